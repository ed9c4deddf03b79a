"""Rich renderables for the live monitor view."""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from infersight.monitor.history_view import NA, history_table, process_table, section_table
from infersight.monitor.state import LATENCIES, MonitorState
from infersight.telemetry.engine_metrics import engine_specs
from infersight.telemetry.gpu import throttle_reason_names

__all__ = ["ViewInfo", "render"]


@dataclass
class ViewInfo:
    url: str | None
    interval: float
    record: str | None = None
    gpu_message: str | None = None
    scrape_error: str | None = None
    #: A live view on a terminal (q quits); False for --once and frames printed to a pipe.
    live: bool = True
    #: The wall-clock time of the frame, shown when frames are printed one after another.
    at: str | None = None


def _bytes(v: float | None) -> str:
    if v is None:
        return NA
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(v) < 1024 or unit == "TiB":
            return f"{v:.0f} {unit}" if unit == "B" else f"{v:.1f} {unit}"
        v /= 1024
    return NA


def _pct(v: float | None, scale: float = 100.0) -> str:
    return NA if v is None else f"{v * scale:.0f}%"


def _ms(v: float | None) -> str:
    if v is None:
        return NA
    return f"{v * 1000:.0f} ms" if v < 10 else f"{v:.1f} s"


def _num(v: float | None, fmt: str = "{:.0f}") -> str:
    return NA if v is None else fmt.format(v)


def _bar(frac: float | None, width: int = 20) -> Text:
    if frac is None:
        return Text(NA, style="dim")
    f = min(max(frac, 0.0), 1.0)
    n = round(f * width)
    style = "green" if f < 0.7 else "yellow" if f < 0.9 else "red"
    return Text("█" * n, style=style) + Text("░" * (width - n), style="dim")


def _gpu(st: MonitorState, info: ViewInfo) -> RenderableType:
    gpus = sorted({s.labels.get("gpu", "") for s in st.values("gpu.utilization")})
    if not gpus:
        return Text(f"GPU: {info.gpu_message or 'no GPU metrics'}", style="dim")
    t = section_table("GPU", expand=True)
    for col in (
        "gpu",
        "util",
        "",
        "SM act",
        "memory",
        "power",
        "SM/mem MHz",
        "temp",
        "PCIe rx/tx",
        "throttle",
    ):
        t.add_column(col)
    for g in gpus:

        def v(n: str, g: str = g) -> float | None:
            return st.value(n, gpu=g)

        used, total = v("gpu.memory_used_bytes"), v("gpu.memory_total_bytes")
        power, limit = v("gpu.power_watts"), v("gpu.power_limit_watts")
        t.add_row(
            g,
            _pct(v("gpu.utilization")),
            _bar(v("gpu.utilization"), 12),
            _pct(v("gpu.sm_activity")),
            f"{_bytes(used)} / {_bytes(total)}",
            f"{_num(power)} / {_num(limit)} W",
            f"{_num(v('gpu.sm_clock_mhz'))} / {_num(v('gpu.mem_clock_mhz'))}",
            f"{_num(v('gpu.temperature_c'))} °C",
            f"{_bytes(v('gpu.pcie_rx_bytes_per_s'))}/s / {_bytes(v('gpu.pcie_tx_bytes_per_s'))}/s",
            ", ".join(throttle_reason_names(v("gpu.throttle_reasons"))) or "-",
        )
    return t


def _engine(st: MonitorState, info: ViewInfo) -> RenderableType:
    if info.url is None:
        return Text("engine: none (pass a URL to watch an engine)", style="dim")
    up = st.value("engine.up")
    spec = engine_specs().get(st.engine or "")
    label = spec.label if spec else "unknown engine"
    t = section_table(f"Engine: {label}  {info.url}", header=False, pad=2)
    t.add_column(style="bold")
    t.add_column()
    t.add_column(style="bold")
    t.add_column()
    running, slots = st.value("engine.requests_running"), st.value("engine.slots")
    waiting, kv = st.value("engine.requests_waiting"), st.value("engine.kv_cache_usage")
    status = Text("up", style="green") if up == 1.0 else Text("DOWN", style="bold red")
    t.add_row("status", status, "scrape failures", str(st.scrape_failures))
    t.add_row(
        "running",
        f"{_num(running)} / {_num(slots)} slots",
        "waiting",
        Text(_num(waiting), style="bold red" if (waiting or 0) > 0 else ""),
    )
    kv_cell = Text(NA, style="dim") if kv is None else Text(_pct(kv) + " ") + _bar(kv, 12)
    t.add_row(
        "KV cache", kv_cell, "preemptions/s", _num(st.rate("engine.preemptions_total"), "{:.2f}")
    )
    t.add_row(
        "prompt tok/s",
        _num(st.rate("engine.prompt_tokens_total"), "{:.1f}"),
        "generated tok/s",
        _num(st.rate("engine.generation_tokens_total"), "{:.1f}"),
    )
    req = st.rate("engine.requests_finished_total") or st.rate("engine.requests_total")
    err = st.rate("engine.request_errors_total")
    t.add_row("requests/s", _num(req, "{:.2f}"), "errors/s", _num(err, "{:.2f}"))
    gen_s, gen_tok = (
        st.rate("engine.generation_seconds_total"),
        st.rate("engine.generation_tokens_total"),
    )
    if gen_s is not None and gen_tok:
        # llama.cpp: time spent generating per generated token, summed over slots
        t.add_row("decode time/token", _ms(gen_s / gen_tok), "", "")
    if info.scrape_error:
        t.add_row("last error", Text(info.scrape_error, style="red"), "", "")
    return t


def _latency(st: MonitorState) -> RenderableType:
    rows = [(k, st.latencies[k]) for k in LATENCIES if k in st.latencies]
    if not rows:
        return Text("latency: the engine exports no latency histograms", style="dim")
    t = section_table("Latency (engine, last interval with requests)", expand=True)
    for col in ("", "p50", "p90", "p99", "mean (30 s)"):
        t.add_column(col)
    for k, lv in rows:
        t.add_row(
            k.upper() if k != "queue_time" else "queue",
            _ms(lv.p50),
            _ms(lv.p90),
            _ms(lv.p99),
            _ms(lv.mean),
        )
    return t


def _host(st: MonitorState) -> RenderableType:
    t = section_table("Host", header=False, pad=2)
    t.add_column(style="bold")
    t.add_column()
    cpu = st.value("host.cpu_percent", cpu="all")
    t.add_row("CPU", Text(_pct(cpu, 1.0) + " ") + _bar(None if cpu is None else cpu / 100.0))
    cores = sorted(
        (s for s in st.values("host.cpu_percent") if s.labels.get("cpu") != "all"),
        key=lambda s: int(s.labels.get("cpu", "0")),
    )
    if cores:
        t.add_row("cores", " ".join(f"{(s.value or 0):3.0f}" for s in cores[:64]))
    used, total = st.value("host.memory_used_bytes"), st.value("host.memory_total_bytes")
    t.add_row("memory", f"{_bytes(used)} / {_bytes(total)}")
    rx, tx = st.rate("host.net_rx_bytes_total"), st.rate("host.net_tx_bytes_total")
    t.add_row("network", f"rx {_bytes(rx)}/s  tx {_bytes(tx)}/s")
    for s in st.values("process.cpu_percent"):
        rss = st.value("process.rss_bytes", pid=s.labels.get("pid", ""))
        t.add_row(
            f"{s.labels.get('name')} ({s.labels.get('pid')})",
            f"CPU {_num(s.value)}% of a core, RSS {_bytes(rss)}",
        )
    return t


def _height(r: RenderableType) -> int:
    """Lines a section takes (tables: title, header, rows; anything else: one)."""
    if isinstance(r, Table):
        return r.row_count + (1 if r.title else 0) + (1 if r.show_header else 0)
    return 1


def render(st: MonitorState, info: ViewInfo, size: tuple[int, int] | None = None) -> RenderableType:
    """The whole screen for the current state. ``size`` (columns, lines) fits it to a
    terminal: the sparklines fill the width; when lines run short, the host, latency
    and GPU tables go first and the process list is cut (most important kept: the
    engine, its history, its processes)."""
    head = Text.assemble(
        ("infersight monitor", "bold"),
        f"  every {info.interval:g} s",
        (f"  recording to {info.record}" if info.record else "", "cyan"),
        (f"  {info.at}" if info.at else "", "dim"),
        ("   q or Ctrl-C to quit" if info.live else "", "dim"),
    )
    width, lines = size if size is not None else (120, 10_000)
    hist, _ = history_table(st, width - 4)
    parts: dict[str, RenderableType] = {
        "gpu": _gpu(st, info),
        "engine": _engine(st, info),
        "history": hist,
        "latency": _latency(st),
        "host": _host(st),
    }
    room = lines - 3  # the panel's borders and the cursor's line
    cost = {k: _height(r) + 1 for k, r in parts.items()}
    for drop in ("host", "latency", "gpu"):  # what a short terminal does without
        if sum(cost.values()) + 3 <= room:
            break
        del parts[drop], cost[drop]
    procs, _ = process_table(st, max(1, room - sum(cost.values()) - 3))
    order = ("gpu", "engine", "history", "processes", "latency", "host")
    parts["processes"] = procs
    shown: list[RenderableType] = []
    for k in order:
        if k in parts:
            shown += [parts[k], Text("")]
    return Panel(Group(*shown[:-1]), title=head, title_align="left")
