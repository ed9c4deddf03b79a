"""A request's cost on its answer, as LiteLLM's proxy gives it: the header
``X-Infersight-Cost-USD`` on a non-streamed answer (LiteLLM: ``x-litellm-response-cost``)
and ``usage.cost`` in a stream's usage chunk (LiteLLM's ``include_cost_in_streaming_usage``),
whose head left before the cost was known.

The dollars are the gateway's own accounting (the price table of ``core.pricing`` and
the answer's ``usage``), the same figure as the access log's ``cost_usd`` and
``infersight_gateway_cost_usd_total``. A model without a price gets neither.
"""

from __future__ import annotations

import orjson

from infersight.client.sse import SSEParser
from infersight.core.errors import MalformedStream

__all__ = ["COST_HEADER", "cost_text", "stamp_usage"]

COST_HEADER = "X-Infersight-Cost-USD"


def cost_text(dollars: float) -> str:
    """The header's value: dollars, 9 significant digits (``0.00012``, ``3.5e-07``)."""
    return format(dollars, ".9g")


def stamp_usage(piece: bytes, dollars: float) -> bytes | None:
    """``piece`` (whole SSE events, as relayed) with ``"cost": dollars`` added to the
    ``usage`` of its usage chunk (the one ``include_usage`` adds: usage, no choices);
    None when the piece has none, or is not a stream this parser reads (it then goes
    out as it came)."""
    parser = SSEParser()
    try:
        events = parser.feed(piece) + parser.close()
    except MalformedStream:
        return None
    for i in range(len(events) - 1, -1, -1):
        ev = events[i]
        if ev.usage is not None and ev.json is not None and not ev.json.get("choices"):
            doc = {**ev.json, "usage": {**ev.usage, "cost": dollars}}
            parts = [e.raw for e in events]
            parts[i] = b"data: " + orjson.dumps(doc) + b"\n\n"
            return b"".join(parts)
    return None
