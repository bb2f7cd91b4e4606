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

from pydantic import BaseModel, ConfigDict, model_validator

from perfmodel.catalog import registry as _registry
from perfmodel.catalog.fields import Count, Flag, count_between
from perfmodel.vocabulary import bytes_per_element

#: Largest relative gap allowed between the stated and the counted parameter number.
PARAMS_TOLERANCE = 0.01
#: Parameters of one model: 1 to 10^15.
Params = count_between(1, 10**15)


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
        gap = abs(self.counted_params() - self.params) / self.params
        if gap > PARAMS_TOLERANCE:
            raise ValueError(
                f"params={self.params} differs from the {self.counted_params()} the layer "
                f"shapes imply by {gap:.1%}"
            )
        return self

    def counted_params(self) -> int:
        """Parameters implied by the shapes: embeddings, attention, SwiGLU MLP (one per
        expert, plus a ``hidden × experts`` router when there are several), RMSNorms."""
        q_out, kv_out = self.heads * self.head_dim, self.kv_heads * self.head_dim
        attention = self.hidden * (q_out + 2 * kv_out) + q_out * self.hidden
        if self.qkv_bias:
            attention += q_out + 2 * kv_out
        mlp = self.experts * 3 * self.hidden * self.intermediate  # gate, up, down
        if self.experts > 1:
            mlp += self.hidden * self.experts  # the router
        layer = attention + mlp + 2 * self.hidden  # two RMSNorm weights
        embeddings = self.vocab * self.hidden * (1 if self.tie_embeddings else 2)
        return self.layers * layer + embeddings + self.hidden  # final norm

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
