"""Measurement maths over request records (docs/design.md section 2).

Everything here is a pure function of records (and the stored documents in
:mod:`infersight.core`): which requests a level's figures describe (``windows``),
exact percentiles (``summary``), a level's aggregates (``aggregate``), whether it was
sustainable (``sustain``) and valid (``validity``), the flags beside its figures
(``level_flags``), whether a difference between runs is real (``significance``, over
``slices`` and ``bootstrap``), the best operating point, cost, pooled ITL (``chunks``),
the prefix cache's hit rate and a replay's fidelity.

``stats`` imports only ``core``; the features, ``servermodel`` and ``report`` read it.
"""

from infersight.stats.aggregate import aggregate, meets_slo
from infersight.stats.cost import price_run
from infersight.stats.level_flags import level_state
from infersight.stats.operating_point import best_level
from infersight.stats.significance import compare, compare_metric
from infersight.stats.summary import PERCENTILES, summarize
from infersight.stats.sustain import judge_sustainability
from infersight.stats.validity import check_level

__all__ = [
    "PERCENTILES",
    "aggregate",
    "best_level",
    "check_level",
    "compare",
    "compare_metric",
    "judge_sustainability",
    "level_state",
    "meets_slo",
    "price_run",
    "summarize",
]
