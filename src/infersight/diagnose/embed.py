"""``embed_diagnosis(result)``: diagnose a run and store the verdicts in it.

The caller chains the steps (bench -> diagnose -> output), so the RunResult every
output reads already holds its verdicts, and no output ever diagnoses by itself.
"""

from __future__ import annotations

import logging
from typing import Any

from infersight.core.records import RunResult
from infersight.core.verdicts import Verdict
from infersight.diagnose.analyze import diagnose_run

__all__ = ["embed_diagnosis"]

log = logging.getLogger(__name__)


def embed_diagnosis(result: RunResult, **options: Any) -> list[Verdict]:
    """Diagnose ``result`` and store the verdicts in ``result.diagnosis``, the capacity
    curve in ``result.capacity_curve`` and the run's one recommendation in
    ``result.recommendation``.

    ``options`` go to :func:`infersight.diagnose.diagnose_run` (``store_physics=True``
    keeps the peaks and floors used in the file). A bug in diagnose must not cost the
    user the measurements: the run keeps them, the traceback is logged and a note in
    every output says so; it never passes quietly.
    """
    try:
        found = diagnose_run(result, **options)
    except Exception as e:
        log.exception("diagnosis failed")
        result.notes.append(f"diagnosis failed (a bug, please report it): {type(e).__name__}: {e}")
        return []
    result.diagnosis = found.verdicts
    result.capacity_curve = found.curve
    result.recommendation = found.recommendation
    if found.advice is not None:
        result.server_model, result.self_check = found.advice.model, found.advice.check
    return found.verdicts
