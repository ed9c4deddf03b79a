"""infersight.report.verdicts: one verdict rendered, as a console panel (``console``) or
an HTML box with its evidence table (``html``)."""

from infersight.report.verdicts.console import render_diagnosis, render_verdicts
from infersight.report.verdicts.html import verdict_box

__all__ = ["render_diagnosis", "render_verdicts", "verdict_box"]
