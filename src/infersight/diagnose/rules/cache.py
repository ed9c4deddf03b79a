"""Prefix cache misses (``prefix_cache_miss``, docs/design.md section 5).

Fires when the workload shares prefixes (a system prompt, a conversation's history,
Mooncake blocks: ``prefix_sharing`` of the level's aggregate, the sharing of the text
actually sent when it was measured) but the prefix cache served much less of the
prompt than was there to reuse (``prefix_cache``: the engine's counters first, else
each answer's ``cached_tokens``). The cause is read from the run where it can be:

- no hit at all: the cache is off, or the requests turn it off (llama.cpp's
  ``cache_prompt: false``);
- several replicas behind one address: the router scatters the requests that share a
  prefix over replicas that each start cold;
- a full KV cache, or llama.cpp slots (each slot caches its own last prompt): cached
  prefixes are evicted before they are reused.

A cache that cannot be read (no counter, no ``cached_tokens``) is never called missing.
"""

from __future__ import annotations

from typing import Any

from infersight.core.verdicts import Evidence, Verdict
from infersight.diagnose.rules.base import RuleInput, evidence, make_verdict

__all__ = ["prefix_cache"]

#: The workload counts as sharing prefixes from this share of its prompt tokens.
SHARING_MIN = 0.2
#: A cache serving less than this fraction of the shareable tokens is missing.
MISS_FRACTION = 0.5
#: Below this hit rate the cache is taken to be off.
OFF_BELOW = 0.02

CACHE_NAMES = {
    "vllm": "vLLM's automatic prefix cache",
    "sglang": "SGLang's radix cache",
    "llamacpp": "llama.cpp's prompt cache",
    "embedded": "llama.cpp's prompt cache (infersight serve)",
    "tgi": "TGI's prefix cache",
    "hosted": "the provider's prompt cache",
    "gateway": "the upstreams' prefix caches",
}


def _sharing(agg: dict[str, Any]) -> tuple[float | None, str]:
    ps = agg.get("prefix_sharing")
    if not isinstance(ps, dict):
        return None, ""
    for key, what in (("sent", "the prompts sent"), ("intended", "the workload")):
        v = ps.get(key)
        if isinstance(v, int | float):
            return float(v), f"{what} ({ps.get('sent_basis') or ps.get('basis') or key})"
    return None, ""


def _hit_rate(agg: dict[str, Any]) -> tuple[float | None, str, dict[str, Any]]:
    pc = agg.get("prefix_cache")
    if not isinstance(pc, dict):
        return None, "", {}
    for side in ("engine", "client"):
        v = pc.get(side)
        if isinstance(v, dict) and isinstance(v.get("hit_rate"), int | float):
            return float(v["hit_rate"]), str(v.get("source") or side), v
    return None, "", {}


def prefix_cache(ri: RuleInput) -> Verdict | None:
    shared, shared_src = _sharing(ri.agg)
    hit, hit_src, seen = _hit_rate(ri.agg)
    if shared is None or hit is None or shared < SHARING_MIN or hit >= MISS_FRACTION * shared:
        return None
    eng = ri.ctx.engine
    cache = CACHE_NAMES.get(eng, "the prefix cache")
    ev: list[Evidence] = [
        evidence(
            "prefix_shared",
            "prompt tokens sharing an earlier prefix",
            shared,
            "fraction",
            shared_src,
        ),
        evidence("prefix_cache_hit_rate", "prefix-cache hit rate", hit, "fraction", hit_src),
    ]
    if "cached_tokens" in seen:
        ev.append(
            evidence(
                "cached_tokens", "cached prompt tokens", seen["cached_tokens"], "tokens", hit_src
            )
        )
    why, fixes = _cause(ri, hit, int(seen.get("sources") or 1))
    return make_verdict(
        ri,
        "prefix_cache_miss",
        "Prefix cache misses",
        f"{shared:.0%} of the prompt tokens repeat an earlier request's prefix, but "
        f"{cache} served {hit:.0%}: {why}.",
        ev,
        0.75,
        fixes,
    )


def _cause(ri: RuleInput, hit: float, replicas: int) -> tuple[str, list[str]]:
    eng, s = ri.ctx.engine, ri.s
    fixes = _engine_fixes(eng)
    route = (
        "route requests that share a prefix to the replica that holds it: session- or "
        "prefix-aware routing (SGLang's router cache-aware policy, vLLM production "
        "stack's session router); the infersight gateway routes to the least "
        "outstanding upstream and has no such routing yet"
    )
    if replicas > 1 or eng == "gateway":
        return (
            f"{replicas if replicas > 1 else 'several'} replicas each start cold, so the "
            "router scattering shared prefixes is the likely cause",
            [route, *fixes],
        )
    if hit < OFF_BELOW:
        return "the cache looks off (or the requests turn it off)", fixes
    if s.kv is not None and s.kv >= 0.9:
        return (
            f"the KV cache is {s.kv:.0%} full, so cached prefixes are evicted before "
            "they are reused",
            [*_room_fixes(eng), *fixes],
        )
    if eng in ("llamacpp", "embedded") and (s.S or 1) > 1:
        return (
            "each llama.cpp slot caches only its own last prompt, so a request that lands "
            "on another slot starts cold",
            fixes,
        )
    return "cached prefixes are evicted before they are reused (too small a cache)", [
        *_room_fixes(eng),
        *fixes,
    ]


_LLAMA_FIXES = [
    "send cache_prompt: true in requests (llama-server's default; a client or proxy may "
    "turn it off)",
    "reuse cached chunks across slots: llama-server --cache-reuse 256, and keep evicted "
    "prompts in host memory with --cache-ram (MiB)",
    "fewer slots (--parallel) keep more of each prompt; --slot-prompt-similarity sends a "
    "request to the slot whose prompt it shares",
]
#: The cache's own setting, per engine.
_ENGINE_FIXES: dict[str, list[str]] = {
    "vllm": [
        "check prefix caching is on: --enable-prefix-caching (the V1 default; "
        "--no-enable-prefix-caching turns it off)"
    ],
    "sglang": ["drop --disable-radix-cache (the radix cache is on by default)"],
    "llamacpp": _LLAMA_FIXES,
    "embedded": _LLAMA_FIXES,
    "tgi": ["turn prefix caching on: PREFIX_CACHING=1 (TGI 3's default)"],
    "hosted": [
        "put the shared part first and keep it byte-identical (provider prompt caches "
        "match exact prefixes, often from 1,024 tokens)"
    ],
}
_ANY_FIX = [
    "turn the engine's prefix cache on (vLLM --enable-prefix-caching, SGLang's radix "
    "cache, llama.cpp cache_prompt)"
]
#: More room for cached prefixes, per engine.
_ROOM_FIXES: dict[str, str] = {
    "vllm": "give the KV cache more room: --gpu-memory-utilization, or a shorter --max-model-len",
    "sglang": "give the radix cache more room: --mem-fraction-static",
}
_ANY_ROOM = "give the KV cache more room (more memory for it, or fewer concurrent sequences)"


def _engine_fixes(eng: str) -> list[str]:
    return list(_ENGINE_FIXES.get(eng, _ANY_FIX))


def _room_fixes(eng: str) -> list[str]:
    return [_ROOM_FIXES.get(eng, _ANY_ROOM)]
