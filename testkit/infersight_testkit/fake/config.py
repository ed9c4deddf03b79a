"""Configuration and scripted faults of the fake OpenAI server.

A :class:`Behavior` says how the server answers one attempt. Behaviours come from,
in order of precedence: the request header ``X-Fake-Behavior`` (JSON object or a
shorthand), the script (consumed one per generation request, in order), and
finally the normal answer. Shorthands: ``"ok"``, ``"reset"`` (close the connection
before the headers), ``"hang"`` (never answer), ``"malformed"`` (bad JSON after the
first chunks), a status code such as ``"429"`` or ``"503"``, and ``"cut:5"`` /
``"reset:5"`` (end cleanly / abort the connection after 5 content chunks);
``"oom:vllm"`` (that engine's real out-of-memory answer: vllm, sglang, tgi, llamacpp,
llamacpp_old), ``"garbage:bad_chunk"`` (broken HTTP framing: status_line, bad_chunk,
short_body, bad_header) and ``"stall_body:30"`` (a non-streamed answer whose body
stops halfway for 30 s); see :mod:`infersight_testkit.fake.faults`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import orjson

from infersight.core.errors import ConfigError

__all__ = ["Behavior", "FakeConfig", "parse_behavior"]


@dataclass(slots=True)
class Behavior:
    """How to answer one attempt. None fields fall back to the FakeConfig."""

    #: Answer with this HTTP error status instead of generating.
    status: int | None = None
    retry_after: str | None = None  # Retry-After header value, seconds or HTTP date
    retry_after_ms: float | None = None
    message: str | None = None
    #: With ``status``: answer exactly this JSON body (a server's own error shape).
    body: Any = None
    #: Abort the connection before sending headers.
    reset: bool = False
    #: Never answer (until the client leaves or the server stops).
    hang: bool = False
    #: Seconds to wait before sending the headers (the first byte).
    delay: float = 0.0
    ttft: float | None = None
    itl: float | None = None
    tokens: int | None = None
    #: End the stream cleanly (no finish_reason, no [DONE]) after this many chunks.
    cut_after: int | None = None
    #: Abort the connection after this many chunks.
    reset_after: int | None = None
    #: Send an invalid JSON event after this many chunks.
    malformed_after: int | None = None
    #: Send an SSE error event (``{"error": ...}``) after this many chunks.
    error_after: int | None = None
    #: Pause this long before chunk index ``stall_at`` (for idle timeouts).
    stall: float = 0.0
    stall_at: int = 1
    #: Answer with this engine's real out-of-memory error (faults.OOM_ANSWERS).
    oom: str | None = None
    #: Write this broken HTTP answer instead of a response (faults.GARBAGE).
    garbage: str | None = None
    #: Non-streamed: send the head and half the body, pause this long, then the rest.
    body_stall: float = 0.0


def parse_behavior(spec: Any) -> Behavior:
    """A Behavior from a dict, a shorthand string or a JSON text."""
    if isinstance(spec, Behavior):
        return spec
    if isinstance(spec, int):
        return Behavior(status=spec)
    if isinstance(spec, str):
        s = spec.strip()
        if s.startswith("{"):
            return parse_behavior(orjson.loads(s))
        name, _, arg = s.partition(":")
        if name.isdigit():
            return Behavior(status=int(name), retry_after=arg or None)
        if name == "ok" or not name:
            return Behavior()
        if name == "reset":
            return Behavior(reset_after=int(arg)) if arg else Behavior(reset=True)
        if name == "hang":
            return Behavior(hang=True)
        if name == "malformed":
            return Behavior(malformed_after=int(arg) if arg else 1)
        if name == "cut":
            return Behavior(cut_after=int(arg) if arg else 5)
        if name == "error":
            return Behavior(error_after=int(arg) if arg else 1)
        if name == "delay":
            return Behavior(delay=float(arg))
        if name == "oom":
            return Behavior(oom=arg or "vllm")
        if name == "garbage":
            return Behavior(garbage=arg or "status_line")
        if name == "stall_body":
            return Behavior(body_stall=float(arg) if arg else 3600.0)
        raise ConfigError(f"unknown fake behaviour {spec!r}")
    if isinstance(spec, dict):
        names = {f.name for f in dataclasses.fields(Behavior)}
        unknown = set(spec) - names
        if unknown:
            raise ConfigError(f"unknown fake behaviour keys {sorted(unknown)}")
        d = dict(spec)
        if "retry_after" in d and d["retry_after"] is not None:
            d["retry_after"] = str(d["retry_after"])
        return Behavior(**d)
    raise ConfigError(f"cannot read a fake behaviour from {spec!r}")


@dataclass(slots=True)
class FakeConfig:
    """Knobs of the fake server (all times in seconds).

    Generation: ``tokens`` chunks of ``token_text`` after ``ttft``, ``itl`` apart
    (``max_tokens`` in the request caps them; ``ignore_eos`` makes it exact).
    ``include_usage`` "auto" honours ``stream_options.include_usage``; "always" /
    "never" force it. ``script`` is a list of behaviours consumed in order, one per
    generation request. ``api_key`` set -> 401 for a missing or wrong key.
    ``max_concurrency`` set -> 429 (with ``Retry-After: 1``) above that many requests
    in flight. ``queue_delay_ms`` set -> an ``X-Queue-Delay`` header. ``error_rate``
    set -> that share of requests fails with ``error_status`` (503).

    Engine model: ``slots`` set -> at most that many generations at once, the rest
    wait in arrival order inside the server, before their headers (a real queue, so
    each request's service time is ``ttft + itl * (tokens - 1)`` after its wait).
    ``metrics_dialect`` "vllm" / "sglang" / "tgi" / "llamacpp" -> ``GET /metrics`` in that
    engine's names, and its info endpoint with the slot limit
    (running = holders of a slot, waiting = the queue); the KV usage it reports is
    ``kv_usage``, or ``kv_per_running * running`` (capped at 1) when that is set.
    ``compute_knee`` set -> steps slow down in proportion to the generations running
    beyond it (a device whose compute saturates). ``prefill_per_token`` lengthens the
    first step with the prompt, ``kv_capacity`` admits only what fits in the KV cache,
    and ``error_rate`` answers a random share with ``error_status`` (see the fields).
    """

    ttft: float = 0.0
    itl: float = 0.0
    tokens: int = 16
    token_text: str = "tok "
    model: str = "fake"
    include_usage: str = "auto"
    api_key: str | None = None
    script: list[Any] = field(default_factory=list)
    max_concurrency: int | None = None
    queue_delay_ms: float | None = None
    tokenize: bool = True
    embedding_dim: int = 16
    #: Embeddings latency: base + per_item * len(input), per request.
    embed_base: float = 0.0
    embed_per_item: float = 0.0
    #: Extra SSE comment line (keep-alive) before each chunk, to exercise parsers.
    keepalive: bool = False
    #: Added to the completion_tokens the server reports (simulates usage that
    #: disagrees with the chunk count, as servers merging tokens per chunk do).
    usage_offset: int = 0
    #: Keep the stream open this long after ``[DONE]`` (some servers do).
    hold_after_done: float = 0.0
    #: Content-Type of streamed answers (some proxies rewrite or drop it).
    sse_content_type: str = "text/event-stream"
    #: Generation slots (None: unlimited); the rest wait FIFO.
    slots: int | None = None
    #: Engine whose ``/metrics`` names to export: "vllm", "sglang", "tgi", "llamacpp" or
    #: None (no /metrics).
    metrics_dialect: str | None = None
    #: Fixed KV-cache usage (0..1) reported by the vllm and sglang dialects.
    kv_usage: float = 0.02
    #: KV usage per running request, for a KV-full engine (overrides ``kv_usage``).
    kv_per_running: float | None = None
    #: Seconds each generation request spends in the engine's HTTP front (reading,
    #: templating, tokenizing) before it joins the slot queue. ``/metrics`` counts it
    #: neither running nor waiting there, as llama.cpp's does not.
    front_delay: float = 0.0
    #: Report no waiting requests: those beyond the slots wait where the engine does
    #: not count them (an HTTP accept backlog, a proxy's queue).
    hide_waiting: bool = False
    #: A compute knee: while more than this many generations run, every step (the
    #: first token and each one after it) takes ``running / compute_knee`` times longer,
    #: so throughput stops growing past it and TPOT grows with the work in flight.
    compute_knee: int | None = None
    #: Seconds of prefill per prompt token (as the server counts them, one per word),
    #: added to the first token's time and scaled by the compute pace like the rest
    #: of that step: long prompts get a later first token.
    prefill_per_token: float = 0.0
    #: Prefill in batches, as vLLM and llama.cpp do (``fake.prefill``): prompts admitted
    #: within one decode step (``itl``) of a prefill's start share it, one ``ttft`` and
    #: each prompt's ``prefill_per_token``, and all get their first token at its end.
    #: False: each prompt's first token comes ``ttft`` plus its own prefill after its
    #: admission, whoever else is admitted.
    batch_prefill: bool = False
    #: KV-cache capacity in tokens (None: unlimited). A request is admitted only when
    #: a slot is free and its prompt plus answer tokens fit beside those the running
    #: requests reserved; otherwise it waits (FIFO, head-of-line). The vllm and sglang
    #: dialects then report reserved / capacity as their KV usage.
    kv_capacity: int | None = None
    #: How KV room is taken: "reserve" (prompt + answer at admission) or "on_demand"
    #: (vLLM: the prompt at admission, then each token as it is made; when none is
    #: free the latest admitted request is preempted, waits at the head of the queue
    #: and recomputes its prompt and answer so far when admitted again, at
    #: ``ttft + prefill_per_token`` per token). Streamed answers only.
    kv_mode: str = "reserve"
    #: This share of generation requests is answered at once (before the queue) with
    #: ``error_status``, no Retry-After; drawn from a random stream seeded by
    #: ``error_seed``, so a run is repeatable. ``POST /_fake/errors`` ``{"rate": r}``
    #: changes the share while the server runs.
    error_rate: float = 0.0
    error_status: int = 503
    error_seed: int = 0
    #: Tokens each streamed content chunk carries (a server that batches its
    #: detokenized output); one chunk per this many tokens, ``itl`` per token.
    tokens_per_chunk: int = 1
    #: Latency drift: the TTFT of a request that starts ``t`` seconds after the server
    #: started is ``ttft * (1 + drift * t)`` (a server slowing down across a level).
    drift: float = 0.0

    def to_json(self) -> bytes:
        d = dataclasses.asdict(self)
        d["script"] = [dataclasses.asdict(b) if isinstance(b, Behavior) else b for b in self.script]
        return orjson.dumps(d)

    @classmethod
    def from_json(cls, data: bytes | str) -> FakeConfig:
        return cls(**orjson.loads(data))
