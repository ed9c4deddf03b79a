"""Physics against hand-computed values (docs/design.md section 6)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from diag_fixtures import LLAMA3_8B

from infersight.core.model_file import default_model_path
from infersight.diagnose.physics import (
    Device,
    compute_knee,
    decode_floor,
    find_gpu,
    gpu_table,
    load_shape,
    plan_capacity,
    prefill_floor,
    read_gguf,
    shape_from_gguf,
    shape_from_hf_config,
)

GIB = 1024**3

# Public configs (values copied from the models' config.json on the HF hub).
MISTRAL_7B_V01 = {
    "architectures": ["MistralForCausalLM"],
    "model_type": "mistral",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "vocab_size": 32000,
    "max_position_embeddings": 32768,
    "sliding_window": 4096,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}
QWEN2_7B = {
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "num_attention_heads": 28,
    "num_hidden_layers": 28,
    "num_key_value_heads": 4,
    "vocab_size": 152064,
    "max_position_embeddings": 131072,
    "sliding_window": 131072,
    "use_sliding_window": False,
    "max_window_layers": 28,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}
MIXTRAL_8X7B = {
    "architectures": ["MixtralForCausalLM"],
    "model_type": "mixtral",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "vocab_size": 32000,
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
    "sliding_window": None,
    "torch_dtype": "bfloat16",
}
DEEPSEEK_V2_LITE = {
    "architectures": ["DeepseekV2ForCausalLM"],
    "model_type": "deepseek_v2",
    "hidden_size": 2048,
    "intermediate_size": 10944,
    "moe_intermediate_size": 1408,
    "num_attention_heads": 16,
    "num_hidden_layers": 27,
    "num_key_value_heads": 16,
    "vocab_size": 102400,
    "kv_lora_rank": 512,
    "q_lora_rank": None,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "n_routed_experts": 64,
    "n_shared_experts": 2,
    "num_experts_per_tok": 6,
    "first_k_dense_replace": 1,
    "torch_dtype": "bfloat16",
}
GEMMA2_9B = {
    "architectures": ["Gemma2ForCausalLM"],
    "model_type": "gemma2",
    "hidden_size": 3584,
    "intermediate_size": 14336,
    "num_attention_heads": 16,
    "num_hidden_layers": 42,
    "num_key_value_heads": 8,
    "head_dim": 256,
    "vocab_size": 256000,
    "sliding_window": 4096,
    "torch_dtype": "float32",
}


def test_llama3_8b_kv_and_params() -> None:
    s = shape_from_hf_config(LLAMA3_8B)
    assert s.kv_bytes_per_token() == 2 * 32 * 8 * 128 * 2 == 128 * 1024
    assert s.kv_bytes_for_context(8192) == 8192 * 128 * 1024  # 1 GiB per 8k sequence
    # embeddings 2 x 128256 x 4096, per layer attn 2x4096^2 + 2x4096x1024, MLP 3x4096x14336
    hand = (
        2 * 128256 * 4096
        + 32 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096)
        + 4096
    )
    assert s.n_params == hand
    assert 8.02e9 < s.n_params < 8.04e9
    assert s.weights_bytes() == hand * 2
    assert s.kv_bytes_per_token(1.0) == 64 * 1024  # fp8 KV halves it


def test_mistral_sliding_window_caps_kv() -> None:
    s = shape_from_hf_config(MISTRAL_7B_V01)
    per_token = 2 * 32 * 8 * 128 * 2
    assert s.kv_bytes_per_token() == per_token
    assert s.kv_bytes_for_context(2000) == 2000 * per_token
    assert s.kv_bytes_for_context(32768) == 4096 * per_token  # the window caps it
    assert 7.2e9 < s.n_params < 7.3e9  # Mistral 7B has 7.24 B parameters


def test_qwen2_7b_kv_and_bias() -> None:
    s = shape_from_hf_config(QWEN2_7B)
    assert s.kv_bytes_per_token() == 2 * 28 * 4 * 128 * 2 == 57344
    assert s.sliding_window is None  # use_sliding_window: false
    assert s.kv_bytes_for_context(100_000) == 100_000 * 57344
    assert 7.6e9 < s.n_params < 7.65e9  # Qwen2-7B: 7.62 B


def test_mixtral_active_params_and_moe_reads() -> None:
    s = shape_from_hf_config(MIXTRAL_8X7B)
    assert 46.6e9 < s.n_params < 46.8e9
    assert 12.8e9 < s.n_active_params < 13.0e9
    # one token reads 2 of 8 experts; a big batch touches all of them
    assert s.decode_weight_bytes(1) < 0.6 * s.weights_bytes()
    assert s.decode_weight_bytes(256) == pytest.approx(s.weights_bytes(), rel=1e-3)


def test_deepseek_mla_kv() -> None:
    s = shape_from_hf_config(DEEPSEEK_V2_LITE)
    assert s.is_mla
    assert s.kv_bytes_per_token() == 27 * (512 + 64) * 2  # compressed latent + rope key
    assert 15.0e9 < s.n_params < 16.5e9  # DeepSeek-V2-Lite: 15.7 B total
    assert 2.2e9 < s.n_active_params < 2.9e9  # 2.4 B active


def test_gemma2_alternating_sliding_window() -> None:
    s = shape_from_hf_config(GEMMA2_9B)
    assert s.n_sliding_layers == 21 and s.sliding_window == 4096
    per_layer = 2 * 8 * 256 * 2
    assert s.kv_bytes_for_context(8192) == per_layer * (21 * 4096 + 21 * 8192)
    assert s.weight_bytes_per_param == 4.0  # float32 checkpoint


def test_hf_config_from_file(tmp_path: Path) -> None:
    p = tmp_path / "config.json"
    p.write_text(json.dumps(LLAMA3_8B))
    assert load_shape(p).kv_bytes_per_token() == 131072
    assert load_shape(tmp_path).n_params == shape_from_hf_config(LLAMA3_8B).n_params


def test_embedded_smollm2_from_gguf() -> None:
    path = default_model_path()
    g = read_gguf(path)
    assert g.architecture == "llama" and g.version == 3
    s = shape_from_gguf(path)
    assert (s.n_layers, s.hidden_size, s.n_heads, s.n_kv_heads, s.head_dim) == (30, 576, 9, 3, 64)
    assert s.kv_bytes_per_token() == 2 * 30 * 3 * 64 * 2 == 23040
    assert s.tie_embeddings  # no output.weight: token_embd is the LM head
    # parameter count by hand: 49152x576 embeddings + 30 layers + final norm
    layer = 576 * 576 * 2 + 2 * 576 * 192 + 3 * 576 * 1536 + 2 * 576
    assert s.n_params == 49152 * 576 + 30 * layer + 576 == 134_515_008
    # weights: the Q8_0 embedding (34 bytes / 32) + Q4_1 matrices (20 / 32) + f32 norms
    mats = 30 * (576 * 576 * 2 + 2 * 576 * 192 + 3 * 576 * 1536)
    hand = 49152 * 576 // 32 * 34 + mats // 32 * 20 + (30 * 2 * 576 + 576) * 4
    assert s.weights_bytes() == hand == g.weights_bytes
    assert abs(g.weights_bytes - path.stat().st_size) < 8 * 1024 * 1024  # header + tokens


def test_decode_floor_llama_h100_by_hand() -> None:
    s, h100 = shape_from_hf_config(LLAMA3_8B), find_gpu("H100 SXM")
    assert h100 is not None
    f = decode_floor(s, h100, batch=1, context=0)
    assert f.bandwidth_s == pytest.approx(s.n_params * 2 / 3.35e12)  # ~4.8 ms
    assert f.compute_s == pytest.approx(2 * s.n_params / 989.4e12)
    assert f.bound == "memory bandwidth" and f.itl_s == f.bandwidth_s
    f64 = decode_floor(s, h100, batch=64, context=1000)
    kv = 64 * 1000 * 131072
    assert f64.bandwidth_s == pytest.approx((s.n_params * 2 + kv) / 3.35e12)
    # with no context, decode turns compute-bound at weights/(2·params)·(flops/bw)
    knee = compute_knee(s, h100, context=0)
    assert knee == pytest.approx(989.4e12 * 2 / (2 * 3.35e12), rel=0.02)  # ~295


def test_prefill_floor_by_hand() -> None:
    s, h100 = shape_from_hf_config(LLAMA3_8B), find_gpu("h100")
    assert h100 is not None
    p = prefill_floor(s, h100, tokens=4096)
    flops = 2 * s.n_params * 4096 + 2 * 32 * 32 * 128 * 4096**2
    assert p.flops == flops and p.compute_s == pytest.approx(flops / 989.4e12)
    assert p.bound == "compute"


def test_peak_table_has_sources_and_sane_values() -> None:
    table = gpu_table()
    for key in (
        "h100-sxm",
        "h100-pcie",
        "h200",
        "a100-40gb",
        "a100-80gb",
        "l4",
        "l40s",
        "a10g",
        "t4",
        "rtx-4090",
        "mi300x",
    ):
        d = table[key]
        assert d.source and ("http" in d.source)
        assert 10 * GIB < d.memory_bytes < 260 * GIB
        assert 2e11 < d.bandwidth < 1e13
        assert d.peak_flops("bf16") > 3e13
    assert table["h200"].bandwidth == 4.8e12 and table["h100-sxm"].flops["fp8"] == 1978.9e12
    assert table["t4"].flops["bf16"] == 0 and table["t4"].peak_flops("bf16") == 65e12
    assert find_gpu("NVIDIA H100 80GB HBM3") == table["h100-sxm"]
    assert find_gpu("NVIDIA A100-SXM4-40GB") == table["a100-40gb"]
    assert find_gpu("nonexistent-gpu") is None


def test_plan_llama_h100_memory_and_seqs() -> None:
    s, h100 = shape_from_hf_config(LLAMA3_8B), find_gpu("h100")
    assert h100 is not None
    plan = plan_capacity(s, h100, ctx=8192)
    usable = h100.memory_bytes * 0.9
    assert plan.weights_bytes == s.n_params * 2
    assert plan.kv_bytes_per_sequence == 8192 * 131072  # 1 GiB
    assert plan.kv_budget_bytes == pytest.approx(
        usable - plan.weights_bytes - plan.activations_bytes
    )
    assert plan.max_sequences == int(plan.kv_budget_bytes // (8192 * 131072))
    assert 45 <= plan.max_sequences <= 60
    assert f"--max-num-seqs {plan.max_sequences}" in plan.settings["vllm"]
    fp8 = plan_capacity(s, h100, ctx=8192, kv_dtype="fp8")
    assert fp8.max_sequences >= 2 * plan.max_sequences - 1
    assert "--kv-cache-dtype fp8" in fp8.settings["vllm"]


def test_plan_does_not_fit_suggests_more_gpus() -> None:
    s, l4 = shape_from_hf_config(MIXTRAL_8X7B), find_gpu("l4")
    assert l4 is not None
    plan = plan_capacity(s, l4, ctx=4096)
    assert not plan.fits and plan.max_sequences == 0
    assert any("--gpus" in n for n in plan.notes)
    tp = plan_capacity(s, l4.scaled(8), ctx=4096, concurrency=8, tokens=128)
    assert tp.fits and "--tensor-parallel-size 8" in tp.settings["vllm"]
    assert tp.estimate["itl_floor_s"] > 0 and tp.estimate["batch"] == 8


def test_plan_embedded_on_measured_cpu() -> None:
    s = load_shape("embedded")
    cpu = Device(
        key="cpu",
        name="test cpu",
        memory_bytes=8 * GIB,
        bandwidth=10e9,
        flops={"bf16": 100e9},
        source="fixed for the test",
        kind="cpu",
        cores=2,
    )
    plan = plan_capacity(s, cpu, ctx=2048, concurrency=16, tokens=64)
    assert plan.kv_bytes_per_sequence == 2048 * 23040
    assert plan.estimate["itl_floor_s"] == pytest.approx(
        decode_floor(s, cpu, batch=16, context=(2048 - 64) + 32).itl_s
    )
    assert plan.settings["llama.cpp"][0].startswith("--parallel ")
    assert cpu.with_cores(1).peak_flops() == pytest.approx(50e9)
