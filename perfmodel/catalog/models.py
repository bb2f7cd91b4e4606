"""Model configurations: frozen pydantic specs loaded from ``specs/models/*.toml``.

Each file copies the figures of one open model's published ``config.json`` and names
its source. ``params`` is stated in the file and checked against the count implied by
the layer shapes (:meth:`ModelSpec.counted_params`), so a mistyped figure is caught.

>>> spec = load_model("llama-3.1-8b")
>>> spec.layers, spec.kv_heads, spec.head_dim
(32, 8, 128)
>>> spec.weight_bytes("bf16") / 1e9
16.060522496
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, model_validator

from perfmodel.catalog import registry as _registry
from perfmodel.catalog.fields import INTEGER, Count, Flag, NonNegativeCount, within
from perfmodel.vocabulary import bytes_per_element

#: Largest relative gap allowed between the stated and the counted parameter number.
PARAMS_TOLERANCE = 0.01
#: Parameters of one model: 1 to 10^15.
Params = Annotated[int, INTEGER, within(1, 10**15)]


class LatentAttention(BaseModel):
    """Multi-head latent attention (DeepSeek-V2 §2.1, DeepSeek-V3 §2.1.1): queries through
    a ``q_lora_rank`` bottleneck; keys and values cached as one ``kv_lora_rank`` latent
    plus a ``qk_rope_head_dim`` rotary key shared by every head; per head, QK dims
    ``qk_nope_head_dim + qk_rope_head_dim`` and V dim ``v_head_dim``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    q_lora_rank: Count
    kv_lora_rank: Count
    qk_nope_head_dim: Count
    qk_rope_head_dim: Count
    v_head_dim: Count

    @property
    def qk_head_dim(self) -> int:
        return self.qk_nope_head_dim + self.qk_rope_head_dim

    @property
    def cache_width(self) -> int:
        """Elements one token adds to one layer's cache: the latent and the rotary key."""
        return self.kv_lora_rank + self.qk_rope_head_dim

    def params(self, hidden: int, heads: int) -> int:
        """q_a, q_b, kv_a (latent + rotary key), kv_b (K nope and V per head), o; two norms."""
        q = hidden * self.q_lora_rank + self.q_lora_rank * heads * self.qk_head_dim
        kv = hidden * self.cache_width
        kv += self.kv_lora_rank * heads * (self.qk_nope_head_dim + self.v_head_dim)
        return q + kv + heads * self.v_head_dim * hidden + self.q_lora_rank + self.kv_lora_rank


class ModelSpec(BaseModel):
    """A decoder-only transformer as the KV-cache and prefill models see it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    aliases: tuple[str, ...] = ()
    layers: Count
    hidden: Count
    heads: Count
    kv_heads: Count
    head_dim: Count
    intermediate: Count
    vocab: Count
    tie_embeddings: Flag
    qkv_bias: Flag = False
    #: Mixture of experts: MLPs per layer, and how many each token runs (1 and 1: dense).
    experts: Count = 1
    experts_per_token: Count = 1
    #: DeepSeek-style MoE: experts every token runs besides the routed ones, the routed
    #: experts' width, and the first layers that keep a dense MLP of ``intermediate``.
    shared_experts: NonNegativeCount = 0
    moe_intermediate: Count | None = None
    dense_layers: NonNegativeCount = 0
    #: Local attention: keys a query sees, itself included (Hugging Face's
    #: ``sliding_window``); ``global_every = k``: every k-th layer (1-based) is global
    #: (Gemma 2: 2, Gemma 3: 6), None: every layer is local.
    sliding_window: Count | None = None
    global_every: Count | None = None
    #: Multi-head latent attention (DeepSeek-V2/V3); None: standard (GQA) attention.
    mla: LatentAttention | None = None
    max_context_tokens: Count
    params: Params
    sources: dict[str, str]

    @model_validator(mode="after")
    def _consistent(self) -> ModelSpec:
        for key in ("config", "params"):
            if key not in self.sources:
                raise ValueError(f"model {self.name!r} gives no source for {key!r}")
        if self.heads % self.kv_heads:
            raise ValueError(f"heads={self.heads} is not a multiple of kv_heads={self.kv_heads}")
        if self.experts_per_token > self.experts:
            raise ValueError(
                f"experts_per_token={self.experts_per_token} exceeds experts={self.experts}"
            )
        if self.global_every is not None and self.sliding_window is None:
            raise ValueError(f"global_every={self.global_every} needs a sliding_window")
        if self.dense_layers > self.layers:
            raise ValueError(f"dense_layers={self.dense_layers} exceeds layers={self.layers}")
        gap = abs(self.counted_params() - self.params) / self.params
        if gap > PARAMS_TOLERANCE:
            raise ValueError(
                f"params={self.params} differs from the {self.counted_params()} the layer "
                f"shapes imply by {gap:.1%}"
            )
        return self

    def counted_params(self) -> int:
        """Parameters implied by the shapes: embeddings, attention (GQA, or latent), SwiGLU
        MLP (dense layers; MoE layers: routed and shared experts plus a ``hidden ×
        experts`` router), RMSNorms."""
        q_out, kv_out = self.heads * self.head_dim, self.kv_heads * self.head_dim
        attention = self.hidden * (q_out + 2 * kv_out) + q_out * self.hidden
        if self.qkv_bias:
            attention += q_out + 2 * kv_out
        if self.mla is not None:
            attention = self.mla.params(self.hidden, self.heads)
        dense = 3 * self.hidden * self.intermediate  # gate, up, down
        moe = (self.experts + self.shared_experts) * 3 * self.hidden * self.expert_width
        if self.experts > 1:
            moe += self.hidden * self.experts  # the router
        norms = 2 * self.hidden
        layers = self.dense_layers * dense + self.moe_layers * moe
        layers += self.layers * (attention + norms)
        embeddings = self.vocab * self.hidden * (1 if self.tie_embeddings else 2)
        return layers + embeddings + self.hidden  # final norm

    @property
    def expert_width(self) -> int:
        """The MLP width of a MoE layer's experts (``intermediate`` unless given)."""
        return self.moe_intermediate or self.intermediate

    @property
    def moe_layers(self) -> int:
        """Layers with the (mixture-of-experts, or only) MLP of ``experts``."""
        return self.layers - self.dense_layers

    def layer_windows(self) -> tuple[int | None, ...]:
        """Per layer, its left window in keys before the query (``jax.nn``'s
        ``local_window_size[0]``: ``sliding_window - 1``), None for global attention."""
        if self.sliding_window is None:
            return (None,) * self.layers
        every = self.global_every
        return tuple(
            None if every is not None and (i + 1) % every == 0 else self.sliding_window - 1
            for i in range(self.layers)
        )

    @property
    def cache_elements_per_token(self) -> int:
        """Elements one token adds to one layer's KV cache: K and V of every KV head, or
        MLA's latent and rotary key (one for all heads)."""
        if self.mla is not None:
            return self.mla.cache_width
        return 2 * self.kv_heads * self.head_dim

    def weight_bytes(self, dtype: str) -> float:
        """Bytes of the weights stored in ``dtype``."""
        return float(self.params * bytes_per_element(dtype))


@functools.cache
def model_registry() -> dict[str, ModelSpec]:
    """Every shipped model, keyed by lower-cased name and each declared alias."""
    return _registry.build("models", ModelSpec, "model")


def known_models() -> list[str]:
    """Canonical names of the shipped models."""
    return _registry.names(model_registry())


def load_model(model: str | Path | ModelSpec) -> ModelSpec:
    """A model by exact name or alias (case-insensitive), or from a path to a TOML file."""
    if isinstance(model, ModelSpec):
        return model
    return _registry.lookup(model, model_registry(), ModelSpec, "model")
