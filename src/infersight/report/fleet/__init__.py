"""infersight.report.fleet: the fleet diagnosis (``diagnose --prometheus``) rendered, on
the console (``console``) and as one HTML page (``html``)."""

from infersight.report.fleet.console import render_fleet
from infersight.report.fleet.html import render_fleet_html

__all__ = ["render_fleet", "render_fleet_html"]
