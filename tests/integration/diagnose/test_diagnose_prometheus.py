"""``diagnose --prometheus`` and ``report --prometheus`` against a real Prometheus.

Prometheus (Debian's, behind TLS with client certificates and basic auth) scrapes, at
1 s: fixture exporters replaying recorded vLLM V1, SGLang and dcgm-exporter
expositions whose values move over time (a slot-bound replica whose queue grows, an
idle one, a KV-full one, an SGLang replica on a GPU at 100% utilisation with 30% SM
activity), the real embedded engine, and infersight's own exporter watching it. The
CLI then diagnoses the last half minute: each replica's verdict, the fleet summary
naming the imbalance, the HTML in headless Chromium, paging, the selector and every
way in (basic auth + mutual TLS, a bearer token through a proxy, refused credentials).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import pytest
from aiohttp import web
from fleet_replay import FIX, Gpu, Replay, render, render_dcgm
from prom_secure import start_prometheus, write_http_config

from infersight.telemetry import (
    EngineScraper,
    ExporterServer,
    HostSampler,
    PrometheusClient,
    Recorder,
    load_auth,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "report"))
from report_cdp import Browser, serve

from support.waiting import until_awaited

pytestmark = [pytest.mark.needs("prometheus", "openssl"), pytest.mark.engine]

T = TypeVar("T")
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
QWEN = "Qwen/Qwen2.5-7B-Instruct"
CLI = [sys.executable, "-c", "from infersight.cli import main; main()"]
#: Seconds of scrapes the range covers (1 s apart), in windows of 10 s.
SPAN, WINDOW = 30, 10


class LoopThread:
    """An event loop in a thread for the servers, so tests can stay synchronous and
    run the CLI (which has its own loop) as a subprocess or in-process."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 60) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


def _vllm(running: Any, waiting: Any, kv: Any, preempt: float = 0.0) -> Any:
    text = (FIX / "vllm_v1_0_10.txt").read_text()
    values = {
        "vllm:num_requests_running": running,
        "vllm:num_requests_waiting": waiting,
        "vllm:kv_cache_usage_perc": kv,
        "vllm:gpu_cache_usage_perc": kv,
        "vllm:num_preemptions_total": lambda t: preempt * t,
    }
    return lambda t: render(text, t, values, growth=0.05)


def _sglang() -> Any:
    text = (FIX / "sglang_0_5.txt").read_text()
    values = {
        "sglang:num_running_reqs": lambda t: 20 + int(t) % 3,
        "sglang:num_queue_reqs": lambda t: 0.0,
        "sglang:token_usage": lambda t: 0.3,
    }
    return lambda t: render(text, t, values, growth=0.05)


GPUS = [
    Gpu(
        "GPU-0a11c0de-0000-4000-8000-000000000000",
        "gpu-node-1",
        "vllm-0",
        lambda t: 93 + int(t) % 2,
        lambda t: 0.72,
    ),
    Gpu(
        "GPU-0a11c0de-0000-4000-8000-000000000001",
        "gpu-node-2",
        "vllm-1",
        lambda t: 10 + int(t) % 3,
        lambda t: 0.05,
    ),
    Gpu(
        "GPU-0a11c0de-0000-4000-8000-000000000002",
        "gpu-node-3",
        "vllm-2",
        lambda t: 96,
        lambda t: 0.81,
    ),
    Gpu(
        "GPU-0a11c0de-0000-4000-8000-000000000003",
        "gpu-node-4",
        "sglang-0",
        lambda t: 100,
        lambda t: 0.30,
    ),
    Gpu("GPU-0a11c0de-0000-4000-8000-000000000009", "gpu-node-9", "", lambda t: 0, lambda t: 0.0),
]


def _scrape_configs(ports: dict[str, str], engine: str, exporter: str, sidecar: str) -> str:
    jobs = {"vllm": ["vllm-0", "vllm-1", "vllm-2"], "sglang": ["sglang-0"]}
    out = ""
    for job, pods in jobs.items():
        out += f"  - job_name: {job}\n    static_configs:\n"
        for i, pod in enumerate(pods):
            node = f"gpu-node-{i + 1 if job == 'vllm' else 4}"
            out += (
                f"      - targets: ['{ports[pod]}']\n        labels: {{namespace: llm, pod: {pod}, "
                f"node: {node}}}\n"
            )
    out += (
        f"  - job_name: dcgm-exporter\n    honor_labels: true\n    static_configs:\n"
        f"      - targets: ['{ports['dcgm']}']\n"
    )
    out += f"  - job_name: engine\n    static_configs:\n      - targets: ['{engine}']\n"
    out += f"  - job_name: infersight\n    static_configs:\n      - targets: ['{exporter}']\n"
    out += (
        f"  - job_name: infersight-sidecar\n    static_configs:\n      - targets: ['{sidecar}']\n"
    )
    return out


async def _wait_for(
    url: str, http: Path, query: str, ok: Callable[[float], bool], what: str, timeout: float = 90
) -> float:
    """Poll Prometheus (twice a second: it scrapes every 0.5 s) until the first value of
    ``query`` satisfies ``ok``; the evaluation time of that answer (Prometheus's clock)."""
    async with PrometheusClient(url, load_auth(http), timeout=10) as prom:

        async def look() -> float:
            try:
                data = await prom.call_get("query", [("query", query)])
            except Exception:  # Prometheus is still starting
                return 0.0
            res = data.get("result") if isinstance(data, dict) else None
            return float(res[0]["value"][0]) if res and ok(float(res[0]["value"][1])) else 0.0

        return await until_awaited(look, what, timeout=timeout, poll=0.5)


@pytest.fixture(scope="module")
def fleet(engine: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    d = tmp_path_factory.mktemp("fleet")
    lt = LoopThread()
    servers = {
        "vllm-0": Replay(_vllm(lambda t: 8.0, lambda t: 10 + t / 4 + int(t) % 3, lambda t: 0.45)),
        "vllm-1": Replay(_vllm(lambda t: 1.0 + int(t) % 2, lambda t: 0.0, lambda t: 0.04)),
        "vllm-2": Replay(
            _vllm(
                lambda t: 5.0 + int(t) % 2,
                lambda t: 4.0 + int(t) % 3,
                lambda t: 0.95 + 0.01 * (int(t) % 3),
                preempt=0.5,
            )
        ),
        "sglang-0": Replay(_sglang()),
        # read only through an infersight exporter beside it (a sidecar): its TTFT
        # reaches Prometheus as the exporter's histogram
        "vllm-3": Replay(_vllm(lambda t: 6.0 + int(t) % 2, lambda t: 0.0, lambda t: 0.3)),
        "dcgm": Replay(lambda t: render_dcgm((FIX / "dcgm_exporter_4.txt").read_text(), t, GPUS)),
    }
    ports = {k: lt.run(s.start()) for k, s in servers.items()}
    rec = Recorder(
        [
            HostSampler({"engine": engine.pid}, per_cpu=False),
            EngineScraper(engine.base_url, api_key=engine.api_key),
        ],
        interval=0.5,
    )
    exporter = ExporterServer(rec, port=0)
    lt.run(exporter.start())
    # as `infersight exporter` builds it: the engine's histogram buckets are kept
    scraper = EngineScraper(f"http://{ports['vllm-3']}", buckets=True)
    sidecar = ExporterServer(Recorder([scraper], interval=0.5), port=0)
    lt.run(sidecar.start())
    eng = engine.base_url.split("//", 1)[1].split("/", 1)[0]
    exp = exporter.url.split("//", 1)[1]
    side = sidecar.url.split("//", 1)[1]
    proc, url = start_prometheus(d, _scrape_configs(ports, eng, exp, side))
    http = write_http_config(d)
    try:
        t_up = lt.run(
            _wait_for(url, http, "count(up == 1)", lambda n: n >= 8, "8 targets up"), timeout=120
        )
        # the window is [t_up + 1, t_up + 1 + SPAN]: every target scraped past its end
        lt.run(
            _wait_for(
                url,
                http,
                "min(timestamp(up))",
                lambda t: t >= t_up + SPAN + 2,
                "every target scraped past the window",
                timeout=SPAN + 90,
            ),
            timeout=SPAN + 120,
        )
        yield {
            "url": url,
            "http": http,
            "dir": d,
            "start": t_up + 1,
            "end": t_up + 1 + SPAN,
            "engine": eng,
            "sidecar": side,
            "loop": lt,
        }
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        lt.run(exporter.stop())
        lt.run(sidecar.stop())
        for s in servers.values():
            lt.run(s.stop())
        lt.close()


def _cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), **(env or {})}
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, timeout=timeout, env=full_env
    )


def _range(f: dict[str, Any]) -> list[str]:
    return [
        "--prometheus",
        f["url"],
        "--start",
        f"{f['start']:.0f}",
        "--end",
        f"{f['end']:.0f}",
        "--step",
        "1s",
        "--window",
        str(WINDOW),
    ]


def test_diagnose_names_each_replica_and_the_imbalance(fleet: dict[str, Any]) -> None:
    r = _cli("diagnose", *_range(fleet), "--http-config", str(fleet["http"]), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    main = {rd["replica"]["id"]: rd["main"] for rd in doc["replicas"]}
    assert main == {
        "llm/vllm-0": "slot_bound",
        "llm/vllm-1": "under_loaded",
        "llm/vllm-2": "kv_bound",
        "llm/sglang-0": "busy_illusion",
        fleet["engine"]: "under_loaded",
        fleet["sidecar"]: "healthy",
    }, r.stdout[:3000]
    by_id = {rd["replica"]["id"]: rd for rd in doc["replicas"]}
    slot = next(v for v in by_id["llm/vllm-0"]["verdicts"] if v["id"] == "slot_bound")
    assert "R stays at 8" in slot["summary"]  # vLLM exports no slot limit: R's plateau shows it
    idle = next(v for v in by_id["llm/vllm-1"]["verdicts"] if v["id"] == "under_loaded")
    assert next(e for e in idle["evidence"] if e["key"] == "slots")["value"] == 8.0  # from vllm-0
    # GPUs joined by dcgm-exporter's pod label; the GPU no pod uses joins nothing
    assert by_id["llm/vllm-0"]["replica"]["gpus"] == [GPUS[0].uuid]
    assert by_id["llm/sglang-0"]["replica"]["gpu_join"] == "pod"
    illusion = next(v for v in by_id["llm/sglang-0"]["verdicts"] if v["id"] == "busy_illusion")
    sm = next(e for e in illusion["evidence"] if e["key"] == "sm_activity")
    assert sm["value"] == pytest.approx(0.30, abs=0.01) and "DCGM_FI_PROF_SM_ACTIVE" in sm["source"]
    assert by_id["llm/vllm-0"]["stats"]["SM"] == pytest.approx(0.72, abs=0.01)
    assert by_id["llm/vllm-0"]["stats"]["ttft_p99_max"] > 0.5  # histogram_quantile in PromQL
    # the embedded engine, scraped directly and through infersight's exporter, is one replica
    eng = by_id[fleet["engine"]]["replica"]
    assert eng["engine"] == "llamacpp" and "infersight exporter" in eng["sources"]
    # a replica seen only through infersight's exporter: engine kind from its labels, TTFT
    # p99 from the exporter's histogram (histogram_quantile), no slot limit to judge load by
    side = by_id[fleet["sidecar"]]
    assert side["replica"]["engine"] == "vllm" and side["stats"]["R"] == pytest.approx(6.5, abs=0.3)
    assert side["stats"]["ttft_p99_max"] > 0.5
    assert any(fleet["sidecar"] in n and "--engine-slots" in n for n in doc["notes"])
    # the fleet summary names the imbalance
    assert [v["id"] for v in doc["balance"]] == ["load_imbalance"]
    head = " ".join(doc["headline"])
    assert (
        f"1 of 3 replicas of {LLAMA} under-loaded while 2 are queueing (1 KV-bound, "
        "1 slot-bound): the router is unbalanced"
    ) in head
    groups = {g["verdict"]: g["replicas"] for g in doc["groups"]}
    assert groups["slot_bound"] == ["llm/vllm-0"] and groups["busy_illusion"] == ["llm/sglang-0"]
    worst = doc["worst"][0]  # vllm-0's queue grows: its last window is the worst
    assert worst["replica"] == "llm/vllm-0" and worst["end"] == pytest.approx(fleet["end"])


def test_console_output_and_one_line_errors(fleet: dict[str, Any]) -> None:
    r = _cli(
        "diagnose", *_range(fleet), "--http-config", str(fleet["http"]), env={"COLUMNS": "160"}
    )
    assert r.returncode == 0, r.stderr
    assert "the router is unbalanced" in r.stdout and "Queueing: slot-bound" in r.stdout
    assert "Traceback" not in r.stdout + r.stderr
    # wrong password: Prometheus answers 401; one line, exit 2, the password never shown
    bad = write_http_config(fleet["dir"], password="not-the-password")
    r = _cli("diagnose", *_range(fleet), "--http-config", str(bad))
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "HTTP 401" in r.stderr and "not-the-password" not in r.stderr
    # no client certificate: the TLS handshake fails, said in one line
    nocert = write_http_config(fleet["dir"], cert=False)
    r = _cli("diagnose", *_range(fleet), "--http-config", str(nocert))
    assert (
        r.returncode == 2
        and r.stderr.startswith("error: Prometheus at ")
        and "Traceback" not in r.stderr
    )
    # no CA: the server's certificate is not trusted
    r = _cli("diagnose", *_range(fleet))
    assert r.returncode == 2 and "certificate" in r.stderr.lower(), r.stderr


def test_selector_and_pages(fleet: dict[str, Any]) -> None:
    from infersight.entrypoints.prometheus import FleetQuery, diagnose_prometheus

    q = FleetQuery(
        url=fleet["url"],
        start=f"{fleet['start']:.0f}",
        end=f"{fleet['end']:.0f}",
        step="1s",
        window=WINDOW,
        http_config=fleet["http"],
        selector='{namespace="llm"}',
    )
    one = diagnose_prometheus(q, progress=False)
    q.page_points = 7  # fewer points than a window: 3 pages of one 10 s window each
    many = diagnose_prometheus(q, progress=False)
    assert sorted(rd.replica.id for rd in one.replicas) == [
        "llm/sglang-0",
        "llm/vllm-0",
        "llm/vllm-1",
        "llm/vllm-2",
    ]
    assert one.stats["pages"] == 1 and many.stats["pages"] == 3

    def key(rep):
        return [
            (rd.replica.id, [(v.id, v.window.start, v.window.end) for v in rd.verdicts])
            for rd in rep.replicas
        ]

    assert key(one) == key(many)
    assert [v.summary for v in one.balance] == [v.summary for v in many.balance]


def test_bearer_token_through_a_proxy(fleet: dict[str, Any], tmp_path: Path) -> None:
    """An auth proxy in front of Prometheus (as oauth2-proxy or a managed service)
    wants a bearer token; it forwards to the real Prometheus with its own credentials."""
    token = "fleet-bearer-2f9c"
    (tmp_path / "token").write_text(token + "\n")
    auth = load_auth(fleet["http"])

    async def start() -> tuple[web.AppRunner, aiohttp.ClientSession, str]:
        session = aiohttp.ClientSession(
            headers=auth.headers(), connector=aiohttp.TCPConnector(ssl=auth.ssl_context())
        )

        async def proxy(req: web.Request) -> web.Response:
            given = req.headers.get("Authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                return web.json_response({"status": "error", "error": "unauthorized"}, status=401)
            async with session.request(
                req.method,
                fleet["url"] + req.path_qs,
                data=await req.read(),
                headers={"Content-Type": req.content_type},
            ) as up:
                return web.Response(
                    body=await up.read(), status=up.status, content_type="application/json"
                )

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", proxy)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        return runner, session, f"http://127.0.0.1:{runner.addresses[0][1]}"

    lt = fleet["loop"]
    runner, session, url = lt.run(start())
    try:
        args = [
            "diagnose",
            "--prometheus",
            url,
            "--start",
            f"{fleet['start']:.0f}",
            "--end",
            f"{fleet['end']:.0f}",
            "--step",
            "1s",
            "--selector",
            '{job="sglang"}',
            "--json",
        ]
        r = _cli(*args, env={"INFERSIGHT_PROMETHEUS_BEARER_TOKEN_FILE": str(tmp_path / "token")})
        assert r.returncode == 0, r.stderr
        assert [rd["main"] for rd in json.loads(r.stdout)["replicas"]] == ["busy_illusion"]
        r = _cli(*args)
        assert r.returncode == 2 and "HTTP 401" in r.stderr and token not in r.stderr
    finally:
        lt.run(session.close())
        lt.run(runner.cleanup())


@pytest.mark.needs("chromium")
def test_report_renders_in_chromium(fleet: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "fleet.html"
    r = _cli("report", *_range(fleet), "--http-config", str(fleet["http"]), "--out", str(out))
    assert r.returncode == 0, r.stderr
    html = out.read_text()

    async def view() -> tuple[list[str], list[str], str, int, list[str]]:
        async with serve({"/fleet.html": html}) as (base, hits), Browser(height=1600) as b:
            page = await b.open(f"{base}/fleet.html")
            text = await page.evaluate("document.body.innerText")
            rects = await page.evaluate("document.querySelectorAll('svg.fleet rect').length")
            return page.errors(), page.requested_urls(), text, int(rects), hits

    errors, urls, text, rects, hits = asyncio.run(view())
    assert errors == [] and hits == ["/fleet.html"] and len(urls) == 1
    assert "the router is unbalanced" in text and "Queueing: slot-bound" in text
    assert "llm/vllm-1" in text and "Load imbalance across replicas" in text
    assert rects >= 6  # one bar per replica span, and the imbalance row
