"""Backward flash attention for Hopper in Pallas Mosaic GPU (FlashAttention-3 §3.3 style).

``pallas_kernels.flash_attention`` runs it under ``jax.grad`` on a Hopper GPU when
``supported`` accepts the call (``flash_backward``, the Triton kernels, everywhere else).
From the forward's O and log-sum-exp it computes dQ, dK, dV in three steps:

1. **Preprocessing** (XLA, memory-bound): D = rowsum(dO ∘ O) − dLSE per query row,
   the cotangent of the log-sum-exp folded in (dS = P ∘ (dP − D) then carries it), and
   the log-sum-exp in log2 units, +inf on rows that see no key (their P is then 0).
2. **dK, dV** (``_dkdv``, FA-3 Algorithm 3's loop order): a CTA owns 128 keys of one
   (batch, K/V head), 64 per consumer warpgroup (the M of one wgmma). Its K and V rows
   and the float32 accumulators dK, dV stay on chip while a producer warpgroup streams,
   by TMA into a ring of ``num_stages`` stages, the tiles of ``block_q`` query rows of
   Q, dO, LSE and D of *every query head of the GQA group* in turn, so the group's sum
   happens in the accumulators (no reduction pass). Per tile each consumer computes, in
   the transposed orientation so that every register operand is a wgmma A operand:
   Sᵀ = K Qᵀ, Pᵀ = exp2(scale·Sᵀ − LSE), dV += Pᵀ dO, dPᵀ = V dOᵀ, dSᵀ = Pᵀ ∘ (dPᵀ − D),
   dK += dSᵀ Q.
3. **dQ** (``_dq``, the forward's loop order): a CTA owns 128 query rows of one head,
   64 per consumer; Q, dO, LSE, D and the dQ accumulator stay on chip while the producer
   streams K and V tiles of ``dq_block_k`` keys: S = Q Kᵀ, dP = dO Vᵀ, dS = P ∘ (dP − D),
   dQ += dS K. This is the "separate dQ pass" of the cost model's two families
   (``perfmodel/costs/backward.py``): 7 n×m×d products in all, against FA-3's 5 with
   dQ summed by atomic adds, in exchange for no float32 dQ traffic.

   ``Config(dq="atomic")`` instead sums dQ in step 2 (FA-3 §3.3): each consumer stores
   its dSᵀ in shared memory (under the dK wgmma), the two meet on a barrier, and one
   wgmma of M = 64 over the CTA's 128 keys gives each its part of the tile's dQ
   (``dq_split``), which it reduce-adds in float32 into a zeroed HBM buffer by TMA while
   the next tile's Sᵀ is computed; 5 products, no dQ kernel. It measured slower than the
   separate pass on the H200 (0.71× cuDNN's backward against 0.79× at d = 128, n =
   4096: docs/perf-notes.md), so it is not the default.

**Pipelined consumers** (``Config.pipeline``; not the default, ``PIPELINE``):
a consumer of the dK/dV kernel issues, per tile, Sᵀ and then the *previous* tile's
dK += dSᵀ Q (its dSᵀ carried in registers), waits for Sᵀ alone and computes Pᵀ while
that dK product runs, issues dPᵀ and dV += Pᵀ dO, waits for dPᵀ (and the dK product:
the previous tile's stage is then released) and computes dSᵀ while dV runs. A consumer
of the dQ kernel issues S, dP and the previous tile's dQ += dS K, computes P under dP
and that product, and dS under the product. Nothing stays in flight past a step's end;
the last tile's product follows the loop. A stage is released one step later than
without the pipeline, so the pipelined launch keeps three stages. It measured 3-9 %
slower than the unpipelined kernels on the H200 (d = 64 and 128, n = 4096, causal and
not): ptxas reports the dK/dV kernel's wgmmas "serialized due to insufficient register
resources" and injects a ``warpgroup.arrive`` into the dQ kernel's (docs/perf-notes.md).

Both kernels split each CTA into roles as the forward (``flash_mosaic``) does: two
consumer warpgroups that only compute (``setmaxreg`` up) and one producer warpgroup that
only issues TMA copies (``setmaxreg`` down); ``ready[stage]`` barriers complete on the
copy's transaction count, ``free[consumer, stage]`` barriers are arrived on by each
consumer when its last wgmma reading the stage has finished.

**Masks.** ``Mask``: row i sees key j iff ``i - left <= j <= i + right`` (None: an
unbounded side); causal is ``right = 0``, a sliding window sets ``left`` (and ``right``
when not causal). Each CTA visits only the tiles inside the band
(``_common.tile_range``); only tiles that cross its edges, or hold padded keys (dQ), pay
for the mask. Any n and kv_len: the sequences are zero-padded to the CTA's 128 rows (a
copy, only when needed); padded query rows have LSE = +inf (P = 0), padded keys are
masked in the dQ pass and their dK, dV rows sliced off.

Head dims: multiples of 16 up to ``PAIRED_MAX_HEAD_DIM`` = 128 run as they are (others are
zero-padded to the next multiple of 16), with the forward's shared-memory swizzle per
row width. Above 128 the two float32 accumulators dK, dV of 64 × d no longer fit one
warpgroup's registers beside Sᵀ and dPᵀ. There, up to ``SPLIT_MAX_HEAD_DIM`` = 256
(padded the same way), **the split kernels** (``Config.split``, ``_dkdv_split``) run:
the dK/dV kernel's CTA owns 64 keys, one consumer holds dV and computes Sᵀ, Pᵀ and
dV += Pᵀ dO, the other holds dK and computes dPᵀ, dSᵀ from the first one's Pᵀ (16-bit,
two shared-memory buffers) and dK += dSᵀ Q; the dQ kernel streams K, V tiles of 32
keys (``SPLIT_CONFIG``), its shared-memory swizzle capped at 64 bytes (dQ += dS K
contracts over the 32 keys, and a wgmma's K is a multiple of the swizzle's elements).
They are the default launch above 128 only when ``SPLIT_DEFAULT`` says so (otherwise
``supported`` refuses those head dims unless ``Config(split=True)`` is passed, and the
Triton backward runs them). float16 and bfloat16.

This module holds its launch (``Config``, frozen and validated), its default launch per
shape (``heuristic_config``) and the check of what it runs (``supported``) beside the
kernels. Mosaic GPU is imported lazily, as in ``flash_mosaic``.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
from jax import lax

from kernel_rules import group_split
from pallas_kernels import flash_mosaic
from pallas_kernels._common import (
    DTYPES_16BIT,
    LOG2_E,
    check_qkv,
    is_hopper,
    sm_count,
    tile_range,
    visible_bounds,
)

#: Head dims up to this run with dK and dV (64 × d float32 each) in one warpgroup's
#: registers: each consumer owns its keys (``_dkdv``).
PAIRED_MAX_HEAD_DIM = 128
#: Head dims up to this run with ``Config.split`` (dK in one consumer, dV in the other).
SPLIT_MAX_HEAD_DIM = 256
#: Whether the default launch runs head dims in (PAIRED_MAX_HEAD_DIM,
#: SPLIT_MAX_HEAD_DIM] with the split kernels (``heuristic_config``); False:
#: ``supported`` refuses them unless a ``Config(split=True)`` is passed, and the Triton
#: backward runs them.
SPLIT_DEFAULT = True
#: Head dims the default launch runs (``flash_attention.choose_backward`` picks this
#: backward up to it on Hopper).
MAX_HEAD_DIM = SPLIT_MAX_HEAD_DIM if SPLIT_DEFAULT else PAIRED_MAX_HEAD_DIM
SUPPORTED_DTYPES = DTYPES_16BIT
#: How dQ is summed (``Config.dq``; the cost model's ``perfmodel.costs.backward`` rules).
DQ_RULES = ("atomic", "two_pass")
#: Rows of K/V (dK/dV kernel) or of Q (dQ kernel) per consumer: the M of one wgmma.
ROWS = flash_mosaic.ROWS_PER_CONSUMER
CONSUMERS = 2
#: Rows one CTA owns: the sequences are padded to a multiple of this.
CTA_ROWS = CONSUMERS * ROWS
SMEM_LIMIT_BYTES = flash_mosaic.SMEM_LIMIT_BYTES
CONSUMER_REGISTERS = flash_mosaic.CONSUMER_REGISTERS
PRODUCER_REGISTERS = flash_mosaic.PRODUCER_REGISTERS


@dataclasses.dataclass(frozen=True, slots=True)
class Config:
    """Tiles and pipeline depths of the two kernels, validated when made.

    ``block_q``: query rows per stage of the dK/dV kernel (the N of Sᵀ = K Qᵀ);
    ``num_stages``: its ring of Q, dO, LSE, D tiles. ``dq_block_k``: keys per stage of
    the dQ kernel (the N of S = Q Kᵀ); ``dq_num_stages``: its ring of K, V tiles.
    """

    block_q: int = 64
    num_stages: int = 2
    dq_block_k: int = 64
    dq_num_stages: int = 2
    #: ``"atomic"``: dQ summed in the dK/dV kernel (``dq_block_k`` and ``dq_num_stages``
    #: then unused); ``"two_pass"``: the separate dQ kernel.
    dq: str = "two_pass"
    #: The two-pass kernels' consumers keep one product in flight under their vector
    #: work: each step issues the last step's dK (dQ) product behind its own Sᵀ (S, dP)
    #: wgmma (``_dkdv``, ``_dq``). False: every wgmma is waited for before the next.
    pipeline: bool = False
    #: The dK/dV kernel's CTA owns 64 keys and its consumers split the accumulators
    #: (``_dkdv_split``: one holds dV, the other dK, Pᵀ passed between them through
    #: shared memory): what lets d > 128 run. Needs block_q = 64 and the separate dQ pass.
    split: bool = False
    #: How many CTAs of the paired dK/dV kernel share one GQA group's query heads, each
    #: summing its share of the heads in float32 partials that XLA adds after (1: one CTA
    #: sums the whole group on chip). None: ``group_split_for`` picks it per call, so
    #: that a grid smaller than the GPU (MQA, few keys, small batch) fills its waves.
    #: Only the plain two-pass paired kernel splits (``splits_group``); the others run 1.
    group_split: int | None = None

    def __post_init__(self) -> None:
        if self.dq not in DQ_RULES:
            raise ValueError(f"dq={self.dq!r} must be one of {DQ_RULES}")
        if self.pipeline and self.dq != "two_pass":
            raise ValueError(f"pipeline=True needs dq='two_pass' (got dq={self.dq!r})")
        if self.block_q not in (64, 128):
            raise ValueError(f"block_q={self.block_q} must be 64 or 128")
        if self.dq_block_k not in (32, 64, 128):
            raise ValueError(f"dq_block_k={self.dq_block_k} must be 32, 64 or 128")
        if self.split and (self.dq != "two_pass" or self.pipeline or self.block_q != ROWS):
            raise ValueError(
                f"split=True needs dq='two_pass', pipeline=False and block_q={ROWS} (got "
                f"dq={self.dq!r}, pipeline={self.pipeline}, block_q={self.block_q})"
            )
        if self.group_split is not None and self.group_split < 1:
            raise ValueError(f"group_split={self.group_split} must be None or >= 1")
        if self.group_split not in (None, 1) and not self.splits_group:
            raise ValueError(
                f"group_split={self.group_split} needs the plain paired kernel "
                f"(split=False, dq='two_pass', pipeline=False)"
            )
        for name in ("num_stages", "dq_num_stages"):
            if getattr(self, name) < 2:
                raise ValueError(f"{name}={getattr(self, name)} must be >= 2")

    @property
    def splits_group(self) -> bool:
        """Whether the dK/dV kernel may spread a GQA group over CTAs (``group_split``)."""
        plain = not self.split and self.dq == "two_pass" and not self.pipeline
        return plain and self.group_split != 1

    def smem_bytes(self, d: int, itemsize: int) -> tuple[int, int]:
        """Shared memory of (the dK/dV kernel, the dQ kernel; 0 when dQ is summed in the
        first) at head dim ``d``."""
        own = 2 * CTA_ROWS * d * itemsize  # K, V (or Q, dO) of both consumers
        stream = self.num_stages * (2 * self.block_q * d * itemsize + 2 * self.block_q * 4)
        dkdv = own + stream
        if self.split:  # K, V of 64 keys; two Pᵀ buffers (64 × block_q)
            dkdv = 2 * ROWS * d * itemsize + stream + 2 * ROWS * self.block_q * itemsize
        if self.splits_group:  # float32 dK, dV partials, staged one after the other
            dkdv += CONSUMERS * ROWS * d * 4
        if self.dq == "atomic":  # two dSᵀ buffers, each consumer's float32 dQ part
            _, rows, cols = dq_split(self.block_q, d) or (None, 0, 0)
            return dkdv + 2 * CTA_ROWS * self.block_q * itemsize + CONSUMERS * rows * cols * 4, 0
        dq = own + 2 * CTA_ROWS * 4 + self.dq_num_stages * 2 * self.dq_block_k * d * itemsize
        return dkdv, dq


#: Whether the default launch pipelines its consumers (``Config.pipeline``): no, it
#: measured slower (3-9 % at d = 64 and 128, n = 4096; ptxas serialises the dK/dV
#: kernel's wgmmas for want of registers: docs/perf-notes.md).
PIPELINE = False


def heuristic_config(d: int, causal: bool = False) -> Config:
    """The default launch for head dim ``d``: 128-wide tiles at d <= 64 (Sᵀ and dPᵀ,
    64 × 128 float32 each, fit beside the small accumulators), 64 above; the separate dQ
    kernel (``dq="atomic"``, where ``dq_split`` allows it, measured slower:
    docs/perf-notes.md); consumers pipelined as ``PIPELINE`` says, with three stages
    then (a pipelined step frees the last step's stage only after this step's products
    are issued, so two stages would leave the producer no step ahead), two otherwise."""
    del causal  # no mask-dependent choice yet
    if run_head_dim(d) > PAIRED_MAX_HEAD_DIM:
        return SPLIT_CONFIG
    wide = 128 if run_head_dim(d) <= 64 else 64
    stages = 3 if PIPELINE else 2
    return Config(
        block_q=wide,
        num_stages=stages,
        dq_block_k=wide,
        dq_num_stages=stages,
        pipeline=PIPELINE,
    )


#: The launch above d = 128 (``heuristic_config``; docs/perf-notes.md's design note): Qᵀ
#: tiles of 64 rows and two stages in the dK/dV kernel (208 KB of shared memory at
#: d = 256), K, V tiles of 32 keys in the dQ kernel (S, dP 16 registers a thread beside
#: dQ's 128).
SPLIT_CONFIG = Config(block_q=64, num_stages=2, dq_block_k=32, dq_num_stages=2, split=True)


def supported_fold(d: int) -> bool:
    """Whether ``dq="atomic"`` can run at head dim ``d`` with the default tiles (not with
    the split kernels above d = 128)."""
    config = heuristic_config(d)
    return not config.split and dq_split(config.block_q, run_head_dim(d)) is not None


def run_head_dim(d: int) -> int:
    """The head dim the kernels run for ``d``: the next multiple of 16 (the wgmma K step)."""
    return flash_mosaic.run_head_dim(d, flash_mosaic.Config())


def supported(
    q, k, v, *, causal: bool = False, interpret: bool = False, config: Config | None = None
) -> str | None:
    """Why these kernels cannot run the backward of the call (None when they can)."""
    del causal
    if interpret:
        return "Mosaic GPU kernels have no interpret mode (the Triton backward runs it)"
    default = config is None
    config = config or heuristic_config(min(q.shape[-1], SPLIT_MAX_HEAD_DIM))
    try:
        limit = SPLIT_MAX_HEAD_DIM if config.split else PAIRED_MAX_HEAD_DIM
        check_qkv(q, k, v, max_head_dim=limit, dtypes=SUPPORTED_DTYPES)
    except ValueError as err:
        return f"Mosaic backward: {err}"
    d = run_head_dim(q.shape[-1])
    if default and config.split and not SPLIT_DEFAULT:
        return (
            f"head_dim d={q.shape[-1]} > {PAIRED_MAX_HEAD_DIM} runs only when "
            "Config(split=True) is passed (SPLIT_DEFAULT is False)"
        )
    if config.dq == "atomic" and dq_split(config.block_q, d) is None:
        return f"dq='atomic' cannot share a {config.block_q} x {d} dQ tile (dq_split)"
    for name, smem in zip(("dK/dV", "dQ"), config.smem_bytes(d, q.dtype.itemsize), strict=True):
        if smem > SMEM_LIMIT_BYTES:
            return f"the {name} kernel of {config} at d={d} needs {smem} B of shared memory"
    if not is_hopper():
        return "needs a Hopper (sm_90) GPU"
    return flash_mosaic.import_error()


# ---------------------------------------------------------------- masks


@dataclasses.dataclass(frozen=True, slots=True)
class Mask:
    """Row i sees key j iff ``i - left <= j <= i + right``; None is an unbounded side.

    ``Mask.of(causal, window)``: causal sets ``right = 0`` (shifted by the tests'
    ``diagonal_offset``), a window (``_common.window_bounds``'s ``(left, right)``)
    bounds the rest.
    """

    left: int | None = None
    right: int | None = None

    @classmethod
    def of(cls, causal: bool, window=None, diagonal_offset: int = 0) -> Mask:
        left, right = visible_bounds(bool(causal), window, diagonal_offset)
        return cls(left, right)

    def tiles(self, first, rows, *, tile, length):
        """``(start, full_start, full_end, end)`` of the tiles of ``tile`` indices (of
        ``[0, length)``) that ``rows`` indices from ``first`` see (``_common.tile_range``)."""
        return tile_range(
            first, rows=rows, tile=tile, length=length, left=self.left, right=self.right
        )

    def seen_by_keys(self) -> Mask:
        """The same band from the keys' side: key j is seen by rows ``[j - right, j + left]``."""
        return Mask(left=self.right, right=self.left)


def _iota(shape, dim):
    import jax.experimental.pallas.mosaic_gpu as plgpu

    return plgpu.layout_cast(lax.broadcasted_iota(jnp.int32, shape, dim), plgpu.Layout.WGMMA)


def _mask_tile(s, mask: Mask, first_y, first_x, x_len=None, y_len=None):
    """``s`` [y, x] (float32, wgmma layout) with -inf where index x is outside
    ``[y - mask.left, y + mask.right]``, ``x >= x_len`` or ``y >= y_len``."""
    y = first_y + _iota(s.shape, 0)
    x = first_x + _iota(s.shape, 1)
    visible = None

    def both(a, b):
        return b if a is None else a & b

    if mask.left is not None:
        visible = both(visible, x >= y - mask.left)
    if mask.right is not None:
        visible = both(visible, x <= y + mask.right)
    if x_len is not None:
        visible = both(visible, x < x_len)
    if y_len is not None:
        visible = both(visible, y < y_len)
    return s if visible is None else jnp.where(visible, s, -jnp.inf)


def _row_vector(ref, dim):
    """A float32 vector from shared memory that indexes dim ``dim`` of a wgmma tile (its
    layout: the tile's, reduced over the other dim). jax 0.10's ``plgpu.load`` needs the
    index argument that 0.11 deprecates."""
    import jax.experimental.pallas.mosaic_gpu as plgpu

    layout = plgpu.Layout.WGMMA.reduce(1 - dim)
    try:
        return plgpu.load(ref, layout=layout)
    except TypeError:  # jax 0.10: load(src, idx, *, layout)
        return plgpu.load(ref, (), layout=layout)


def _smem_transforms(d: int, dtype, max_swizzle: int = 128):
    """Tiling and swizzle of a shared-memory row of ``d`` elements: the largest swizzle
    the row's bytes divide (``plgpu.find_swizzle``; 128 bytes at d = 64 and 128), at most
    ``max_swizzle`` bytes (a wgmma's K, in a B operand that is not transposed, is a
    multiple of the swizzle's elements, and both operands share one swizzle)."""
    import jax.experimental.pallas.mosaic_gpu as plgpu

    bits = jnp.dtype(dtype).itemsize * 8
    swizzle = min(plgpu.find_swizzle(d * bits), max_swizzle)
    return plgpu.TilingTransform((8, swizzle * 8 // bits)), plgpu.SwizzleTransform(swizzle)


def _bcast(vec, shape, dim):
    return lax.broadcast_in_dim(vec, shape, [dim])


def _three_ranges(loop, lo, full_lo, full_hi, hi, carry):
    """``loop(start, stop, masked, carry)`` over ``[lo, full_lo)`` and ``[full_hi, hi)``
    with the mask, ``[full_lo, full_hi)`` without."""
    carry = loop(lo, full_lo, True, carry)
    carry = loop(full_lo, full_hi, False, carry)
    return loop(full_hi, hi, True, carry)


# ---------------------------------------------------------------- the static plan


@dataclasses.dataclass(frozen=True, slots=True)
class _Plan:
    batch: int
    n: int
    n_pad: int
    heads: int
    kv_heads: int
    d: int
    kv_len: int
    kv_pad: int
    mask: Mask
    scale: float
    config: Config
    #: CTAs per GQA group in the dK/dV kernel (``Config.group_split``, resolved)
    group_split: int = 1

    @property
    def group(self) -> int:
        return self.heads // self.kv_heads

    @property
    def scale_log2(self) -> float:
        return self.scale * LOG2_E


def _wgmma_scores(a_ref, b_ref_t, shape):
    """A Bᵀ (both in shared memory), float32 [shape], waited for."""
    import jax.experimental.pallas as pl
    import jax.experimental.pallas.mosaic_gpu as plgpu

    def body(acc):
        plgpu.wgmma(acc, a_ref, plgpu.transpose_ref(b_ref_t, (1, 0)))
        return acc[...]

    return pl.run_scoped(body, plgpu.ACC(shape, jnp.float32))


def _accumulate(acc, a, b_ref):
    """acc + a B (a in registers, B in shared memory), waited for."""
    import jax.experimental.pallas as pl
    import jax.experimental.pallas.mosaic_gpu as plgpu

    def body(acc_ref):
        plgpu.wgmma(acc_ref, a, b_ref)

    return pl.run_state(body)(plgpu.ACC.init(acc))


def _zeros(shape):
    import jax.experimental.pallas.mosaic_gpu as plgpu

    return plgpu.layout_cast(jnp.zeros(shape, jnp.float32), plgpu.Layout.WGMMA)


def _roles(consumer, producer, smem_types, barrier_types):
    """Allocate shared memory and barriers, then run the consumers and the producer."""
    import jax.experimental.pallas as pl
    import jax.experimental.pallas.mosaic_gpu as plgpu

    def roles(smem, barriers):
        wg = lax.axis_index("wg")

        @pl.when(wg < CONSUMERS)
        def _():
            plgpu.set_max_registers(CONSUMER_REGISTERS, action="increase")
            consumer(smem, barriers, wg)

        @pl.when(wg == CONSUMERS)
        def _():
            plgpu.set_max_registers(PRODUCER_REGISTERS, action="decrease")
            producer(smem, barriers)

    pl.run_scoped(roles, smem_types, barrier_types, collective_axes="wg")


def _launch(plan: _Plan, body, out_types, grid, names, *args):
    """Run ``body`` over ``grid``, 3 warpgroups per CTA. A ``jax.Ref`` among ``args`` is
    read and written in place: ``pl.kernel`` takes it (``plgpu.kernel``'s batching
    wrapper does not), so that launch is used then."""
    import jax.experimental.pallas as pl
    import jax.experimental.pallas.mosaic_gpu as plgpu

    params = plgpu.CompilerParams(approx_math=True)
    roles = dict(grid=grid, grid_names=names, num_threads=CONSUMERS + 1, thread_name="wg")
    if any(isinstance(x, jax.Ref) for x in args):
        mesh = plgpu.Mesh(**roles)
        return pl.kernel(body, out_type=out_types, mesh=mesh, compiler_params=params)(*args)
    return plgpu.kernel(body, out_type=out_types, compiler_params=params, **roles)(*args)


# ---------------------------------------------------------------- dK, dV


def group_split_for(batch: int, kv_blocks: int, kv_heads: int, group: int, sm_count: int) -> int:
    """CTAs per GQA group of the dK/dV kernel: ``kernel_rules.group_split`` of its grid of
    ``batch * kv_heads * kv_blocks`` CTAs (the rule the model costs, written once)."""
    return int(group_split(batch * kv_blocks * kv_heads, group, sm_count))


def dq_split(block_q: int, d: int) -> tuple[str, int, int] | None:
    """How the two consumers of the dK/dV kernel share a ``block_q`` × d tile of dQ when
    it is summed there (``Config.dq = "atomic"``), each a 64-row part that one wgmma of
    M = 64 accumulates over the CTA's 128 keys: ``("rows", 64, d)`` (block_q = 128: each
    its 64 query rows, all of d) or ``("cols", 64, d / 2)`` (block_q = 64: each half of d,
    which must be whole 128-byte swizzle rows of 64 elements, so d = 128); None where
    neither fits."""
    if block_q == CTA_ROWS:
        return "rows", ROWS, d
    if block_q == ROWS and d % (CONSUMERS * 64) == 0:
        return "cols", ROWS, d // CONSUMERS
    return None


def _query_tile_producer(refs, steps, stages, bq, tile_of, batch):
    """The dK/dV kernels' producer ``(smem, barriers)``, both laid out as the kernels'
    (Q, dO, LSE, D stages in ``smem[2:6]``; their ready barriers and ``free`` in
    ``barriers[1:6]``): per step t, once both consumers released the stage
    (``free[consumer, stage]``), the Q, dO rows and LSE, D entries of step t's tile
    (``tile_of(t)``: query head and tile) by TMA into stage ``t % stages``."""
    import jax.experimental.pallas as pl
    import jax.experimental.pallas.mosaic_gpu as plgpu

    q_ref, do_ref, lse_ref, delta_ref = refs

    def producer(smem, barriers):
        q_smem, do_smem, lse_smem, delta_smem = smem[2:6]
        q_ready, do_ready, lse_ready, delta_ready, free = barriers[1:6]

        @pl.loop(0, steps)
        def _(t):
            slot = lax.rem(t, jnp.int32(stages))
            head, tile = tile_of(t)
            for wg in range(CONSUMERS):  # each consumer released the stage
                pl.when(t >= stages)(lambda wg=wg: plgpu.barrier_wait(free.at[wg * stages + slot]))
            rows = pl.ds(tile * bq, bq)
            for src, dst, ready in ((q_ref, q_smem, q_ready), (do_ref, do_smem, do_ready)):
                plgpu.copy_gmem_to_smem(src.at[batch, rows, head], dst.at[slot], ready.at[slot])
            for src, dst, ready in (
                (lse_ref, lse_smem, lse_ready),
                (delta_ref, delta_smem, delta_ready),
            ):
                plgpu.copy_gmem_to_smem(src.at[batch, head, rows], dst.at[slot], ready.at[slot])

    return producer


def _dkdv(plan: _Plan, q, k, v, do, lse2, delta, dq_acc=None):
    """``(dK, dV)`` [batch, kv_pad, kv_heads, d] from padded inputs. With ``dq_acc`` (a
    ``jax.Ref`` of float32 zeros [batch, n_pad, heads, d]; ``Config.dq = "atomic"``) the
    kernel also adds dQ / scale into it, by TMA reduce-adds of each tile's float32 parts."""
    import jax.experimental.pallas as pl
    import jax.experimental.pallas.mosaic_gpu as plgpu

    cfg = plan.config
    bq, stages, d, group = cfg.block_q, cfg.num_stages, plan.d, plan.group
    fold = dq_acc is not None
    split, part_rows, part_cols = dq_split(bq, d) if fold else (None, 0, 0)
    share = plan.group_split  # CTAs per GQA group; each runs heads_here query heads
    heads_here = group // share
    # the keys past kv_len (zero rows) are masked in every tile of the last block: their
    # dS multiplies zero K rows in dQ += dS K, but P there is exp2(-LSE), unbounded
    key_tail = plan.kv_len if fold and plan.kv_len % CTA_ROWS else None
    last_block = plan.kv_pad // CTA_ROWS - 1
    band = plan.mask.seen_by_keys()  # key j is seen by rows [j - right, j + left]
    dtype = q.dtype
    swizzled = _smem_transforms(d, dtype)

    q_tiles = functools.partial(band.tiles, tile=bq, length=plan.n)

    def body(q_ref, k_ref, v_ref, do_ref, lse_ref, delta_ref, *refs):
        dq_ref, dk_ref, dv_ref = refs if fold else (None, *refs)
        block, cta_head, batch = (lax.axis_index(x) for x in ("kv", "head", "batch"))
        kv_head = lax.div(cta_head, jnp.int32(share))
        first_head = kv_head * group + lax.rem(cta_head, jnp.int32(share)) * heads_here
        first_key = block * CTA_ROWS
        lo, _, _, hi = q_tiles(first_key, CTA_ROWS)  # the tiles either consumer needs
        span = hi - lo
        steps = span * heads_here

        def tile_of(t):
            """(query head, query tile) of pipeline step t: heads outer, tiles inner."""
            safe = jnp.maximum(span, 1)
            return first_head + lax.div(t, safe), lo + lax.rem(t, safe)

        def consumer(smem, barriers, wg):
            k_all, v_own, q_smem, do_smem, lse_smem, delta_smem, *extra = smem
            fold_smem = extra if fold else ()
            kv_ready, q_ready, do_ready, lse_ready, delta_ready, free, *fold_barriers = barriers
            my_k, my_v = k_all.at[pl.ds(wg * ROWS, ROWS)], v_own.at[wg]
            my_first = first_key + wg * ROWS
            rows = (batch, pl.ds(my_first, ROWS), kv_head)
            plgpu.copy_gmem_to_smem(k_ref.at[rows], my_k, kv_ready.at[wg])
            plgpu.copy_gmem_to_smem(v_ref.at[rows], my_v, kv_ready.at[CONSUMERS + wg])
            # folded, dQ += dS K reads both consumers' keys
            for i in range(CONSUMERS) if fold else (wg,):
                plgpu.barrier_wait(kv_ready.at[i])
            plgpu.barrier_wait(kv_ready.at[CONSUMERS + wg])
            _, full_lo, full_hi, _ = q_tiles(my_first, ROWS)
            full_lo = jnp.clip(full_lo, lo, hi)
            full_hi = jnp.clip(full_hi, full_lo, hi)
            if key_tail is not None:  # the last block masks every tile
                full_lo = jnp.where(block == last_block, hi, full_lo)
                full_hi = jnp.where(block == last_block, hi, full_hi)

            def dq_part_of(t, buf):
                """(dS operand, K operand, HBM destination) of my part of step t's dQ."""
                ds_smem, _ = fold_smem
                head, tile = tile_of(t)
                if split == "rows":  # dS of my 64 query rows over the 128 keys, all of d
                    ds_ref = ds_smem.at[buf, :, pl.ds(wg * ROWS, ROWS)]
                    dst = dq_ref.at[batch, pl.ds(tile * bq + wg * ROWS, ROWS), head]
                    return ds_ref, k_all, dst
                cols = pl.ds(wg * part_cols, part_cols)  # dS of the tile's 64 rows, my half of d
                dst = dq_ref.at[batch, pl.ds(tile * bq, bq), head, cols]
                return ds_smem.at[buf], k_all.at[:, cols], dst

            def fold_products(t, ds16, dk, q_tile):
                """dK += dSᵀ Q and my part of step t's dQ (left in registers: ``flush``
                sends it while the next step's Sᵀ is computed)."""
                ds_smem, _ = fold_smem
                ds_ready, _ = fold_barriers
                buf = lax.rem(t, jnp.int32(2))
                ds_ref, keys, _ = dq_part_of(t, buf)

                def products(refs):
                    dk_ref_, dq_ref_ = refs
                    plgpu.wgmma(dk_ref_, ds16, q_tile)  # dK += dSᵀ Q, while dSᵀ is stored
                    ds_smem.at[buf, pl.ds(wg * ROWS, ROWS)][...] = ds16  # dSᵀ of my keys
                    plgpu.commit_smem()
                    plgpu.barrier_arrive(ds_ready.at[buf])
                    plgpu.barrier_wait(ds_ready.at[buf])  # both consumers' dSᵀ written
                    plgpu.wgmma(dq_ref_, plgpu.transpose_ref(ds_ref, (1, 0)), keys)

                dk, dq_part = pl.run_state(products)(
                    (plgpu.ACC.init(dk), plgpu.ACC.init(_zeros((part_rows, part_cols))))
                )
                plgpu.barrier_arrive(free.at[wg * stages + lax.rem(t, jnp.int32(stages))])
                return dk, dq_part

            def flush(t, dq_part):
                """Reduce-add my float32 part of step t's dQ into HBM (by TMA)."""
                _, dq_smem = fold_smem
                plgpu.wait_smem_to_gmem(0, wait_read_only=True)  # my last part was read
                dq_smem.at[wg][...] = dq_part
                plgpu.commit_smem()
                _, _, dst = dq_part_of(t, 0)
                plgpu.copy_smem_to_gmem(dq_smem.at[wg], dst, reduction_op="add")

            def step(t, carry, *, masked):
                dk, dv, *last_dq = carry
                slot = lax.rem(t, jnp.int32(stages))
                q_tile = q_smem.at[slot]
                do_tile = do_smem.at[slot]
                plgpu.barrier_wait(q_ready.at[slot])

                def scores(acc):  # Sᵀ = K Qᵀ; folded, the last step's dQ part meanwhile
                    plgpu.wgmma(acc, my_k, plgpu.transpose_ref(q_tile, (1, 0)))
                    if fold:
                        pl.when(t > 0)(lambda: flush(t - 1, last_dq[0]))
                    return acc[...]

                s_t = pl.run_scoped(scores, plgpu.ACC((ROWS, bq), jnp.float32))
                plgpu.barrier_wait(lse_ready.at[slot])
                lse = _row_vector(lse_smem.at[slot], 1)
                if masked:
                    s_t = _mask_tile(s_t, band, my_first, tile_of(t)[1] * bq, y_len=key_tail)
                p_t = jnp.exp2(s_t * plan.scale_log2 - _bcast(lse, s_t.shape, 1))
                plgpu.barrier_wait(do_ready.at[slot])

                def pv_and_dp(refs):
                    dv_ref_, dp_ref_ = refs
                    plgpu.wgmma(dv_ref_, p_t.astype(dtype), do_tile)  # dV += Pᵀ dO
                    plgpu.wgmma(dp_ref_, my_v, plgpu.transpose_ref(do_tile, (1, 0)))  # dPᵀ

                dv, dp_t = pl.run_state(pv_and_dp)(
                    (plgpu.ACC.init(dv), plgpu.ACC.init(_zeros((ROWS, bq))))
                )
                plgpu.barrier_wait(delta_ready.at[slot])
                delta = _row_vector(delta_smem.at[slot], 1)
                ds16 = (p_t * (dp_t - _bcast(delta, dp_t.shape, 1))).astype(dtype)  # dSᵀ
                if fold:
                    dk, dq_part = fold_products(t, ds16, dk, q_tile)
                    return dk, dv, dq_part
                dk = _accumulate(dk, ds16, q_tile)  # dK += dSᵀ Q
                plgpu.barrier_arrive(free.at[wg * stages + slot])
                return dk, dv

            def pipelined_step(t, carry, *, masked, dk_ref, dv_ref):
                """Step t with the last step's dK product issued behind this step's Sᵀ:
                it runs under the exp, and dV += Pᵀ dO under the dSᵀ math; nothing is
                left in flight when the step ends."""
                ds_last, last_slot = carry
                slot = lax.rem(t, jnp.int32(stages))
                q_tile = q_smem.at[slot]
                do_tile = do_smem.at[slot]
                plgpu.barrier_wait(q_ready.at[slot])

                def scores(s_ref):
                    plgpu.wgmma(s_ref, my_k, plgpu.transpose_ref(q_tile, (1, 0)))  # Sᵀ
                    plgpu.wgmma(dk_ref, ds_last, q_smem.at[last_slot])  # last dK += dSᵀ Q
                    return plgpu.wgmma_accumulator_load(s_ref, wait_n=1)  # Sᵀ only

                s_t = pl.run_scoped(scores, plgpu.ACC((ROWS, bq), jnp.float32))
                plgpu.barrier_wait(lse_ready.at[slot])
                lse = _row_vector(lse_smem.at[slot], 1)
                if masked:
                    s_t = _mask_tile(s_t, band, my_first, tile_of(t)[1] * bq)
                p_t = jnp.exp2(s_t * plan.scale_log2 - _bcast(lse, s_t.shape, 1))
                plgpu.barrier_wait(do_ready.at[slot])

                def dp_and_pv(dp_ref):
                    plgpu.wgmma(dp_ref, my_v, plgpu.transpose_ref(do_tile, (1, 0)))  # dPᵀ
                    plgpu.wgmma(dv_ref, p_t.astype(dtype), do_tile)  # dV += Pᵀ dO
                    return plgpu.wgmma_accumulator_load(dp_ref, wait_n=1)  # and last dK

                dp_t = pl.run_scoped(dp_and_pv, plgpu.ACC((ROWS, bq), jnp.float32))
                # the last step's stage is read no more
                pl.when(t > 0)(lambda: plgpu.barrier_arrive(free.at[wg * stages + last_slot]))
                plgpu.barrier_wait(delta_ready.at[slot])
                delta = _row_vector(delta_smem.at[slot], 1)
                ds16 = (p_t * (dp_t - _bcast(delta, dp_t.shape, 1))).astype(dtype)  # dSᵀ
                plgpu.wgmma_wait(0)  # dV: Pᵀ's registers are free
                return ds16, slot

            def loop(start, stop, masked, carry, *, head_step, body=step):
                return lax.fori_loop(
                    head_step + start - lo,
                    head_step + stop - lo,
                    functools.partial(body, masked=masked),
                    carry,
                )

            def head_loop(h, carry, body=step):
                part = functools.partial(loop, head_step=h * span, body=body)
                return _three_ranges(part, lo, full_lo, full_hi, hi, carry)

            def pipelined(dk_ref, dv_ref):
                body = functools.partial(pipelined_step, dk_ref=dk_ref, dv_ref=dv_ref)
                first = (_zeros((ROWS, bq)).astype(dtype), jnp.int32(0))
                ds_last, last_slot = lax.fori_loop(
                    0, heads_here, functools.partial(head_loop, body=body), first
                )

                @pl.when(steps > 0)  # the last step's dK product
                def _():
                    plgpu.wgmma(dk_ref, ds_last, q_smem.at[last_slot])
                    plgpu.wgmma_wait(0)
                    plgpu.barrier_arrive(free.at[wg * stages + last_slot])

                return dk_ref[...], dv_ref[...]

            zeros = _zeros((ROWS, d))
            if cfg.pipeline:
                accumulators = (plgpu.ACC((ROWS, d), jnp.float32),) * 2
                dk, dv = pl.run_scoped(pipelined, *accumulators)
                last_dq = ()
            else:
                carry = (zeros, zeros) + ((_zeros((part_rows, part_cols)),) if fold else ())
                dk, dv, *last_dq = lax.fori_loop(0, heads_here, head_loop, carry)
            if fold:  # my K is read by the other consumer's dQ products until it is done
                pl.when(steps > 0)(lambda: flush(steps - 1, last_dq[0]))
                done = fold_barriers[1]
                plgpu.barrier_arrive(done.at[0])
                plgpu.barrier_wait(done.at[0])
            if share > 1:  # my float32 partials of dK, dV, through one staging buffer
                stage = extra[0].at[wg]
                out_rows = (batch, pl.ds(my_first, ROWS), cta_head)
                for acc, dst in ((dk * plan.scale, dk_ref), (dv, dv_ref)):
                    plgpu.wait_smem_to_gmem(0, wait_read_only=True)
                    stage[...] = acc
                    plgpu.commit_smem()
                    plgpu.copy_smem_to_gmem(stage, dst.at[out_rows])
                plgpu.wait_smem_to_gmem(0)
                return
            my_k[...] = (dk * plan.scale).astype(dtype)
            my_v[...] = dv.astype(dtype)
            plgpu.commit_smem()
            plgpu.copy_smem_to_gmem(my_k, dk_ref.at[rows])
            plgpu.copy_smem_to_gmem(my_v, dv_ref.at[rows])
            plgpu.wait_smem_to_gmem(0)

        producer = _query_tile_producer(
            (q_ref, do_ref, lse_ref, delta_ref), steps, stages, bq, tile_of, batch
        )

        smem_types = (
            plgpu.SMEM((CTA_ROWS, d), dtype, transforms=swizzled),  # K, then dK
            plgpu.SMEM((CONSUMERS, ROWS, d), dtype, transforms=swizzled),  # V, then dV
            plgpu.SMEM((stages, bq, d), dtype, transforms=swizzled),  # Q stages
            plgpu.SMEM((stages, bq, d), dtype, transforms=swizzled),  # dO stages
            plgpu.SMEM((stages, bq), jnp.float32),  # LSE stages
            plgpu.SMEM((stages, bq), jnp.float32),  # D stages
        )
        barrier_types = (
            plgpu.Barrier(num_barriers=2 * CONSUMERS),  # kv_ready[K or V, consumer]
            plgpu.Barrier(num_barriers=stages),  # q_ready
            plgpu.Barrier(num_barriers=stages),  # do_ready
            plgpu.Barrier(num_barriers=stages),  # lse_ready
            plgpu.Barrier(num_barriers=stages),  # delta_ready
            plgpu.Barrier(num_barriers=CONSUMERS * stages),  # free[consumer, stage]
        )
        if fold:
            part = _smem_transforms(part_cols, jnp.float32)
            smem_types += (
                # dSᵀ of both consumers' keys, two buffers (the ds_ready of step t + 1
                # orders the reads of step t before the writes of step t + 2)
                plgpu.SMEM((2, CTA_ROWS, bq), dtype, transforms=_smem_transforms(bq, dtype)),
                plgpu.SMEM((CONSUMERS, part_rows, part_cols), jnp.float32, transforms=part),
            )
            barrier_types += (
                plgpu.Barrier(num_arrivals=CONSUMERS, num_barriers=2),  # ds_ready[buffer]
                plgpu.Barrier(num_arrivals=CONSUMERS, num_barriers=1),  # done
            )
        if share > 1:  # each consumer's float32 dK, then dV, on its way to HBM
            smem_types += (
                plgpu.SMEM(
                    (CONSUMERS, ROWS, d), jnp.float32, transforms=_smem_transforms(d, jnp.float32)
                ),
            )
        _roles(consumer, producer, smem_types, barrier_types)

    parts = plan.kv_heads * share
    out_dtype = jnp.float32 if share > 1 else dtype
    out = jax.ShapeDtypeStruct((plan.batch, plan.kv_pad, parts, d), out_dtype)
    grid = (plan.kv_pad // CTA_ROWS, parts, plan.batch)
    args = (q, k, v, do, lse2, delta) + ((dq_acc,) if fold else ())
    return _launch(plan, body, [out, out], grid, ("kv", "head", "batch"), *args)


def _dkdv_split(plan: _Plan, q, k, v, do, lse2, delta):
    """``(dK, dV)`` [batch, kv_pad, kv_heads, d] from padded inputs, ``Config.split``: a
    CTA owns 64 keys; consumer 0 computes Sᵀ = K Qᵀ, Pᵀ and dV += Pᵀ dO and stores Pᵀ
    (16-bit) in one of two shared-memory buffers; consumer 1 computes dPᵀ = V dOᵀ, reads
    Pᵀ there, dSᵀ = Pᵀ ∘ (dPᵀ − D) and dK += dSᵀ Q. ``p_ready[buffer]`` says a Pᵀ is
    written, ``p_free[buffer]`` that it was read, so consumer 0 runs at most two tiles
    ahead. Each accumulator is 64 × d float32 in one warpgroup (128 registers a thread
    at d = 256) beside one 64 × block_q product."""
    import jax.experimental.pallas as pl
    import jax.experimental.pallas.mosaic_gpu as plgpu

    cfg = plan.config
    bq, stages, d, group = cfg.block_q, cfg.num_stages, plan.d, plan.group
    band = plan.mask.seen_by_keys()  # key j is seen by rows [j - right, j + left]
    dtype = q.dtype
    swizzled = _smem_transforms(d, dtype)
    q_tiles = functools.partial(band.tiles, tile=bq, length=plan.n)

    def body(q_ref, k_ref, v_ref, do_ref, lse_ref, delta_ref, dk_ref, dv_ref):
        block, kv_head, batch = (lax.axis_index(x) for x in ("kv", "head", "batch"))
        first_key = block * ROWS
        lo, full_lo, full_hi, hi = q_tiles(first_key, ROWS)
        full_lo = jnp.clip(full_lo, lo, hi)
        full_hi = jnp.clip(full_hi, full_lo, hi)
        span = hi - lo
        steps = span * group
        rows = (batch, pl.ds(first_key, ROWS), kv_head)

        def tile_of(t):
            """(query head, query tile) of step t: heads outer, tiles inner."""
            safe = jnp.maximum(span, 1)
            return kv_head * group + lax.div(t, safe), lo + lax.rem(t, safe)

        def write_out(acc, smem, dst):
            smem[...] = acc.astype(dtype)
            plgpu.commit_smem()
            plgpu.copy_smem_to_gmem(smem, dst.at[rows])
            plgpu.wait_smem_to_gmem(0)

        def scores_consumer(smem, barriers):
            """Sᵀ, Pᵀ (to the other consumer) and dV; K's buffer then holds dV."""
            k_smem, _, q_smem, do_smem, lse_smem, _, p_smem = smem
            kv_ready, q_ready, do_ready, lse_ready, _, free, p_ready, p_free = barriers
            plgpu.copy_gmem_to_smem(k_ref.at[rows], k_smem, kv_ready.at[0])
            plgpu.barrier_wait(kv_ready.at[0])

            def step(t, dv, *, masked):
                slot = lax.rem(t, jnp.int32(stages))
                buf = lax.rem(t, jnp.int32(2))
                q_tile, do_tile = q_smem.at[slot], do_smem.at[slot]
                plgpu.barrier_wait(q_ready.at[slot])
                s_t = _wgmma_scores(k_smem, q_tile, (ROWS, bq))  # Sᵀ = K Qᵀ
                plgpu.barrier_wait(lse_ready.at[slot])
                lse = _row_vector(lse_smem.at[slot], 1)
                if masked:
                    s_t = _mask_tile(s_t, band, first_key, tile_of(t)[1] * bq)
                p16 = jnp.exp2(s_t * plan.scale_log2 - _bcast(lse, s_t.shape, 1)).astype(dtype)
                pl.when(t >= 2)(lambda: plgpu.barrier_wait(p_free.at[buf]))  # read at t - 2
                p_smem.at[buf][...] = p16
                plgpu.barrier_arrive(p_ready.at[buf])
                plgpu.barrier_wait(do_ready.at[slot])
                dv = _accumulate(dv, p16, do_tile)  # dV += Pᵀ dO
                plgpu.barrier_arrive(free.at[slot])
                return dv

            def loop(start, stop, masked, dv, *, head_step):
                first, last = head_step + start - lo, head_step + stop - lo
                return lax.fori_loop(first, last, functools.partial(step, masked=masked), dv)

            def head_loop(h, dv):
                part = functools.partial(loop, head_step=h * span)
                return _three_ranges(part, lo, full_lo, full_hi, hi, dv)

            dv = lax.fori_loop(0, group, head_loop, _zeros((ROWS, d)))
            write_out(dv, k_smem, dv_ref)

        def gradient_consumer(smem, barriers):
            """dPᵀ, dSᵀ (from the other consumer's Pᵀ) and dK; V's buffer then holds dK."""
            _, v_smem, q_smem, do_smem, _, delta_smem, p_smem = smem
            kv_ready, q_ready, do_ready, _, delta_ready, free, p_ready, p_free = barriers
            plgpu.copy_gmem_to_smem(v_ref.at[rows], v_smem, kv_ready.at[1])
            plgpu.barrier_wait(kv_ready.at[1])

            def step(t, dk):
                slot = lax.rem(t, jnp.int32(stages))
                buf = lax.rem(t, jnp.int32(2))
                q_tile, do_tile = q_smem.at[slot], do_smem.at[slot]
                plgpu.barrier_wait(do_ready.at[slot])
                dp_t = _wgmma_scores(v_smem, do_tile, (ROWS, bq))  # dPᵀ = V dOᵀ
                plgpu.barrier_wait(delta_ready.at[slot])
                delta = _row_vector(delta_smem.at[slot], 1)
                plgpu.barrier_wait(p_ready.at[buf])
                p_t = p_smem.at[buf][...].astype(jnp.float32)
                plgpu.barrier_arrive(p_free.at[buf])
                ds16 = (p_t * (dp_t - _bcast(delta, dp_t.shape, 1))).astype(dtype)  # dSᵀ
                plgpu.barrier_wait(q_ready.at[slot])
                dk = _accumulate(dk, ds16, q_tile)  # dK += dSᵀ Q
                plgpu.barrier_arrive(free.at[stages + slot])
                return dk

            dk = lax.fori_loop(0, steps, step, _zeros((ROWS, d)))
            write_out(dk * plan.scale, v_smem, dk_ref)

        def consumer(smem, barriers, wg):
            pl.when(wg == 0)(lambda: scores_consumer(smem, barriers))
            pl.when(wg == 1)(lambda: gradient_consumer(smem, barriers))

        producer = _query_tile_producer(
            (q_ref, do_ref, lse_ref, delta_ref), steps, stages, bq, tile_of, batch
        )

        smem_types = (
            plgpu.SMEM((ROWS, d), dtype, transforms=swizzled),  # K, then dV
            plgpu.SMEM((ROWS, d), dtype, transforms=swizzled),  # V, then dK
            plgpu.SMEM((stages, bq, d), dtype, transforms=swizzled),  # Q stages
            plgpu.SMEM((stages, bq, d), dtype, transforms=swizzled),  # dO stages
            plgpu.SMEM((stages, bq), jnp.float32),  # LSE stages
            plgpu.SMEM((stages, bq), jnp.float32),  # D stages
            plgpu.SMEM((2, ROWS, bq), dtype, transforms=_smem_transforms(bq, dtype)),  # Pᵀ
        )
        barrier_types = (
            plgpu.Barrier(num_barriers=2),  # kv_ready[K, V]
            plgpu.Barrier(num_barriers=stages),  # q_ready
            plgpu.Barrier(num_barriers=stages),  # do_ready
            plgpu.Barrier(num_barriers=stages),  # lse_ready
            plgpu.Barrier(num_barriers=stages),  # delta_ready
            plgpu.Barrier(num_barriers=CONSUMERS * stages),  # free[consumer, stage]
            plgpu.Barrier(num_barriers=2),  # p_ready[buffer]
            plgpu.Barrier(num_barriers=2),  # p_free[buffer]
        )
        _roles(consumer, producer, smem_types, barrier_types)

    out = jax.ShapeDtypeStruct((plan.batch, plan.kv_pad, plan.kv_heads, d), dtype)
    grid = (plan.kv_pad // ROWS, plan.kv_heads, plan.batch)
    return _launch(plan, body, [out, out], grid, ("kv", "head", "batch"), q, k, v, do, lse2, delta)


# ---------------------------------------------------------------- dQ


def _dq(plan: _Plan, q, k, v, do, lse2, delta):
    """dQ [batch, n_pad, heads, d] from padded inputs."""
    import jax.experimental.pallas as pl
    import jax.experimental.pallas.mosaic_gpu as plgpu

    cfg = plan.config
    bk, stages, d = cfg.dq_block_k, cfg.dq_num_stages, plan.d
    tail = plan.kv_len if plan.kv_len % bk else None
    mask = plan.mask
    dtype = q.dtype
    # dQ += dS K contracts over the tile's bk keys: a 32-key tile caps the swizzle at 64 B
    swizzled = _smem_transforms(d, dtype, max_swizzle=bk * dtype.itemsize)
    q_blocks = plan.n_pad // CTA_ROWS

    k_tiles = functools.partial(mask.tiles, tile=bk, length=plan.kv_len)

    def body(q_ref, k_ref, v_ref, do_ref, lse_ref, delta_ref, dq_ref):
        block, head, batch = (lax.axis_index(x) for x in ("q", "head", "batch"))
        if mask.right is not None:  # causal: the longest query blocks first
            block = q_blocks - 1 - block
        kv_head = lax.div(head, jnp.int32(plan.group))
        first_row = block * CTA_ROWS
        lo, _, _, hi = k_tiles(first_row, CTA_ROWS)

        def consumer(smem, barriers, wg):
            q_own, do_own, lse_own, delta_own, k_smem, v_smem = smem
            own_ready, k_ready, v_ready, k_free, v_free = barriers
            my_q, my_do = q_own.at[wg], do_own.at[wg]
            my_first = first_row + wg * ROWS
            rows = (batch, pl.ds(my_first, ROWS), head)
            stats = (batch, head, pl.ds(my_first, ROWS))
            copies = (
                (q_ref.at[rows], my_q),
                (do_ref.at[rows], my_do),
                (lse_ref.at[stats], lse_own.at[wg]),
                (delta_ref.at[stats], delta_own.at[wg]),
            )
            for i, (src, dst) in enumerate(copies):
                plgpu.copy_gmem_to_smem(src, dst, own_ready.at[i * CONSUMERS + wg])
            for i in range(len(copies)):
                plgpu.barrier_wait(own_ready.at[i * CONSUMERS + wg])
            lse = _row_vector(lse_own.at[wg], 0)
            delta = _row_vector(delta_own.at[wg], 0)
            _, full_lo, full_hi, _ = k_tiles(my_first, ROWS)
            full_lo = jnp.clip(full_lo, lo, hi)
            full_hi = jnp.clip(full_hi, full_lo, hi)

            def step(j, dq, *, masked):
                slot = lax.rem(j - lo, jnp.int32(stages))
                k_tile, v_tile = k_smem.at[slot], v_smem.at[slot]
                plgpu.barrier_wait(k_ready.at[slot])
                s = _wgmma_scores(my_q, k_tile, (ROWS, bk))  # S = Q Kᵀ
                plgpu.barrier_wait(v_ready.at[slot])
                dp = _wgmma_scores(my_do, v_tile, (ROWS, bk))  # dP = dO Vᵀ
                plgpu.barrier_arrive(v_free.at[wg * stages + slot])
                if masked:
                    s = _mask_tile(s, mask, my_first, j * bk, tail)
                p = jnp.exp2(s * plan.scale_log2 - _bcast(lse, s.shape, 0))
                ds = p * (dp - _bcast(delta, dp.shape, 0))
                dq = _accumulate(dq, ds.astype(dtype), k_tile)  # dQ += dS K
                plgpu.barrier_arrive(k_free.at[wg * stages + slot])
                return dq

            def pipelined_step(j, carry, *, masked, dq_ref):
                """Tile j with the last tile's dQ product issued behind its S and dP: the
                exp runs under dP and that product, the dS math under the product."""
                ds_last, last_slot = carry
                slot = lax.rem(j - lo, jnp.int32(stages))
                k_tile, v_tile = k_smem.at[slot], v_smem.at[slot]
                plgpu.barrier_wait(k_ready.at[slot])

                def products(s_ref, dp_ref):
                    plgpu.wgmma(s_ref, my_q, plgpu.transpose_ref(k_tile, (1, 0)))  # S
                    plgpu.barrier_wait(v_ready.at[slot])
                    plgpu.wgmma(dp_ref, my_do, plgpu.transpose_ref(v_tile, (1, 0)))  # dP
                    plgpu.wgmma(dq_ref, ds_last, k_smem.at[last_slot])  # last dQ += dS K
                    s = plgpu.wgmma_accumulator_load(s_ref, wait_n=2)  # S only
                    if masked:
                        s = _mask_tile(s, mask, my_first, j * bk, tail)
                    p = jnp.exp2(s * plan.scale_log2 - _bcast(lse, s.shape, 0))
                    dp = plgpu.wgmma_accumulator_load(dp_ref, wait_n=1)  # dP too
                    plgpu.barrier_arrive(v_free.at[wg * stages + slot])
                    return (p * (dp - _bcast(delta, dp.shape, 0))).astype(dtype)  # dS

                acc = plgpu.ACC((ROWS, bk), jnp.float32)
                ds16 = pl.run_scoped(products, acc, acc)
                plgpu.wgmma_wait(0)  # the last dQ product: its K stage is read no more
                pl.when(j > lo)(lambda: plgpu.barrier_arrive(k_free.at[wg * stages + last_slot]))
                return ds16, slot

            def loop(start, stop, masked, carry, *, body=step):
                return lax.fori_loop(start, stop, functools.partial(body, masked=masked), carry)

            def pipelined(dq_ref):
                body = functools.partial(pipelined_step, dq_ref=dq_ref)
                first = (_zeros((ROWS, bk)).astype(dtype), jnp.int32(0))
                part = functools.partial(loop, body=body)
                ds_last, last_slot = _three_ranges(part, lo, full_lo, full_hi, hi, first)

                @pl.when(hi > lo)  # the last tile's dQ product
                def _():
                    plgpu.wgmma(dq_ref, ds_last, k_smem.at[last_slot])
                    plgpu.wgmma_wait(0)
                    plgpu.barrier_arrive(k_free.at[wg * stages + last_slot])

                return dq_ref[...]

            if cfg.pipeline:
                dq = pl.run_scoped(pipelined, plgpu.ACC((ROWS, d), jnp.float32))
            else:
                dq = _three_ranges(loop, lo, full_lo, full_hi, hi, _zeros((ROWS, d)))
            my_q[...] = (dq * plan.scale).astype(dtype)
            plgpu.commit_smem()
            plgpu.copy_smem_to_gmem(my_q, dq_ref.at[rows])
            plgpu.wait_smem_to_gmem(0)

        def producer(smem, barriers):
            *_, k_smem, v_smem = smem
            _, k_ready, v_ready, k_free, v_free = barriers

            @pl.loop(lo, hi)
            def _(j):
                t = j - lo
                slot = lax.rem(t, jnp.int32(stages))
                keys = (batch, pl.ds(j * bk, bk), kv_head)
                for free, src, dst, ready in (
                    (k_free, k_ref, k_smem, k_ready),
                    (v_free, v_ref, v_smem, v_ready),
                ):
                    for wg in range(CONSUMERS):
                        pl.when(t >= stages)(
                            lambda free=free, wg=wg: plgpu.barrier_wait(free.at[wg * stages + slot])
                        )
                    plgpu.copy_gmem_to_smem(src.at[keys], dst.at[slot], ready.at[slot])

        smem_types = (
            plgpu.SMEM((CONSUMERS, ROWS, d), dtype, transforms=swizzled),  # Q, then dQ
            plgpu.SMEM((CONSUMERS, ROWS, d), dtype, transforms=swizzled),  # dO
            plgpu.SMEM((CONSUMERS, ROWS), jnp.float32),  # LSE
            plgpu.SMEM((CONSUMERS, ROWS), jnp.float32),  # D
            plgpu.SMEM((stages, bk, d), dtype, transforms=swizzled),  # K stages
            plgpu.SMEM((stages, bk, d), dtype, transforms=swizzled),  # V stages
        )
        barrier_types = (
            plgpu.Barrier(num_barriers=4 * CONSUMERS),  # own_ready[Q, dO, LSE, D; consumer]
            plgpu.Barrier(num_barriers=stages),  # k_ready
            plgpu.Barrier(num_barriers=stages),  # v_ready
            plgpu.Barrier(num_barriers=CONSUMERS * stages),  # k_free[consumer, stage]
            plgpu.Barrier(num_barriers=CONSUMERS * stages),  # v_free[consumer, stage]
        )
        _roles(consumer, producer, smem_types, barrier_types)

    out = jax.ShapeDtypeStruct((plan.batch, plan.n_pad, plan.heads, d), dtype)
    grid = (q_blocks, plan.heads, plan.batch)
    return _launch(plan, body, out, grid, ("q", "head", "batch"), q, k, v, do, lse2, delta)


# ---------------------------------------------------------------- the three steps


def _pad(x, axis: int, length: int):
    pad = length - x.shape[axis]
    if pad == 0:
        return x
    widths = [(0, 0)] * x.ndim
    widths[axis] = (0, pad)
    return jnp.pad(x, widths)


@functools.partial(jax.jit, static_argnames=("plan",))
def _backward(q, k, v, o, lse, do, dlse, plan: _Plan):
    n, kv_len, d = plan.n, plan.kv_len, plan.d
    q, o, do = (_pad(_pad(x, 3, d), 1, plan.n_pad) for x in (q, o, do))
    k, v = (_pad(_pad(x, 3, d), 1, plan.kv_pad) for x in (k, v))
    # 1. D = rowsum(dO ∘ O) − dLSE; LSE in log2 units, +inf where a row sees no key
    delta = jnp.einsum("bnhd,bnhd->bhn", o.astype(jnp.float32), do.astype(jnp.float32))
    if dlse is not None:
        delta = delta - _pad(dlse.astype(jnp.float32), 2, plan.n_pad)
    lse2 = jnp.where(jnp.isneginf(lse), jnp.inf, lse * LOG2_E)
    lse2 = jnp.pad(lse2, ((0, 0), (0, 0), (0, plan.n_pad - n)), constant_values=jnp.inf)
    if plan.config.dq == "atomic":  # 2. dK, dV and dQ / scale in one kernel
        acc = jax.new_ref(jnp.zeros((plan.batch, plan.n_pad, plan.heads, d), jnp.float32))
        dk, dv = _dkdv(plan, q, k, v, do, lse2, delta, acc)
        dq = (acc[...] * plan.scale).astype(q.dtype)
    else:  # 2. dK, dV
        dkdv = _dkdv_split if plan.config.split else _dkdv
        dk, dv = dkdv(plan, q, k, v, do, lse2, delta)
        if plan.group_split > 1:  # the CTAs' float32 partials of each group
            shape = (plan.batch, plan.kv_pad, plan.kv_heads, plan.group_split, d)
            dk, dv = (x.reshape(shape).sum(3).astype(q.dtype) for x in (dk, dv))
        dq = _dq(plan, q, k, v, do, lse2, delta)  # 3. dQ
    return dq[:, :n], dk[:, :kv_len], dv[:, :kv_len]


def _group_split(config: Config, batch: int, kv_len: int, kv_heads: int, group: int) -> int:
    """``Config.group_split`` resolved for a call (``group_split_for`` when None)."""
    if not config.splits_group:
        return 1
    if config.group_split is not None:
        if group % config.group_split:
            raise ValueError(
                f"group_split={config.group_split} must divide the GQA group ({group})"
            )
        return config.group_split
    kv_blocks = -(-kv_len // CTA_ROWS)
    return group_split_for(batch, kv_blocks, kv_heads, group, sm_count())


def mosaic_attention_backward(
    q,
    k,
    v,
    o,
    lse,
    do,
    dlse=None,
    *,
    causal: bool,
    sm_scale: float,
    window=None,
    config: Config | None = None,
    diagonal_offset: int = 0,
):
    """``(dQ, dK, dV)`` of attention from the forward's O and natural-log ``lse``.

    ``dlse``: the cotangent of the log-sum-exp (None: zero). ``window``: the checked
    ``(left, right)`` of ``_common.window_bounds`` (None: none). ``diagonal_offset``
    shifts the causal diagonal as the forward's test hook does (tests only). Raises
    ValueError naming the limit when ``supported`` refuses the call.
    """
    reason = supported(q, k, v, causal=causal, config=config)
    if reason:
        raise ValueError(f"the Mosaic backward cannot run this call: {reason}")
    config = config or heuristic_config(q.shape[-1], causal)
    d = q.shape[-1]
    b, n, h, _ = q.shape
    kv_len, h_kv = k.shape[1], k.shape[2]
    plan = _Plan(
        batch=b,
        n=n,
        n_pad=-(-n // CTA_ROWS) * CTA_ROWS,
        heads=h,
        kv_heads=h_kv,
        d=run_head_dim(d),
        kv_len=kv_len,
        kv_pad=-(-kv_len // CTA_ROWS) * CTA_ROWS,
        mask=Mask.of(causal, window, diagonal_offset),
        scale=float(sm_scale),
        config=config,
        group_split=_group_split(config, b, kv_len, h_kv, h // h_kv),
    )
    grads = _backward(q, k, v, o, lse, do.astype(q.dtype), dlse, plan)
    return tuple(g[..., :d] for g in grads)


__all__ = [
    "Config",
    "Mask",
    "dq_split",
    "group_split_for",
    "heuristic_config",
    "mosaic_attention_backward",
    "supported",
    "supported_fold",
]
