"""Model location, GGUF validation and model naming (no engine needed)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infersight.core.errors import ConfigError
from infersight.engine import model_alias, validate_gguf


def test_validate_accepts_gguf_magic(tmp_path: Path) -> None:
    f = tmp_path / "m.gguf"
    f.write_bytes(b"GGUF" + b"\x03\x00\x00\x00")
    assert validate_gguf(f) == f.resolve()


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"", "empty file"),
        (b"PK\x03\x04rest", "not a GGUF"),
        (b"GGU", "not a GGUF"),
        (b"ggml-old-format", "not a GGUF"),
    ],
)
def test_validate_rejects_non_gguf(tmp_path: Path, content: bytes, needle: str) -> None:
    f = tmp_path / "model.gguf"
    f.write_bytes(content)
    with pytest.raises(ConfigError) as ei:
        validate_gguf(f)
    msg = str(ei.value)
    assert needle in msg and str(f) in msg
    assert "\n" not in msg


def test_validate_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        validate_gguf(tmp_path / "nope.gguf")
    with pytest.raises(ConfigError, match="directory"):
        validate_gguf(tmp_path)


@pytest.mark.parametrize(
    ("name", "alias"),
    [
        ("SmolLM2-135M-Instruct.Q4_1.gguf", "SmolLM2-135M-Instruct"),
        ("Qwen2.5-0.5B-Instruct-Q4_K_M.gguf", "Qwen2.5-0.5B-Instruct"),
        ("llama-3-8b.IQ3_XXS.gguf", "llama-3-8b"),
        ("Qwen3-30B-A3B-UD-Q4_K_XL.gguf", "Qwen3-30B-A3B"),
        ("phi-2.f16.gguf", "phi-2"),
        ("gemma-2b-BF16.gguf", "gemma-2b"),
        ("Llama-3.2-1B-Instruct-Q8_0.gguf", "Llama-3.2-1B-Instruct"),
        ("big-model-Q4_K_M-00001-of-00003.gguf", "big-model"),
        ("tiny.gguf", "tiny"),
        ("/some/dir/Mistral-7B-v0.1.gguf", "Mistral-7B-v0.1"),
    ],
)
def test_model_alias_strips_quantisation(name: str, alias: str) -> None:
    assert model_alias(name) == alias


# Names that are themselves free of tags (and not ending in "UD", Unsloth's
# dynamic-quant marker that goes with the quantisation: "-UD-Q4_K_XL").
_base = st.from_regex(r"[A-Za-z][A-Za-z0-9]{0,8}(-[A-Za-z0-9]{1,6}){0,3}", fullmatch=True).filter(
    lambda s: model_alias(s + ".gguf") == s and not s.upper().endswith("UD")
)
_quant = st.sampled_from(["Q4_0", "Q4_1", "Q4_K_M", "Q5_K_S", "Q8_0", "IQ2_XS", "F16", "BF16"])


@given(base=_base, quant=_quant, sep=st.sampled_from([".", "-", "_"]))
def test_model_alias_is_independent_of_the_quantisation(base: str, quant: str, sep: str) -> None:
    assert model_alias(f"{base}{sep}{quant}.gguf") == base
    assert model_alias(f"{base}{sep}{quant.lower()}.gguf") == base
