"""Read a :class:`ModelShape` from an HF ``config.json`` or a GGUF file's metadata."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

from infersight.core.errors import ConfigError, file_error, read_user_file
from infersight.diagnose.physics.gguf import read_gguf
from infersight.diagnose.physics.shape import ModelShape, dtype_bytes

__all__ = ["shape_from_gguf", "shape_from_hf_config"]


# -- HF config.json ---------------------------------------------------------------


def _get(cfg: dict[str, Any], *keys: str, default: Any = None) -> Any:
    for k in keys:
        if cfg.get(k) is not None:
            return cfg[k]
    return default


def _weight_bytes_from_hf(cfg: dict[str, Any]) -> tuple[float, str | None]:
    q = cfg.get("quantization_config")
    if isinstance(q, dict):
        method = str(q.get("quant_method", "")).lower()
        if "fp8" in method or q.get("fmt") in ("e4m3", "e5m2"):
            return 1.0, "fp8 weights (quantization_config)"
        bits = q.get("bits") or q.get("w_bit") or q.get("weight_bits")
        if bits:
            # group scales/zeros add about 1/32 byte per weight at group size 128
            return float(bits) / 8 + 0.03, f"{bits}-bit {method or 'quantised'} weights"
    dt = str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16")
    try:
        return dtype_bytes(dt), None
    except ConfigError:
        return 2.0, None


def shape_from_hf_config(cfg: dict[str, Any] | str | Path, *, name: str = "") -> ModelShape:
    """Build a :class:`ModelShape` from an HF ``config.json`` (dict or path).

    Handles Llama, Mistral, Qwen2/3, Gemma 1-3, Phi-3, Mixtral/Qwen-MoE (active
    parameters) and DeepSeek-V2/V3 (MLA). Multimodal configs use their ``text_config``.
    A file that cannot be read or understood raises :class:`ConfigError`.
    """
    if not isinstance(cfg, dict):
        p = Path(cfg)
        cfg = _read_json(p)
        name = name or p.parent.name or p.stem
    if not isinstance(cfg, dict):
        raise ConfigError("config.json is not a JSON object")
    if isinstance(cfg.get("text_config"), dict):
        cfg = {**cfg["text_config"], "torch_dtype": cfg.get("torch_dtype")}
    try:
        return _hf_shape(cfg, name)
    except (TypeError, ValueError, ZeroDivisionError) as e:
        raise ConfigError(f"config.json holds a value of the wrong kind ({e})") from None


def _read_json(p: Path) -> Any:
    data = read_user_file(p)
    try:
        return json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(f"{p}: not a JSON file ({e})") from None


def _hf_shape(cfg: dict[str, Any], name: str) -> ModelShape:
    arch_list = cfg.get("architectures") or [cfg.get("model_type", "unknown")]
    arch = str(arch_list[0])
    mtype = str(cfg.get("model_type", "")).lower()
    try:
        hidden = int(_get(cfg, "hidden_size", "n_embd", "d_model"))
        layers = int(_get(cfg, "num_hidden_layers", "n_layer", "num_layers"))
        heads = int(_get(cfg, "num_attention_heads", "n_head"))
    except (TypeError, ValueError):
        raise ConfigError(
            "config.json lacks hidden_size / num_hidden_layers / num_attention_heads"
        ) from None
    wbytes, qnote = _weight_bytes_from_hf(cfg)
    notes: list[str] = [qnote] if qnote else []
    n_experts, k, moe_inter, shared, dense_layers = _hf_moe(cfg)
    window, n_sliding = _hf_sliding(cfg, mtype, layers)
    if n_sliding:
        notes.append(f"sliding window {window} on {n_sliding}/{layers} layers")
    kv_lora = int(cfg.get("kv_lora_rank") or 0)
    if kv_lora:
        notes.append("multi-head latent attention: KV cache holds the compressed latent")
    return ModelShape(
        name=name or str(cfg.get("_name_or_path") or arch),
        architecture=arch,
        n_layers=layers,
        hidden_size=hidden,
        n_heads=heads,
        n_kv_heads=int(_get(cfg, "num_key_value_heads", "num_kv_heads", default=heads)),
        head_dim=int(_get(cfg, "head_dim", default=hidden // heads)),
        intermediate_size=int(
            _get(cfg, "intermediate_size", "ffn_dim", "n_inner", default=4 * hidden)
        ),
        vocab_size=int(_get(cfg, "vocab_size", default=32000)),
        max_context=_get(cfg, "max_position_embeddings", "n_positions", "seq_length"),
        tie_embeddings=bool(cfg.get("tie_word_embeddings", mtype.startswith("gemma"))),
        n_experts=n_experts,
        experts_per_token=k,
        moe_intermediate_size=moe_inter,
        n_shared_experts=shared,
        n_dense_layers=dense_layers,
        sliding_window=window,
        n_sliding_layers=n_sliding,
        kv_lora_rank=kv_lora,
        qk_rope_head_dim=int(cfg.get("qk_rope_head_dim") or 0),
        q_lora_rank=int(cfg.get("q_lora_rank") or 0),
        qk_nope_head_dim=int(cfg.get("qk_nope_head_dim") or 0),
        v_head_dim=int(cfg.get("v_head_dim") or 0),
        attention_bias=bool(cfg.get("attention_bias", mtype.startswith("qwen2"))),
        weight_bytes_per_param=wbytes,
        kv_bytes_per_element=2.0,
        source="config.json",
        notes=tuple(notes),
    )


def _hf_moe(cfg: dict[str, Any]) -> tuple[int, int, int, int, int]:
    """(experts, experts per token, expert FFN width, shared experts, dense layers)."""
    n_experts = int(_get(cfg, "num_local_experts", "n_routed_experts", "num_experts", default=0))
    if not n_experts:
        return 0, 0, 0, 0, 0
    k = int(_get(cfg, "num_experts_per_tok", "moe_topk", default=0))
    moe_inter = int(_get(cfg, "moe_intermediate_size", default=0))
    shared = int(_get(cfg, "n_shared_experts", default=0) or 0)
    if cfg.get("shared_expert_intermediate_size") and moe_inter:
        shared = max(1, int(cfg["shared_expert_intermediate_size"]) // moe_inter)
    dense_layers = int(_get(cfg, "first_k_dense_replace", default=0) or 0)
    return n_experts, k, moe_inter, shared, dense_layers


def _hf_sliding(cfg: dict[str, Any], mtype: str, layers: int) -> tuple[int | None, int]:
    """(sliding window, layers that use it); (None, 0) without one."""
    window = cfg.get("sliding_window")
    if not window or cfg.get("use_sliding_window", True) is False:
        return None, 0
    pattern = cfg.get("sliding_window_pattern")
    layer_types = cfg.get("layer_types")
    if isinstance(layer_types, list) and layer_types:
        n_sliding = sum(1 for t in layer_types if "sliding" in str(t))
    elif pattern:  # Gemma 3: every `pattern`-th layer is global
        n_sliding = layers - layers // int(pattern)
    elif mtype.startswith("gemma2"):
        n_sliding = layers // 2  # Gemma 2 alternates local and global layers
    elif mtype.startswith("qwen2") or mtype.startswith("qwen3"):
        n_sliding = layers - int(cfg.get("max_window_layers", layers))
    else:
        n_sliding = layers
    return int(window), n_sliding


# -- GGUF -------------------------------------------------------------------------


def shape_from_gguf(path: str | Path) -> ModelShape:
    """Build a :class:`ModelShape` from a GGUF file's metadata and tensor table.

    A file that cannot be read or understood raises :class:`ConfigError`.
    """
    p = Path(path)
    try:
        st = p.stat()
    except OSError as e:
        raise file_error(p, e) from None
    try:
        return _shape_from_gguf(str(p.resolve()), st.st_size, st.st_mtime_ns)
    except (TypeError, ValueError, ZeroDivisionError) as e:
        raise ConfigError(f"{p}: GGUF metadata of an unexpected kind ({e})") from None


@functools.lru_cache(maxsize=16)
def _shape_from_gguf(path: str, size: int, mtime: int) -> ModelShape:
    g = read_gguf(path)
    arch = g.architecture
    if arch is None:
        raise ConfigError(f"{path}: GGUF has no general.architecture")

    def need(key: str) -> int:
        v = g.arch_value(key)
        if v is None:
            raise ConfigError(f"{path}: GGUF lacks {arch}.{key}")
        return int(v[0] if isinstance(v, list) else v)

    hidden, layers, heads = (
        need("embedding_length"),
        need("block_count"),
        need("attention.head_count"),
    )
    kv_raw = g.arch_value("attention.head_count_kv", heads)
    # Some architectures store per-layer head counts; the cache follows the largest.
    kv_heads = int(max(kv_raw) if isinstance(kv_raw, list) else kv_raw)
    head_dim = int(g.arch_value("attention.key_length", hidden // heads))
    ff = g.arch_value("feed_forward_length", 4 * hidden)
    vocab = g.arch_value("vocab_size")
    if vocab is None:
        toks = g.metadata.get("tokenizer.ggml.tokens")
        vocab = len(toks) if isinstance(toks, list) else 0
    names = {t.name for t in g.tensors}
    window = g.arch_value("attention.sliding_window")
    n_experts = int(g.arch_value("expert_count", 0) or 0)
    kv_lora = int(g.arch_value("attention.kv_lora_rank", 0) or 0)
    # The name as the user gave it (the file), not general.name: that one is often a
    # title-cased training tag ("Smollm2 135M 8k Lc100K Mix1 Ep2"); it names only
    # files whose own name says nothing (a 64-hex blob in a model cache).
    stem = Path(path).stem
    generic = re.fullmatch(r"[0-9a-f]{32,}|model|ggml-model.*", stem, re.IGNORECASE)
    label = str(g.metadata.get("general.name") or stem) if generic else stem
    types = sorted({t.type_name for t in g.tensors})
    return ModelShape(
        name=label,
        architecture=arch,
        n_layers=layers,
        hidden_size=hidden,
        n_heads=heads,
        n_kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=int(max(ff) if isinstance(ff, list) else ff),
        vocab_size=int(vocab),
        max_context=g.arch_value("context_length"),
        tie_embeddings="output.weight" not in names,
        n_experts=n_experts,
        experts_per_token=int(g.arch_value("expert_used_count", 0) or 0),
        moe_intermediate_size=int(g.arch_value("expert_feed_forward_length", 0) or 0),
        n_shared_experts=int(g.arch_value("expert_shared_count", 0) or 0),
        n_dense_layers=int(g.arch_value("leading_dense_block_count", 0) or 0),
        sliding_window=int(window) if window else None,
        n_sliding_layers=layers if window else 0,
        kv_lora_rank=kv_lora,
        qk_rope_head_dim=int(g.arch_value("rope.dimension_count", 0) or 0) if kv_lora else 0,
        weight_bytes_per_param=g.weights_bytes / max(1, g.n_parameters),
        weights_bytes_exact=g.weights_bytes,
        n_params_exact=g.n_parameters,
        kv_bytes_per_element=2.0,  # llama.cpp caches K and V in f16 by default
        source=f"GGUF v{g.version} ({', '.join(types)})",
    )
