"""Console output of a capacity plan (``infersight plan``).

Run results and verdicts are rendered by ``infersight.report``; a plan is the physics
package's own answer, so it is printed next to it.
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from infersight.diagnose.physics.capacity import KNEE_NEVER, CapacityPlan
from infersight.diagnose.physics.hardware import GIB

__all__ = ["print_plan"]


def _gib(x: float) -> str:
    return f"{x / GIB:,.2f} GiB"


def print_plan(plan: CapacityPlan, *, console: Console | None = None) -> None:
    """Memory breakdown, max sequences, settings and the optional estimate."""
    con = console or Console()
    dev = f"{plan.devices}x {plan.device}" if plan.devices > 1 else plan.device
    con.print(
        f"[bold]{escape(plan.model)}[/bold] on [bold]{escape(dev)}[/bold] at {plan.ctx:,} tokens "
        "of context"
    )
    mem = Table(title="memory per device", box=None, show_header=False)
    mem.add_column("part")
    mem.add_column("size", justify="right")
    mem.add_row("weights", _gib(plan.weights_bytes))
    mem.add_row("activations (estimate)", _gib(plan.activations_bytes))
    mem.add_row("KV cache budget", _gib(plan.kv_budget_bytes))
    mem.add_row("headroom (not claimed)", _gib(plan.headroom_bytes))
    mem.add_row("device memory", _gib(plan.memory_bytes))
    mem.add_row(f"KV per token ({plan.kv_dtype})", f"{plan.kv_bytes_per_token / 1024:,.1f} KiB")
    mem.add_row(f"KV per {plan.ctx:,}-token sequence", _gib(plan.kv_bytes_per_sequence))
    con.print(mem)
    style = "green" if plan.fits else "red"
    knee = (
        f"decode turns compute-bound near {plan.compute_knee:,} sequences"
        if plan.compute_knee < KNEE_NEVER
        else "at this context KV reads keep decode memory-bound at any batch"
    )
    con.print(
        f"[{style}]max concurrent sequences at {plan.ctx:,} tokens: "
        f"{plan.max_sequences:,}[/{style}]   ({knee})"
    )
    for n in plan.notes:
        con.print(f"[yellow]note:[/yellow] {escape(n)}")
    if plan.fits:
        st = Table(title="recommended settings", box=None, show_header=False)
        st.add_column("engine", style="bold")
        st.add_column("flags")
        for eng, flags in plan.settings.items():
            st.add_row(escape(eng), escape(" ".join(flags)))
        con.print(st)
    if plan.estimate:
        e = plan.estimate
        if e.get("prompt_tokens_assumed"):
            con.print(
                f"[yellow]assumed:[/yellow] prompts of {e['prompt_tokens']:,} tokens, the "
                f"context less {e['output_tokens']:,} output tokens (the longest it "
                "holds); give --prompt-tokens N for yours"
            )
        con.print(
            f"estimate (roofline floors, best case) at concurrency {e['batch'] + e['queued']}: "
            f"batch {e['batch']} ({e['queued']} queued), ITL >= {e['itl_floor_s'] * 1000:.2f} ms "
            f"({e['itl_bound']}-bound), TTFT >= {e['ttft_floor_s'] * 1000:.1f} ms for "
            f"{e['prompt_tokens']:,}-token prompts, <= {e['output_tokens_per_s']:,.0f} output "
            f"tokens/s, <= {e['requests_per_s']:.2f} requests/s of {e['output_tokens']} tokens. "
            "Real engines reach about 50-80% of these."
        )
