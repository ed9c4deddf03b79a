"""The fake server's harder faults: each engine's real out-of-memory answer, broken
HTTP framing, and a non-streamed answer that stalls inside its body.

The out-of-memory answers are the engines' own texts and statuses, recorded from their
sources (the numbers in a message vary per machine, the wording does not):

- ``vllm``: vLLM main@619e4b3 (2026), ``create_error_response`` in
  ``vllm/entrypoints/openai/engine/serving.py`` maps a ``torch.OutOfMemoryError`` (a
  RuntimeError) to 400 ``BadRequestError``; the text is PyTorch >= 2.1's
  (``c10/cuda/CUDACachingAllocator.cpp``).
- ``sglang``: ``python/sglang/srt/mem_cache/common.py`` raises "Prefill out of memory.
  Try to lower your batch size."; ``serving_base.py`` answers 500
  ``{"object": "error", "message": "Internal server error: ...", ...}``.
- ``tgi``: text-generation-inference 2.x-3.x router, ``InferError::GenerationError``:
  424 ``{"error": "Request failed during generation: Server error: ...",
  "error_type": "generation"}``.
- ``llamacpp``: llama.cpp server (``tools/server/server-context.cpp`` update_slots,
  the text is in xllamacpp 2026.10's library): the KV cache full at a one-token batch,
  500 ``server_error`` "Context size has been exceeded.".
- ``llamacpp_old``: llama.cpp server builds before 2025, same condition: "Input prompt
  is too big compared to KV size. Please try increasing KV size.".
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from aiohttp import web

from infersight.core.errors import ConfigError

__all__ = ["GARBAGE", "OOM_ANSWERS", "garbage_answer", "oom_answer", "stalled_json"]

_TORCH_OOM = (
    "CUDA out of memory. Tried to allocate 1.95 GiB. GPU 0 has a total capacity of 79.15 GiB "
    "of which 1.02 GiB is free. Including non-PyTorch memory, this process has 78.12 GiB "
    "memory in use. Of the allocated memory 75.20 GiB is allocated by PyTorch, and 1.31 GiB "
    "is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try "
    "setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
    "documentation for Memory Management  "
    "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
)

#: engine -> (status, body) of its out-of-memory answer.
OOM_ANSWERS: dict[str, tuple[int, Any]] = {
    "vllm": (
        400,
        {"error": {"message": _TORCH_OOM, "type": "BadRequestError", "param": None, "code": 400}},
    ),
    "sglang": (
        500,
        {
            "object": "error",
            "message": "Internal server error: Prefill out of memory. Try to lower "
            "your batch size.\nTry to allocate 8192 tokens.\n",
            "type": "InternalServerError",
            "param": None,
            "code": 500,
        },
    ),
    "tgi": (
        424,
        {
            "error": "Request failed during generation: Server error: " + _TORCH_OOM,
            "error_type": "generation",
        },
    ),
    "llamacpp": (
        500,
        {
            "error": {
                "code": 500,
                "message": "Context size has been exceeded.",
                "type": "server_error",
            }
        },
    ),
    "llamacpp_old": (
        500,
        {
            "error": {
                "code": 500,
                "message": "Input prompt is too big "
                "compared to KV size. Please try increasing KV size.",
                "type": "server_error",
            }
        },
    ),
}

#: Broken answers: raw bytes written instead of an HTTP response, then the connection
#: is closed.
GARBAGE: dict[str, bytes] = {
    "status_line": b"HTPT/1.1 2OO Fine\r\n\r\n",
    "bad_chunk": (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n"
    ),
    "short_body": (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        b'Content-Length: 500\r\n\r\n{"id": "cut'
    ),
    "bad_header": b"HTTP/1.1 200 OK\r\nContent-Length: -4\r\n\r\n",
}


def oom_answer(engine: str, headers: dict[str, str]) -> web.Response:
    """``engine``'s own out-of-memory answer (see the module docstring)."""
    try:
        status, body = OOM_ANSWERS[engine]
    except KeyError:
        raise ConfigError(f"no OOM answer for {engine!r} (known: {sorted(OOM_ANSWERS)})") from None
    return web.Response(
        status=status, body=orjson.dumps(body), headers=headers, content_type="application/json"
    )


def garbage_answer(request: web.Request, kind: str) -> web.Response:
    """Write the broken answer ``kind`` to the socket and close it."""
    try:
        data = GARBAGE[kind]
    except KeyError:
        raise ConfigError(f"no garbage answer {kind!r} (known: {sorted(GARBAGE)})") from None
    transport = request.transport
    if transport is not None:
        transport.write(data)
        transport.close()
    return web.Response(status=500)  # never reaches the client: the socket is closed


async def stalled_json(
    request: web.Request, obj: Any, headers: dict[str, str], stall: float
) -> web.StreamResponse:
    """A JSON answer whose head and first half are sent at once, the rest after
    ``stall`` seconds (a non-streamed answer that stalls mid-body)."""
    data = orjson.dumps(obj)
    resp = web.StreamResponse(status=200, headers={**headers, "Content-Type": "application/json"})
    resp.content_length = len(data)
    await resp.prepare(request)
    half = len(data) // 2
    await resp.write(data[:half])
    await asyncio.sleep(stall)
    await resp.write(data[half:])
    await resp.write_eof()
    return resp
