"""Real vLLM (its CPU build) for the tests of this folder: one server per setting,
started once per session and shared (a start takes about two minutes on 2 cores).

Every limit is made to bind by construction: ``--max-num-seqs`` for slots, a KV cache
of a few blocks (``--num-gpu-blocks-override``) for KV, with prompt lengths and
``max_tokens`` chosen so the bound is reached. Each test here loads the CPU: the
folder is heavy (tests/integration/conftest.py).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from infersight.testing.vllm_server import VLLMServer, VLLMSetting

#: A 2-sequence server: slot-bound from c=3 on.
SLOTS_2 = VLLMSetting(max_num_seqs=2)
#: 16 sequences, but a KV cache of 16 blocks of 128 tokens (2,048 tokens): requests of
#: 200 prompt tokens that grow by 64 take 2 to 3 blocks each, so about 6 run and vLLM
#: preempts (and later recomputes) a running one when no block is free.
KV_16_BLOCKS = VLLMSetting(max_num_seqs=16, max_model_len=512, kv_blocks=16)

_servers: dict[VLLMSetting, VLLMServer] = {}


def vllm_server(setting: VLLMSetting) -> VLLMServer:
    """The session's server for ``setting``, started on first use."""
    if setting not in _servers:
        _servers[setting] = VLLMServer(setting).__enter__()
    return _servers[setting]


@pytest.fixture(scope="session", autouse=True)
def _stop_vllm_servers() -> Iterator[None]:
    yield
    for server in _servers.values():
        server.stop()
    _servers.clear()


@pytest.fixture(scope="session")
def vllm_slots() -> VLLMServer:
    return vllm_server(SLOTS_2)


@pytest.fixture(scope="session")
def vllm_kv() -> VLLMServer:
    return vllm_server(KV_16_BLOCKS)
