"""infersight.monitor: the live terminal view behind ``infersight monitor``."""

from infersight.monitor.app import MonitorResult, default_url, listening_pid, run_monitor
from infersight.monitor.state import LatencyView, MonitorState
from infersight.monitor.view import ViewInfo, render

__all__ = [
    "LatencyView",
    "MonitorResult",
    "MonitorState",
    "ViewInfo",
    "default_url",
    "listening_pid",
    "render",
    "run_monitor",
]
