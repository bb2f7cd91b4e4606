"""Tiled (flash) attention, FlashAttention-2 loop order, one fused kernel.

Algorithm 1 of FlashAttention-2 (Dao 2023, §3.1): the grid walks Q blocks of B_r
rows; each Q block is read once, streams every K/V block of B_c rows it needs through
SRAM with an online softmax, and writes its O block and log-sum-exp once. So the
SMs load K and V once per Q block — FlashAttention (Dao et al. 2022, Theorem 2):
Θ(n²d²/M) accesses for SRAM of M bytes, against Θ(nd + n²) for naive attention.

Where those re-reads are served from is the L2 question. Thread blocks of one
(batch, head) run side by side (the Q-block axis is the fastest grid axis) and walk
K/V in step, so while the K/V of the heads in flight fit in L2, DRAM sees each K/V
byte once; past that, once per wave of resident thread blocks. The L2-to-SM traffic
is the full re-read count, bounded by the L2-bandwidth roof.

Left out: the backward pass (``perfmodel.costs.backward``); TMA multicast inside
clusters (which would cut the L2-to-SM traffic); L2 misses from other streams (Q, O)
evicting K/V; the bytes of padding rows in the last block (loads are masked).
"""

from __future__ import annotations

import sympy as sp

from perfmodel.costs import terms as t
from perfmodel.costs.base import CostModel, Kernel
from perfmodel.symbols import F32, b, block_k, block_q, d, h, h_kv, m, n, s

#: Pipeline stages of K/V tiles in shared memory (double buffering).
KV_STAGES = 2


def _visited(causal: bool) -> tuple[sp.Expr, sp.Expr, sp.Expr]:
    """Per (b, h): scores computed, K/V rows streamed, and (Q block, K block) tiles."""
    if not causal:
        return n * m, t.q_blocks * m, t.q_blocks * t.k_blocks
    tiles = t.causal_tiles()
    # Full tiles, except that the last K block is partial. Q block i reaches it when its
    # last row, (i+1)·B_r - 1, is at or past the block's first, (T_c - 1)·B_c: the last
    # T_r - floor((T_c - 1)·B_c / B_r) Q blocks (just the last one when B_r >= B_c).
    reach_last = t.q_blocks - sp.floor((t.k_blocks - 1) * block_k / block_q)
    kv_rows = tiles * block_k - reach_last * (t.k_blocks * block_k - m)
    return tiles * block_q * block_k, kv_rows, tiles


def kv_dram_passes() -> sp.Expr:
    """How many times each head's K/V crosses DRAM, given L2 and resident thread blocks
    (past L2, each query head of a GQA group re-reads its K/V)."""
    return t.streamed_dram_passes(t.q_blocks, t.kv_head_bytes, h / h_kv)


def build(causal: bool = False, l2: bool = True) -> CostModel:
    """The flash model; ``l2=False`` charges every K/V re-read to DRAM (TPUs, no L2)."""
    scores_per_head, kv_rows_per_head, tiles_per_head = _visited(causal)
    scores = b * h * scores_per_head
    rows_rescaled = b * h * tiles_per_head * block_q  # once per row per tile
    streamed_kv = b * h * 2 * kv_rows_per_head * d * s  # K and V, into SRAM
    compulsory = t.q_bytes + t.o_bytes + t.lse_bytes
    l2_traffic = compulsory + streamed_kv
    dram = compulsory + t.kv_bytes * kv_dram_passes() if l2 else l2_traffic
    kernel = Kernel(
        name="flash",
        matmul_flops=t.matmul_flops(scores),
        # online softmax per score, plus rescaling acc (d per row) at every tile
        vector_flops=t.SOFTMAX_FLOPS_PER_SCORE * scores + rows_rescaled * d,
        exp_count=scores + rows_rescaled,
        hbm_bytes=dram,
        l2_bytes=l2_traffic,
        work_items=b * h * t.q_blocks,  # the grid: one thread block per (Q block, b, h)
        tiles=b * h * tiles_per_head,
    )
    return CostModel(
        name="flash",
        kernels=(kernel,),
        extra_memory_bytes=t.lse_bytes,
        hbm_bytes_no_cache=l2_traffic,
        sram_bytes=(block_q + KV_STAGES * 2 * block_k) * d * s,
        register_bytes=(block_q * block_k + block_q * d + 2 * block_q) * F32,
        notes={"l2": "K/V re-reads served by L2 while the heads in flight fit" if l2 else "none"},
    )
