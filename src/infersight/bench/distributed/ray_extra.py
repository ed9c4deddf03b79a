"""The optional Ray extra: whether it is installed, and how to install it. Read when the
configuration is checked, before anything of Ray is imported."""

from __future__ import annotations

import importlib.util

__all__ = ["INSTALL_HINT", "ray_installed"]

INSTALL_HINT = "pip install 'infersight[ray]'"


def ray_installed() -> bool:
    """Whether the optional Ray extra is importable."""
    try:
        return importlib.util.find_spec("ray") is not None
    except (ImportError, ValueError):
        return False
