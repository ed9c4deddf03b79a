"""infersight.report.headline: the answer every output starts with.

``answer`` builds it (the best operating point, the main verdict, the run's one fix)
for the console, the HTML page and the Markdown summary alike; ``html`` puts it at the
top of each run's page with the table of contents beside it.
"""

from infersight.report.headline.answer import (
    Headline,
    OperatingPoint,
    build_headline,
    find_max_text,
    slo_text,
    verdict_where,
)
from infersight.report.headline.html import headline_html, run_headline, toc_html

__all__ = [
    "Headline",
    "OperatingPoint",
    "build_headline",
    "find_max_text",
    "headline_html",
    "run_headline",
    "slo_text",
    "toc_html",
    "verdict_where",
]
