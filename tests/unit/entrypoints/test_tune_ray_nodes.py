"""``tune --ray``'s comparable nodes and its flags' checks (no cluster needed)."""

from __future__ import annotations

import pytest

from infersight.core.errors import ConfigError
from infersight.entrypoints.tune_ray import comparable_key
from infersight.tune import TuneConfig


def test_nodes_are_comparable_by_cpus_gpu_count_and_model() -> None:
    h100 = {
        "CPU": 64.0,
        "GPU": 8.0,
        "accelerator_type:H100": 1.0,
        "memory": 1e12,
        "node:10.0.0.1": 1.0,
    }
    assert comparable_key(h100) == "cpu=64,gpu=8xH100"
    # The node's own address and memory do not count; the GPU model does.
    assert comparable_key({**h100, "memory": 5e11, "node:10.0.0.2": 1.0}) == comparable_key(h100)
    a100 = {k: v for k, v in h100.items() if k != "accelerator_type:H100"} | {
        "accelerator_type:A100": 1.0
    }
    assert comparable_key(a100) != comparable_key(h100)
    assert comparable_key({"CPU": 1.0}) == "cpu=1,gpu=0"
    assert comparable_key({"CPU": 64.0, "GPU": 4.0}) == "cpu=64,gpu=4"


def test_ray_flags_are_checked_before_anything_runs() -> None:
    with pytest.raises(ConfigError, match="--ray runs each trial's server"):
        TuneConfig.build(ray="auto")
    with pytest.raises(ConfigError, match="--gpus-per-trial needs --ray"):
        TuneConfig.build(launch="x {port}", gpus_per_trial=2)
    cfg = TuneConfig.build(launch="x {port}", ray="auto", gpus_per_trial=2)
    assert cfg.ray == "auto" and cfg.gpus_per_trial == 2
