"""A run stopped by a signal says which: a scheduler's SIGTERM is not a Ctrl-C."""

from __future__ import annotations

import signal

from infersight.core.interrupts import stop_text


def test_each_signal_is_named() -> None:
    assert stop_text(signal.SIGINT) == "interrupted (Ctrl-C)"
    assert stop_text(signal.SIGTERM) == "terminated (SIGTERM)"
    assert stop_text(signal.SIGHUP) == "stopped (SIGHUP)"
    assert stop_text(None) == "stopped"
    assert stop_text(250) == "stopped (signal 250)"
