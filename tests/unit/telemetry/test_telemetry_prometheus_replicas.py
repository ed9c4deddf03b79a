"""Which replicas a store holds and which series belong to each: pods, instances, GPUs
joined by dcgm-exporter's pod mapping or by host, infersight's exporter merged with the
engine it scrapes."""

from __future__ import annotations

from infersight.telemetry.prometheus.catalog import Signal, dcgm_spec
from infersight.telemetry.prometheus.replicas import build_inventory

M = "meta-llama/Llama-3.1-8B-Instruct"


def _vllm(pod: str, **extra: str) -> dict[str, str]:
    return {
        "namespace": "llm",
        "pod": pod,
        "job": "vllm",
        "instance": f"10.0.0.{pod[-1]}:8000",
        "model_name": M,
        **extra,
    }


def _gpu(uuid: str, host: str, **extra: str) -> dict[str, str]:
    return {
        "gpu": "0",
        "UUID": uuid,
        "Hostname": host,
        "instance": f"{host}:9400",
        "job": "dcgm-exporter",
        **extra,
    }


ENGINE = Signal("engine.requests_running", "q", "engine", "vllm")
GPU = Signal("gpu.utilization", "q", "gpu", "dcgm")


def test_replicas_by_pod_and_gpus_by_pod_mapping() -> None:
    inv = build_inventory(
        {"vllm": [_vllm("vllm-0"), _vllm("vllm-0", engine="1"), _vllm("vllm-1")]},
        [],
        [
            _gpu("GPU-a", "n1", pod="vllm-0", namespace="llm"),
            # honor_labels: false renames the workload's pod; the target's own pod is dcgm's
            _gpu(
                "GPU-b",
                "n2",
                pod="dcgm-exporter-x",
                namespace="gpu-operator",
                exported_pod="vllm-1",
                exported_namespace="llm",
            ),
            _gpu("GPU-c", "n3", pod="", namespace=""),
        ],
        [],
        dcgm_spec(),
    )
    assert sorted(inv.replicas) == ["llm/vllm-0", "llm/vllm-1"]  # two DP ranks, one replica
    r0, r1 = inv.replicas["llm/vllm-0"], inv.replicas["llm/vllm-1"]
    assert (r0.gpus, r0.gpu_join, r0.model) == (["GPU-a"], "pod", M)
    assert r1.gpus == ["GPU-b"] and "dcgm-exporter" in r1.sources
    assert inv.replica_of(GPU, _gpu("GPU-c", "n3")) is None  # nobody's GPU
    assert inv.replica_of(ENGINE, _vllm("vllm-1")) == ("llm/vllm-1", {"engine": "vllm"})
    assert inv.replica_of(GPU, _gpu("GPU-b", "n2")) == (
        "llm/vllm-1",
        {"gpu": "GPU-b", "via": "dcgm"},
    )


def test_gpus_by_host_only_when_one_replica_runs_there() -> None:
    a = {"job": "vllm", "instance": "gpu-a.example:8000"}
    b1 = {"job": "vllm", "instance": "10.1.0.5:8000", "node": "gpu-b"}
    b2 = {"job": "vllm", "instance": "10.1.0.6:8001", "node": "gpu-b"}
    inv = build_inventory(
        {"vllm": [a, b1, b2]},
        [],
        [_gpu("GPU-1", "gpu-a"), _gpu("GPU-2", "gpu-b"), _gpu("GPU-3", "gpu-b")],
        [],
        dcgm_spec(),
    )
    assert inv.replicas["gpu-a.example:8000"].gpus == ["GPU-1"]  # short host names match
    assert inv.replicas["gpu-a.example:8000"].gpu_join == "host"
    assert not inv.replicas["10.1.0.5:8000"].gpus and not inv.replicas["10.1.0.6:8001"].gpus
    assert any("2 GPU(s) on host gpu-b not joined" in n for n in inv.notes)


def test_exporter_joins_the_engine_it_scrapes() -> None:
    engine = {"job": "engine", "instance": "127.0.0.1:8000"}
    exp = {
        "job": "infersight",
        "instance": "127.0.0.1:9400",
        "engine": "llamacpp",
        "source": "http://127.0.0.1:8000/metrics",
    }
    lone = {
        "job": "infersight",
        "instance": "10.2.0.1:9400",
        "engine": "sglang",
        "source": "http://10.2.0.9:30000/metrics",
    }
    inv = build_inventory(
        {"llamacpp": [engine]},
        [exp, lone],
        [],
        [{"job": "infersight", "instance": "10.2.0.1:9400", "gpu": "0"}],
        dcgm_spec(),
    )
    assert sorted(inv.replicas) == ["10.2.0.1:9400", "127.0.0.1:8000"]
    merged = inv.replicas["127.0.0.1:8000"]
    assert merged.engine == "llamacpp" and merged.sources == [
        "llama.cpp /metrics",
        "infersight exporter",
    ]
    inv.direct = {("llamacpp", "engine.requests_running", "")}
    running = Signal("engine.requests_running", "q", "exporter", "exporter")
    slots = Signal("engine.slots", "q", "exporter", "exporter")
    assert inv.replica_of(running, exp) is None  # the engine's own series say it at the source
    assert inv.replica_of(slots, exp) == ("127.0.0.1:8000", {"engine": "llamacpp"})
    inv.direct.add(("sglang", "engine.requests_running", ""))  # an SGLang elsewhere, scraped
    assert inv.replica_of(running, lone) == ("10.2.0.1:9400", {"engine": "sglang"})  # not this one
    assert inv.replicas["10.2.0.1:9400"].engine == "sglang"
    assert inv.replicas["10.2.0.1:9400"].gpus == ["10.2.0.1:9400/0"]
    cpu = Signal("process.cpu_percent", "q", "exporter", "exporter", labels=(("name", "engine"),))
    assert inv.replica_of(
        cpu, {"job": "infersight", "instance": "127.0.0.1:9400", "name": "engine"}
    ) == ("127.0.0.1:8000", {"engine": "llamacpp", "name": "engine"})
