"""``embed_diagnosis(result)``: diagnose a run and store the verdicts in it.

The caller chains the steps (bench -> diagnose -> output), so the RunResult every
output reads already holds its verdicts, and no output ever diagnoses by itself.
"""

from __future__ import annotations

import logging
from typing import Any

from infersight.core.records import RunResult
from infersight.core.verdicts import Verdict
from infersight.diagnose.analyze import diagnose

__all__ = ["embed_diagnosis"]

log = logging.getLogger(__name__)


def embed_diagnosis(result: RunResult, **options: Any) -> list[Verdict]:
    """Diagnose ``result`` and store the verdicts in ``result.diagnosis``.

    ``options`` go to :func:`infersight.diagnose.diagnose` (``store_physics=True``
    keeps the peaks and floors used in the file). A bug in diagnose must not cost the
    user the measurements: the run keeps them, the traceback is logged and a note in
    every output says so; it never passes quietly.
    """
    try:
        verdicts = diagnose(result, **options)
    except Exception as e:
        log.exception("diagnosis failed")
        result.notes.append(f"diagnosis failed (a bug, please report it): {type(e).__name__}: {e}")
        return []
    result.diagnosis = verdicts
    return verdicts
