"""The real vLLM servers the integration tests share, one per setting of ``SHARED``.

``scripts/test.sh`` starts them as soon as vLLM is installed, while the unit tests run,
and stops them at its end::

    .venv/bin/python tests/support/vllm_servers.py start DIR slots_2 kv_16_blocks
    .venv/bin/python tests/support/vllm_servers.py stop DIR

``start`` leaves each server running in a session of its own and writes
``DIR/NAME.json``: its port and pid first (so ``stop`` ends it even mid-start), then
"ready", or the error that stopped it. A test session adopts it (``adopt``) and never
stops it. (Test infrastructure, kept out of the package: a session without the script
starts its servers itself, ``infersight_testkit.vllm_server``.)
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import orjson

from infersight.core.errors import ConfigError
from infersight.core.processes import stop_group
from infersight_testkit.vllm_server import VLLMServer, VLLMSetting

__all__ = ["SHARED", "adopt"]

#: Every limit binds by construction: ``--max-num-seqs`` for slots, a KV cache of a few
#: blocks for KV.
SHARED = {
    # 2 sequences: slot-bound from c=3 on.
    "slots_2": VLLMSetting(max_num_seqs=2),
    # 16 sequences, but a KV cache of 16 blocks of 128 tokens (2,048 tokens): requests of
    # 200 prompt tokens that grow by 64 take 2 to 3 blocks each, so about 6 run and vLLM
    # preempts (and later recomputes) a running one when no block is free. Eager: it
    # starts in under half a compiled server's time, and no prediction compares its
    # steps with a compiled server's.
    "kv_16_blocks": VLLMSetting(
        max_num_seqs=16, max_model_len=512, kv_blocks=16, extra=("--enforce-eager",)
    ),
}


def adopt(state: Path) -> VLLMServer:
    """The server that ``start`` left running and described in ``state``."""
    if not state.is_file():
        raise ConfigError(f"no vLLM server was started for {state.stem} ({state} is missing)")
    doc = orjson.loads(state.read_bytes())
    if "error" in doc:
        raise ConfigError(doc["error"])
    if not doc["ready"]:
        raise ConfigError(f"the vLLM server for {state.stem} never became ready ({doc['log']})")
    setting = VLLMSetting(**{**doc["setting"], "extra": tuple(doc["setting"]["extra"])})
    return VLLMServer(setting, port=doc["port"], log_path=Path(doc["log"]), adopted_pid=doc["pid"])


def _start(folder: Path, names: list[str]) -> int:
    unknown = sorted(set(names) - set(SHARED))
    if unknown:
        print(f"vllm_servers: unknown setting {', '.join(unknown)} (known: {', '.join(SHARED)})")
        return 2
    folder.mkdir(parents=True, exist_ok=True)
    # All start at once: each start is mostly one core's work (imports, a compile).
    started: dict[str, tuple[VLLMServer, dict[str, object]]] = {}
    try:
        for name in names:
            # the log in the state folder: the test script's cleanup removes both
            server = VLLMServer(SHARED[name], log_path=folder / f"{name}.log")
            server.spawn()
            doc = {
                "setting": dataclasses.asdict(server.setting),
                "port": server.port,
                "pid": server.pid,
                "log": str(server.log_path),
                "ready": False,
            }
            (folder / f"{name}.json").write_bytes(orjson.dumps(doc))
            started[name] = (server, doc)
        for name, (server, doc) in started.items():
            server.wait_ready()
            (folder / f"{name}.json").write_bytes(orjson.dumps({**doc, "ready": True}))
    except ConfigError as e:
        # the test that needs it fails with this, in its own words (`stop` ends the rest)
        (folder / f"{name}.json").write_bytes(orjson.dumps({"error": str(e)}))
        print(f"vllm_servers: {name}: {str(e).splitlines()[0]}")
        return 1
    return 0


def _stop(folder: Path) -> int:
    for state in sorted(folder.glob("*.json")):
        pid = orjson.loads(state.read_bytes()).get("pid")
        if pid is not None:
            stop_group(pid, grace=20.0)
        state.unlink()
    return 0


def main(argv: list[str]) -> int:
    """``start DIR NAME...`` or ``stop DIR`` (see the module's docstring)."""
    if len(argv) >= 3 and argv[0] == "start":
        return _start(Path(argv[1]), argv[2:])
    if len(argv) == 2 and argv[0] == "stop":
        return _stop(Path(argv[1]))
    print("usage: tests/support/vllm_servers.py start DIR NAME... | stop DIR")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
