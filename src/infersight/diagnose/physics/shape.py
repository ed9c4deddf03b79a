"""A model's shape (layers, heads, experts, attention kind), read from an HF
``config.json`` or from GGUF metadata, and the sizes that follow from it.

Formulas (docs/design.md section 6):
- KV bytes per token = ``2 · layers · kv_heads · head_dim · bytes_per_element``;
- multi-head latent attention (DeepSeek-V2/V3) caches one compressed latent per layer
  and token: ``layers · (kv_lora_rank + qk_rope_head_dim) · bytes``;
- sliding-window layers hold at most ``window`` tokens, so a sequence's KV grows with
  ``min(context, window)`` on those layers;
- parameters are counted from the matrices (embeddings, attention, MLP or experts);
  a mixture of experts reads only ``experts_per_token`` experts per token (active).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from infersight.core.errors import ConfigError

__all__ = ["ModelShape", "dtype_bytes"]

#: Bytes per element of the cache/weight dtypes infersight knows by name.
DTYPE_BYTES: dict[str, float] = {
    "float32": 4.0,
    "fp32": 4.0,
    "f32": 4.0,
    "bfloat16": 2.0,
    "bf16": 2.0,
    "float16": 2.0,
    "fp16": 2.0,
    "f16": 2.0,
    "half": 2.0,
    "auto": 2.0,
    "fp8": 1.0,
    "fp8_e4m3": 1.0,
    "fp8_e5m2": 1.0,
    "float8": 1.0,
    "int8": 1.0,
    "q8_0": 34 / 32,
    "q4_0": 18 / 32,
    "q4_1": 20 / 32,
    "q5_0": 22 / 32,
    "q5_1": 24 / 32,
    "iq4_nl": 18 / 32,
    "int4": 0.5,
    "fp4": 0.5,
    "nvfp4": 0.5 + 1 / 16,
}


def dtype_bytes(name: str) -> float:
    """Bytes per element for a dtype name (``bf16``, ``fp8``, ``q8_0``...)."""
    key = name.strip().lower().replace("torch.", "")
    if key not in DTYPE_BYTES:
        known = ", ".join(sorted(k for k in DTYPE_BYTES if "_" not in k or k.startswith("q")))
        raise ConfigError(f"unknown dtype {name!r}; known: {known}")
    return DTYPE_BYTES[key]


@dataclass(frozen=True, slots=True)
class ModelShape:
    """Everything the physics needs to know about a transformer decoder."""

    name: str
    architecture: str
    n_layers: int
    hidden_size: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    max_context: int | None = None
    tie_embeddings: bool = False
    #: Mixture of experts: routed experts, experts per token, expert FFN width, shared experts.
    n_experts: int = 0
    experts_per_token: int = 0
    moe_intermediate_size: int = 0
    n_shared_experts: int = 0
    #: Leading layers with a dense MLP in an MoE model (DeepSeek ``first_k_dense_replace``).
    n_dense_layers: int = 0
    #: Sliding-window attention: window size and how many layers use it (rest are global).
    sliding_window: int | None = None
    n_sliding_layers: int = 0
    #: Multi-head latent attention (DeepSeek): cache width per layer and token.
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    q_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    attention_bias: bool = False
    #: Weight bytes per parameter before any override (2 for bf16 checkpoints).
    weight_bytes_per_param: float = 2.0
    #: Exact weight bytes when known (a GGUF file's tensor table).
    weights_bytes_exact: int | None = None
    #: Exact parameter count when known (GGUF), else counted from the shape.
    n_params_exact: int | None = None
    #: KV cache element bytes the model's engine uses by default.
    kv_bytes_per_element: float = 2.0
    source: str = ""
    notes: tuple[str, ...] = field(default=())

    # -- attention / KV -------------------------------------------------------------
    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    def kv_bytes_per_token(self, element_bytes: float | None = None) -> float:
        """KV-cache bytes one token adds on every layer (full-attention formula)."""
        b = self.kv_bytes_per_element if element_bytes is None else element_bytes
        if self.is_mla:
            return self.n_layers * (self.kv_lora_rank + self.qk_rope_head_dim) * b
        return 2 * self.n_layers * self.n_kv_heads * self.head_dim * b

    def kv_bytes_for_context(self, context: int, element_bytes: float | None = None) -> float:
        """KV bytes one sequence of ``context`` tokens holds (sliding windows capped)."""
        per_layer = self.kv_bytes_per_token(element_bytes) / self.n_layers
        if self.sliding_window and self.n_sliding_layers:
            local = self.n_sliding_layers * min(context, self.sliding_window)
            glob = (self.n_layers - self.n_sliding_layers) * context
            return per_layer * (local + glob)
        return per_layer * self.n_layers * context

    # -- parameters -----------------------------------------------------------------
    def _attn_params(self) -> int:
        h, nh = self.hidden_size, self.n_heads
        if self.is_mla:
            qk = self.qk_nope_head_dim + self.qk_rope_head_dim
            q = (
                h * self.q_lora_rank + self.q_lora_rank * nh * qk
                if self.q_lora_rank
                else h * nh * qk
            )
            kv_a = h * (self.kv_lora_rank + self.qk_rope_head_dim)
            kv_b = self.kv_lora_rank * nh * (self.qk_nope_head_dim + self.v_head_dim)
            return q + kv_a + kv_b + nh * self.v_head_dim * h
        q_out = nh * self.head_dim
        kv_out = self.n_kv_heads * self.head_dim
        bias = (q_out + 2 * kv_out) if self.attention_bias else 0
        return h * q_out + 2 * h * kv_out + q_out * h + bias

    def _layer_params(self, *, active: bool) -> tuple[int, int]:
        """(dense-MLP layer params, MoE layer params) for total or active counting."""
        h = self.hidden_size
        attn = self._attn_params() + 2 * h  # + two norms
        dense = attn + 3 * h * self.intermediate_size
        if not self.n_experts:
            return dense, dense
        width = self.moe_intermediate_size or self.intermediate_size
        routed = self.experts_per_token if active else self.n_experts
        moe = attn + 3 * h * width * (routed + self.n_shared_experts) + h * self.n_experts
        return dense, moe

    def _count(self, *, active: bool) -> int:
        dense, moe = self._layer_params(active=active)
        n_dense = self.n_dense_layers if self.n_experts else self.n_layers
        layers = n_dense * dense + (self.n_layers - n_dense) * moe
        emb = self.vocab_size * self.hidden_size
        return layers + emb * (1 if self.tie_embeddings else 2) + self.hidden_size

    @property
    def n_params(self) -> int:
        """Total parameters (exact for GGUF files, counted from the shape otherwise)."""
        return self.n_params_exact if self.n_params_exact is not None else self._count(active=False)

    @property
    def n_active_params(self) -> int:
        """Parameters used per token (all of them for a dense model)."""
        if not self.n_experts:
            return self.n_params
        counted_total = self._count(active=False)
        scale = self.n_params / counted_total if counted_total else 1.0
        return int(self._count(active=True) * scale)

    def weights_bytes(self, bytes_per_param: float | None = None) -> float:
        """Weight memory: exact for a GGUF file, else ``params · bytes per weight``."""
        if bytes_per_param is None and self.weights_bytes_exact is not None:
            return float(self.weights_bytes_exact)
        b = self.weight_bytes_per_param if bytes_per_param is None else bytes_per_param
        return self.n_params * b

    def decode_weight_bytes(self, batch: int, bytes_per_param: float | None = None) -> float:
        """Weight bytes one decode step reads for ``batch`` sequences.

        A dense model reads all weights once per step. An MoE model reads the shared
        part plus the experts the batch touches: with ``k`` of ``E`` experts per token,
        the expected touched fraction is ``1 - (1 - k/E)^batch``.
        """
        total = self.weights_bytes(bytes_per_param)
        if not self.n_experts:
            return total
        counted = self._count(active=False)
        expert_share = min(1.0, max(0.0, self._expert_params() / counted)) if counted else 0.0
        k, e = self.experts_per_token, self.n_experts
        touched = 1.0 - (1.0 - k / e) ** max(1, batch)
        return total * ((1 - expert_share) + expert_share * touched)

    def _expert_params(self) -> int:
        width = self.moe_intermediate_size or self.intermediate_size
        return (self.n_layers - self.n_dense_layers) * self.n_experts * 3 * self.hidden_size * width
