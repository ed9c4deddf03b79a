"""infersight.telemetry.prometheus: reading a Prometheus store (``diagnose --prometheus``).

``times`` parses durations and times as Prometheus users write them, ``auth`` the
store's credentials, ``http`` is the query client, ``catalog`` knows the metric names of
the engines, dcgm-exporter and infersight's exporter, ``replicas`` finds the fleet's
replicas and ``fleet`` pages their series.
"""

from infersight.telemetry.prometheus.auth import PrometheusAuth, load_auth
from infersight.telemetry.prometheus.fleet import Fleet, discover_fleet
from infersight.telemetry.prometheus.http import PrometheusClient

__all__ = ["Fleet", "PrometheusAuth", "PrometheusClient", "discover_fleet", "load_auth"]
