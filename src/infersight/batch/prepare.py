"""Everything checked before the first request: input, output, prices, what to run."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from infersight.batch.budget import CostMeter
from infersight.batch.input import BadInput, InputScan, RowDefaults, scan_input
from infersight.batch.lock import OutputLock
from infersight.batch.output import (
    OutputState,
    OutputWriter,
    compact_output,
    load_output,
    result_line,
)
from infersight.core.errors import ConfigError, DataError
from infersight.core.pricing import PriceTable
from infersight.flags.batch import BatchConfig

__all__ = ["BatchJob", "make_meter", "prepare_job", "prior_cost"]


@dataclass
class BatchJob:
    """The validated input, what the output already holds, and the rows to run."""

    cfg: BatchConfig
    scan: InputScan
    state: OutputState
    prices: PriceTable
    todo: set[str]
    compacted: int = 0
    foreign: int = 0
    notes: list[str] = field(default_factory=list)
    #: Held while the run writes the output (None for a dry run).
    lock: OutputLock | None = None


def _prices(cfg: BatchConfig) -> PriceTable:
    if cfg.price_in is not None and cfg.price_out is not None:
        return PriceTable.flat(cfg.price_in, cfg.price_out)
    return PriceTable.load(cfg.prices)


def prior_cost(state: OutputState, prices: PriceTable, keep: set[str]) -> float | None:
    """Cost of the succeeded rows already in the output (None if some are unpriced)."""
    if not keep:
        return 0.0
    total = 0.0
    for model, (p, c) in state.usage.items():
        cost = prices.cost(model or None, p, c)
        if cost is None:
            cost = prices.cost(None, p, c)
        if cost is None:
            return None
        total += cost
    return total


def prepare_job(cfg: BatchConfig, *, lock: bool = True) -> BatchJob:
    """Validate input and output; raise ConfigError before anything is sent.

    With ``lock`` the output is locked for this process (release with
    ``job.lock.release()``) and a torn last line is repaired; a dry run reads only.
    """
    inp, out = Path(cfg.input), Path(cfg.output)
    if inp.resolve() == out.resolve():
        raise ConfigError("--out is the input file; give a different output path")
    prices = _prices(cfg)
    scan = scan_input(inp, RowDefaults(model=cfg.model, max_tokens=cfg.max_tokens))
    if scan.bad and cfg.on_bad_line == "stop":
        raise BadInput(inp, scan.bad)
    if scan.rows == 0:
        what = f" ({len(scan.bad)} bad lines skipped)" if scan.bad else ""
        raise ConfigError(f"{inp}: no valid rows to run{what}")
    out_lock = OutputLock(out) if lock else None
    try:
        return _plan_output(cfg, scan, prices, out_lock)
    except BaseException:
        if out_lock is not None:
            out_lock.release()
        raise


def _plan_output(
    cfg: BatchConfig, scan: InputScan, prices: PriceTable, out_lock: OutputLock | None
) -> BatchJob:
    inp, out = Path(cfg.input), Path(cfg.output)
    state = load_output(out, repair=out_lock is not None)
    job = BatchJob(cfg, scan, state, prices, set(), lock=out_lock)
    if state.repaired_bytes:
        job.notes.append(
            f"{out}: cut a torn final line ({state.repaired_bytes} bytes) left by a crash; "
            "that row runs again"
        )
    if state.duplicates and out_lock is not None:
        job.compacted = compact_output(out)
        out_lock.relock()
        job.notes.append(f"{out}: compacted {job.compacted} superseded lines (last wins)")
    if out_lock is not None:
        _write_bad_lines(out, scan, state)
    job.foreign = len(set(state.done) - scan.ids - scan.bad_ids)
    if job.foreign:
        job.notes.append(
            f"{out} holds {job.foreign} rows whose custom_id is not in {inp} "
            "(was the input edited?)"
        )
    if cfg.retry_failed:
        job.todo = state.failed_ids & scan.ids
        left = scan.rows - len(set(state.done) & scan.ids)
        if left:
            job.notes.append(f"{left} rows never ran; rerun without --retry-failed to run them")
    else:
        # A line that was invalid in an earlier run and has been fixed since runs now.
        job.todo = scan.ids - (set(state.done) - state.input_errors)
    if cfg.max_cost is not None and job.todo:
        unpriced = (
            sorted(m for m in scan.models if m is not None and prices.price(m) is None)
            if prices.price(None) is None
            else []
        )
        if unpriced:
            raise ConfigError(
                f"--max-cost needs a price for model {unpriced[0]!r}: "
                "add it with --prices FILE or give --price-in/--price-out"
            )
    return job


def _write_bad_lines(out: Path, scan: InputScan, state: OutputState) -> None:
    """One error line per skipped input line (kind ``DataError``, docs/design.md
    section 7: the row was never sent), so the output accounts for every input row;
    lines an earlier run wrote are not written again."""
    lines = [
        result_line(
            b.custom_id,
            status=None,
            body=None,
            error_code=DataError.__name__,
            error_message=f"input line {b.line} skipped: {b.reason}",
        )
        for b in scan.bad
        if b.custom_id not in state.input_errors
    ]
    if lines:
        writer = OutputWriter(out)
        try:
            writer.add(b"".join(lines))
        finally:
            writer.close()
        for b in scan.bad:
            state.done[b.custom_id] = False
            state.input_errors.add(b.custom_id)


def make_meter(job: BatchJob, default_model: str | None) -> CostMeter:
    """The cost meter, counting the output's earlier rows in the budget."""
    cfg = job.cfg
    if (
        cfg.max_cost is not None
        and job.prices.price(default_model) is None
        and (None in job.scan.models)
    ):
        raise ConfigError(
            f"--max-cost needs a price for model {default_model!r}: "
            "add it with --prices FILE or give --price-in/--price-out"
        )
    keep = job.state.ok_ids - job.todo
    prior = prior_cost(job.state, job.prices, keep)
    if prior is None:
        job.notes.append("some rows already in the output have no price; not counted in the cost")
        prior = 0.0
    return CostMeter(job.prices, default_model, cfg.max_cost, prior_cost=prior)
