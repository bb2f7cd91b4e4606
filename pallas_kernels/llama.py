"""A Llama-shaped decoder in plain JAX, with the attention implementation selectable.

The layer is Llama 3's (Grattafiori et al. 2024, §3.1; Touvron et al. 2023, §2.2):
pre-norm RMSNorm, one fused QKV projection, rotary embeddings on q and k, grouped-query
attention, output projection and residual; RMSNorm, SwiGLU MLP (gate and up as one
matmul, ``silu(g)·u``, down) and residual. Shapes come from a shipped model file
(``specs/models/*.toml``, read with ``tomllib``: no pydantic, so this runs on the GPU
image); weights are random, bf16, scaled by ``1/sqrt(fan_in)`` so activations stay finite.

Attention in prefill (causal, over the prompt):

* ``naive``: the three unfused steps of ``pallas_kernels.naive`` (S and P through HBM);
* ``flash``: our Pallas FlashAttention-2 kernel (``pallas_kernels.flash_attention``);
* ``cudnn``: ``jax.nn.dot_product_attention(implementation="cudnn")``.

Attention in decode (one new token per sequence over a KV cache of ``m`` tokens):

* ``contiguous``: K/V as ``[b, m, h_kv, d]``, attended by XLA (grouped einsums, f32
  softmax);
* ``paged``: the same bytes as a page pool ``[pages, page, h_kv, d]`` with a block table,
  read by our Pallas kernel (``pallas_kernels.paged_decode``).

The layers are run in chunks: one jitted function holds ``chunk`` layers (unrolled, so
each matmul reads its own weight buffer) and is called once per chunk with that chunk's
weights, so the whole depth costs one compilation of a few layers. The decode step
attends over the cache as it stands; writing the new token's K/V into it (two rows per
layer) is left out, as in ``perfmodel.costs.decode``.

>>> cfg = LlamaConfig(layers=2, hidden=64, heads=4, kv_heads=2, head_dim=16,
...                   intermediate=128, vocab=100)
>>> model = LlamaModel.random(cfg, chunk=1, seed=0)
>>> tokens = jnp.arange(16, dtype=jnp.int32).reshape(1, 16) % cfg.vocab
>>> model.prefill(tokens, attention="naive").shape
(1, 100)
"""

from __future__ import annotations

import dataclasses
import functools
import math
import tomllib
from pathlib import Path

import jax
import jax.numpy as jnp

ROOT = Path(__file__).resolve().parent.parent
PREFILL_ATTENTION = ("naive", "flash", "cudnn")
DECODE_KV = ("contiguous", "paged")


@dataclasses.dataclass(frozen=True)
class LlamaConfig:
    """The shape of the network (the fields of ``specs/models/*.toml`` that it needs)."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    rope_theta: float = 500_000.0
    norm_eps: float = 1e-5
    #: Weight storage: "in_out" ``[in, out]`` (x @ w), or "out_in" ``[out, in]`` as PyTorch and
    #: Hugging Face checkpoints store them (x @ w.T).
    weight_layout: str = "in_out"

    @classmethod
    def from_toml(cls, name: str) -> LlamaConfig:
        """``specs/models/<name>.toml`` (a file name, not an alias)."""
        data = tomllib.loads((ROOT / "specs" / "models" / f"{name}.toml").read_text())
        fields = ("layers", "hidden", "heads", "kv_heads", "head_dim", "intermediate", "vocab")
        return cls(**{f: int(data[f]) for f in fields})

    @property
    def qkv_width(self) -> int:
        return (self.heads + 2 * self.kv_heads) * self.head_dim


# --- building blocks ------------------------------------------------------------------
def rms_norm(x, weight, eps):
    """RMSNorm (Zhang and Sennrich 2019) in f32, stored in x's dtype."""
    x32 = x.astype(jnp.float32)
    scale = jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)
    return (x32 * scale * weight.astype(jnp.float32)).astype(x.dtype)


def rope(x, positions, theta):
    """Rotary embedding (Su et al. 2021) on ``x [b, n, heads, d]`` at ``positions [b, n]``,
    the half-split layout of the Llama reference code."""
    d = x.shape[-1]
    freqs = theta ** (-jnp.arange(0, d, 2, dtype=jnp.float32) / d)
    angles = positions.astype(jnp.float32)[..., None] * freqs  # [b, n, d/2]
    cos, sin = (f(angles)[:, :, None, :] for f in (jnp.cos, jnp.sin))
    x1, x2 = jnp.split(x.astype(jnp.float32), 2, axis=-1)
    return jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1).astype(x.dtype)


def _interpret() -> bool:
    """Pallas kernels run compiled on a GPU and in the interpreter elsewhere (CI, CPU)."""
    return jax.default_backend() != "gpu"


def _matmul(x, w, layout: str = "in_out"):
    spec = "...k,kn->...n" if layout == "in_out" else "...k,nk->...n"
    return jnp.einsum(spec, x, w, preferred_element_type=jnp.float32).astype(x.dtype)


def prefill_attention(q, k, v, attention: str):
    """Causal attention over the prompt, ``[b, n, heads, d]`` layout, by ``attention``."""
    if attention == "naive":
        from pallas_kernels.naive import naive_attention

        return naive_attention(q, k, v, causal=True)
    if attention == "flash":
        from pallas_kernels import flash_attention

        return flash_attention(q, k, v, causal=True, interpret=_interpret())
    if attention == "cudnn":
        return jax.nn.dot_product_attention(q, k, v, is_causal=True, implementation="cudnn")
    raise ValueError(f"attention={attention!r}; known: {PREFILL_ATTENTION}")


def contiguous_decode(q, k, v):
    """One new token per sequence against all ``m`` cached tokens (XLA, f32 softmax)."""
    b, _, h, d = q.shape
    h_kv = k.shape[2]
    qg = q.reshape(b, h_kv, h // h_kv, d)
    s = jnp.einsum("bgjd,bmgd->bgjm", qg, k, preferred_element_type=jnp.float32)
    p = jax.nn.softmax(s / math.sqrt(d), axis=-1).astype(q.dtype)
    o = jnp.einsum("bgjm,bmgd->bgjd", p, v, preferred_element_type=jnp.float32)
    return o.reshape(b, 1, h, d).astype(q.dtype)


def decode_attention(q, k_pages, v_pages, table, lengths, kv: str, splits: int):
    """Decode attention over a cache held as pages ``[b·pages, page, h_kv, d]``."""
    b = q.shape[0]
    if kv == "contiguous":  # the pages of sequence i are rows i·pages ... in order
        _, page, h_kv, d = k_pages.shape
        k, v = (x.reshape(b, -1, h_kv, d) for x in (k_pages, v_pages))
        return contiguous_decode(q, k, v)
    if kv == "paged":
        from pallas_kernels.paged_decode import paged_decode_attention

        return paged_decode_attention(
            q, k_pages, v_pages, table, lengths, splits=splits, interpret=_interpret()
        )
    raise ValueError(f"kv={kv!r}; known: {DECODE_KV}")


def _attention_block(p, x, positions, cfg: LlamaConfig):
    """Norm, QKV projection, rotary embeddings: q, k, v as ``[b, n, heads, d]``."""
    b, n, _ = x.shape
    qkv = _matmul(rms_norm(x, p["attn_norm"], cfg.norm_eps), p["wqkv"], cfg.weight_layout)
    q_w, kv_w = cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim
    q = qkv[..., :q_w].reshape(b, n, cfg.heads, cfg.head_dim)
    k = qkv[..., q_w : q_w + kv_w].reshape(b, n, cfg.kv_heads, cfg.head_dim)
    v = qkv[..., q_w + kv_w :].reshape(b, n, cfg.kv_heads, cfg.head_dim)
    return rope(q, positions, cfg.rope_theta), rope(k, positions, cfg.rope_theta), v


def _mlp_block(p, x, attn_out, cfg: LlamaConfig):
    """Output projection and residual, then the SwiGLU MLP and its residual."""
    b, n = x.shape[:2]
    x = x + _matmul(attn_out.reshape(b, n, -1), p["wo"], cfg.weight_layout)
    gate_up = _matmul(rms_norm(x, p["mlp_norm"], cfg.norm_eps), p["w_gate_up"], cfg.weight_layout)
    gate, up = jnp.split(gate_up, 2, axis=-1)
    return x + _matmul(jax.nn.silu(gate) * up, p["w_down"], cfg.weight_layout)


@functools.partial(jax.jit, static_argnames=("cfg", "attention"))
def prefill_chunk(layers, x, positions, *, cfg: LlamaConfig, attention: str):
    """``len(layers)`` layers over the prompt; returns x and each layer's K and V."""
    ks, vs = [], []
    for p in layers:
        q, k, v = _attention_block(p, x, positions, cfg)
        x = _mlp_block(p, x, prefill_attention(q, k, v, attention), cfg)
        ks.append(k)
        vs.append(v)
    return x, ks, vs


@functools.partial(jax.jit, static_argnames=("cfg", "kv", "splits"))
def decode_chunk(
    layers, caches, x, positions, table, lengths, *, cfg: LlamaConfig, kv: str, splits: int
):
    """``len(layers)`` layers for one new token per sequence; ``caches`` holds each
    layer's (k_pages, v_pages)."""
    for p, (k_pages, v_pages) in zip(layers, caches, strict=True):
        q, _, _ = _attention_block(p, x, positions, cfg)
        attn = decode_attention(q, k_pages, v_pages, table, lengths, kv, splits)
        x = _mlp_block(p, x, attn, cfg)
    return x


@jax.jit
def embed(table, tokens):
    return table[tokens]


@functools.partial(jax.jit, static_argnames=("cfg",))
def head(ends, x, *, cfg: LlamaConfig):
    """Final RMSNorm and LM head on the last position of each sequence: logits ``[b, vocab]``."""
    last = rms_norm(x[:, -1], ends["final_norm"], cfg.norm_eps)
    return _matmul(last, ends["lm_head"], cfg.weight_layout)


# --- weights ----------------------------------------------------------------------------
def _normal(key, shape, fan_in, dtype):
    return (jax.random.normal(key, shape, jnp.float32) / math.sqrt(fan_in)).astype(dtype)


def _weight(key, fan_in, fan_out, cfg: LlamaConfig, dtype):
    """A projection's weight in ``cfg.weight_layout``, scaled by ``1/sqrt(fan_in)``."""
    shape = (fan_in, fan_out) if cfg.weight_layout == "in_out" else (fan_out, fan_in)
    return _normal(key, shape, fan_in, dtype)


@functools.partial(jax.jit, static_argnames=("cfg", "count", "dtype"))
def random_layers(key, *, cfg: LlamaConfig, count: int, dtype=jnp.bfloat16):
    """``count`` layers of random weights (a list of dicts, one buffer per weight)."""
    out = []
    for i in range(count):
        kq, ko, kg, kd = jax.random.split(jax.random.fold_in(key, i), 4)
        inter, q_w = cfg.intermediate, cfg.heads * cfg.head_dim
        out.append(
            {
                "attn_norm": jnp.ones((cfg.hidden,), dtype),
                "wqkv": _weight(kq, cfg.hidden, cfg.qkv_width, cfg, dtype),
                "wo": _weight(ko, q_w, cfg.hidden, cfg, dtype),
                "mlp_norm": jnp.ones((cfg.hidden,), dtype),
                "w_gate_up": _weight(kg, cfg.hidden, 2 * inter, cfg, dtype),
                "w_down": _weight(kd, inter, cfg.hidden, cfg, dtype),
            }
        )
    return out


@functools.partial(jax.jit, static_argnames=("cfg", "dtype"))
def random_ends(key, *, cfg: LlamaConfig, dtype=jnp.bfloat16):
    """Embedding table, final norm and (untied) LM head."""
    ke, kh = jax.random.split(key)
    return {
        "embed": _normal(ke, (cfg.vocab, cfg.hidden), 1.0, dtype),
        "final_norm": jnp.ones((cfg.hidden,), dtype),
        "lm_head": _weight(kh, cfg.hidden, cfg.vocab, cfg, dtype),
    }


@dataclasses.dataclass
class LlamaModel:
    """Weights in chunks of ``chunk`` layers, and the forward passes over all of them."""

    cfg: LlamaConfig
    chunks: list  # each: a list of ``chunk`` layer dicts
    ends: dict

    @classmethod
    def random(cls, cfg: LlamaConfig, *, chunk: int, seed: int = 0, dtype=jnp.bfloat16):
        if cfg.layers % chunk:
            raise ValueError(f"layers={cfg.layers} is not a multiple of chunk={chunk}")
        key = jax.random.key(seed)
        chunks = [
            random_layers(jax.random.fold_in(key, c), cfg=cfg, count=chunk, dtype=dtype)
            for c in range(cfg.layers // chunk)
        ]
        return cls(
            cfg, chunks, random_ends(jax.random.fold_in(key, len(chunks)), cfg=cfg, dtype=dtype)
        )

    def prefill(self, tokens, *, attention: str, return_cache: bool = False):
        """Logits of the last prompt token ``[b, vocab]`` (and the K/V of every layer)."""
        b, n = tokens.shape
        positions = jnp.broadcast_to(jnp.arange(n, dtype=jnp.int32), (b, n))
        x = embed(self.ends["embed"], tokens)
        cache = []
        for layers in self.chunks:
            x, ks, vs = prefill_chunk(layers, x, positions, cfg=self.cfg, attention=attention)
            cache.extend(zip(ks, vs, strict=True))
        logits = head(self.ends, x, cfg=self.cfg)
        return (logits, cache) if return_cache else logits

    def decode(self, tokens, caches, table, lengths, *, kv: str, splits: int = 1):
        """Logits ``[b, vocab]`` of one decode step; ``caches[chunk][layer] = (k, v)`` pages."""
        positions = (lengths - 1)[:, None]
        x = embed(self.ends["embed"], tokens[:, None])
        for layers, cache in zip(self.chunks, caches, strict=True):
            x = decode_chunk(
                layers, cache, x, positions, table, lengths, cfg=self.cfg, kv=kv, splits=splits
            )
        return head(self.ends, x, cfg=self.cfg)
