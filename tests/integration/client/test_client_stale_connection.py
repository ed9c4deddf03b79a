"""A pooled keep-alive connection that the server has dropped is not a failed request.

llama.cpp's server offers keep-alive but closes after streamed answers, so the next
request on that pooled connection fails before any answer. The client must send it
again on a fresh connection, without counting an attempt.
"""

from __future__ import annotations

import asyncio

import orjson

from infersight.client import Client, RetryPolicy

_BODY = orjson.dumps(
    {
        "id": "x",
        "object": "chat.completion",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }
)


async def _read_request(reader: asyncio.StreamReader) -> bool:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    await reader.readexactly(length)
    return True


async def test_a_dropped_pooled_connection_is_resent_without_an_attempt() -> None:
    seen = {"requests": 0, "connections": 0}

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # Each connection answers one request, then drops the next one unanswered.
        seen["connections"] += 1
        try:
            await _read_request(reader)
            seen["requests"] += 1
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                b"Connection: keep-alive\r\nContent-Length: "
                + str(len(_BODY)).encode()
                + b"\r\n\r\n"
                + _BODY
            )
            await writer.drain()
            await _read_request(reader)
            seen["requests"] += 1
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        # No retries at all: only the stale-connection resend can save these requests.
        async with Client(f"http://127.0.0.1:{port}", retry=RetryPolicy(max_attempts=1)) as c:
            for _ in range(5):
                out = await c.chat([{"role": "user", "content": "hi"}], stream=False)
                assert out.record.ok and out.text == "hi"
                assert out.record.attempts == 1
    finally:
        server.close()
        await server.wait_closed()
    # Requests 2..5 each went out twice: once on the dropped connection, once fresh.
    assert seen["connections"] == 5
    assert seen["requests"] == 9
