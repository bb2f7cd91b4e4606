"""Shared terms of the attention cost models, each written once.

Every algorithm in ``perfmodel.costs`` builds its FLOPs, bytes and memory from these.
Tensors are ``[b, n, h, d]`` (Q, O) and ``[b, m, h_kv, d]`` (K, V); ``s`` is bytes
per element of the input dtype; statistics and the log-sum-exp are float32.
"""

from __future__ import annotations

import sympy as sp

from perfmodel.symbols import (
    F32,
    b,
    block_k,
    block_q,
    d,
    h,
    h_kv,
    kv_rank,
    l2_capacity,
    m,
    n,
    nope_dim,
    rope_dim,
    s,
    tile_gcd,
)
from perfmodel.symbols import resident_ctas as resident

# --- tensor sizes (bytes) -------------------------------------------------------
q_bytes = b * h * n * d * s
o_bytes = b * h * n * d * s
k_bytes = b * h_kv * m * d * s
v_bytes = b * h_kv * m * d * s
kv_bytes = k_bytes + v_bytes
#: One n x m matrix per (batch, head): the score matrix S, or the probabilities P.
score_matrix_bytes = b * h * n * m * s
#: Log-sum-exp per query row, float32 (what a flash forward keeps for the backward).
lse_bytes = b * h * n * F32
#: K and V of one (batch, kv-head): what a Q block streams, and what L2 must hold.
kv_head_bytes = 2 * m * d * s
#: D = rowsum(dO∘O) per query row, float32: the backward's preprocessing output
#: (FlashAttention-2 Algorithm 2, line 4); the same size as the log-sum-exp.
delta_bytes = lse_bytes

# --- multi-head latent attention (perfmodel.costs.mla) ------------------------------
#: Per head, the QK dim of MLA's non-absorbed form (no-rotary part + rotary part).
latent_qk_dim = nope_dim + rope_dim
#: Values one token adds to one layer's latent cache: the latent and the rotary key.
latent_cache_width = kv_rank + rope_dim


# --- work (FLOPs and exponentials) ----------------------------------------------
#: QK^T and PV over an n x m score matrix: 2 matmuls x 2 FLOPs per multiply-add.
def matmul_flops(score_elements: sp.Expr) -> sp.Expr:
    """FLOPs of QK^T plus PV over ``score_elements`` scores (4·d each)."""
    return 4 * d * score_elements


def gemm_flops(score_elements: sp.Expr, gemms: int) -> sp.Expr:
    """FLOPs of ``gemms`` products of the score shape by d (2·d per score each).

    The forward does 2 (``matmul_flops``); a backward 4 (naive) to 7 (flash, dQ in a
    separate pass).
    """
    return matmul_flops(score_elements) * sp.Rational(gemms, 2)


#: Vector-unit FLOPs per score of a softmax: scale, running max, subtract, sum.
SOFTMAX_FLOPS_PER_SCORE = 4
#: A two-pass softmax also divides every probability by its row sum.
NORMALISE_FLOPS_PER_SCORE = 1

all_scores = b * h * n * m

# --- tiles ----------------------------------------------------------------------
q_blocks = sp.ceiling(n / block_q)  # T_r in FlashAttention-2
k_blocks = sp.ceiling(m / block_k)  # T_c


def causal_tiles(any_tile: bool = False) -> sp.Expr:
    """Exact count of (Q block, K block) tiles on or below the diagonal, per (b, h).

    Q block i covers rows [i·B_r, (i+1)·B_r); it needs K blocks j with j·B_c < (i+1)·B_r,
    so ceil((i+1)·B_r/B_c) of them, except the last Q block, which needs all T_c.
    When one of B_r, B_c divides the other (power-of-two tiles) the sum has a closed
    form; with ``any_tile``, tiles where neither divides the other (FlashAttention-3's
    128 × 176) take its average over the diagonal's period (exact when T_r − 1 is a
    multiple of B_c/gcd). Requires m == n (self-attention).
    """
    big_q = q_blocks - 1  # the Q blocks before the last
    r_q = block_q / block_k  # B_r = r·B_c
    r_k = block_k / block_q  # B_c = r·B_r
    whole = sp.floor(big_q / r_k)
    rest = big_q - whole * r_k
    q_wider = r_q * big_q * (big_q + 1) / 2
    k_wider = r_k * whole * (whole + 1) / 2 + rest * (whole + 1)
    # Neither side divides the other (FlashAttention-3's 128 x 176): ceil((i+1)·B_r/B_c)
    # exceeds (i+1)·B_r/B_c by (1 - g/B_c)/2 on average over a period, g = gcd(B_r, B_c).
    if not any_tile:
        return sp.Piecewise((q_wider, block_q >= block_k), (k_wider, True)) + k_blocks
    general = q_wider + big_q * (1 - tile_gcd / block_k) / 2
    return (
        sp.Piecewise(
            (q_wider, sp.Eq(sp.Mod(block_q, block_k), 0)),
            (k_wider, sp.Eq(sp.Mod(block_k, block_q), 0)),
            (general, True),
        )
        + k_blocks
    )


def streamed_fits(blocks_per_head: sp.Expr, head_bytes: sp.Expr) -> sp.Basic:
    """Whether the streamed tensors of the heads in flight fit in L2 together (the heads
    whose ``blocks_per_head`` thread blocks one wave of resident blocks holds)."""
    heads_in_flight = sp.ceiling(resident / blocks_per_head)
    return heads_in_flight * head_bytes <= l2_capacity


def streamed_dram_passes(
    blocks_per_head: sp.Expr, head_bytes: sp.Expr, spill_factor: sp.Expr | int = 1
) -> sp.Expr:
    """How often a tensor that every thread block of a head streams crosses DRAM.

    Thread blocks of one head run side by side (the block axis is the fastest grid
    axis) and walk the streamed tensor in step: while the heads in flight fit in L2
    (``head_bytes`` each), DRAM sees each byte once; past that, once per wave of
    resident blocks (times ``spill_factor``, e.g. h/h_kv when each query head of a GQA
    group re-reads its K/V). The forward's K/V and the backward's Q/dO are both this.
    """
    waves = sp.ceiling(blocks_per_head / resident)
    fits = streamed_fits(blocks_per_head, head_bytes)
    return sp.Piecewise((1, fits), (waves * spill_factor, True))
