"""The price table: lookup order, user overrides, flat prices, bad files."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infersight.core.errors import ConfigError
from infersight.core.pricing import Price, PriceTable


def test_lookup_exact_then_case_insensitive_then_pattern_in_order() -> None:
    t = PriceTable(
        {
            "gpt-4o-mini*": Price(0.15, 0.60),
            "gpt-4o*": Price(2.5, 10.0),
            "Exact-Model": Price(1.0, 2.0),
        }
    )
    assert t.price("Exact-Model") == Price(1.0, 2.0)
    assert t.price("exact-model") == Price(1.0, 2.0)
    assert t.price("gpt-4o-mini-2024-07-18") == Price(0.15, 0.60)  # first matching pattern
    assert t.price("GPT-4o-2024-08-06") == Price(2.5, 10.0)
    assert t.price("llama") is None and t.cost("llama", 10, 10) is None
    assert t.price(None) is None


def test_shipped_defaults_price_the_embedded_model_at_zero() -> None:
    t = PriceTable.load(defaults=True)
    assert t.cost("SmolLM2-135M-Instruct", 1000, 1000) == 0.0
    assert t.cost("gpt-4o-mini", 1_000_000, 1_000_000) == pytest.approx(0.75)


def test_user_file_overrides_defaults_and_its_patterns_win(tmp_path: Path) -> None:
    f = tmp_path / "prices.toml"
    f.write_text(
        '[models."gpt-4o*"]\ninput = 1.0\noutput = 1.0\n'
        '[models."mine"]\ninput = 3.0\noutput = 4.0\nnote = "ours"\n'
    )
    t = PriceTable.load(f)
    assert t.price("gpt-4o-mini") == Price(1.0, 1.0)  # before the shipped gpt-4o-mini*
    assert t.price("mine") == Price(3.0, 4.0, "ours")
    assert t.price("SmolLM2-135M-Instruct") is not None  # defaults kept


def test_env_file_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "p.toml"
    f.write_text('[models."x"]\ninput = 5\noutput = 6\n')
    monkeypatch.setenv("INFERSIGHT_PRICES_FILE", str(f))
    assert PriceTable.load().price("x") == Price(5.0, 6.0)


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("[models.x\n", "invalid TOML"),
        ('[models."x"]\ninput = "cheap"\noutput = 1\n', "needs numeric"),
        ('[models."x"]\noutput = 1\n', "needs numeric"),
        ('[models."x"]\ninput = -1\noutput = 1\n', "negative price"),
    ],
)
def test_bad_price_files_are_config_errors(tmp_path: Path, content: str, why: str) -> None:
    f = tmp_path / "p.toml"
    f.write_text(content)
    with pytest.raises(ConfigError, match=why):
        PriceTable.load(f, defaults=False)


def test_unreadable_price_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        PriceTable.load(tmp_path / "absent.toml")


money = st.floats(min_value=0, max_value=1000, allow_nan=False)
tokens = st.integers(min_value=0, max_value=10**9)


@given(pin=money, pout=money, p=tokens, c=tokens, model=st.text(max_size=10))
def test_flat_price_cost_is_linear_per_million(
    pin: float, pout: float, p: int, c: int, model: str
) -> None:
    t = PriceTable.flat(pin, pout)
    cost = t.cost(model or None, p, c)
    assert cost is not None and cost >= 0
    assert math.isclose(cost, (p * pin + c * pout) / 1e6, rel_tol=1e-12, abs_tol=1e-12)
    assert math.isclose(
        t.cost(model or None, 2 * p, 2 * c) or 0.0, 2 * cost, rel_tol=1e-9, abs_tol=1e-12
    )
