"""The metrics reference (``docs/metrics.md``), generated from the exporter's name
table and the engine table, so the documentation cannot drift from what is served.

``python -m infersight.telemetry.exporter.docs docs/metrics.md`` rewrites the
generated block of that file (between the two markers) in place.
"""

from __future__ import annotations

import sys
from pathlib import Path

from infersight.core.engines import engine_specs
from infersight.telemetry.dashboards import dashboard_panels, panel_engines
from infersight.telemetry.exporter.names import EXPORTED, EXPORTER_OWN, GPU_INFO, Exported

__all__ = ["BEGIN", "END", "engines_with", "panels_markdown", "reference_markdown", "update_file"]

BEGIN = "<!-- BEGIN GENERATED: python -m infersight.telemetry.exporter.docs docs/metrics.md -->"
END = "<!-- END GENERATED -->"

_SECTIONS = (
    ("Host and watched processes", ("host.", "process.")),
    ("GPUs (NVML)", ("gpu.",)),
    ("Engines", ("engine.",)),
)


def engines_with(sample_name: str) -> tuple[list[str], list[str]]:
    """(engines whose current releases export ``sample_name``, engines whose older
    versions only do, as "label (versions)"), from the engine table."""
    current: list[str] = []
    older: list[str] = []
    for spec in engine_specs().values():
        rules = [r for rs in spec.metrics.values() for r in rs if r.name == sample_name]
        if any(r.legacy is None for r in rules):
            current.append(spec.label)
        elif rules:
            older.append(f"{spec.label} ({rules[0].legacy})")
    return current, older


def _labels(sample_name: str, e: Exported) -> str:
    if sample_name.startswith("engine."):
        base = ["engine", "source"]
    elif sample_name.startswith("gpu."):
        base = ["gpu", "pid"] if sample_name == "gpu.process_memory_bytes" else ["gpu"]
    elif sample_name.startswith("process."):
        base = ["name", "pid"]
    elif sample_name == "host.cpu_percent" and not e.only:
        base = ["cpu"]
    else:
        base = []
    if e.kind == "histogram":
        base.append("le")
    return ", ".join(f"`{x}`" for x in base) or "-"


def _row(sample_name: str, e: Exported) -> str:
    cells = [f"`{e.name}`", e.kind, _labels(sample_name, e), e.help.replace("|", "\\|")]
    if sample_name.startswith("engine."):
        current, older = engines_with(sample_name)
        if sample_name in ("engine.up", "engine.scrape_duration_seconds"):
            current = ["every scraped engine"]
        elif sample_name == "engine.slots":  # also read from the engine's info endpoint
            probed = [f"{s.label} ({s.slots[0][0]})" for s in engine_specs().values() if s.slots]
            current = [*current, *probed]
        cells.append(", ".join(current + older) or "-")
    return "| " + " | ".join(cells) + " |"


def reference_markdown() -> str:
    """The generated block of ``docs/metrics.md`` (without the markers)."""
    out: list[str] = ["", "## The exporter itself", ""]
    out += ["| name | type | labels | meaning |", "|---|---|---|---|"]
    for name, (kind, help_) in EXPORTER_OWN.items():
        out.append(f"| `{name}` | {kind} | - | {help_} |")
    out.append(
        f"| `{GPU_INFO[0]}` | gauge | `gpu`, `name`, `uuid`, `driver_version` | {GPU_INFO[1]} |"
    )
    for title, prefixes in _SECTIONS:
        engines = prefixes == ("engine.",)
        out += ["", f"## {title}", ""]
        if engines:
            out += ["| name | type | labels | meaning | exported for |", "|---|---|---|---|---|"]
        else:
            out += ["| name | type | labels | meaning |", "|---|---|---|---|"]
        for sample_name, forms in EXPORTED.items():
            if sample_name.startswith(prefixes):
                out.extend(_row(sample_name, e) for e in forms)
    return "\n".join(out) + "\n" + panels_markdown()


def panels_markdown() -> str:
    """Which shipped dashboard panels each engine fills (engine panels only)."""
    specs = engine_specs()
    head = "| panel | " + " | ".join(s.label for s in specs.values()) + " |"
    out = [
        "",
        "## Dashboard panels by engine",
        "",
        "What the shipped Grafana dashboard (`infersight dashboards grafana`) shows for each",
        "engine (llama.cpp includes infersight's embedded engine); an empty cell is a panel",
        'that says "no data" for it. GPU, host and cost panels do not depend on the engine.',
        "",
        head,
        "|---" * (len(specs) + 1) + "|",
    ]
    for p in dashboard_panels():
        engines = panel_engines(p)
        if engines and p.get("type") != "stat":
            cells = ["yes" if key in engines else "" for key in specs]
            out.append(f"| {p['title']} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def update_file(path: Path) -> bool:
    """Rewrite the generated block of ``path``; True when it changed."""
    text = path.read_text()
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    new = head + BEGIN + "\n" + reference_markdown() + "\n" + END + tail
    if new == text:
        return False
    path.write_text(new)
    return True


if __name__ == "__main__":  # pragma: no cover
    for arg in sys.argv[1:]:
        print(f"{arg}: {'updated' if update_file(Path(arg)) else 'up to date'}")
