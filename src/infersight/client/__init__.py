"""infersight.client: the async OpenAI-compatible client with per-request timing.

Every request fills a :class:`~infersight.core.records.RequestRecord` (docs/design.md
section 2) inside the SSE loop, and failures raise the typed errors of docs/design.md
section 3 with the record attached as ``.record``::

    async with Client("http://127.0.0.1:8000") as c:
        done = await c.chat([{"role": "user", "content": "Hi"}], max_tokens=16)
        print(done.text, done.record.ttft)

Proxies forward a stream with :meth:`StreamResponse.raw_chunks` (passthrough): one
bytes piece per upstream read, cut at event boundaries, bytes exactly as received,
while the record, ``usage``, ``finish_reason`` and ``done`` are filled as usual::

    async with c.stream("/v1/chat/completions", body) as sr:   # enters at first content
        async for piece in sr.raw_chunks(drop_usage_only=True):
            await downstream.write(piece)
"""

from infersight.client.auth import is_placeholder, resolve_api_key
from infersight.client.client import Client, RequestOptions
from infersight.client.errors_map import map_transport_error
from infersight.client.retry import RetryBudget, RetryPolicy
from infersight.client.sse import SSEEvent, SSEParser
from infersight.client.stream import StreamResponse
from infersight.client.types import Completion, Timeouts

__all__ = [
    "Client",
    "Completion",
    "RequestOptions",
    "RetryBudget",
    "RetryPolicy",
    "SSEEvent",
    "SSEParser",
    "StreamResponse",
    "Timeouts",
    "is_placeholder",
    "map_transport_error",
    "resolve_api_key",
]
