"""infersight.telemetry.exporter: the recorder's samples served as Prometheus metrics.

``names`` is the table of exported names, ``collector`` turns samples into metric
families under them, ``server`` serves ``/metrics``; ``docs`` writes the table into
docs/metrics.md (``python -m infersight.telemetry.exporter.docs docs/metrics.md``), so
it is not imported here: ``-m`` would find it loaded twice.
"""

from infersight.telemetry.exporter.collector import TelemetryCollector, render
from infersight.telemetry.exporter.names import exported_name
from infersight.telemetry.exporter.server import ExporterServer, run_exporter

__all__ = ["ExporterServer", "TelemetryCollector", "exported_name", "render", "run_exporter"]
