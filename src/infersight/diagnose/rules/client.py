"""Client-side and error rules: client-limited, error-driven (docs/design.md section 5)."""

from __future__ import annotations

from infersight.core.verdicts import Verdict, is_marginal
from infersight.diagnose.rules.base import (
    ERROR_RATE,
    RuleInput,
    evidence,
    fmt,
    loadgen_evidence,
    make_verdict,
)

__all__ = ["client_limited", "error_driven"]


def client_limited(ri: RuleInput) -> Verdict | None:
    if not ri.client_limited:
        return None
    w = ri.w
    ev = [
        evidence(
            "schedule_lag_p99", "schedule lag p99", w.lag_p99, "s", "records (sent - scheduled)"
        ),
        loadgen_evidence(ri),
    ]
    ev += [
        evidence(
            "reason", "reason", r, "", "client-limited check (schedule lag and client CPU limits)"
        )
        for r in ri.client_reasons
    ]
    why = "; ".join(ri.client_reasons) or "schedule lag / load generator CPU over limits"
    margin = (
        " Every flag clears its limit by less than 20%: the figures are very likely the server's."
        if ri.client_marginal
        else ""
    )
    contention = (ri.agg.get("client_limited") or {}).get("contention")
    if contention:  # docs/design.md s.2: name the contention, do not blame the client alone
        # Each stored reason ends by naming the contention; the sentence names it once.
        tail = f", while {contention} (contention, not the client alone)"
        slipped = "; ".join(r.removesuffix(tail) for r in ri.client_reasons) or why
        return make_verdict(
            ri,
            "client_limited",
            "Benchmark client and server share cores",
            f"The load generator's schedule slipped ({slipped}): the figures include the "
            f"time each side waited for the other's CPU, not the server's alone.{margin}",
            ev,
            0.8,
            [
                "run the load generator on another host (or pin client and engine to "
                "separate cores) to measure the server alone",
                "give the engine fewer threads than the host has cores",
            ],
            marginal=ri.client_marginal,
        )
    return make_verdict(
        ri,
        "client_limited",
        "Benchmark client-limited",
        f"The load generator, not the server, limited this run ({why}); its latencies "
        f"include client delay (schedule lag p99 {fmt((w.lag_p99 or 0) * 1000)} ms).{margin}",
        ev,
        0.9,
        [
            "run the load generator with more worker processes (bench --workers) or on "
            "another host",
            "lower the per-process concurrency or request rate",
            "stop other CPU-heavy work on the load generator's host",
        ],
        marginal=ri.client_marginal,
    )


def error_driven(ri: RuleInput) -> Verdict | None:
    w = ri.w
    total = w.n_ok + w.n_failed
    if not total or w.n_failed / total <= ERROR_RATE:
        return None
    rate = w.n_failed / total
    kind, count = w.errors.most_common(1)[0]
    ev = [
        evidence("error_rate", "error rate", rate, "fraction", "records"),
        evidence("failed_requests", "failed requests", w.n_failed, "requests", "records"),
    ]
    ev += [
        evidence(f"errors.{k}", f"errors: {k}", n, "requests", "records (error kind)")
        for k, n in w.errors.most_common(5)
    ]
    ev += [
        evidence(f"from.{k}", f"from: {k}", n, "requests", "records (upstream label / HTTP status)")
        for k, n in w.error_sources.most_common(3)
    ]
    if kind in w.error_example:
        ev.append(
            evidence(
                f"example.{kind}",
                f"example {kind}",
                w.error_example[kind],
                "",
                "records (error_message)",
            )
        )
    fixes = _error_fixes(kind, ri.ctx.engine)
    if kind in ("Overloaded", "RateLimited") and not _under_pressure(ri):
        fixes.insert(
            0,
            f"the {kind} answers come while the server keeps up with the load "
            "(no queue, no rate it fell behind): find what sheds them (a proxy's or "
            "the server's own admission limits, a health check) before adding capacity",
        )
    where = ", ".join(f"{k} ({n})" for k, n in w.error_sources.most_common(3))
    return make_verdict(
        ri,
        "error_driven",
        "Error-driven",
        # as precise as the evidence: 3 of 200 is 1.5%, not "2%"
        f"{rate * 100:.3g}% of requests failed ({w.n_failed} of {total}); most are {kind} "
        f"({count}), from {where}.",
        ev,
        min(0.99, 0.75 + rate / 4),
        fixes,
        marginal=is_marginal(rate, ERROR_RATE),
    )


def _under_pressure(ri: RuleInput) -> bool:
    """Whether the level showed load: a queue, or a rate it could not keep up with."""
    sus = ri.agg.get("sustainability") if isinstance(ri.agg, dict) else None
    if isinstance(sus, dict) and sus.get("sustainable") is False:
        return True
    return ri.s.Q is not None and ri.s.Q >= 0.5


def _error_fixes(kind: str, engine: str) -> list[str]:
    if kind == "AuthError":
        return [
            "the API key does not match the server's: check INFERSIGHT_API_KEY / "
            "--api-key-env / --api-key-file on the client and the server's key "
            "(a placeholder or expired key is the usual cause)"
        ]
    if kind == "RateLimited":
        return [
            "lower concurrency or rate below the provider's limit, or ask for a higher quota",
            "let `infersight gateway` queue and pace requests; its retries honour Retry-After",
        ]
    if kind == "Overloaded":
        return [
            "the server sheds load: raise its capacity (replicas) or lower offered load",
            "tune the gateway's concurrency limit and queue bound so it queues instead of 503",
        ]
    if kind in ("FirstTokenTimeout", "IdleTimeout", "DeadlineExceeded", "ConnectTimeout"):
        return [
            "requests wait too long: the server is queueing (see the queueing verdicts) "
            "or the timeouts are tighter than its latency",
            "raise the timeouts, or reduce load / add replicas",
        ]
    if kind == "BadRequest":
        flag = {
            "vllm": "--max-model-len",
            "sglang": "--context-length",
            "tgi": "--max-total-tokens",
            "llamacpp": "--ctx-size",
            "embedded": "infersight serve --ctx",
        }.get(engine, "the context limit")
        return [
            "read the server's message in the evidence; prompt + max_tokens above the "
            f"context limit is common: raise {flag} or lower max_tokens"
        ]
    if kind == "OutOfMemory":
        return [
            "the engine runs out of memory: see the memory-pressure verdict for the "
            "slot and context settings that fit"
        ]
    if kind in ("ConnectError", "ResetError", "ReadError"):
        return [
            "the server is unreachable or dropping connections: check it is up, its "
            "connection limits and any proxy timeouts"
        ]
    return ["see the error examples in the evidence; fix the cause before tuning throughput"]
