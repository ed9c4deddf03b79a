"""The ``infersight`` command line: thin commands over importable functions.

Each command lives in its own module (``cli/serve.py``, ``cli/bench.py``...) that
exposes ``register(app)``. Heavy imports happen inside the command functions so that
``infersight --help`` stays fast.
"""

from __future__ import annotations

from infersight.cli._app import app, main

__all__ = ["app", "main"]
