"""Forward flash attention for Hopper in Pallas Mosaic GPU (FlashAttention-3 style).

The kernel follows FlashAttention-3 (Shah et al. 2024), §3.1-3.2, on one H100/H200 SM:

* **Roles (warp specialisation, §3.1).** Each CTA has three warpgroups. The
  *producer* (warpgroup 2) only issues TMA bulk copies of K and V tiles into a ring
  of ``num_stages`` shared-memory *stages*; the two *consumers* (warpgroups 0 and 1)
  each own ``block_q`` = 64 query rows (the M of one wgmma) and only compute. The
  producer gives its registers up (``setmaxreg``) so the consumers can hold S, P and
  O in registers.
* **Barriers.** ``k_ready[stage]`` / ``v_ready[stage]`` complete when a TMA copy
  lands (transaction count); ``k_free[wg, stage]`` / ``v_free[wg, stage]`` are
  arrived on by each consumer when its last wgmma reading the stage has finished,
  and the producer waits on both before overwriting the stage. A consumer that needs
  fewer key tiles than its partner (causal) still waits and releases those stages,
  so every barrier phase stays paired across work units.
* **Intra-warpgroup pipelining (§3.2), ``Config.overlap``.** ``"pv"`` is
  FA-3's Algorithm 2: issue S_{j+1} = Q K_{j+1}^T and O += P_j V_j back to back
  (asynchronous wgmma), wait only for S_{j+1}, run its softmax while P_j V_j still
  computes, then wait and rescale O. ``"qk"`` issues S_{j+1}, runs the softmax of
  S_j under it, then P_j V_j: the next QK^T is in flight before the current softmax
  finishes. ``"none"`` is the serial order.
* **No ping-pong.** FA-3's explicit turn-taking between the consumers (§3.1) was
  tried (a two-party rendezvous barrier around each tile's wgmma issue) and measured
  slower on every shape (0.66-0.86x cuDNN, ``specs/measurements/h200-mosaic-call*.json``):
  the warp schedulers interleave the two consumers anyway. It was removed.
* **Persistent grid.** One CTA per SM loops over work units; the producer runs
  ahead into the next unit's K/V while the consumers store the last unit's O, and each
  consumer loads its next unit's Q into its second Q buffer during the current unit
  (``Config.prefetch_q``). The stage of a key tile continues across units (``base``).
* **Operands.** Q, K, V in shared memory (128-byte swizzle) feed wgmma; P goes from
  registers (the wgmma A operand may live in registers); S and O accumulate in f32.
* **Causal, sliding windows.** Key tiles wholly above the diagonal or outside the
  window (``window=(left, right)``: row i sees keys ``i - left <= j <= i + right``) are
  never loaded; only the tiles that straddle an edge (or the masked tail of a sequence
  whose length is not a tile multiple) pay for the mask. The producer loads the union of
  the two consumers' key ranges; a consumer takes the stages of tiles only its partner
  needs in step (before its own range and after it). Query tiles are taken longest first, and a
  persistent CTA takes every 132nd unit, which spreads long and short units evenly.
* **GQA.** When a K/V head serves an even number of query heads, the two consumers
  of a CTA take two query heads of the same group at the same rows: one K/V load
  feeds both (and causal work is equal between the two). Otherwise they take two
  adjacent row tiles of one head, which also share the K/V stream.

Any n and kv_len, with no copy: the TMA loads zero-fill the rows past the end, its
stores skip them, and the keys past kv_len are masked. Where a length is not a multiple
of 8 rows the shared memory holds d in column blocks (``_Buffers``), which Mosaic GPU's
TMA lowering accepts at any length; ``Config(pad_seq=True)`` pads with copies instead.
Head dims: any multiple of 16 up to 256 runs as it is:
shared memory is swizzled by 128 bytes where a row is a multiple of 64 elements (64,
128, 192, 256), else by 64 (96, 160) or 32 bytes (80, 112, ...); any other head dim is
zero-padded to the next multiple of 16 (a copy of Q, K and V; d=72 runs as 80). The
tiles are those of the next multiple of 64 (``native_head_dim``); ``Config(
pad_head_dim=True)`` pads to it instead (the first version: 4/3 of the work at d=96,
measured 1.04-1.20x slower). float16 and bfloat16.

Each backend module holds its launch (``Config``, frozen and validated), its default
launch per shape (``heuristic_config``) and the check of what it runs (``supported``)
beside the kernel. Mosaic GPU is imported lazily: on a machine without it (CPU CI, jax
0.10 without absl) this module still imports and ``supported`` says why it cannot run.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
from jax import lax

from pallas_kernels._common import (
    DTYPES_16BIT,
    LN_2,
    LOG2_E,
    check_qkv,
    is_hopper,
    softmax_scale,
    tile_range,
    visible_bounds,
    window_bounds,
)

#: Head dims up to this run (padded to ``native_head_dim``).
MAX_HEAD_DIM = 256
#: A native head dim is a multiple of this: one 128-byte swizzled row of 16-bit values.
HEAD_DIM_MULTIPLE = 64
SUPPORTED_DTYPES = DTYPES_16BIT
#: Rows of one consumer's query tile: the M of a Hopper wgmma (64 rows per warpgroup).
ROWS_PER_CONSUMER = 64
CONSUMERS = 2
#: Shared memory a CTA may use on sm_90 (227 KiB), less a margin for barriers.
SMEM_LIMIT_BYTES = 227 * 1024 - 1024
#: Registers per thread after ``setmaxreg``: 2 consumers x 128 x 232 + 128 x 40 <= 64 Ki.
CONSUMER_REGISTERS, PRODUCER_REGISTERS = 232, 40
#: Rows of one shared-memory tile (the wgmma core matrix): Mosaic GPU tiles a TMA
#: descriptor's sequence dimension by it in the tiled layout (``_Buffers``).
TMA_ROW_TILE = 8


@dataclasses.dataclass(frozen=True, slots=True)
class Config:
    """Tiles, pipeline depth and schedule; defaults per head dim from ``heuristic_config``.

    ``overlap``: what a consumer overlaps with its own softmax (FA-3 §3.2):
    ``"pv"`` issues S_{j+1} = Q K_{j+1}^T and P_j V_j back to back, then runs the
    softmax of S_{j+1} while P_j V_j computes (FA-3 Algorithm 2); ``"qk"`` issues
    S_{j+1} and runs the softmax of S_j while it computes, then P_j V_j; ``"none"``
    runs QK^T, softmax and PV one after the other. ``persistent``: one CTA per SM loops
    over the work units, so the producer loads the next unit's K/V while the
    consumers finish the last one. ``pad_head_dim``: a head dim that is not a multiple
    of 64 is zero-padded to one (True), or (False, the default) padded only to a multiple
    of 16 (the wgmma K step) and run with the largest shared-memory swizzle a row divides
    (64 bytes at d=96 and 160, 32 at d=80 and 112). On the H200 the second ran 1.04-1.20x
    faster on all 12 shapes timed (specs/measurements/details/h200-shapes-2026-12-01.*).
    ``pad_seq``: (False, the default) nothing is copied: the TMA loads zero-fill the rows
    past n and kv_len and its stores skip the rows past n; or (True) a length that is not
    a whole number of tiles is zero-padded with copies of Q, K and V and O is sliced back
    (three or four extra kernels: on the H200, 2026-12-02, the default ran 1.03-1.83x
    faster than True on 12 window shapes and 1.03-1.23x on seven odd-n shapes,
    docs/perf-notes.md). ``blocked``: the shared-memory layout
    (``_Buffers``). Mosaic GPU lowers a TMA copy into the tiled layout only where the
    sequence is a multiple of 8 rows (jax 0.11.2: "dimension 2 must have size smaller or
    a multiple of its tiling 8", H200 run of 2026-12-02); the blocked layout (d in column
    blocks of one swizzle row, one wgmma per block) lowers at any length. None (the
    default): blocked where n or kv_len is not a multiple of 8 and ``pad_seq`` is False;
    False there is refused. ``prefetch_q`` (persistent only): each consumer holds two Q
    (then O) buffers and loads the next unit's Q while it computes this one (after this
    unit's first S), so a unit starts without waiting for its Q load nor for the last
    unit's O store to read its buffer; Q and O take twice the shared memory
    (``heuristic_config`` sets it wherever that fits).
    """

    block_k: int = 128
    num_stages: int = 2
    overlap: str = "pv"
    persistent: bool = False
    pad_head_dim: bool = False
    pad_seq: bool = False
    blocked: bool | None = None
    prefetch_q: bool = False

    def __post_init__(self) -> None:
        if self.block_k not in (64, 128, 192, 256):
            raise ValueError(f"block_k={self.block_k} must be one of 64, 128, 192, 256")
        if self.num_stages < 2:
            raise ValueError(f"num_stages={self.num_stages} must be >= 2")
        if self.overlap not in OVERLAPS:
            raise ValueError(f"overlap={self.overlap!r} must be one of {OVERLAPS}")

    @property
    def q_slots(self) -> int:
        """Q (then O) buffers per consumer: two where the next unit's Q is prefetched."""
        return 2 if self.prefetch_q and self.persistent else 1

    def smem_bytes(self, d: int, itemsize: int, return_lse: bool) -> int:
        q_and_o = self.q_slots * CONSUMERS * ROWS_PER_CONSUMER * d * itemsize
        k_and_v = 2 * self.num_stages * self.block_k * d * itemsize
        lse = CONSUMERS * ROWS_PER_CONSUMER * 4 if return_lse else 0
        return q_and_o + k_and_v + lse


OVERLAPS = ("pv", "qk", "none")


def native_head_dim(d: int) -> int:
    """The head dim the kernel runs for ``d``: the next multiple of 64."""
    return -(-int(d) // HEAD_DIM_MULTIPLE) * HEAD_DIM_MULTIPLE


def run_head_dim(d: int, config: Config) -> int:
    """The head dim one call runs at: ``native_head_dim(d)`` with ``config.pad_head_dim``,
    else the next multiple of 16 (the wgmma K step; d itself where it is one)."""
    return native_head_dim(d) if config.pad_head_dim else -(-int(d) // 16) * 16


def swizzle_bytes(d: int, itemsize: int) -> int:
    """The shared-memory swizzle of a row of ``d`` elements: the largest (128, 64 or 32
    bytes) the row's bytes divide; its tiles are (8, swizzle / itemsize)."""
    return next(b for b in (128, 64, 32) if d * itemsize % b == 0)


#: (block_k, num_stages) per largest native head dim: O is 64 x d f32 per consumer, 128
#: registers per thread at d=256, so the key tile shrinks to 64 above d=128; d=64 keeps
#: four stages in flight (its tiles are small). specs/kernels/pallas-mosaic.toml states
#: the same (tests/test_kernel_specs.py holds them equal).
TILES: tuple[tuple[int, int, int], ...] = ((64, 128, 4), (128, 128, 2), (192, 64, 2), (256, 64, 2))
#: (native head dim, largest left + right, block_k, num_stages) under a small sliding
#: window: a 64-row block sees left + right + 64 keys, and every tile it touches is loaded
#: whole and (at an edge) masked, so a narrower tile loads and masks ~64 keys less per
#: block; four stages keep the bytes in flight of two 128-key stages. On the H200
#: (2026-12-02, one process, docs/perf-notes.md "Small windows: a 64-key tile: outcome")
#: its time over the 128-key tile's was 0.86-1.00 at d = 128 for spans 146-887 and
#: 1.05-1.26 for spans 1064-4986; at d = 64 1.07-1.16 at every span (742-4391), so
#: d = 128 only.
SMALL_WINDOW_TILE: tuple[int, int, int, int] = (128, 1024, 64, 4)


def window_tile(d: int, causal: bool, window) -> tuple[int, int] | None:
    """(block_k, num_stages) of ``SMALL_WINDOW_TILE`` where head dim ``d`` runs at its
    native head dim and ``window`` (as ``flash_attention`` takes it) bounds both sides
    to at most its span, else None."""
    left, right = visible_bounds(causal, window)
    d_native, span_max, block_k, stages = SMALL_WINDOW_TILE
    if native_head_dim(d) != d_native or left is None or right is None:
        return None
    return (block_k, stages) if left + right <= span_max else None


def heuristic_config(d: int, causal: bool = False, window=None) -> Config:
    """The default launch for head dim ``d`` (``TILES``), the mask and the window (a
    narrower key tile under a small one, ``window_tile``).

    Schedule, from the H200 variants (docs/perf-notes.md, "Mosaic GPU kernel: outcome"):
    persistent everywhere; non-causal with the FA-3 PV overlap (n=4096: 0.99 x cuDNN,
    0.91 not persistent; n=1024: 0.94 against 0.73), causal with the QK^T look-ahead
    (n=4096: 1.01-1.05 x cuDNN, 0.94-0.97 not persistent, 0.82-0.96 with the PV
    overlap). The next unit's Q prefetched (``prefetch_q``) wherever its second Q/O
    buffer fits (not at d = 256): the time without it over the time with it was 0.99-1.20
    on the 11 H200 shapes where both ran (2026-12-02, docs/perf-notes.md "Prefetching
    the next unit's Q: outcome"). Not persistent where causal with no window and the
    Q prefetch does not fit (d = 256): there the CTAs of a persistent grid each walk a
    fixed share of the causal units and the grid waits for the longest; one CTA per unit
    runs as SMs free up. Measured at d = 256 only. At d = 256 on the H200 the
    persistent grid ran 0.59-0.69 of cuDNN on four causal shapes, the non-persistent one
    0.85-1.06 (docs/perf-notes.md "Our Mosaic forward at d = 256 on the blocked layout").
    """
    d_native = native_head_dim(min(max(int(d), 1), MAX_HEAD_DIM))
    block_k, stages = next((bk, st) for d_max, bk, st in TILES if d_native <= d_max)
    small = window_tile(d_native, causal, window)
    if small is not None:
        block_k, stages = small
    overlap = "qk" if causal else "pv"
    config = Config(block_k, stages, overlap=overlap, persistent=True, prefetch_q=True)
    if config.smem_bytes(d_native, 2, return_lse=True) > SMEM_LIMIT_BYTES:  # d = 256
        config = dataclasses.replace(config, prefetch_q=False)
    if causal and window is None and not config.prefetch_q:  # d = 256
        config = dataclasses.replace(config, persistent=False)
    return config


def import_error() -> str | None:
    """Why ``jax.experimental.pallas.mosaic_gpu`` does not import here (None when it does)."""
    try:
        import jax.experimental.pallas.mosaic_gpu  # noqa: F401
    except Exception as err:  # noqa: BLE001 - any import failure means "cannot run"
        return f"jax.experimental.pallas.mosaic_gpu does not import here ({err!r})"
    return None


def supported(
    q,
    k,
    v,
    *,
    causal: bool = False,
    interpret: bool = False,
    config: Config | None = None,
    window=None,
) -> str | None:
    """Why this kernel cannot run the call (None when it can)."""
    if interpret:
        return "Mosaic GPU kernels have no interpret mode (use backend='triton')"
    try:
        check_qkv(q, k, v, max_head_dim=MAX_HEAD_DIM, dtypes=SUPPORTED_DTYPES)
    except ValueError as err:
        return str(err)
    config = config or heuristic_config(q.shape[-1], causal, window)
    d = run_head_dim(q.shape[-1], config)
    smem = config.smem_bytes(d, q.dtype.itemsize, return_lse=True)
    if smem > SMEM_LIMIT_BYTES:
        return (
            f"block_k={config.block_k} x num_stages={config.num_stages} at d={d} needs "
            f"{smem} B of shared memory > {SMEM_LIMIT_BYTES}"
        )
    if not is_hopper():
        return "needs a Hopper (sm_90) GPU"
    return import_error()


# ---------------------------------------------------------------- the static plan


@dataclasses.dataclass(frozen=True, slots=True)
class _Plan:
    """Everything static about one call: shapes, padding, who computes what.

    A *work unit* is what one CTA computes at a time: 64 rows for each consumer, either
    two query heads of one GQA group at the same rows (``heads_paired``) or two
    adjacent 64-row tiles of one head.
    """

    batch: int
    n: int
    n_pad: int
    heads: int
    kv_heads: int
    d: int
    kv_len: int
    kv_pad: int
    causal: bool
    heads_paired: bool
    q_units: int  # work units along the sequence
    head_units: int  # work units along the heads
    ctas: int  # CTAs launched (persistent: at most one per SM)
    scale_log2: float
    return_lse: bool
    #: (left, right): row i sees keys ``i - left <= j <= i + right`` (None: unbounded),
    #: from the causal mask (shifted by the tests' diagonal offset) and the window
    bounds: tuple
    config: Config
    #: shared memory in column blocks (``_Buffers``): ``Config.blocked``, or where it is
    #: None, wherever a sequence the TMA copies is not a multiple of 8 rows
    blocked: bool
    #: columns of one block: one swizzle row (``swizzle_bytes``)
    block_cols: int

    @property
    def group(self) -> int:
        return self.heads // self.kv_heads

    @property
    def kv_tiles(self) -> int:
        return self.kv_pad // self.config.block_k

    @property
    def units(self) -> int:
        return self.q_units * self.head_units * self.batch


def _sm_count() -> int | None:
    """The GPU's SM count (None where the device has none: a CPU tracing the kernel)."""
    return int(getattr(jax.devices()[0], "core_count", 0)) or None


def _plan(q, k, *, causal, sm_scale, return_lse, config, window=None, diagonal_offset=0) -> _Plan:
    b, n, h, d = q.shape
    kv_len, h_kv = k.shape[1], k.shape[2]
    group = h // h_kv
    heads_paired = group % 2 == 0
    rows_per_unit = ROWS_PER_CONSUMER * (1 if heads_paired else CONSUMERS)
    n_pad = -(-n // rows_per_unit) * rows_per_unit
    kv_pad = -(-kv_len // config.block_k) * config.block_k
    q_units = n_pad // rows_per_unit
    head_units = h // 2 if heads_paired else h
    units = q_units * head_units * b
    return _Plan(
        batch=b,
        n=n,
        n_pad=n_pad,
        heads=h,
        kv_heads=h_kv,
        d=d,
        kv_len=kv_len,
        kv_pad=kv_pad,
        causal=causal,
        heads_paired=heads_paired,
        q_units=q_units,
        head_units=head_units,
        ctas=min(units, _sm_count() or units) if config.persistent else units,
        scale_log2=sm_scale * LOG2_E,
        return_lse=return_lse,
        bounds=visible_bounds(causal, window, diagonal_offset),
        config=config,
        blocked=_blocked(config, n, kv_len),
        block_cols=swizzle_bytes(d, q.dtype.itemsize) // q.dtype.itemsize,
    )


def _blocked(config: Config, n: int, kv_len: int) -> bool:
    """Whether the call runs the blocked shared-memory layout (``_Buffers``)."""
    not_of_8 = not config.pad_seq and bool(n % TMA_ROW_TILE or kv_len % TMA_ROW_TILE)
    if config.blocked is False and not_of_8:
        raise ValueError(
            f"blocked=False (the tiled layout) needs n and kv_len multiples of "
            f"{TMA_ROW_TILE} or pad_seq=True; got n={n}, kv_len={kv_len}"
        )
    return not_of_8 if config.blocked is None else config.blocked


# ---------------------------------------------------------------- the kernel


def _unit_coords(plan: _Plan, unit):
    """(query-tile unit, head unit, batch) of a work unit.

    The query axis is the fastest, so CTAs running at once share one head's K/V in
    L2; causal: query units longest first. A persistent CTA takes every ``ctas``-th
    unit, which spreads long and short causal units evenly over the CTAs.
    """
    if plan.config.persistent:
        q_unit = lax.rem(unit, jnp.int32(plan.q_units))
        rest = lax.div(unit, jnp.int32(plan.q_units))
        head_unit = lax.rem(rest, jnp.int32(plan.head_units))
        batch = lax.div(rest, jnp.int32(plan.head_units))
    else:
        q_unit = lax.axis_index("q")
        head_unit, batch = lax.axis_index("heads"), lax.axis_index("batch")
    if plan.causal:
        q_unit = plan.q_units - 1 - q_unit
    return q_unit, head_unit, batch


def _consumer_work(plan: _Plan, coords, wg):
    """(query head, first row) of consumer ``wg`` in a work unit."""
    q_unit, head_unit, _ = coords
    if plan.heads_paired:
        return head_unit * 2 + wg, q_unit * ROWS_PER_CONSUMER
    return head_unit, (q_unit * CONSUMERS + wg) * ROWS_PER_CONSUMER


def _key_tiles(plan: _Plan, first_row):
    """``(lo, lo_full, hi_full, hi)``: rows ``[first_row, first_row + 64)`` need key tiles
    ``[lo, hi)`` (at least one: a row that sees no key gets O = 0 from a masked tile);
    tiles ``[lo_full, hi_full)`` need no mask. Tiles wholly above the causal diagonal or
    outside the window are outside the range (``_common.tile_range``). Only the rows
    below n count: the last partial block of a right window (or of the shifted diagonal)
    loads no tile that only its rows past n would see, and a block wholly past n (the
    second consumer of a last unit) takes row n - 1's range, inside its partner's."""
    bk = plan.config.block_k
    lo, lo_full, hi_full, hi = tile_range(
        jnp.minimum(first_row, plan.n - 1),
        rows=ROWS_PER_CONSUMER,
        tile=bk,
        length=plan.kv_len,
        left=plan.bounds[0],
        right=plan.bounds[1],
        queries=plan.n,
    )
    if plan.bounds == (None, None):
        return lo, lo_full, hi_full, hi
    lo = jnp.minimum(lo, plan.kv_tiles - 1)
    hi = jnp.maximum(hi, lo + 1)
    lo_full = jnp.minimum(jnp.maximum(lo_full, lo), hi)
    hi_full = jnp.minimum(jnp.maximum(hi_full, lo_full), hi)
    return lo, lo_full, hi_full, hi


def _unit_tiles(plan: _Plan, coords):
    """``(lo, hi)``: key tiles the producer loads for a unit, the union of the two
    consumers' ranges (each one's is contiguous and they overlap or touch: adjacent rows)."""
    ranges = [_key_tiles(plan, _consumer_work(plan, coords, wg)[1]) for wg in range(CONSUMERS)]
    if plan.heads_paired or plan.bounds == (None, None):  # one range for both
        return ranges[0][0], ranges[0][3]
    return jnp.minimum(ranges[0][0], ranges[1][0]), jnp.maximum(ranges[0][3], ranges[1][3])


def _layout(x, layout):
    """``plgpu.layout_cast``: the register layout of a value in a wgmma's fragments."""
    import jax.experimental.pallas.mosaic_gpu as plgpu

    return plgpu.layout_cast(x, layout)


def _mask(plan: _Plan, s, tile, first_row):
    """Scores of keys a row may not see become -inf (the kv tail, above the diagonal,
    outside the window)."""
    import jax.experimental.pallas.mosaic_gpu as plgpu

    bk = plan.config.block_k
    shape = (ROWS_PER_CONSUMER, bk)

    def iota(dim):
        return _layout(lax.broadcasted_iota(jnp.int32, shape, dim), plgpu.Layout.WGMMA)

    cols = tile * bk + iota(1)
    rows = first_row + iota(0)
    left, right = plan.bounds
    conditions = []
    if plan.kv_len % bk:
        conditions.append(cols < plan.kv_len)
    if left is not None:
        conditions.append(cols >= rows - left)
    if right is not None:
        conditions.append(cols <= rows + right)
    if not conditions:
        return s
    return jnp.where(functools.reduce(jnp.logical_and, conditions), s, -jnp.inf)


def _online_softmax(plan: _Plan, s, m_prev, l_prev, *, masked: bool, dtype):
    """FlashAttention-2 online softmax of one score tile, in log2 units.

    m is the running row max of ``s * scale * log2(e)``; a row whose keys are all
    masked so far keeps m = -inf and subtracts 0 instead. Returns P (16-bit, the
    next wgmma's A operand), m, l and alpha = exp2(m_prev - m) that rescales O.
    """
    m_new = jnp.maximum(m_prev, s.max(axis=1) * plan.scale_log2)
    m_use = jnp.where(m_new == -jnp.inf, 0.0, m_new) if masked else m_new
    alpha = jnp.exp2(m_prev - m_use)
    p = jnp.exp2(s * plan.scale_log2 - lax.broadcast_in_dim(m_use, s.shape, [0]))
    l_new = l_prev * alpha + p.sum(axis=1)
    return p.astype(dtype), m_new, l_new, alpha


def _rescale(o, alpha):
    """Each column block of O times its row's ``alpha``."""
    return [block * lax.broadcast_in_dim(alpha, block.shape, [0]) for block in o]


def _consumer(plan: _Plan, refs, smem, barriers, wg):
    """One consumer warpgroup: its 64 query rows of each work unit of this CTA.

    ``base`` counts the key tiles of the earlier units of this CTA, so that the stage of
    tile t is (base + t) mod stages, in step with the producer.
    """
    import jax.experimental.pallas as pl
    import jax.experimental.pallas.mosaic_gpu as plgpu

    cfg = plan.config
    q_ref, _, _, o_ref, lse_ref = refs
    buf: _Buffers = smem
    q_ready, k_ready, v_ready, k_free, v_free = barriers
    dtype = q_ref.dtype
    rows, bk, stages = ROWS_PER_CONSUMER, cfg.block_k, cfg.num_stages
    slots = cfg.q_slots
    plgpu.set_max_registers(CONSUMER_REGISTERS, action="increase")

    def q_rows(unit):
        """(batch, rows, head) of this consumer's Q (and O) in ``unit``."""
        coords = _unit_coords(plan, unit)
        head, first_row = _consumer_work(plan, coords, wg)
        return coords[2], pl.ds(first_row, rows), head

    def load_q(unit, slot):
        for dst, part in buf.copies("q", slot, q_ref.at[q_rows(unit)]):
            plgpu.copy_gmem_to_smem(part, dst, q_ready.at[slot])

    def one_unit(unit, base, local):
        coords = _unit_coords(plan, unit)
        batch = coords[2]
        head, first_row = _consumer_work(plan, coords, wg)
        parity = lax.rem(local, jnp.int32(slots))
        slot = wg * slots + parity  # this unit's Q (then O) buffer
        my_q = [buf.block("q", slot, b) for b in range(buf.blocks)]
        lo, lo_full, hi_full, hi = _key_tiles(plan, first_row)
        unit_lo, unit_hi = _unit_tiles(plan, coords)

        def stage(tile):
            return lax.rem(base + tile - unit_lo, jnp.int32(stages))

        def drain(first, end):
            """Take (wait for, release) the stages of tiles the other consumer needs and
            this one does not, in step, so barrier phases stay paired."""

            @pl.loop(first, end)
            def _(tile):
                plgpu.barrier_wait(k_ready.at[stage(tile)])
                release(k_free, tile)
                plgpu.barrier_wait(v_ready.at[stage(tile)])
                release(v_free, tile)

        def k_tile(tile):
            """K_tile^T, one view per column block, once it has landed."""
            plgpu.barrier_wait(k_ready.at[stage(tile)])
            return [
                plgpu.transpose_ref(buf.block("k", stage(tile), b), (1, 0))
                for b in range(buf.blocks)
            ]

        def v_tile(tile):
            plgpu.barrier_wait(v_ready.at[stage(tile)])
            return [buf.block("v", stage(tile), b) for b in range(buf.blocks)]

        def qk(s_acc, k_t):
            """Issue S += Q K^T, one wgmma (commit group) per column block."""
            for q_block, k_block in zip(my_q, k_t, strict=True):
                plgpu.wgmma(s_acc, q_block, k_block)

        def pv(o_accs, p, v):
            """Issue O += P V, one wgmma (commit group) per column block of O."""
            for o_acc, v_block in zip(o_accs, v, strict=True):
                plgpu.wgmma(o_acc, p, v_block)

        def o_accs():
            return [plgpu.ACC((rows, buf.cols), jnp.float32) for _ in range(buf.blocks)]

        def release(free, tile):
            plgpu.barrier_arrive(free.at[wg * stages + stage(tile)])

        def scores(tile):
            """S_tile = Q K_tile^T, waited for."""
            k_t = k_tile(tile)

            def body(s_acc):
                qk(s_acc, k_t)
                return s_acc[...]

            s = pl.run_scoped(body, plgpu.ACC((rows, bk), jnp.float32))
            release(k_free, tile)
            return s

        def softmax(tile, s, row_max, row_sum, masked):
            if masked:
                s = _mask(plan, s, tile, first_row)
            return _online_softmax(plan, s, row_max, row_sum, masked=masked, dtype=dtype)

        def add_pv(tile, o, p):
            """O += P V_tile, waited for (O is the wgmma accumulator)."""
            v = v_tile(tile)

            def body(accs):
                pv(accs, p, v)

            o = pl.run_state(body)([plgpu.ACC.init(o_block) for o_block in o])
            release(v_free, tile)
            return o

        # --- the three schedules; each step consumes tile ``tile`` and ends with
        # --- P_tile (or S_tile) ready for the next step.
        def step_pv(tile, carry, *, masked):
            """FA-3 Alg. 2: issue S_{t+1} and P_t V_t; softmax S_{t+1} while PV runs."""
            o, p, row_max, row_sum = carry
            k_t, v = k_tile(tile + 1), v_tile(tile)

            def body(s_acc, accs):
                for o_acc, o_block in zip(accs, o, strict=True):
                    o_acc[...] = o_block
                qk(s_acc, k_t)
                pv(accs, p, v)
                # S_{t+1} only: the PV groups (one per column block) may still run
                s = plgpu.wgmma_accumulator_load(s_acc, wait_n=len(accs))
                release(k_free, tile + 1)
                p_next, new_max, new_sum, alpha = softmax(tile + 1, s, row_max, row_sum, masked)
                o_new = [plgpu.wgmma_accumulator_load(o_acc, wait_n=0) for o_acc in accs]
                release(v_free, tile)
                return _rescale(o_new, alpha), p_next, new_max, new_sum

            return pl.run_scoped(body, plgpu.ACC((rows, bk), jnp.float32), o_accs())

        def step_qk(tile, carry, *, masked):
            """Issue S_{t+1}; softmax S_t while it runs; then O += P_t V_t."""
            s, o, row_max, row_sum = carry
            k_t = k_tile(tile + 1)

            def body(s_acc):
                qk(s_acc, k_t)
                p, new_max, new_sum, alpha = softmax(tile, s, row_max, row_sum, masked)
                o_new = add_pv(tile, _rescale(o, alpha), p)
                return s_acc[...], o_new, new_max, new_sum

            out = pl.run_scoped(body, plgpu.ACC((rows, bk), jnp.float32))
            release(k_free, tile + 1)
            return out

        def step_none(tile, carry, *, masked):
            s, o, row_max, row_sum = carry
            p, row_max, row_sum, alpha = softmax(tile, s, row_max, row_sum, masked)
            o = add_pv(tile, _rescale(o, alpha), p)
            return scores(tile + 1), o, row_max, row_sum

        reduced = plgpu.Layout.WGMMA.reduce(1)
        row_max = _layout(jnp.full((rows,), -jnp.inf, jnp.float32), reduced)
        row_sum = _layout(jnp.zeros((rows,), jnp.float32), reduced)
        zeros = jnp.zeros((rows, buf.cols), jnp.float32)
        o = [_layout(zeros, plgpu.Layout.WGMMA) for _ in range(buf.blocks)]

        my_rows = (batch, pl.ds(first_row, rows), head)
        if slots == 1:
            load_q(unit, slot)
        has_left_edge = plan.bounds[0] is not None
        if has_left_edge and not plan.heads_paired:
            drain(unit_lo, lo)  # the partner's rows start earlier (a window)
        plgpu.barrier_wait(q_ready.at[slot])
        s = scores(lo)
        if slots > 1:  # the next unit's Q into the other buffer, once its O store has read it
            plgpu.wait_smem_to_gmem(0, wait_read_only=True)
            pl.when(unit + plan.ctas < plan.units)(
                lambda: load_q(unit + plan.ctas, wg * slots + 1 - parity)
            )
        last = hi - 1
        tail_masked = bool(plan.bounds != (None, None) or plan.kv_len % bk)
        # three runs of tiles: masked (the window's left edge), unmasked, masked (the
        # diagonal, the window's right edge, the padded tail)
        if cfg.overlap == "pv":
            # the loop step t handles S_{t+1}: mask iff t+1 < lo_full or t+1 >= hi_full
            p, row_max, row_sum, _ = softmax(lo, s, row_max, row_sum, True)
            step, carry = step_pv, (o, p, row_max, row_sum)
            begin_unmasked = jnp.clip(lo_full - 1, lo, last)
            end_unmasked = jnp.clip(hi_full - 1, begin_unmasked, last)
        else:
            step = step_qk if cfg.overlap == "qk" else step_none
            carry = (s, o, row_max, row_sum)
            begin_unmasked = jnp.clip(lo_full, lo, last)
            end_unmasked = jnp.clip(hi_full, begin_unmasked, last)
        if has_left_edge:
            carry = lax.fori_loop(lo, begin_unmasked, functools.partial(step, masked=True), carry)
        carry = lax.fori_loop(
            begin_unmasked, end_unmasked, functools.partial(step, masked=False), carry
        )
        carry = lax.fori_loop(end_unmasked, last, functools.partial(step, masked=True), carry)
        if cfg.overlap == "pv":
            o, p, row_max, row_sum = carry
        else:
            s, o, row_max, row_sum = carry
            p, row_max, row_sum, alpha = softmax(last, s, row_max, row_sum, tail_masked)
            o = _rescale(o, alpha)
        o = add_pv(last, o, p)
        if not plan.heads_paired:
            drain(hi, unit_hi)  # the partner's rows end later (causal, a window)

        # O / l and the log-sum-exp, through shared memory and a TMA store.
        l_safe = jnp.where(row_sum == 0.0, 1.0, row_sum)  # rows with no key: O = 0
        for o_block, q_block in zip(_rescale(o, 1.0 / l_safe), my_q, strict=True):
            q_block[...] = o_block.astype(dtype)
        if plan.return_lse:
            buf.lse.at[wg][...] = row_max * LN_2 + jnp.log(row_sum)  # -inf if no key
        plgpu.commit_smem()
        for src, part in buf.copies("q", slot, o_ref.at[my_rows]):
            plgpu.copy_smem_to_gmem(src, part)
        if plan.return_lse:
            plgpu.copy_smem_to_gmem(buf.lse.at[wg], lse_ref.at[batch, head, pl.ds(first_row, rows)])
        if slots == 1:  # the next unit's Q lands in the same buffer: the store must have read it
            plgpu.wait_smem_to_gmem(0, wait_read_only=True)
        return base + unit_hi - unit_lo

    if slots > 1:  # the first unit's Q (the persistent CTA's first unit is its index)
        load_q(lax.axis_index("cta"), wg * slots)
    _for_each_unit(plan, one_unit)
    plgpu.wait_smem_to_gmem(0)


def _for_each_unit(plan: _Plan, one_unit):
    """Run ``one_unit(unit, base, local) -> base`` over this CTA's work units (``local``:
    the unit's index among them)."""
    if not plan.config.persistent:
        one_unit(jnp.int32(0), jnp.int32(0), jnp.int32(0))
        return
    cta = lax.axis_index("cta")
    my_units = lax.div(plan.units - 1 - cta, jnp.int32(plan.ctas)) + 1
    lax.fori_loop(0, my_units, lambda i, base: one_unit(cta + i * plan.ctas, base, i), jnp.int32(0))


def _producer(plan: _Plan, refs, smem, barriers):
    """The producer warpgroup: TMA copies of K and V tiles into the stage ring.

    Before overwriting a stage it waits until both consumers released it; across work
    units (persistent) it runs ahead into the next unit while the consumers finish.
    """
    import jax.experimental.pallas as pl
    import jax.experimental.pallas.mosaic_gpu as plgpu

    cfg = plan.config
    _, k_ref, v_ref, _, _ = refs
    buf: _Buffers = smem
    _, k_ready, v_ready, k_free, v_free = barriers
    bk, stages = cfg.block_k, cfg.num_stages
    plgpu.set_max_registers(PRODUCER_REGISTERS, action="decrease")

    def one_unit(unit, base, _local):
        coords = _unit_coords(plan, unit)
        batch = coords[2]
        kv_head = lax.div(_consumer_work(plan, coords, 0)[0], jnp.int32(plan.group))
        unit_lo, unit_hi = _unit_tiles(plan, coords)

        @pl.loop(unit_lo, unit_hi)
        def _(tile):
            step = base + tile - unit_lo
            slot = lax.rem(step, jnp.int32(stages))
            rows = (batch, pl.ds(tile * bk, bk), kv_head)
            for free, src, name, ready in (
                (k_free, k_ref, "k", k_ready),
                (v_free, v_ref, "v", v_ready),
            ):
                for wg in range(CONSUMERS):  # each consumer released the stage
                    pl.when(step >= stages)(
                        lambda free=free, wg=wg: plgpu.barrier_wait(free.at[wg * stages + slot])
                    )
                for dst, part in buf.copies(name, slot, src.at[rows]):
                    plgpu.copy_gmem_to_smem(part, dst, ready.at[slot])

        return base + unit_hi - unit_lo

    _for_each_unit(plan, one_unit)


@dataclasses.dataclass(frozen=True)
class _Buffers:
    """A CTA's shared memory: Q (then O) of each consumer, K and V of each stage, the
    lse; and how wgmma (``mma``) and the TMA copies (``tma``) see Q, K and V.

    Tiled layout: one buffer per name, ``(index, rows, d)``, tiled by (8, one swizzle
    row) as wgmma reads it; one TMA copy moves a ``(rows, d)`` slice. The copy's
    descriptor tiles the sequence by 8 too, so Mosaic GPU lowers it only where n and
    kv_len are multiples of 8.

    Blocked layout (``_Plan.blocked``): d in ``blocks`` column blocks of one swizzle row
    (``cols`` = swizzle bytes / itemsize), one buffer ``(index, rows, cols)`` per name and
    block. wgmma reads block b through its (8, cols)-tiled view (one wgmma per block), and
    one TMA copy per block moves the ``(rows, cols)`` column slice through a swizzle-only
    view of the same bytes (a ``plgpu.RefUnion`` of the two groups): that descriptor keeps
    the sequence whole, so the TMA zero-fills the rows past n or kv_len and skips the
    stores past n, at any length. A buffer per block keeps every index into a view a
    traced value (jax 0.11.2's Mosaic GPU lowering refuses a view with a constant index
    captured by a ``run_state`` body: "Shaped arrays must be represented by ir.Values").
    """

    mma: dict  # name -> one ref per block
    tma: dict  # name -> one ref per block (the tiled layout: ``mma``'s)
    cols: int  # of one block (d in the tiled layout)
    lse: object
    blocked: bool

    @property
    def blocks(self) -> int:
        return len(self.mma["q"])

    def block(self, name: str, index, b: int):
        """Column block ``b`` of buffer ``name`` (q, k, v) at ``index``, as wgmma reads it."""
        return self.mma[name][b].at[index]

    def copies(self, name: str, index, gmem):
        """(shared-memory view, global view) of each TMA copy of buffer ``name`` at
        ``index``; ``gmem``: the ``(rows, d)`` global slice (Q, K or V in; O out)."""
        import jax.experimental.pallas as pl

        return [
            (ref.at[index], gmem.at[:, pl.ds(b * self.cols, self.cols)] if self.blocked else gmem)
            for b, ref in enumerate(self.tma[name])
        ]


def _buffer_types(plan: _Plan, dtype):
    """The shared-memory allocations of ``_Buffers`` and a function of the allocated refs
    that builds it."""
    import jax.experimental.pallas.mosaic_gpu as plgpu

    cfg = plan.config
    itemsize = jnp.dtype(dtype).itemsize
    swizzle = swizzle_bytes(plan.d, itemsize)
    cols = plan.block_cols if plan.blocked else plan.d
    lead = {  # Q (then O) per consumer, K and V per stage
        "q": (CONSUMERS * cfg.q_slots, ROWS_PER_CONSUMER),
        "k": (cfg.num_stages, cfg.block_k),
        "v": (cfg.num_stages, cfg.block_k),
    }
    shapes = [(name, shape + (cols,)) for name, shape in lead.items()]
    shapes = [(name, shape) for name, shape in shapes for _ in range(plan.d // cols)]
    tiled = (plgpu.TilingTransform((8, swizzle // itemsize)), plgpu.SwizzleTransform(swizzle))
    mma = [plgpu.SMEM(shape, dtype, transforms=tiled) for _, shape in shapes]
    lse = plgpu.SMEM((CONSUMERS, ROWS_PER_CONSUMER), jnp.float32) if plan.return_lse else None

    def by_name(refs) -> dict:
        out: dict = {name: [] for name in lead}
        for (name, _), ref in zip(shapes, refs, strict=True):
            out[name].append(ref)
        return out

    if not plan.blocked:
        return (mma, lse), lambda refs: _Buffers(
            by_name(refs[0]), by_name(refs[0]), cols, refs[1], False
        )
    copied = (plgpu.SwizzleTransform(swizzle),)
    tma = [plgpu.SMEM(shape, dtype, transforms=copied) for _, shape in shapes]

    def buffers(refs):  # RefUnion: both groups from offset 0, equal buffers in one order
        (mma_refs, tma_refs), lse_ref = refs
        return _Buffers(by_name(mma_refs), by_name(tma_refs), cols, lse_ref, True)

    return (plgpu.RefUnion(mma, tma), lse), buffers


def _cta(plan: _Plan, q_ref, k_ref, v_ref, o_ref, lse_ref):
    """One CTA: allocate the stage ring and the barriers, then split into roles."""
    import jax.experimental.pallas as pl
    import jax.experimental.pallas.mosaic_gpu as plgpu

    cfg = plan.config
    stages = cfg.num_stages
    smem_types, buffers = _buffer_types(plan, q_ref.dtype)
    blocks = plan.d // plan.block_cols if plan.blocked else 1
    barrier_types = (
        # q_ready, k_ready, v_ready: one arrival (with its bytes) per copy, a copy a block
        plgpu.Barrier(num_arrivals=blocks, num_barriers=CONSUMERS * cfg.q_slots),
        plgpu.Barrier(num_arrivals=blocks, num_barriers=stages),
        plgpu.Barrier(num_arrivals=blocks, num_barriers=stages),
        plgpu.Barrier(num_barriers=CONSUMERS * stages),  # k_free[wg, stage]
        plgpu.Barrier(num_barriers=CONSUMERS * stages),  # v_free[wg, stage]
    )
    refs = (q_ref, k_ref, v_ref, o_ref, lse_ref)

    def roles(smem, barriers):
        smem = buffers(smem)
        wg = lax.axis_index("wg")

        @pl.when(wg < CONSUMERS)
        def _():
            _consumer(plan, refs, smem, barriers, wg)

        @pl.when(wg == CONSUMERS)
        def _():
            _producer(plan, refs, smem, barriers)

    pl.run_scoped(roles, smem_types, barrier_types, collective_axes="wg")


def _forward(q, k, v, plan: _Plan):
    import jax.experimental.pallas.mosaic_gpu as plgpu

    if plan.config.pad_seq:
        q_p = _pad_to(q, plan.n_pad)
        k_p, v_p = _pad_to(k, plan.kv_pad), _pad_to(v, plan.kv_pad)
        n_out = plan.n_pad
    else:  # TMA zero-fills loads past the end and skips stores past it
        q_p, k_p, v_p, n_out = q, k, v, plan.n
    out_types = [jax.ShapeDtypeStruct((plan.batch, n_out, plan.heads, plan.d), q.dtype)]
    # the lse stays padded: a TMA store needs 16-byte strides, 4 n bytes need not be
    if plan.return_lse:
        out_types.append(jax.ShapeDtypeStruct((plan.batch, plan.heads, plan.n_pad), jnp.float32))

    def body(q_ref, k_ref, v_ref, o_ref, *lse_refs):
        _cta(plan, q_ref, k_ref, v_ref, o_ref, lse_refs[0] if lse_refs else None)

    if plan.config.persistent:
        grid, names = (plan.ctas,), ("cta",)
    else:
        grid, names = (plan.q_units, plan.head_units, plan.batch), ("q", "heads", "batch")
    outs = plgpu.kernel(
        body,
        out_type=out_types,
        grid=grid,
        grid_names=names,
        num_threads=CONSUMERS + 1,
        thread_name="wg",
        compiler_params=plgpu.CompilerParams(approx_math=True),
    )(q_p, k_p, v_p)
    o = outs[0] if n_out == plan.n else outs[0][:, : plan.n]
    return o, (outs[1][:, :, : plan.n] if plan.return_lse else None)


def _pad_to(x, length: int):
    """Zero rows appended to axis 1 up to ``length`` (no copy when already there)."""
    pad = length - x.shape[1]
    return x if pad == 0 else jnp.pad(x, ((0, 0), (0, pad), (0, 0), (0, 0)))


_jitted_forward = jax.jit(_forward, static_argnames=("plan",))


def mosaic_flash_attention(
    q,
    k,
    v,
    *,
    causal: bool = False,
    window=None,
    sm_scale: float | None = None,
    return_lse: bool = False,
    **options,
):
    """Attention on Hopper; arguments as ``pallas_kernels.flash_attention``.

    ``options`` replace fields of ``heuristic_config(head_dim, causal, window)`` (``Config``:
    ``block_k``, ``num_stages``, ``overlap``, ``persistent``); query tiles are 64 rows
    per consumer warpgroup.
    """
    o, lse = _run(
        q, k, v, causal=causal, window=window, sm_scale=sm_scale, return_lse=return_lse, **options
    )
    return (o, lse) if return_lse else o


def _run(q, k, v, *, causal, sm_scale, return_lse, window=None, diagonal_offset=0, **options):
    """Plan (refusing what the kernel does not run), pad the head dim to the native one,
    run, and slice O back."""
    d = q.shape[-1]
    window = window_bounds(window, causal)
    config = resolve_config(q, causal, options, window)
    reason = supported(q, k, v, causal=causal, config=config, window=window)
    if reason:
        raise ValueError(f"backend='mosaic' cannot run this call: {reason}")
    d_pad = run_head_dim(d, config)
    q, k, v = (_pad_head_dim(x, d_pad) for x in (q, k, v))
    plan = _plan(
        q,
        k,
        causal=bool(causal),
        sm_scale=softmax_scale(d, sm_scale),
        return_lse=bool(return_lse),
        config=config,
        window=window,
        diagonal_offset=diagonal_offset,
    )
    o, lse = _jitted_forward(q, k, v, plan)
    return o[..., :d], lse


def _pad_head_dim(x, d_pad: int):
    """Zero columns appended to the head dim (a copy; only where d is not native)."""
    pad = d_pad - x.shape[-1]
    return x if pad == 0 else jnp.pad(x, ((0, 0), (0, 0), (0, 0), (0, pad)))


def resolve_config(q, causal: bool, options: dict, window=None) -> Config:
    """``options`` over ``heuristic_config(head_dim, causal, window)``; an unknown one is a
    TypeError."""
    unknown = set(options) - set(Config.__dataclass_fields__)
    if unknown:
        raise TypeError(f"unknown Mosaic options {sorted(unknown)}; see flash_mosaic.Config")
    return dataclasses.replace(heuristic_config(q.shape[-1], bool(causal), window), **options)


def forward_with_test_hooks(
    q, k, v, *, causal, sm_scale=None, diagonal_offset=0, window=None, **options
):
    """Tests' entry point: (O, lse) with the causal diagonal shifted by ``diagonal_offset``
    (key j visible to row i iff ``j <= i + offset``; negative offsets leave rows with no
    key). ``options`` replace fields of ``heuristic_config``."""
    return _run(
        q,
        k,
        v,
        causal=causal,
        sm_scale=sm_scale,
        return_lse=True,
        window=window,
        diagonal_offset=diagonal_offset,
        **options,
    )


__all__ = [
    "Config",
    "heuristic_config",
    "mosaic_flash_attention",
    "native_head_dim",
    "supported",
]
