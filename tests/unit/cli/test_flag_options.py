"""The options of bench, tune and batch are made from the settings' declarations: one
help and one default per flag, and a flag not given leaves its environment variable."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from typer.main import get_command

from infersight.cli import app
from infersight.cli.bench import _config
from infersight.flags.batch import BatchConfig
from infersight.flags.bench import SECTIONS
from infersight.flags.declare import declared
from infersight.flags.tune import TuneConfig

COMMANDS: dict[str, Any] = dict(get_command(app).commands)  # type: ignore[attr-defined]


def _options(cmd: str) -> dict[str, Any]:
    return {p.name: p for p in COMMANDS[cmd].params}


def _declared(*classes: type) -> dict[str, Any]:
    return {f.name: how for cls in classes for f, how in declared(cls) if how.cli}


@pytest.mark.parametrize(
    ("cmd", "classes"),
    [("bench", tuple(SECTIONS.values())), ("tune", (TuneConfig,)), ("batch", (BatchConfig,))],
)
def test_every_declared_flag_is_an_option_with_the_declared_help(
    cmd: str, classes: tuple[type, ...]
) -> None:
    options = _options(cmd)
    for name, how in _declared(*classes).items():
        assert name in options, f"{cmd}: no option for {name}"
        assert options[name].help == how.help, (cmd, name)
        if not how.argument:
            assert set(how.option_names(name)) <= set(options[name].opts), (cmd, name)


def test_tune_takes_benchs_declarations_for_each_trials_load() -> None:
    bench, tune = _options("bench"), _options("tune")
    for name in ("concurrency", "rate", "requests", "duration", "input_tokens", "seed", "slo"):
        assert tune[name].help == bench[name].help, name
    assert "the trial's slots" in str(tune["concurrency"].show_default)


def _bench_flags(*argv: str) -> dict[str, Any]:
    """The bench command's parameters for this command line (its --format aside)."""
    ctx = COMMANDS["bench"].make_context("bench", list(argv))
    return {k: v for k, v in ctx.params.items() if k != "output_format"}


def test_a_flag_not_given_leaves_its_environment_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("INFERSIGHT_BENCH_SEED", "7")
    monkeypatch.setenv("INFERSIGHT_BENCH_STREAM", "false")
    cfg = _config(_bench_flags("--url", "http://127.0.0.1:9", "--concurrency", "1,4"))
    assert cfg.workload.seed == 7 and cfg.target.stream is False
    assert cfg.load.concurrency == (1, 4)
    cfg = _config(_bench_flags("--url", "http://127.0.0.1:9", "--seed", "3", "--stream"))
    assert cfg.workload.seed == 3 and cfg.target.stream is True


def test_declared_defaults_hold_when_nothing_is_given() -> None:
    cfg = _config(_bench_flags("--url", "http://127.0.0.1:9"))
    for name, section in SECTIONS.items():
        expected = section(url="http://127.0.0.1:9") if name == "target" else section()
        assert getattr(cfg, name) == expected, name
    assert dataclasses.asdict(cfg.load)["rate"] == ()


def test_renamed_and_list_flags_reach_their_fields() -> None:
    cfg = _config(
        _bench_flags(
            "--url", "http://127.0.0.1:9", "--parallel", "3", "--poisson", "2,4", "-o", "d"
        )
    )
    assert cfg.target.engine_parallel == 3 and cfg.output.out == "d"
    assert cfg.load.rate == (2.0, 4.0) and cfg.load.arrival == "poisson"
