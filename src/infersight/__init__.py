"""infersight: find out why LLM inference is slow, idle or expensive, and fix it."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("infersight")
except PackageNotFoundError:  # running from a source tree without install
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
