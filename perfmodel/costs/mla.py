"""Multi-head latent attention (MLA, DeepSeek-V2 §2.1; DeepSeek-V3 §2.1.1), as sympy.

Per token, a layer caches one latent ``c_KV`` of ``kv_rank`` values (512 in V2/V3) and
one rotary key ``k_R`` of ``rope_dim`` values (64), shared by all ``h`` heads: the cache
is ``(kv_rank + rope_dim)·s`` bytes a token a layer, against ``2·h_kv·d·s`` for GQA
(DeepSeek-V3: 576 values against 2·128·128 = 32768 for its 128 heads as MHA). Each head
has a QK dim of ``nope_dim + rope_dim`` (128 + 64) and a V dim ``v_dim`` (128); the
up-projection ``W_UKV`` (``kv_rank`` → ``h·(nope_dim + v_dim)``) turns the latent into
per-head keys and values. Two ways to run it (§2.1.2 of V2: "absorbed" matrices):

* **non-absorbed** (prefill): decompress K and V per head (one GEMM over the ``m``
  cached tokens), then ordinary attention with QK dim 192 and V dim 128, ``h_kv = h``.
  Its FLOPs and bytes are exactly those of the standard flash model at the mean head
  dim ``d = (qk_dim + v_dim)/2`` (every term pairs Q with O and K with V), so the
  attention step is :func:`perfmodel.predict` at that ``d``
  (:func:`prefill_attention_shape`); this module adds the decompression.
* **absorbed** (decode, FlashMLA): ``W_UK`` folds into the query (``q·W_UK`` per head:
  a 576-wide query against the latent) and ``W_UV`` into the output (``(P·c_KV)·W_UV``),
  so attention runs as MQA over the cache itself: one K/V "head" of QK dim
  ``kv_rank + rope_dim`` = 576 whose V is the latent's first ``kv_rank`` = 512 values,
  read once for all heads. FLOPs per score ``2·(576 + 512)`` (3.4x the non-absorbed
  ``2·(192 + 128)``), bytes per cached token 576·s for all heads: decode reads 57x fewer
  bytes than 128 heads of 128 as MHA would (2·128·128 values a token).

Left out: the rotary embedding's FLOPs on q and k_R; FP8 weights and their scales;
the cache write of the new token (``(kv_rank + rope_dim)·s`` a token); tiles and
L2 (the absorbed kernel reads the cache once from DRAM: all head blocks of one
sequence run in one wave, as FlashMLA's 64-head tiles do).

>>> from perfmodel.compile import compiled
>>> per_token = compiled(cache_bytes_per_token)(kv_rank=512, rope_dim=64, s=2)
>>> float(per_token)                      # bytes a token a layer, bf16
1152.0
"""

from __future__ import annotations

import sympy as sp

from perfmodel.costs import terms as t
from perfmodel.costs.base import Kernel
from perfmodel.costs.transformer import elementwise, matmul
from perfmodel.errors import PerfmodelError
from perfmodel.symbols import (
    b,
    h,
    kv_rank,
    m,
    nope_dim,
    q_len,
    rope_dim,
    rows,
    s,
    v_dim,
)

#: QK head dim of the non-absorbed form, and what the cache holds per token and layer.
qk_dim = t.latent_qk_dim
cache_width = t.latent_cache_width
cache_bytes_per_token = cache_width * s
#: The cache of b sequences of m tokens, one layer.
cache_bytes = b * m * cache_bytes_per_token

#: Absorbed form: each score's dot products (576-wide QK against the latent, 512-wide PV).
ABSORBED_QK = cache_width
ABSORBED_PV = kv_rank


def absorbed_attention(queries: sp.Expr = q_len) -> Kernel:
    """Decode attention over the latent cache (FlashMLA's form): ``queries`` new tokens a
    sequence, each of ``h`` heads a 576-wide query (q_nope·W_UK and q_rope) against the
    ``m`` cached latents; reads the cache once, the absorbed queries, writes the 512-wide
    per-head outputs (before ``W_UV``). Softmax as in ``costs.terms``."""
    scores = b * h * queries * m
    return Kernel(
        name="mla_attention",
        matmul_flops=2 * scores * (ABSORBED_QK + ABSORBED_PV),
        vector_flops=t.SOFTMAX_FLOPS_PER_SCORE * scores + b * h * queries * ABSORBED_PV,
        exp_count=scores,
        hbm_bytes=cache_bytes + b * h * queries * (ABSORBED_QK + ABSORBED_PV) * s,
    )


def absorb_kernels(tokens: sp.Expr = rows) -> tuple[Kernel, ...]:
    """The absorbed projections around decode attention, per token and head:
    ``q_nope (nope_dim) @ W_UK (nope_dim x kv_rank)`` and ``o (kv_rank) @ W_UV (kv_rank x
    v_dim)``: the two halves of ``W_UKV``, read once per step."""
    return (
        matmul("mla_absorb_q", tokens, h * nope_dim, kv_rank, weights=h * nope_dim * kv_rank),
        matmul("mla_absorb_o", tokens, h * kv_rank, v_dim, weights=h * kv_rank * v_dim),
    )


def decompress(tokens: sp.Expr) -> Kernel:
    """Non-absorbed form: per-head K (nope part) and V from ``tokens`` cached latents,
    ``[tokens, kv_rank] @ [kv_rank, h·(nope_dim + v_dim)]``; the rotary key is then
    broadcast to every head (one elementwise pass, counted in :func:`expand_rope`)."""
    return matmul("mla_decompress", tokens, kv_rank, h * (nope_dim + v_dim))


def expand_rope(tokens: sp.Expr) -> Kernel:
    """Copy the shared rotary key into each head's K: read ``rope_dim``, write ``h·rope_dim``."""
    return elementwise("mla_rope_k", tokens * rope_dim, tokens * h * rope_dim, sp.Integer(0))


def prefill_attention_shape(qk_head_dim: int, v_head_dim: int, heads: int) -> dict[str, int]:
    """``predict``'s ``d``, ``h`` and ``h_kv`` for the non-absorbed attention step: the mean
    head dim (exact for the FLOPs ``2·(qk + v)`` a score and the bytes of Q+O and K+V),
    one K/V head per query head.

    >>> prefill_attention_shape(192, 128, 128)
    {'d': 160, 'h': 128, 'h_kv': 128}
    """
    if (qk_head_dim + v_head_dim) % 2:
        raise PerfmodelError(f"qk_head_dim={qk_head_dim} + v_head_dim={v_head_dim} must be even")
    return {"d": (qk_head_dim + v_head_dim) // 2, "h": heads, "h_kv": heads}
