"""Old home of :mod:`infersight.telemetry.prometheus.auth`, kept only because
tests/integration/diagnose/test_diagnose_prometheus.py (another branch's folder) still
imports it; delete once that test imports ``load_auth`` from ``infersight.telemetry``."""

from infersight.telemetry.prometheus.auth import PrometheusAuth, load_auth

__all__ = ["PrometheusAuth", "load_auth"]
