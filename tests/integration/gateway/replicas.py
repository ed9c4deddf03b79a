"""Gateway replicas for the shared-state tests: N `infersight gateway` processes from
one config file, all on 127.0.0.1, each with its output in its own log file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import orjson
from gateway_stack import metric_sum

from infersight.gateway import hash_key
from support.waiting import until_blocking

CLI = [sys.executable, "-c", "from infersight.cli import main; main()"]
#: A key of the tests' own: with keys configured, /stats and /metrics need one.
ADMIN_KEY = "sk-replicas-admin-0000"


def _toml(v: Any) -> str:
    return json.dumps(v) if not isinstance(v, bool) else str(v).lower()


def write_config(
    path: Path,
    *,
    redis_url: str,
    upstreams: list[dict[str, Any]],
    keys: dict[str, dict[str, Any]],
    shared: dict[str, Any] | None = None,
    prices: Path | None = None,
) -> Path:
    """A gateway TOML file: ``keys`` maps each key's secret to its name and limits."""
    lines = ["access_log = false"]
    if prices is not None:
        lines.append(f"prices_file = {_toml(str(prices))}")
    for up in upstreams:
        lines.append("[[upstreams]]")
        lines += [f"{k} = {_toml(v)}" for k, v in up.items()]
    for secret, spec in keys.items():
        lines.append("[[keys]]")
        lines.append(f"sha256 = {_toml(hash_key(secret))}")
        lines += [f"{k} = {_toml(v)}" for k, v in spec.items()]
    if keys:
        lines += ["[[keys]]", 'name = "admin"', f"sha256 = {_toml(hash_key(ADMIN_KEY))}"]
    lines.append("[shared]")
    lines += [f"{k} = {_toml(v)}" for k, v in {"redis_url": redis_url, **(shared or {})}.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


class Replicas:
    """``n`` gateway processes serving ``config`` on free ports."""

    def __init__(self, config: Path, n: int, logs: Path) -> None:
        self.config = config
        self.logs = [logs / f"gateway-{i}.log" for i in range(n)]
        self.procs: list[subprocess.Popen[bytes]] = []
        self.urls: list[str] = []

    def __enter__(self) -> Replicas:
        try:
            for log in self.logs:
                with log.open("wb") as out:
                    self.procs.append(
                        subprocess.Popen(
                            [*CLI, "gateway", "--config", str(self.config), "--port", "0"],
                            stdout=out,
                            stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"},
                        )
                    )
            self.urls = [self._wait_listening(i) for i in range(len(self.procs))]
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _wait_listening(self, i: int, timeout: float = 90.0) -> str:
        def url() -> str:
            text = self.log(i)
            if "listening on http://" in text:
                return text.split("listening on ")[1].split()[0]
            if self.procs[i].poll() is not None:
                raise AssertionError(f"gateway {i} exited: {text[-800:]}")
            return ""

        try:
            return until_blocking(url, f"gateway {i} to listen", timeout)
        except AssertionError as e:
            raise AssertionError(f"{e}\n{self.log(i)[-800:]}") from None

    def log(self, i: int) -> str:
        return self.logs[i].read_text(errors="replace")

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        for p in self.procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)

    # -- reading a replica ------------------------------------------------------------
    def _open(self, i: int, path: str) -> Any:
        req = urllib.request.Request(
            self.urls[i] + path, headers={"Authorization": f"Bearer {ADMIN_KEY}"}
        )
        return urllib.request.urlopen(req, timeout=10)

    def get(self, i: int, path: str) -> Any:
        with self._open(i, path) as r:
            return orjson.loads(r.read())

    def health(self, i: int) -> dict[str, Any]:
        try:
            doc: dict[str, Any] = self.get(i, "/health")
        except urllib.error.HTTPError as e:  # 503 still carries the JSON body
            doc = orjson.loads(e.read())
        return doc

    def metric(self, i: int, name: str, **labels: str) -> float:
        with self._open(i, "/metrics") as r:
            return metric_sum(r.read().decode(), name, **labels)
