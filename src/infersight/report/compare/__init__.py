"""infersight.report.compare: ``report A B``, several runs side by side.

``match`` pairs the levels that may be compared, ``rows`` computes each row's deltas and
whether each change is real, ``console`` and ``html`` render them.
"""

from infersight.report.compare.console import render_comparison
from infersight.report.compare.html import comparison_html
from infersight.report.compare.match import match_levels
from infersight.report.compare.rows import CompareRow, comparison_rows, matched_rows

__all__ = [
    "CompareRow",
    "comparison_html",
    "comparison_rows",
    "match_levels",
    "matched_rows",
    "render_comparison",
]
