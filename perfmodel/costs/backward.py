"""The backward pass of attention: naive (materialised) and flash (FlashAttention-2).

With dO the gradient of O, the backward of ``O = softmax(scale·QKᵀ)·V`` is

    dV = Pᵀ dO          dP = dO Vᵀ          D = rowsum(dO ∘ O)
    dS = P ∘ (dP − D)   dQ = scale·dS K     dK = scale·dSᵀ Q

(FlashAttention-2, Dao 2023, §3.2 and Algorithm 2; D is Algorithm 2's line 4).

Naive attention reads P back from HBM (the forward stored it) and passes dP and dS
through HBM too: six kernels, four n×m×d products (2× the forward's FLOPs) and seven
trips of an n×m matrix, against the forward's four.

Flash recomputes S and P tile by tile from Q, K and the forward's log-sum-exp, so no
n×m matrix touches HBM. The grid walks K/V blocks (the outer loop of Algorithm 2):
K_j, V_j and the dK_j, dV_j accumulators stay on chip while Q, dO, LSE and D stream
past. dQ needs a sum over K blocks, which that loop order cannot keep on chip; the
family decides how it is done (``DQ_FAMILIES``):

* ``"two_pass"``: a second kernel walks Q blocks, recomputes S, P and dP, and keeps
  dQ on chip (the Triton tutorial's structure; ours, pallas_kernels/flash_backward.py).
  4 + 3 = 7 products: 3.5× the forward's matmul FLOPs.
* ``"atomic"``: FlashAttention-2's kernel adds each tile's dQ into a float32 buffer
  with atomics (in L2), then a small kernel converts it. 5 products: 2.5×.

Causal attention visits the same tiles as the forward (``terms.causal_tiles``), in
the other loop order; so does any mask (``masked``: a window, documents, a block mask,
``perfmodel.costs.masks``): the symbols ``mask_*`` count the visited tiles in both loop
orders (``masks.backward_visited``), and DRAM sees each streamed row once while the
heads in flight fit in L2, else once per wave of the programs that read it.
GQA: the two-pass family's dK/dV kernel of a kv head loops over the query heads of its
group and sums their dK, dV on chip, so its grid has b·h_kv·T_c blocks (ours); the
atomic family's runs one program per query head (b·h·T_c) and sums the group's partials
after (FlashAttention-2 and -3: that summing traffic is left out; cuDNN's is counted,
``group_reduce`` below).

The atomic family clears its float32 dQ buffer before the main kernel (cuDNN's and
FlashAttention-3's preprocess kernel, beside D: b·h·n·d·4 bytes written). Where a family
writes a GQA group's dK, dV per query head and sums them after in kernels of their own
(``group_reduce``, cuDNN), those copies and the two summing kernels are counted.

Left out: the padding rows of a last partial block (loads are masked); dropout.
"""

from __future__ import annotations

import dataclasses

import sympy as sp

from perfmodel.costs import terms as t
from perfmodel.costs.base import CostModel, Kernel
from perfmodel.symbols import (
    F32,
    b,
    block_k,
    block_q,
    d,
    dq_block_k,
    dq_block_q,
    dq_tile_gcd,
    group_reduce,
    group_split,
    h,
    h_kv,
    m,
    mask_kv_rows,
    mask_kv_touched,
    mask_kv_wave_rows,
    mask_q_rows,
    mask_q_touched,
    mask_q_wave_rows,
    mask_scores,
    mask_tiles,
    n,
    s,
    tile_gcd,
)
from perfmodel.vocabulary import DQ_FAMILIES as DQ_FAMILIES  # how dQ is summed (docstring)

#: Pipeline stages of the streamed Q/dO tiles in shared memory.
Q_STAGES = 2
#: Vector FLOPs per score to recompute P = exp(scale·S − LSE): the scale and the subtract.
RECOMPUTE_P_FLOPS_PER_SCORE = 2
#: Vector FLOPs per score of dS = scale·P∘(dP − D): subtract, multiply, scale.
DS_FLOPS_PER_SCORE = 3
#: Vector FLOPs per element of dO∘O summed over a row (multiply, add).
DELTA_FLOPS_PER_ELEMENT = 2


def _delta_kernel(zeroed: sp.Expr | int = 0) -> Kernel:
    """D = rowsum(dO∘O): reads dO and O, writes one float32 per query row; ``zeroed``:
    the bytes of a buffer the same kernel clears for the main kernel's atomics."""
    zero = 0 * t.all_scores
    return Kernel(
        name="bwd_delta",
        matmul_flops=zero,
        vector_flops=DELTA_FLOPS_PER_ELEMENT * b * h * n * d,
        exp_count=zero,
        hbm_bytes=2 * t.o_bytes + t.delta_bytes + zeroed,
    )


def _gemm(name: str, scores: sp.Expr, hbm_bytes: sp.Expr) -> Kernel:
    zero = 0 * scores
    return Kernel(name, t.gemm_flops(scores, 1), zero, zero, hbm_bytes)


def build_naive(causal: bool = False) -> CostModel:
    """The naive backward. ``causal`` changes nothing: the full matrices are computed."""
    del causal  # the naive forward masks a full S; its backward is full-size too
    p = dp = ds = t.score_matrix_bytes
    scores = t.all_scores
    kernels = (
        _gemm("bwd_dv", scores, p + t.o_bytes + t.v_bytes),  # read P, dO; write dV
        _gemm("bwd_dp", scores, t.o_bytes + t.v_bytes + dp),  # read dO, V; write dP
        _delta_kernel(),
        Kernel(
            name="bwd_ds",  # read P, dP, D; write dS
            matmul_flops=0 * scores,
            vector_flops=DS_FLOPS_PER_SCORE * scores,
            exp_count=0 * scores,
            hbm_bytes=p + dp + t.delta_bytes + ds,
        ),
        _gemm("bwd_dq", scores, ds + t.k_bytes + t.q_bytes),  # read dS, K; write dQ
        _gemm("bwd_dk", scores, ds + t.q_bytes + t.k_bytes),  # read dS, Q; write dK
    )
    hbm = sp.Add(*(k.hbm_bytes for k in kernels))
    return CostModel(
        name="naive_backward",
        kernels=kernels,
        # P kept from the forward, one n×m gradient buffer (dS overwrites dP), and D.
        extra_memory_bytes=2 * t.score_matrix_bytes + t.delta_bytes,
        hbm_bytes_no_cache=hbm,
    )


def _visited(causal: bool, masked: bool = False) -> tuple[sp.Expr, sp.Expr, sp.Expr, sp.Expr]:
    """Per (b, q head): scores computed, Q rows streamed (dK/dV kernel), K/V rows
    streamed (dQ kernel), and (Q block, K block) tiles."""
    if masked:  # counted by perfmodel.costs.masks.backward_visited, exactly
        return mask_scores, mask_q_rows, mask_kv_rows, mask_tiles
    if not causal:
        return n * m, t.k_blocks * n, t.q_blocks * m, t.q_blocks * t.k_blocks
    tiles = t.causal_tiles()  # the forward's tiles, visited in the other loop order
    # Every tile is full except the padding of the last block in the streamed direction:
    # every K block reaches the last Q block; the last K block is reached by the Q
    # blocks from floor((T_c - 1)·B_c / B_r) on.
    q_rows = tiles * block_q - t.k_blocks * (t.q_blocks * block_q - n)
    reach_last_k = t.q_blocks - sp.floor((t.k_blocks - 1) * block_k / block_q)
    kv_rows = tiles * block_k - reach_last_k * (t.k_blocks * block_k - m)
    return tiles * block_q * block_k, q_rows, kv_rows, tiles


def _dkdv_kernel(
    causal: bool,
    l2: bool,
    gemms: int,
    name: str,
    reductions: sp.Expr,
    heads: sp.Expr = h_kv,
    masked: bool = False,
) -> Kernel:
    """The K/V-block loop of Algorithm 2 (grid b·heads·T_c, inner loop over Q blocks):
    ``heads`` h_kv where one program sums its group's dK, dV on chip (ours), h where each
    query head has its programs and the group's partials are summed after (FA-2, FA-3).
    ``reductions``: bytes it adds into a buffer in L2 (the atomic family's dQ), on the
    L2-reduce roof; with no L2 modelled, DRAM traffic."""
    _, q_rows, _, _ = _visited(causal, masked)
    row_bytes = 2 * d * s + 2 * F32  # Q and dO rows, their LSE and D
    streamed = b * h * q_rows * row_bytes
    compulsory = 2 * t.kv_bytes  # read K, V; write dK, dV
    l2_traffic = compulsory + streamed
    head_bytes = n * row_bytes  # one query head's Q, dO, LSE, D
    if masked:  # the rows any visited tile reads; past L2, once per wave reading them
        fits = t.streamed_fits(t.k_blocks, head_bytes)
        rows_read = sp.Piecewise((mask_q_touched, fits), (mask_q_wave_rows, True))
        streamed_dram = b * h * rows_read * row_bytes
    else:
        streamed_dram = b * h * head_bytes * t.streamed_dram_passes(t.k_blocks, head_bytes)
    dram = compulsory + streamed_dram if l2 else l2_traffic + reductions
    # One program per K/V head and block, the group's dK, dV summed on chip; a kernel can
    # as well run one per query head and sum the group's partials after (FlashAttention-2
    # and -3 expand dK, dV per query head for GQA): the floor's parallelism.
    kernel = _recompute_pass(
        name, causal, gemms, dram, l2_traffic, b * heads * t.k_blocks, b * h * t.k_blocks, masked
    )
    return dataclasses.replace(kernel, l2_reduce_bytes=reductions if l2 else 0 * reductions)


def _dq_kernel(causal: bool, l2: bool, masked: bool = False) -> Kernel:
    """The separate dQ pass: the forward's loop order (grid b·h·T_r, inner over K/V)."""
    _, _, kv_rows, _ = _visited(causal, masked)
    streamed_kv = b * h * 2 * kv_rows * d * s
    # read Q, dO (the size of O), LSE and D once; write dQ (the size of Q) once
    compulsory = t.q_bytes + t.o_bytes + t.lse_bytes + t.delta_bytes + t.q_bytes
    l2_traffic = compulsory + streamed_kv
    if masked:  # once while the heads in flight fit; past L2 per wave, per query head
        fits = t.streamed_fits(t.q_blocks, t.kv_head_bytes)
        kv_dram = sp.Piecewise(
            (b * h_kv * 2 * mask_kv_touched * d * s, fits),
            (b * h * 2 * mask_kv_wave_rows * d * s, True),
        )
    else:
        kv_dram = t.kv_bytes * t.streamed_dram_passes(t.q_blocks, t.kv_head_bytes, h / h_kv)
    dram = compulsory + kv_dram if l2 else l2_traffic
    # 3 products: S = QKᵀ, dP = dO Vᵀ, dQ = dS K
    grid = b * h * t.q_blocks
    kernel = _recompute_pass("bwd_dq", causal, 3, dram, l2_traffic, grid, None, masked)
    if masked:  # a mask's symbols count its tiles at the dK/dV kernel's tile
        return kernel
    return _at_dq_tile(kernel)


def _at_dq_tile(kernel: Kernel) -> Kernel:
    """The dQ kernel at its own tile: Q blocks of ``dq_block_q`` rows walking K/V tiles
    of ``dq_block_k`` keys (its grid, the K/V rows it streams, the causal tiles it
    visits), where the family's dQ kernel is not the dK/dV kernel's tile."""
    at = {block_q: dq_block_q, block_k: dq_block_k, tile_gcd: dq_tile_gcd}
    exprs = {f.name: getattr(kernel, f.name) for f in dataclasses.fields(kernel)}
    return dataclasses.replace(
        kernel, **{k: v.xreplace(at) for k, v in exprs.items() if isinstance(v, sp.Basic)}
    )


def _recompute_pass(
    name: str,
    causal: bool,
    gemms: int,
    hbm_bytes: sp.Expr,
    l2_bytes: sp.Expr,
    work_items: sp.Expr,
    floor_work_items: sp.Expr | None = None,
    masked: bool = False,
) -> Kernel:
    """A flash backward kernel over the forward's tiles: for every score it recomputes
    P = exp(scale·S − LSE) (one exp) and dS = P∘(dP − D), and runs ``gemms`` products."""
    scores_per_head, _, _, tiles_per_head = _visited(causal, masked)
    scores = b * h * scores_per_head
    return Kernel(
        name=name,
        matmul_flops=t.gemm_flops(scores, gemms),
        vector_flops=(RECOMPUTE_P_FLOPS_PER_SCORE + DS_FLOPS_PER_SCORE) * scores,
        exp_count=scores,
        hbm_bytes=hbm_bytes,
        l2_bytes=l2_bytes,
        work_items=work_items,
        tiles=b * h * tiles_per_head,
        floor_work_items=floor_work_items,
    )


def _dq_convert_kernel() -> Kernel:
    """The atomic family's last step: the float32 dQ buffer to the input dtype."""
    zero = 0 * t.all_scores
    dq_f32 = b * h * n * d * F32
    return Kernel("bwd_dq_convert", zero, zero, zero, dq_f32 + t.q_bytes)


def _group_reduce_kernels() -> Kernel:
    """Where ``group_reduce`` is 1: dK and dV written per query head (``h/h_kv`` copies
    of each K/V head's) are summed over the GQA group by one kernel each, reading the
    copies and writing dK, dV (cuDNN's two ``fmha_reduce_head`` kernels); none at 0."""
    zero = 0 * t.all_scores
    moved = group_reduce * (h / h_kv + 1) * t.kv_bytes
    return Kernel("bwd_group_reduce", zero, zero, zero, moved, launches=2 * group_reduce)


def build_flash(
    causal: bool = False, l2: bool = True, dq: str = "two_pass", masked: bool = False
) -> CostModel:
    """The flash backward of FlashAttention-2 Algorithm 2, dQ summed as ``dq`` says;
    ``masked``: over the tiles a mask keeps (the symbols ``mask_*``)."""
    if dq not in DQ_FAMILIES:
        raise ValueError(f"dq={dq!r} unknown; known: {DQ_FAMILIES}")
    if dq == "two_pass":
        # a GQA group's heads over group_split programs of b·h_kv·T_c each, their
        # float32 dK, dV partials written and read once more where it is above 1
        partials = sp.Piecewise(
            (0, group_split <= 1), (t.kv_bytes * 2 * F32 * group_split / s, True)
        )
        dkdv = _dkdv_kernel(
            causal, l2, 4, "bwd_dkdv", 0 * t.q_bytes, heads=h_kv * group_split, masked=masked
        )
        dkdv = dataclasses.replace(
            dkdv, hbm_bytes=dkdv.hbm_bytes + partials, l2_bytes=dkdv.l2_bytes + partials
        )
        kernels: tuple[Kernel, ...] = (_delta_kernel(), dkdv, _dq_kernel(causal, l2, masked))
        dq_buffer = 0 * t.q_bytes
    else:
        _, q_rows, _, _ = _visited(causal, masked)
        # each tile's dQ sent to L2 once: a reduction without return (FA-2's red.global.add,
        # FA-3's TMA bulk reduce-add) moves its operand one way; the add is done in L2
        atomics = b * h * q_rows * d * F32
        dq_buffer = b * h * n * d * F32
        # FA-2 and FA-3 run one program per query head and K/V block (GQA's dK, dV are
        # summed after: FA-3 in float32 accumulators, FA-2 by the caller)
        main = _dkdv_kernel(causal, l2, 5, "bwd_dkdvdq", atomics, heads=h, masked=masked)
        # the float32 dQ buffer also crosses DRAM once, written back from L2; where the
        # group is reduced after, dK and dV leave per query head (h/h_kv - 1 more copies)
        copies = group_reduce * (h / h_kv - 1) * t.kv_bytes
        main = dataclasses.replace(
            main, hbm_bytes=main.hbm_bytes + dq_buffer + copies, l2_bytes=main.l2_bytes + copies
        )
        # the buffer is cleared before the main kernel's atomics (cuDNN's and FA-3's
        # preprocess kernel does it beside D: one write of the buffer)
        kernels = (_delta_kernel(dq_buffer), main, _dq_convert_kernel(), _group_reduce_kernels())
    return CostModel(
        name=f"flash_backward_{dq}" + "_masked" * masked,
        kernels=kernels,
        # LSE kept from the forward, D, and the atomic family's float32 dQ buffer.
        extra_memory_bytes=t.lse_bytes + t.delta_bytes + dq_buffer,
        hbm_bytes_no_cache=sp.Add(
            *(k.l2_bytes for k in kernels), *(k.l2_reduce_bytes for k in kernels)
        ),
        sram_bytes=backward_sram_bytes(),
        register_bytes=backward_register_bytes(),
        notes={"dq": dq, "l2": "Q/dO and K/V re-reads served by L2" if l2 else "none"},
    )


def backward_sram_bytes() -> sp.Expr:
    """Shared memory of one dK/dV thread block: K_j and V_j, and ``Q_STAGES`` stages
    of the streamed Q_i and dO_i tiles. The capacity that limits backward tiles."""
    return (2 * block_k + Q_STAGES * 2 * block_q) * d * s


def backward_register_bytes() -> sp.Expr:
    """Registers of one dK/dV thread block: the float32 dK_j, dV_j accumulators and two
    B_r×B_c float32 tiles (S/P and dP/dS) live at once."""
    return (2 * block_k * d + 2 * block_q * block_k) * F32


def build(
    algorithm: str,
    causal: bool = False,
    l2: bool = True,
    dq: str = "two_pass",
    masked: bool = False,
) -> CostModel:
    """The backward model of ``algorithm`` ("naive" or "flash"; ``masked``: flash over a
    mask's tiles, ``perfmodel.costs.masks``; naive computes every score under any mask)."""
    if algorithm == "naive":
        return build_naive(causal)
    if algorithm == "flash":
        return build_flash(causal, l2, dq, masked)
    raise ValueError(f"algorithm={algorithm!r} unknown; known: ('naive', 'flash')")


def training_step(forward: CostModel, backward: CostModel) -> CostModel:
    """One training step of the attention call: the forward's kernels, then the backward's.

    Memory is the larger of the two passes' (the backward's working set already holds
    what the forward kept for it: P for naive, the log-sum-exp for flash).
    """
    return CostModel(
        name=f"{forward.name}+{backward.name}",
        kernels=forward.kernels + backward.kernels,
        extra_memory_bytes=sp.Max(forward.extra_memory_bytes, backward.extra_memory_bytes),
        hbm_bytes_no_cache=forward.hbm_bytes_no_cache + backward.hbm_bytes_no_cache,
        sram_bytes=sp.Max(forward.sram_bytes, backward.sram_bytes),
        register_bytes=sp.Max(forward.register_bytes, backward.register_bytes),
        notes={**forward.notes, **backward.notes},
    )
