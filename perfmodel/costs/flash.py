"""Tiled (flash) attention, FlashAttention-2 loop order, one fused kernel.

Algorithm 1 of FlashAttention-2 (Dao 2023, §3.1): the grid walks Q blocks of B_r
rows; each Q block is read once, streams every K/V block of B_c rows it needs through
SRAM with an online softmax, and writes its O block and log-sum-exp once. So the
SMs load K and V once per Q block — FlashAttention (Dao et al. 2022, Theorem 2):
Θ(n²d²/M) accesses for SRAM of M bytes, against Θ(nd + n²) for naive attention.

GQA packing (``pack`` query heads per tile): a kernel may put the query heads of one
K/V group into the rows of one tile (FlashAttention-2's decode swap, FlashAttention-3's
PackGQA), so the group reads its K/V once instead of once per query head: a tile of
B_r rows then covers B_r/pack query positions of ``pack`` heads. ``pack = 1`` is one
program per query head.

Split-KV (flash-decoding, Dao et al. 2023): with ``splits`` > 1 each (batch, head
group, Q block) is cut into ``splits`` K/V chunks walked by separate programs, which
write float32 partials (acc, max, sum); a second kernel reads them back and writes O
and the log-sum-exp. ``build(split=False)`` is the one-kernel form.

Where K/V re-reads are served from is the L2 question. Thread blocks of one
(batch, head group) run side by side (the Q-block axis is the fastest grid axis) and
walk K/V in step, so DRAM sees each K/V byte once per wave of them; across waves, once
in all while the K/V of the heads in flight fit in L2. The L2-to-SM traffic is the full
re-read count, bounded by the L2-bandwidth roof.

Masks (``masked``: a sliding window, packed documents, a block mask;
``perfmodel.costs.masks``): the kernel visits only the tiles with a score the mask keeps,
so scores, K/V rows streamed and tiles are the mask's counts (symbols ``mask_*``, valued by
``masks.visited``); DRAM sees each K/V row a visited tile reads once while the heads in
flight fit in L2, past that once per wave of the thread blocks that read it.

FP8 (``fp8``: ``perfmodel.costs.precision``): O is written at ``s_out`` bytes an element
(the family's output format), and the kernel does ``fp8_score_ops`` vector ops a score
(P's conversion, max|S|) and ``fp8_output_ops`` an output element (V's descale, max|O|)
more; the matrix rate of the two matmuls is the caller's (``precision.matmul_rate``).

Left out: the backward pass (``perfmodel.costs.backward``); TMA multicast inside
clusters (which would cut the L2-to-SM traffic); L2 misses from other streams (Q, O)
evicting K/V; the bytes of padding rows in the last block (loads are masked);
block-table reads of a paged cache (``paged``: 4 bytes per page per program, 0.05 % of
the K/V at 16-token pages).
"""

from __future__ import annotations

import sympy as sp

from perfmodel.costs import terms as t
from perfmodel.costs.base import CostModel, Kernel
from perfmodel.symbols import (
    F32,
    b,
    block_k,
    block_q,
    d,
    fp8_output_ops,
    fp8_score_ops,
    h,
    h_kv,
    kv_stages,
    m,
    mask_kv_rows,
    mask_kv_touched,
    mask_kv_wave_rows,
    mask_scores,
    mask_tiles,
    n,
    pack,
    page,
    s,
    s_out,
    splits,
)

#: Pipeline stages of K/V tiles in shared memory of the paper's model (``build()``
#: without ``launch``: double buffering); a kernel family's own count is its ``kv_stages``
#: (``specs/kernels``), which the launch model keeps as a symbol.
KV_STAGES = 2
#: Bytes of one block-table entry (an int32 page id).
TABLE_ENTRY_BYTES = 4

#: Shared memory of one thread block: its Q tile and ``kv_stages`` K and V tiles.
SRAM_BYTES = (block_q + kv_stages * 2 * block_k) * d * s
#: Float32 accumulators of one thread block: the score tile S (B_r x B_c), the output O
#: (B_r x d) and the running max and sum (2 B_r), held in registers.
ACCUMULATORS = block_q * block_k + block_q * d + 2 * block_q

#: Query positions one tile covers when ``pack`` heads share its rows.
positions_per_block = block_q / pack
#: Q blocks per (batch, head group): T_r of the packed row space.
q_blocks = sp.ceiling(n * pack / block_q)
#: Head groups walked by the grid's head axis.
head_groups = h / pack


def _visited(causal: bool, any_tile: bool, masked: bool = False) -> tuple[sp.Expr, ...]:
    """Per (b, head group): scores computed, K/V rows streamed, and (Q block, K block) tiles."""
    if masked:  # counted by perfmodel.costs.masks.visited, exactly, for any mask
        return mask_scores, mask_kv_rows, mask_tiles
    if not causal:
        return n * pack * m, q_blocks * m, q_blocks * t.k_blocks
    tiles = t.causal_tiles(any_tile).subs(block_q, positions_per_block)
    # Full tiles, except that the last K block is partial. Q block i reaches it when its
    # last row, (i+1)·B_r - 1, is at or past the block's first, (T_c - 1)·B_c: the last
    # T_r - floor((T_c - 1)·B_c / B_r) Q blocks (just the last one when B_r >= B_c); with
    # ``pack`` heads per tile a block covers B_r/pack query positions.
    reach_last = q_blocks - sp.floor((t.k_blocks - 1) * block_k / positions_per_block)
    kv_rows = tiles * block_k - reach_last * (t.k_blocks * block_k - m)
    return tiles * block_q * block_k, kv_rows, tiles


#: Programs (thread blocks) of one K/V head: the Q blocks of its query-head groups.
programs_per_kv_head = q_blocks * h / (h_kv * pack)


def kv_dram_passes() -> sp.Expr:
    """How often each K/V head crosses DRAM: once while the heads in flight fit in L2;
    past that once per wave of the programs that read it (the query heads of a GQA group
    read it side by side in one wave when the grid holds them together)."""
    return t.streamed_dram_passes(programs_per_kv_head, t.kv_head_bytes)


def masked_kv_dram_bytes() -> sp.Expr:
    """K/V DRAM bytes under a mask: the rows any visited tile reads, once while the heads
    in flight fit in L2; past that each row once per wave of programs that read it
    (``masks.Visited.kv_wave_rows``; a dense mask gives ``kv_bytes·kv_dram_passes()``)."""
    fits = t.streamed_fits(programs_per_kv_head, t.kv_head_bytes)
    rows = sp.Piecewise((mask_kv_touched, fits), (mask_kv_wave_rows, True))
    return b * h_kv * 2 * rows * d * s


def build(
    causal: bool = False,
    l2: bool = True,
    split: bool = False,
    paged: bool = False,
    launch: bool = False,
    masked: bool = False,
    fp8: bool = False,
) -> CostModel:
    """The flash model; ``l2=False`` charges every K/V re-read to DRAM (TPUs, no L2);
    ``split`` adds flash-decoding's partials and combine kernel; ``paged`` the block
    table. ``launch=True`` keeps a kernel family's launch symbols (``pack``, ``splits``,
    tiles of any size); without it the model is one program per query head, no split,
    power-of-two tiles: FlashAttention-2 as its paper describes it (Dao 2023, Alg. 1)."""
    model = _build(causal, l2, split, paged, launch, masked, fp8)
    if launch:
        return model
    fixed = (
        {pack: 1, splits: 1, kv_stages: KV_STAGES} if not split else {pack: 1, kv_stages: KV_STAGES}
    )
    return model.subs(fixed)


def _build(
    causal: bool,
    l2: bool,
    split: bool,
    paged: bool,
    any_tile: bool,
    masked: bool = False,
    fp8: bool = False,
) -> CostModel:
    scores_per_group, kv_rows_per_group, tiles_per_group = _visited(causal, any_tile, masked)
    groups = b * head_groups
    scores = groups * scores_per_group
    rows_rescaled = groups * tiles_per_group * block_q  # once per row per tile
    streamed_kv = groups * 2 * kv_rows_per_group * d * s  # K and V, into SRAM
    table = b * head_groups * q_blocks * splits * sp.ceiling(m / page) * TABLE_ENTRY_BYTES
    table = table / splits if paged else sp.Integer(0)  # each chunk reads its own pages
    partials = b * h * n * splits * (d + 2) * F32 if split else sp.Integer(0)
    o_bytes = t.o_bytes.subs(s, s_out) if fp8 else t.o_bytes  # O in the family's format
    written = partials if split else o_bytes + t.lse_bytes
    extra_ops = fp8_score_ops * scores + fp8_output_ops * b * h * n * d if fp8 else 0
    l2_traffic = t.q_bytes + written + streamed_kv + table
    kv_dram = masked_kv_dram_bytes() if masked else t.kv_bytes * kv_dram_passes()
    dram = t.q_bytes + written + kv_dram + table if l2 else l2_traffic
    kernel = Kernel(
        name="flash",
        matmul_flops=t.matmul_flops(scores),
        # online softmax per score, plus rescaling acc (d per row) at every tile
        vector_flops=t.SOFTMAX_FLOPS_PER_SCORE * scores + rows_rescaled * d + extra_ops,
        exp_count=scores + rows_rescaled,
        hbm_bytes=dram,
        l2_bytes=l2_traffic,
        # the grid: one thread block per (Q block, batch, head group, K/V chunk)
        work_items=groups * q_blocks * splits,
        tiles=groups * tiles_per_group,
    )
    kernels: tuple[Kernel, ...] = (kernel,)
    if split:
        rows = b * h * n
        kernels += (
            Kernel(
                name="combine",
                matmul_flops=0 * rows,
                # rescale and sum the partials, divide by l: about 3 FLOPs per value
                vector_flops=3 * rows * splits * (d + 2),
                exp_count=rows * splits,
                hbm_bytes=partials + o_bytes + t.lse_bytes,
            ),
        )
    return CostModel(
        name="flash" + ("-split" if split else ""),
        kernels=kernels,
        extra_memory_bytes=t.lse_bytes + partials,
        hbm_bytes_no_cache=sp.Add(*(k.l2_bytes for k in kernels)),
        sram_bytes=SRAM_BYTES,
        register_bytes=ACCUMULATORS * F32,
        notes={"l2": "K/V re-reads served by L2 while the heads in flight fit" if l2 else "none"},
    )
