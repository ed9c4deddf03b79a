"""Placing Ray workers: the one-line errors that come before any load."""

from __future__ import annotations

import socket

import pytest

from infersight.bench.config import BenchConfig
from infersight.bench.distributed import ray_place
from infersight.core.errors import ConfigError


def test_an_address_nobody_listens_on_is_one_line_at_once() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connections are refused
        with pytest.raises(ConfigError, match=r"no Ray cluster answers there"):
            ray_place._check_reachable(f"127.0.0.1:{port}")
    ray_place._check_reachable("auto")  # resolved by Ray itself: no check here


def test_a_loopback_server_is_out_of_reach_of_other_hosts() -> None:
    here = [{"ip": "127.0.0.2"}, {"ip": "127.0.0.3"}]
    ray_place._check_reach("http://127.0.0.1:8000", here)  # one machine: fine
    away = [*here, {"ip": "10.1.2.3"}]
    with pytest.raises(ConfigError, match=r"out of reach of the workers on 10\.1\.2\.3"):
        ray_place._check_reach("http://localhost:8000", away)
    ray_place._check_reach("http://10.1.2.9:8000", away)  # a routable server: fine


def test_ray_settings_are_checked_with_the_other_flags() -> None:
    with pytest.raises(ConfigError, match="'auto' or the cluster's address"):
        BenchConfig.build(url="http://x", ray=" ")
    with pytest.raises(ConfigError, match=r"ray-strategy|ray_strategy"):
        BenchConfig.build(url="http://x", ray_strategy="pack")
