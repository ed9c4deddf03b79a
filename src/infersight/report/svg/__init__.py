"""infersight.report.svg: the HTML report's hand-made SVG charts.

``series`` holds the charts' data (series, bands, palette), ``axes`` the scales and
number formats, ``marks`` what is drawn on the axes, ``charts`` puts them together.
"""

from infersight.report.svg.axes import Axis, fmt_value
from infersight.report.svg.charts import chart
from infersight.report.svg.series import PALETTE, Band, Series

__all__ = ["PALETTE", "Axis", "Band", "Series", "chart", "fmt_value"]
