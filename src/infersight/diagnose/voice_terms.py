"""The names one voice speaks in: which verdict names each of the model's limiters,
which rule verdicts the model decides, and the knobs that may turn each limiter."""

from __future__ import annotations

__all__ = ["DECIDED", "KNOBS", "LIMITER_VERDICT", "TITLES"]

LIMITER_VERDICT = {
    "slots": "slot_bound",
    "kv": "kv_bound",
    "compute": "compute_bound",
    "upstream": "error_driven",
    "client": "client_limited",
}
#: Rule verdicts that say what limits the server: the model decides these.
DECIDED = ("slot_bound", "kv_bound", "compute_bound", "capacity")
#: The knobs that may turn each limiter (replicas: more of everything).
KNOBS: dict[str, tuple[str | None, ...]] = {
    "slots": ("slots", "replicas"),
    "kv": ("kv", "replicas"),
    "compute": ("replicas", "slots", None),
    "upstream": (None,),
    "client": (None,),
}
TITLES = {
    "slot_bound": "Queueing: slot-bound",
    "kv_bound": "Queueing: KV-capacity-bound",
    "compute_bound": "Compute-bound",
}
