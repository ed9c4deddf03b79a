"""Old home of :mod:`infersight.telemetry.prometheus.http`, kept only because
tests/integration/diagnose/test_diagnose_prometheus.py (another branch's folder) still
imports it; delete once that test imports ``PrometheusClient`` from
``infersight.telemetry``."""

from infersight.telemetry.prometheus.http import PrometheusClient

__all__ = ["PrometheusClient"]
