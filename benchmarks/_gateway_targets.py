"""The servers `gateway_overhead.py` compares, each in its own process.

- ``infersight``: `infersight gateway` as deployed (access log on, to a file);
- ``baseline``: the same command from another checkout's ``src`` (before/after in one run);
- ``nginx``: Debian's nginx as a keep-alive reverse proxy, one worker (the floor of a
  proxy that parses HTTP in C);
- ``aiohttp``: a bare aiohttp proxy (``web`` server + one ``ClientSession``, nothing
  else): the floor of any gateway built on aiohttp;
- ``litellm``: LiteLLM's proxy in a benchmark-only venv (one worker, no database).

Each yields a :class:`Target` (its URL and pid) and is stopped when its block exits.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from infersight.core.listen import free_port
from infersight.core.processes import stop_process

ROOT = Path(__file__).resolve().parent.parent
BENCH_VENVS = ROOT / ".bench-venvs"


@dataclass
class Target:
    name: str
    url: str
    pid: int | None = None
    model: str = "fake"
    headers: dict[str, str] = field(default_factory=dict)


def _wait_http(url: str, proc: subprocess.Popen[bytes], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return True
        except urllib.error.HTTPError:
            return True  # it answers (a 404 or 405 is an answer)
        except OSError:
            time.sleep(0.1)
    return False


@contextlib.contextmanager
def gateway_process(
    name: str,
    upstream: str,
    *,
    src: str | None = None,
    prefix: list[str] | None = None,
    env: dict[str, str] | None = None,
    args: list[str] | None = None,
) -> Iterator[Target]:
    """`infersight gateway` in its own process; access log on (to a file), as deployed.

    ``src``: run another checkout's code (its ``src`` folder first on the path).
    ``prefix``: Python code run before the CLI (a profiler wraps it that way).
    ``args``: more gateway flags (``["-c", "gateway.toml"]``)."""
    fd, log_name = tempfile.mkstemp(suffix=".log")
    log = os.fdopen(fd, "w")
    code = "from infersight.cli import main; main()" if prefix is None else "\n".join(prefix)
    cmd = [
        sys.executable,
        "-c",
        code,
        "gateway",
        "--upstream",
        f"up={upstream},models=fake,concurrency=4096,queue=8192",
        "--port",
        "0",
        *(args or []),
    ]
    penv = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    if src is not None:
        penv["PYTHONPATH"] = os.pathsep.join([src, *filter(None, [os.environ.get("PYTHONPATH")])])
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=penv)
    try:
        url = None
        deadline = time.monotonic() + 60
        while url is None and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
            text = Path(log_name).read_text()
            if "listening on " in text:
                url = text.split("listening on ")[1].split()[0]
        if url is None:
            raise RuntimeError(f"gateway did not start: {Path(log_name).read_text()[-500:]}")
        yield Target(name, url, proc.pid)
    finally:
        stop_process(proc)
        log.close()
        os.unlink(log_name)


def nginx_binary() -> str | None:
    return shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/usr/local/nginx/sbin/nginx") if os.path.exists(p)), None
    )


_NGINX_CONF = """daemon off; master_process off; worker_processes 1;
pid {tmp}/nginx.pid; error_log {tmp}/error.log warn;
events {{ worker_connections 8192; }}
http {{
  access_log off;
  client_body_temp_path {tmp}/body; proxy_temp_path {tmp}/proxy;
  fastcgi_temp_path {tmp}/fcgi; uwsgi_temp_path {tmp}/uwsgi; scgi_temp_path {tmp}/scgi;
  keepalive_requests 1000000;
  upstream up {{ server {upstream}; keepalive 512; keepalive_requests 1000000; }}
  server {{
    listen 127.0.0.1:{port} backlog=1024;
    location / {{
      proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection "";
      proxy_buffering off; proxy_request_buffering off;
    }}
  }}
}}
"""


@contextlib.contextmanager
def nginx_process(upstream: str) -> Iterator[Target | None]:
    """nginx (one worker, keep-alive to the upstream, no buffering so streams pass
    through as they come); None with a note when it is not installed or fails."""
    exe = nginx_binary()
    if exe is None:
        print("note: nginx not installed (apt-get install nginx); no nginx reference")
        yield None
        return
    tmp = Path(tempfile.mkdtemp(prefix="bench-nginx-"))
    port = free_port()
    conf = tmp / "nginx.conf"
    conf.write_text(_NGINX_CONF.format(tmp=tmp, port=port, upstream=upstream.split("://")[1]))
    proc = subprocess.Popen(
        [exe, "-p", str(tmp), "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        url = f"http://127.0.0.1:{port}"
        if not _wait_http(url + "/health", proc, 20):
            err = (tmp / "error.log").read_text()[-300:] if (tmp / "error.log").exists() else ""
            print(f"note: nginx did not start; no nginx reference ({err.strip()})")
            yield None
            return
        yield Target("nginx", url, proc.pid)
    finally:
        stop_process(proc)
        shutil.rmtree(tmp, ignore_errors=True)


AIOHTTP_PROXY = """
import asyncio, sys
import aiohttp
from aiohttp import web
UP = sys.argv[1]
JSON = {"Content-Type": "application/json"}
async def main():
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
    async def handle(request):
        body = await request.read()
        async with session.post(UP + request.path, data=body, headers=JSON) as r:
            if r.content_type == "text/event-stream":
                resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
                await resp.prepare(request)
                async for piece in r.content.iter_any():
                    await resp.write(piece)
                await resp.write_eof()
                return resp
            return web.Response(body=await r.read(), status=r.status, headers=JSON)
    app = web.Application()
    app.router.add_post("/v1/chat/completions", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", int(sys.argv[2]))
    await site.start()
    await asyncio.Event().wait()
try:
    import uvloop
    uvloop.run(main())
except ImportError:
    asyncio.run(main())
"""


@contextlib.contextmanager
def aiohttp_proxy_process(upstream: str) -> Iterator[Target]:
    """A bare aiohttp proxy: what aiohttp's server and client cost with nothing else."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-c", AIOHTTP_PROXY, upstream, str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        if not _wait_http(url + "/", proc, 30):
            raise RuntimeError("the bare aiohttp proxy did not start")
        yield Target("aiohttp", url, proc.pid)
    finally:
        stop_process(proc)


# ---- LiteLLM (benchmark-only venv; one worker, no database) -------------------------------
LITELLM_VENV = BENCH_VENVS / "litellm"


def _litellm_ready() -> Path | None:
    """Create the venv and install LiteLLM's proxy on first use; None (with a note) on failure."""
    exe = LITELLM_VENV / "bin" / "litellm"
    if exe.exists():
        return exe
    print(f"installing litellm[proxy] into {LITELLM_VENV} (one time)...", flush=True)
    try:
        subprocess.run([sys.executable, "-m", "venv", str(LITELLM_VENV)], check=True)
        subprocess.run(
            [str(LITELLM_VENV / "bin" / "pip"), "install", "-q", "litellm[proxy]"],
            check=True,
            timeout=900,
        )
    except (subprocess.SubprocessError, OSError) as e:
        print(f"note: LiteLLM install failed ({e}); skipping the LiteLLM comparison")
        return None
    return exe if exe.exists() else None


@contextlib.contextmanager
def litellm_process(upstream: str) -> Iterator[Target | None]:
    exe = _litellm_ready()
    if exe is None:
        yield None
        return
    port = free_port()
    tmp = Path(tempfile.mkdtemp())
    cfg = tmp / "litellm.yaml"
    cfg.write_text(
        "model_list:\n  - model_name: fake\n    litellm_params:\n"
        f"      model: openai/fake\n      api_base: {upstream}/v1\n      api_key: sk-bench\n"
        "litellm_settings:\n  drop_params: true\n  set_verbose: false\n"
    )
    master = "sk-bench-" + secrets.token_hex(16)  # the proxy refuses to start without one
    env = {
        **os.environ,
        "LITELLM_LOG": "ERROR",
        "DISABLE_SCHEMA_UPDATE": "true",
        "LITELLM_MASTER_KEY": master,
    }
    env.pop("DATABASE_URL", None)
    with (tmp / "err.log").open("w") as err:
        proc = subprocess.Popen(
            [
                str(exe),
                "--config",
                str(cfg),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--num_workers",
                "1",
            ],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=env,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        if not _wait_http(url + "/health/liveliness", proc, 180):
            print(
                "note: LiteLLM proxy did not start; skipping it "
                f"({(tmp / 'err.log').read_text()[-300:]})"
            )
            yield None
            return
        yield Target("litellm", url, proc.pid, headers={"Authorization": f"Bearer {master}"})
    finally:
        stop_process(proc)
        shutil.rmtree(tmp, ignore_errors=True)
