"""What a kernel family launches for a shape on a device: every launch rule, once.

For each point (a numpy column; one point is a one-row column) this module decides,
from the family's rules (``specs/kernels``) and the device's on-chip limits:

- the tile (``block_q`` x ``block_k``) and warps: the family's per head dim unless named;
- the on-chip footprint of one thread block: shared memory for its Q tile and
  ``kv_stages`` K and V tiles, float32 accumulators in registers (S, O, max, sum);
- how blocks sit on an SM: blocks at once, spilled registers, K/V bytes in flight;
- GQA packing: query heads of one K/V group sharing a tile;
- K/V splits (flash-decoding): the family's wave-efficiency rule;
- the alternatives the floor is taken over: every packing and split count the family
  could launch (:func:`floor_launches`).

The footprint reproduces what the FlashAttention-2 sources say of their own tiles:
256x64 at d=64 with 4 warps "is 85% slower because of register spilling" (256·(64+64)
f32 over 128 threads = 256 registers), and d=256 at 64x64 takes 96 KB so that "we can
get 2 CTAs per SM" on H100 (csrc/flash_attn/src/flash_fwd_launch_template.h). Left
out: registers for addresses and loop state, the register allocation granularity, and
the P tile (converted from S in place).

>>> from perfmodel.catalog.hardware import load_hardware
>>> from perfmodel.catalog.kernels import load_kernel
>>> c = resolve(load_kernel("fa3"), load_hardware("h200"), n=8192, m=8192, d=128, h=16,
...             h_kv=16, b=1, s=2, causal=False)
>>> int(c.block_q[0]), int(c.block_k[0]), int(c.pack[0]), int(c.splits[0])
(128, 176, 1, 1)
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from kernel_rules import group_split
from perfmodel import trace
from perfmodel.catalog.hardware import HardwareSpec
from perfmodel.catalog.kernels import (
    ON_CHIP_HEAD_DIM_PADDING,
    KernelFamily,
    load_kernel,
    padded_head_dim,
)
from perfmodel.compile import Compiled, compiled_named
from perfmodel.costs import masks
from perfmodel.errors import PerfmodelError
from perfmodel.roofline import FLOATS, Array, Num, xp_of
from perfmodel.roofline import rows as picked
from perfmodel.shape import Shape
from perfmodel.trace import as_float, as_int, is_traced, never_negative, opaque, searching

#: A column of numbers, one per point.
Column = npt.NDArray[np.float64]

#: Tile sides must be multiples of the matrix instruction's shape: 16 query rows
#: (mma.sync m16n8k16; wgmma's 64 rows are per warpgroup) and 8 keys (its n).
BLOCK_Q_MULTIPLE = 16
BLOCK_K_MULTIPLE = 8
#: Bytes of one register (32 bits).
REGISTER_BYTES = 4
WARP = 32
#: Query rows of one consumer warpgroup of our Mosaic kernel (flash_mosaic.ROWS_PER_CONSUMER).
MOSAIC_CONSUMER_ROWS = 64
#: Registers a producer warp's thread runs on (FA-3 sets 24-32 with setmaxnreg).
PRODUCER_REGISTERS = 32


def _tile_expression(name: str) -> Compiled:
    """The on-chip footprint of one block, the cost models' expressions compiled: the
    forward's SRAM bytes and float32 accumulators (``costs.flash.SRAM_BYTES``,
    ``ACCUMULATORS``), the backward's dK/dV block's shared memory and register bytes
    (``costs.backward.backward_sram_bytes``, ``backward_register_bytes``)."""

    def build() -> tuple[Any, None]:
        if name.startswith("backward_"):
            from perfmodel.costs import backward as backward_costs

            return getattr(backward_costs, name)(), None
        from perfmodel.costs import flash as flash_costs

        return getattr(flash_costs, name), None

    return compiled_named(f"launch {name}", build)[0]


@dataclass(frozen=True)
class Launch:
    """One launch per point: each field a float64 column (plain floats for one point,
    :meth:`point`)."""

    block_q: Num
    block_k: Num
    warps: Num
    kv_stages: Num  #: K/V tile stages in shared memory (the tile's, else the family's)
    pack: Num  #: query heads sharing one tile (one K/V read per group when > 1)
    splits: Num  #: K/V chunks per (batch, head group, Q block)
    group: Num  #: query heads per K/V head (h / h_kv)
    smem_bytes: Num  #: shared memory of one block
    accumulator_bytes: Num  #: float32 accumulators of one block (S, O, max, sum)
    registers_per_thread: Num  #: demanded, before any cap
    threads: Num  #: compute threads (the accumulators are spread over these)
    producer_threads: Num
    blocks_per_sm: Num
    spilled_registers_per_thread: Num
    #: Local-memory bytes one inner-loop step moves: spilled registers written and read.
    spill_bytes_per_tile: Num
    #: K/V bytes one block has in flight from memory: one step's K and V tiles, or
    #: ``kv_stages`` of them where a producer (TMA) issues the loads ahead.
    bytes_in_flight: Num
    #: Q bytes one block loads before its first step (and O bytes it writes after its last)
    q_tile_bytes: Num
    #: The most K/V splits the floor tries (:func:`split_limit`) at one program per query
    #: head, and with the GQA group packed in a tile.
    split_limit_one: Num
    split_limit_group: Num
    #: K/V tiles in flight ahead of the one computed on (``KernelFamily.loads_ahead``)
    loads_ahead: Num = 1.0
    #: HBM bytes one block moves outside its loop: the query rows it holds (at most its Q
    #: tile; one packed group's at decode) in, and their O out
    edge_bytes: Num = 0.0
    #: The head dim the kernel runs at (``KernelFamily.head_dim_padding``).
    head_dim: Num = 0.0
    #: Bytes read and written, and kernels run, by the copies into padded inputs and out
    #: of the padded output around the fused kernel (:func:`pad_copies`).
    pad_bytes: Num = 0.0
    pad_copies: Num = 0.0
    #: XLA kernels the wrapper runs around the modelled ones (:func:`xla_kernels`).
    xla_kernels: Num = 0.0
    #: The busiest SM's inner-loop steps over what equal blocks would give it, with the
    #: programs taken longest first (:func:`schedule_imbalance`; 1: equal work).
    imbalance: Num = 1.0

    def __len__(self) -> int:
        return len(cast(Array, self.block_q))  # a launch of columns

    def take(self, rows: Any) -> Launch:
        """The launch of some rows (an index or a boolean mask)."""
        return Launch(**{f.name: picked(getattr(self, f.name), rows) for f in fields(self)})

    def point(self) -> Launch:
        """A one-row launch with plain floats for its columns (one point's numbers)."""
        return Launch(**{f.name: float(getattr(self, f.name)[0]) for f in fields(self)})

    def rows(self, index: Any) -> Launch:
        """The launch at some rows; a point launch is its own rows."""
        return self if isinstance(self.block_q, float) else self.take(index)


IntArray = npt.NDArray[np.int64]


def _column(value: Any) -> Column:
    return np.atleast_1d(np.asarray(value, dtype=np.float64))


def check_multiple(name: str, value: Any, multiple: int) -> None:
    """A tile side (or split count) the hardware allows: a positive multiple of
    ``multiple``; the error names the first value that is not."""
    arr = np.atleast_1d(np.asarray(value))
    bad = (arr <= 0) | (arr % multiple != 0)
    if np.any(bad):
        shown = arr[bad].flat[0].item()
        raise PerfmodelError(f"{name}={shown!r} must be a positive multiple of {multiple}")


#: Largest integer key :func:`distinct` indexes by a lookup table (else it sorts).
_TABLE_KEYS = 1 << 16


def _codes(key: Column) -> tuple[npt.NDArray[np.intp], Column]:
    """Each row's index into the key's distinct values, and those values (ascending).
    Integer keys below ``_TABLE_KEYS`` (head dims, flags, block counts) by a lookup
    table, in one pass; others by a sort."""
    if key.strides == (0,) and key.size:  # one value, broadcast
        return np.zeros(key.size, dtype=np.intp), key[:1].astype(np.float64)
    low, high = (float(key.min()), float(key.max())) if key.size else (0.0, 0.0)
    ints = key.astype(np.intp) if low >= 0 and high < _TABLE_KEYS else None
    if ints is not None and np.array_equal(ints, key):
        seen = np.zeros(int(high) + 1, dtype=bool)
        seen[ints] = True
        values = np.flatnonzero(seen)
        index = np.cumsum(seen, dtype=np.intp) - 1
        return index[ints], values.astype(np.float64)
    values, inverse = np.unique(key, return_inverse=True)
    return inverse.ravel().astype(np.intp), values.astype(np.float64)


def distinct(*keys: Column) -> tuple[Column, npt.NDArray[np.intp]]:
    """The distinct rows of some key columns (one row per distinct tuple, as columns of
    a 2-D array) and each point's row in them: what ``np.unique(axis=0)`` gives, without
    its sort of whole rows."""
    if len(keys[0]) == 1:  # one point: its row
        return np.array([[float(k[0]) for k in keys]]), np.zeros(1, dtype=np.intp)
    code, values = _codes(np.asarray(keys[0], dtype=np.float64))
    table = values[:, None]
    for key in keys[1:]:
        column = np.asarray(key, dtype=np.float64)
        if column.strides == (0,) and column.size:  # one value: the same rows, one more column
            table = np.concatenate([table, np.full((len(table), 1), column[0])], axis=1)
            continue
        more, more_values = _codes(column)
        joint, rows = _codes((code * len(more_values) + more).astype(np.float64))
        first = np.zeros(len(rows), dtype=np.intp)
        first[joint[::-1]] = np.arange(len(joint))[::-1]  # a point of each joint row
        table = np.concatenate([table[code[first]], more_values[more[first]][:, None]], axis=1)
        code = joint
    return table, code


def _by_unique(fn: Callable[..., tuple[float, ...]], *keys: Column) -> list[Column]:
    """``fn`` of each distinct key tuple, spread back over the rows: one call per
    distinct value, whatever the number of points."""
    uniq, inverse = distinct(*keys)
    table = np.array([fn(*row) for row in uniq.tolist()], dtype=np.float64)
    return list(_at_points(table.T, inverse))


def _at_points(table: npt.NDArray[np.float64], inverse: npt.NDArray[np.intp]) -> Column:
    """Each row of ``table`` (one value per distinct key) at every point: one contiguous
    column each (``table[:, inverse]`` would lay the values of a point side by side, and
    every operation on such a strided column costs four times as much)."""
    out: Column = np.take(np.ascontiguousarray(table), inverse, axis=1)
    return out


def default_tiles(
    family: KernelFamily, d: Column, causal: Column, arch: str | None
) -> tuple[Column, Column, Column, Column, Column]:
    """The family's (block_q, block_k, warps, kv_stages, loads_ahead) per point: its
    first tile matching the head dim, causal flag and arch (``KernelFamily.tile_for``),
    with the tile's own K/V stages where it states them, else the family's, and the K/V
    tiles in flight ahead of use (``KernelFamily.loads_ahead``)."""

    def tile(dim: float, masked: float) -> tuple[float, float, float, float, float]:
        t = family.tile_for(int(dim), causal=bool(masked), arch=arch)
        check_multiple("block_q", np.array([float(t.block_q)]), BLOCK_Q_MULTIPLE)
        check_multiple("block_k", np.array([float(t.block_k)]), BLOCK_K_MULTIPLE)
        stages = t.kv_stages or family.kv_stages
        return (t.block_q, t.block_k, t.warps, stages, family.loads_ahead(t))

    bq, bk, w, stages, ahead = _by_unique(tile, d, causal)
    return bq, bk, w, stages, ahead


def tile_limit(family: KernelFamily, d: Column, causal: Column, arch: str | None) -> Column:
    """The blocks per SM the family's own tile at each point states (``Tile.blocks_per_sm``:
    registers the accumulators do not account for), infinity where it states none."""

    def limit(dim: float, masked: float) -> tuple[float]:
        stated = family.tile_for(int(dim), causal=bool(masked), arch=arch).blocks_per_sm
        return (np.inf if stated is None else float(stated),)

    return _by_unique(limit, d, causal)[0]


@dataclass(frozen=True)
class BackwardLaunch:
    """The backward's tile (both its kernels), blocks per SM of its dK/dV kernel, the
    Q/dO tiles in flight ahead of use, the head dim it runs at and its wrapper's padding
    copies: numbers for one point, else columns."""

    block_q: Any
    block_k: Any
    blocks_per_sm: Any
    loads_ahead: Any
    head_dim: Any
    pad_bytes: Any
    pad_copies: Any
    #: query-head shares a GQA group's dK/dV programs split into (1: summed on chip)
    group_split: Any
    #: 1 where dK, dV leave per query head and kernels of their own sum the group after
    #: (``Backward.group_reduce`` "kernels" and a group larger than one), else 0
    group_reduce: Any
    #: the two-pass dQ kernel's tile (query rows a CTA owns, keys a step): the tile's
    #: ``dq_block_*`` where it states them, else the dK/dV kernel's (:func:`dq_tiles`)
    dq_block_q: Any
    dq_block_k: Any
    #: bytes a dK/dV program moves outside its loop, exposed once a wave (the ``prologue``
    #: effect): its K and V tiles in, its dK and dV out (float32 where kernels of their own
    #: sum the group after)
    edge_bytes: Any = 0.0


def backward_imbalance(
    causal: bool,
    *,
    n: Any,
    m: Any,
    h: Any,
    h_kv: Any,
    b: Any,
    launch: BackwardLaunch,
    slots: float,
) -> tuple[tuple[str, Any], ...]:
    """A causal backward's compute stretch per kernel, by name: the busiest SM's time
    over the wave terms' (``ceil(programs / slots)`` programs of the mean). The dK/dV
    kernel's programs are K/V blocks walking the query tiles that see them
    (b·h_kv·group_split of each; FlashAttention's atomic kernel one per query head),
    the dQ kernel's are Q blocks walking K/V blocks. Neither grid is persistent: a CTA
    starts where an SM frees up (:func:`dispatched_stretch`). Empty without a causal
    mask (every program then walks the same tiles)."""
    if not causal:
        return ()
    one = all(np.ndim(v) == 0 for v in (n, m, h, h_kv, b, launch.block_q, launch.group_split))
    cols = np.broadcast_arrays(
        *(np.atleast_1d(np.asarray(v, dtype=np.float64)) for v in (n, m, h, h_kv, b))
    )
    n, m, h, h_kv, b = cols
    bq = np.broadcast_to(np.asarray(launch.block_q, dtype=np.float64), n.shape)
    bk = np.broadcast_to(np.asarray(launch.block_k, dtype=np.float64), n.shape)
    dq_q = np.broadcast_to(np.asarray(launch.dq_block_q, dtype=np.float64), n.shape)
    dq_k = np.broadcast_to(np.asarray(launch.dq_block_k, dtype=np.float64), n.shape)
    # the dK/dV grid at (block_q, block_k); the dQ grid's Q blocks of dq_q rows walking
    # K/V tiles of dq_k keys (the second half of _causal_programs at (dq_k, dq_q))
    table = np.stack([n, m, bq, bk, dq_k, dq_q], axis=1)
    keys, inverse = np.unique(table, axis=0, return_inverse=True)
    stats = np.array(
        [
            _causal_programs(*(int(v) for v in row[:4]))[:3]
            + _causal_programs(int(row[0]), int(row[1]), int(row[4]), int(row[5]))[3:]
            for row in keys
        ]
    )
    rows = stats[inverse.reshape(-1)]
    kv_side, q_side = (rows[:, 0], rows[:, 1], rows[:, 2]), (rows[:, 3], rows[:, 4], rows[:, 5])
    split = np.broadcast_to(np.asarray(launch.group_split, dtype=np.float64), n.shape)
    out = (
        ("bwd_dkdv", dispatched_stretch(*kv_side, copies=b * h_kv * split, slots=slots)),
        ("bwd_dkdvdq", dispatched_stretch(*kv_side, copies=b * h, slots=slots)),
        ("bwd_dq", dispatched_stretch(*q_side, copies=b * h, slots=slots)),
    )
    return tuple((name, float(v[0]) if one else v) for name, v in out)


def _causal_programs(n: int, m: int, block_q: int, block_k: int) -> tuple[float, ...]:
    """(programs, longest, mean steps) of a causal backward's two grids for one head,
    queries aligned bottom-right (row i sees keys up to i + m - n): K/V blocks of
    ``block_k`` keys walking Q tiles of ``block_q`` rows (the dK/dV kernel), then Q blocks
    of ``block_k`` rows walking K/V tiles of ``block_q`` keys (the dQ kernel; called
    with the dQ kernel's keys and rows for its half: :func:`backward_imbalance`)."""
    shift = m - n
    first_row = np.maximum(0, np.arange(0, m, block_k) - shift)  # the first row seeing it
    kv_steps = np.maximum(0, -(-n // block_q) - first_row // block_q)
    last_row = np.minimum(np.arange(block_k, n + block_k, block_k), n) - 1
    q_steps = np.clip((last_row + shift) // block_q + 1, 0, -(-m // block_q))
    return tuple(
        float(v)
        for steps in (kv_steps, q_steps)
        for v in (len(steps), steps.max(initial=0), steps.mean() if len(steps) else 0.0)
    )


def dispatched_stretch(
    blocks: Column, longest: Column, mean: Column, copies: Column, slots: float
) -> Column:
    """The busiest SM's time over the wave terms' for a grid of ``copies`` × ``blocks``
    programs of unequal steps, dispatched longest first as SMs free up (a
    non-persistent grid, the longest blocks first in its order): the longest program or
    the mean share of the SMs, whichever is more, against ``ceil(programs / slots)``
    programs of the mean; never below 1 (the wave terms stand where the short programs
    would fill the last wave). Above 1 where one long program outlasts the rest: a grid
    of few programs (a small batch, an MQA group)."""
    programs = copies * blocks
    waves = np.ceil(programs / slots)
    busiest = np.maximum(longest, programs * mean / slots)
    with np.errstate(divide="ignore", invalid="ignore"):
        stretch = busiest / (waves * mean)
    return np.where(mean > 0, np.maximum(stretch, 1.0), 1.0)


def pad_copies(
    family: KernelFamily,
    *,
    n: Num,
    m: Num,
    d: Num,
    d_run: Num,
    h: Num,
    h_kv: Num,
    b: Num,
    s: Num,
    block_q: Num,
    block_k: Num,
    per_side: int = 2,
) -> tuple[Num, Num]:
    """Bytes and kernels of the XLA copies a family's wrapper makes around its fused
    kernel (``KernelFamily.sequence_padding``, ``head_dim_padding``): Q copied into a
    buffer of whole row blocks (and O sliced out of one) where n is not a multiple or the
    head dim is padded; K and V likewise for the keys. Each copy reads the tensor and
    writes it padded (or the reverse). ``per_side``: tensors of each side copied (the
    forward: Q and O, K and V; the backward: Q, O, dO and dQ, K, V, dK and dV)."""
    xp = xp_of(n, m, d, d_run, h, h_kv, b, s, block_q, block_k)
    zero = xp.full_like(n, 0.0, dtype=np.float64)
    on_chip = family.head_dim_padding in ON_CHIP_HEAD_DIM_PADDING  # the kernel pads d itself
    if family.sequence_padding == "none" and (family.head_dim_padding == "none" or on_chip):
        return zero, zero
    rows = block_q
    if family.sequence_padding == "per_consumer":
        paired = xp.floor_divide(h, h_kv) % 2 == 0
        rows = xp.where(paired, float(MOSAIC_CONSUMER_ROWS), 2.0 * MOSAIC_CONSUMER_ROWS)
    keys = block_k
    if family.sequence_padding == "cta_rows":
        rows = keys = xp.full_like(n, 2.0 * MOSAIC_CONSUMER_ROWS, dtype=np.float64)
    if family.sequence_padding == "none":
        rows = keys = xp.full_like(n, 1.0, dtype=np.float64)
    n_pad, m_pad = xp.ceil(n / rows) * rows, xp.ceil(m / keys) * keys
    wider = (d_run != d) & (not on_chip)
    q_copy = (n_pad != n) | wider
    kv_copy = (m_pad != m) | wider
    q_bytes = b * h * (n * d + n_pad * d_run) * s  # Q in, and as much for O out
    kv_bytes = b * h_kv * (m * d + m_pad * d_run) * s  # each of K and V
    copied = xp.where(q_copy, per_side * q_bytes, 0.0) + xp.where(kv_copy, per_side * kv_bytes, 0.0)
    return copied, per_side * (q_copy + 0.0) + per_side * (kv_copy + 0.0)


def schedule_imbalance(
    mask: masks.Mask | None,
    causal: Num,
    *,
    n: Num,
    m: Num,
    h: Num,
    b: Num,
    pack: Num,
    block_q: Num,
    block_k: Num,
    splits: Num,
    slots: float,
) -> Num:
    """How much longer the busiest SM computes than the wave terms say, where programs
    walk unequal numbers of K/V blocks (causal, a mask): our kernels take the Q blocks
    longest first (``flash_triton._q_block_index``; the persistent Mosaic kernel deals
    units in that order, every ``sm_count``-th to a CTA, and at causal d = 256, where it
    is not persistent, runs them as SMs free up; assumed for the other families), so
    SM ``i`` gets
    programs ``i, i + slots, ...`` of the sorted list: its steps are the sum of every
    ``slots``-th entry from the longest, against ``ceil(programs / slots)`` programs of the
    mean. 1 where every program walks the same blocks (the wave terms then hold)."""
    xp = xp_of(n, m, h, b, pack, block_q, block_k, splits)
    if xp is FLOATS:
        if mask is None and not causal:
            return 1.0
        return _imbalance_point(mask, causal, n, m, h, b, pack, block_q, block_k, splits, slots)
    given = (causal, n, m, h, b, pack, block_q, block_k, splits)
    cols = np.broadcast_arrays(*(_column(v) for v in given))
    out = np.ones(len(cols[0]))
    if mask is None and not np.any(cols[0]):
        return out
    if mask is None:  # causal rows, all at once
        rows = np.flatnonzero(cols[0])
        out[rows] = _causal(np.stack([c[rows] for c in cols[1:]]).astype(np.int64), int(slots))
        return out
    keys, inverse = np.unique(np.stack(cols, axis=1), axis=0, return_inverse=True)
    found = [_imbalance(mask, bool(k[0]), *(int(v) for v in k[1:]), int(slots)) for k in keys]
    return np.asarray(found, dtype=np.float64)[inverse.reshape(-1)]


def _imbalance_point(mask: masks.Mask | None, causal: Any, *args: Any) -> float:
    """:func:`schedule_imbalance` of one point, on its Python ints (a traced point's
    closed form is printed code, on ints as here: ``perfmodel.trace``)."""
    *point, slots = (as_int(v) for v in args)
    if mask is not None:
        return _imbalance(mask, bool(causal), *point, slots)
    value, closed = _causal_triangle(point, slots, _IntMath)
    out: float = as_float(value) if closed else _causal_point(*point, slots)
    return out


@never_negative  # 1 or more: the maximum with 1.0
@opaque
def _causal_point(*point_and_slots: int) -> float:
    """:func:`_imbalance` of a causal point (one operation of a traced point)."""
    return _imbalance(None, True, *point_and_slots)


def _causal(point: IntArray, slots: int) -> npt.NDArray[np.float64]:
    """:func:`_imbalance` of a causal mask at many points (``point``: one row per
    argument ``n, m, h, b, pack, block_q, block_k, splits``, one column per point): in
    closed form where the steps are linear (:func:`_causal_triangle`), else summed over
    every Q block of every point at once (:func:`_causal_blocks`). Both do the float
    operations of :func:`_imbalance` in its order, so all three agree bit for bit
    (``tests/test_launch_imbalance.py``)."""
    value, done = _causal_triangle(point, slots)
    rest = np.flatnonzero(~done)
    if len(rest):
        value[rest] = _causal_blocks(point[:, rest], slots)
    out: npt.NDArray[np.float64] = value
    return out


def _causal_blocks(point: IntArray, slots: int) -> npt.NDArray[np.float64]:
    """:func:`_imbalance` of a causal mask, its Q blocks of all points in one column:
    a causal Q block walks no fewer blocks than the one before, so longest first is
    last first, and entry ``r`` of that order takes ``G(r + 1) - G(r)`` of the SMs'
    turns, ``G(x) = ceil(x copies / slots)`` (every ``slots``-th entry of the list of
    ``copies`` equal programs per Q block)."""
    n, m, h, b, pack, block_q, block_k, splits = point
    q = np.maximum(1, block_q // pack)
    blocks = -(-n // q)
    owner = np.repeat(np.arange(len(n)), blocks)
    start = np.cumsum(blocks) - blocks
    i = np.arange(len(owner)) - start[owner]
    first = i * q[owner]
    last = np.minimum(first + q[owner], n[owner]) - 1
    shape = masks.Mask(causal=True)
    lo, _ = masks._key_range(shape, first, n[owner], m[owner])
    _, hi = masks._key_range(shape, last, n[owner], m[owner])
    k = block_k[owner]
    steps = np.ceil(np.where(hi >= lo, hi // k - lo // k + 1, 0) / splits[owner])
    copies = b * (h // pack) * splits
    rank = blocks[owner] - 1 - i  # r: 0 for the last Q block, the longest

    def turns(x: IntArray) -> IntArray:  # G(x)
        dealt: IntArray = -(-(x * copies[owner]) // slots)
        return dealt

    busiest = np.bincount(owner, weights=steps * (turns(rank + 1) - turns(rank)), minlength=len(n))
    total = np.bincount(owner, weights=steps, minlength=len(n)) * copies
    programs = blocks * copies
    balanced = np.ceil(programs / slots) * total / np.maximum(programs, 1)
    ok = total > 0
    return np.where(ok, np.maximum(1.0, busiest / np.where(ok, balanced, 1.0)), 1.0)


def _floor_sum(count: IntArray, div: IntArray, a: IntArray, c: IntArray) -> IntArray:
    """``sum(floor((a*i + c) / div) for i in range(count))`` per row, exactly, for
    ``a, c >= 0``, ``div > 0``: added up where the rows allow (:func:`_floor_sum_table`),
    else by a Euclid-like reduction (a few passes over the rows still open, not
    ``count``; each pass :func:`_floor_sum_step`)."""
    table = _floor_sum_table(count, div, a, c)
    if table is not None:
        return table
    total = np.zeros(len(count), dtype=np.int64)
    at = np.flatnonzero(count > 0)
    count, div, a, c = (np.asarray(v, dtype=np.int64)[at] for v in (count, div, a, c))
    while len(at):
        add, top, a, div = _floor_sum_step(count, div, a, c)
        total[at] += add
        live = top >= div
        at, top, a, div = at[live], top[live], a[live], div[live]
        (count, c), div, a = divmod(top, div), a, div
    return total


def _floor_sum_table(
    count: IntArray, div: IntArray, a: IntArray, c: IntArray
) -> IntArray | None:
    """:func:`_floor_sum` as its terms' sum, where every row has the same ``div`` and
    ``c`` and the rows' ``a`` few values and ``count`` few terms (as the causal schedule
    has: the SMs' slots, programs per Q block, Q blocks): each distinct ``a``'s terms
    summed once, every row a look-up in those prefix sums (exact in int64, which the
    bounds checked here keep); None elsewhere."""
    if not len(count):
        return None
    d0, c0, most, least = int(div[0]), int(c[0]), int(count.max()), int(count.min())
    if np.any(div != d0) or np.any(c != c0) or least < 0 or d0 <= 0 or c0 < 0:
        return None
    code, values = _codes(a.astype(np.float64))
    top = int(values[-1])
    if values[0] < 0 or top >= 2**53 or len(values) * most > _FLOOR_SUM_TABLE:
        return None
    if (top * most + c0) * most >= 2**62:
        return None
    terms = (values.astype(np.int64)[:, None] * np.arange(most, dtype=np.int64) + c0) // d0
    prefix = np.zeros((len(values), most + 1), dtype=np.int64)
    np.cumsum(terms, axis=1, out=prefix[:, 1:])
    out: IntArray = prefix[code, count]
    return out


#: The most terms :func:`_floor_sum_table` adds up (distinct ``a`` times the most terms).
_FLOOR_SUM_TABLE = 1 << 20


@never_negative  # a sum of floors of quotients of numbers not below zero
@opaque
def _floor_sum_one(count: int, div: int, a: int, c: int) -> int:
    """:func:`_floor_sum` of one point's integers (the same passes)."""
    total = 0
    while count > 0:
        add, top, a, div = _floor_sum_step(count, div, a, c)
        total += add
        if not top >= div:
            break
        (count, c), div, a = divmod(top, div), a, div
    return total


def _floor_sum_step(count: Any, div: Any, a: Any, c: Any) -> tuple[Any, Any, Any, Any]:
    """One pass of :func:`_floor_sum` (integers or columns of them): what it adds to the
    sum, and the next pass's ``a * count + c`` (``top``), ``a`` and ``div``."""
    whole, a = divmod(a, div)
    more, c = divmod(c, div)
    return (count - 1) * count // 2 * whole + count * more, a * count + c, a, div


class _IntMath:
    """The numpy functions :func:`_causal_triangle` calls, for one point's Python ints:
    the same integer and float operations, without numpy's cost per call (each one
    operation of a trace where its ints are traced: ``perfmodel.trace``)."""

    maximum = staticmethod(trace.maximum)
    where = staticmethod(trace.select)

    @staticmethod
    def ones_like(x: Any) -> int:
        return 1

    @staticmethod
    def full_like(x: Any, value: int) -> int:
        return value

    as_float = staticmethod(as_float)

    @staticmethod
    def ceil(x: Any) -> Any:
        return as_float(math.ceil(x))

    floor_sum = staticmethod(_floor_sum_one)


class _IntColumns:
    """:class:`_IntMath` for columns: numpy's."""

    maximum = staticmethod(np.maximum)
    where = staticmethod(np.where)
    ones_like = staticmethod(np.ones_like)
    full_like = staticmethod(np.full_like)
    ceil = staticmethod(np.ceil)
    floor_sum = staticmethod(_floor_sum)

    @staticmethod
    def as_float(x: Any) -> Any:
        return x.astype(np.float64)


def _causal_triangle(point: Any, slots: int, xp: Any = _IntColumns) -> tuple[Any, Any]:
    """:func:`_imbalance` of causal self-attention (``n == m``) where a Q block's rows
    span whole split K/V chunks (``block_k * splits`` divides ``q = block_q // pack``),
    in closed form, and on which rows it applies. Q block ``i < T - 1`` then walks
    ``(i + 1) R`` chunk steps (``R = q / (block_k splits)``), the last one ``ceil(ceil(n /
    block_k) / splits)``; longest first, entry ``r`` of the sorted list is dealt to
    ``G(r + 1) - G(r)`` of the SMs' turns, ``G(x) = ceil(x copies / slots)``; summed by
    parts, the busiest SM's steps are ``d_0 G(1) + R (G(T) + sum_{u<T} G(u) - T G(1))``
    (the sum by :func:`_floor_sum`). The same float operations as :func:`_imbalance`
    follow, so the two agree bit for bit (``tests/test_launch_imbalance.py``). ``xp``:
    numpy's functions over columns, or :class:`_IntMath` for one point's ints."""
    n, m, h, b, pack, block_q, block_k, splits = point  # rows of :func:`_imbalance`'s ints
    q = xp.maximum(1, block_q // xp.maximum(pack, 1))
    chunk = block_k * splits
    ok = (n == m) & (n > 0) & (chunk > 0) & (q % xp.maximum(chunk, 1) == 0) & (pack > 0)
    q = xp.where(ok, q, xp.maximum(n, 1))  # elsewhere one block: a value not used
    chunk = xp.where(ok, chunk, 1)
    blocks = -(-n // q)  # T
    ratio = q // chunk  # R
    last = -(-(-(-n // xp.maximum(block_k, 1))) // xp.maximum(splits, 1))  # d_0
    copies = b * (h // xp.maximum(pack, 1)) * splits
    ok &= copies > 0
    copies = xp.where(ok, copies, 1)

    def turns(x: Any) -> Any:  # G(x)
        return -(-(x * copies) // slots)

    one = turns(xp.ones_like(blocks))  # G(1)
    slots_at, rest = xp.full_like(blocks, slots), xp.full_like(blocks, slots - 1)
    dealt = xp.floor_sum(blocks, slots_at, copies, rest)
    busiest = last * one + ratio * (turns(blocks) + dealt - blocks * one)
    steps = ratio * blocks * (blocks - 1) // 2 + last
    total = xp.as_float(steps) * copies
    programs = blocks * copies
    balanced = xp.ceil(programs / slots) * total / programs
    some = ok & (total > 0)  # none: every program empty, 1 as in _imbalance
    value = xp.where(some, xp.maximum(1.0, busiest / xp.where(some, balanced, 1.0)), 1.0)
    return value, ok


@functools.lru_cache(maxsize=4096)
def _imbalance(
    mask: masks.Mask | None, causal: bool, n: int, m: int, h: int, b: int, pack: int,
    block_q: int, block_k: int, splits: int, slots: int,
) -> float:
    """:func:`schedule_imbalance` of one point."""
    shape = mask if mask is not None else masks.Mask(causal=causal)
    steps = masks.steps_per_q_block(shape, n, m, max(1, block_q // pack), block_k)
    steps = np.ceil(steps / splits)
    copies = b * (h // pack) * splits  # programs per Q block: batch, head groups, chunks
    total = float(steps.sum()) * copies
    if total <= 0:
        return 1.0
    ordered = np.repeat(np.sort(steps)[::-1], copies)
    busiest = float(ordered[::slots].sum())
    programs = len(ordered)
    balanced = math.ceil(programs / slots) * total / programs
    return max(1.0, busiest / balanced)


def xla_kernels(family: KernelFamily, splits: Num) -> Num:
    """XLA kernels a family's wrapper runs around the fused kernel and its combine (the
    kernels the cost model counts) at ``splits`` K/V chunks: the family's
    ``xla_kernels`` table, the last entry whose fewest splits ``splits`` reaches."""
    xp = xp_of(splits)
    out = xp.full_like(splits, 0.0, dtype=np.float64)
    for fewest, kernels in family.xla_kernels:
        out = xp.where(splits >= fewest, float(kernels), out)
    return out


def backward_launch(
    view: KernelFamily,
    hw: HardwareSpec,
    *,
    n: Any,
    m: Any,
    d: Any,
    h: Any,
    h_kv: Any,
    b: Any,
    s: Any,
    causal: bool,
) -> BackwardLaunch:
    """The launch of a backward (``view``: ``KernelFamily.backward_view``, the backward
    that runs after a family's forward at these points), per point: its tile, its blocks
    per SM from the dK/dV block's shared memory and registers (``costs.backward``), the
    head dim it runs at and its padding copies."""
    n, m, d, h, h_kv, b, s = (_column(v) for v in (n, m, d, h, h_kv, b, s))
    size = max(len(v) for v in (n, m, d, h, h_kv, b, s))
    n, m, d, h, h_kv, b, s = (np.broadcast_to(v, (size,)) for v in (n, m, d, h, h_kv, b, s))
    d_run = np.asarray(padded_head_dim(view.head_dim_padding, d), dtype=np.float64)
    bq, bk, w, _, ahead = default_tiles(view, d_run, np.full(size, float(causal)), hw.arch)
    tile = dict(block_q=bq, block_k=bk, d=d_run, s=s)
    threads = WARP * w
    regs = _tile_expression("backward_register_bytes")(**tile) / REGISTER_BYTES / threads
    producers = np.full(size, float(WARP * view.producer_warps))
    smem = _tile_expression("backward_sram_bytes")(**tile)
    blocks, _ = capacity(hw, smem, regs, threads, producers)
    copied, copies = pad_copies(
        view, n=n, m=m, d=d, d_run=d_run, h=h, h_kv=h_kv, b=b, s=s, block_q=bq, block_k=bk,
        per_side=4,
    )  # fmt: skip
    share = np.ones(size)
    if view.group_split == "fill_waves":  # the dK/dV grid b·h_kv·T_c, before the split
        programs = b * h_kv * np.ceil(m / bk)
        fill = group_split(programs, h / h_kv, hw.sm_count)
        share = np.where(d_run <= view.group_split_d_max, fill, 1.0)
    reduce = np.zeros(size)
    if view.group_reduce == "kernels":
        reduce = np.where(h > h_kv, 1.0, 0.0)
    dq_q, dq_k = dq_tiles(view, d_run, np.full(size, float(causal)), hw.arch, bq, bk)
    edge = 2 * bk * d_run * (s + np.where(reduce > 0, 4.0, s))
    return BackwardLaunch(
        bq, bk, blocks, ahead, d_run, copied, copies, share, reduce, dq_q, dq_k, edge
    )


def dq_tiles(
    view: KernelFamily, d: Column, causal: Column, arch: str | None, bq: Column, bk: Column
) -> tuple[Column, Column]:
    """The dQ kernel's (rows, keys) per point: the backward tile's ``dq_block_*`` where
    it states them, else the dK/dV tile's own."""

    def tile(dim: float, masked: float) -> tuple[float, float]:
        t = view.tile_for(int(dim), causal=bool(masked), arch=arch)
        return (float(t.dq_block_q or 0.0), float(t.dq_block_k or 0.0))

    rows, keys = _by_unique(tile, d, causal)
    return np.where(rows > 0, rows, bq), np.where(keys > 0, keys, bk)


def footprint(
    *, block_q: Column, block_k: Column, d: Column, s: Column, kv_stages: Column, warps: Column
) -> tuple[Column, Column, Column, Column]:
    """Shared memory, accumulator bytes, registers per compute thread and compute
    threads of one flash block (FlashAttention-2 Algorithm 1 / FlashAttention-3's
    consumer warpgroups: the same tiles, split over the warps)."""
    tile = dict(block_q=block_q, block_k=block_k, d=d, s=s, kv_stages=kv_stages)
    smem = _tile_expression("SRAM_BYTES")(**tile)
    accumulators = _tile_expression("ACCUMULATORS")(**tile)
    threads = WARP * warps
    return smem, accumulators * REGISTER_BYTES, accumulators / threads, threads


def check_fits(hw: HardwareSpec, smem: Column, what: Callable[[], str]) -> None:
    """A block must fit one SM's shared memory (the per-block limit where the spec has one)."""
    limit = hw.smem_per_block_bytes or hw.sram_per_sm_bytes
    too_big = smem > limit
    if np.any(too_big):
        need = int(np.max(smem[too_big]))
        name = "per block" if hw.smem_per_block_bytes else "per SM"
        raise PerfmodelError(
            f"{what()} needs {need} B of shared memory; {hw.name} allows {limit} B {name}"
        )


def capacity(
    hw: HardwareSpec, smem: Column, registers: Column, threads: Column, producers: Column
) -> tuple[Column, Column]:
    """Blocks per SM from shared memory, registers and threads; spilled registers per
    thread past the per-thread limit. Devices without register facts: shared memory only."""
    blocks = np.floor_divide(hw.sram_per_sm_bytes, np.maximum(smem, 1))
    spilled = np.zeros_like(registers)
    cap, per_sm = hw.max_registers_per_thread, hw.registers_per_sm
    most_threads, most_blocks = hw.max_threads_per_sm, hw.max_blocks_per_sm
    # the spec gives these four together or none of them (HardwareSpec's validator)
    if cap is not None and per_sm and most_threads and most_blocks:
        spilled = np.maximum(0.0, registers - cap)
        per_block = np.minimum(registers, cap) * threads + PRODUCER_REGISTERS * producers
        blocks = np.minimum(blocks, np.floor_divide(per_sm, per_block))
        blocks = np.minimum(blocks, np.floor_divide(most_threads, threads + producers))
        blocks = np.minimum(blocks, most_blocks)
    return np.maximum(blocks, 1.0), spilled


def gqa_pack(rule: str, n: Num, group: Num, block_q: Num) -> Num:
    """Query heads per tile: the whole group when the family's rule packs it, else 1."""

    xp = xp_of(n, group, block_q)

    def up(a: Num) -> Num:
        return xp.ceil(a / block_q) * block_q

    if rule == "none":
        return xp.full_like(n, 1.0, dtype=np.float64)
    if rule == "always":
        packed = group > 1
    elif rule == "decode":
        packed = (n == 1) & (group > 1)
    else:  # "when_short", FlashAttention-3's: pack when it fills the tiles 1/0.9 better
        packed = (n / up(n) < 0.9 * (n * group) / up(n * group)) & (group > 1)
    return xp.where(packed, group, 1.0)


def programs(n: Num, h: Num, b: Num, pack: Num, block_q: Num | int) -> Num:
    """Thread blocks of one unsplit launch: (batch, head group, Q block)."""
    xp = xp_of(n, h, b, pack, block_q)
    return b * xp.floor_divide(h, pack) * xp.ceil(n * pack / block_q)


def split_slots(family: KernelFamily, hw: HardwareSpec) -> int:
    """Program slots the family's split rule fills: SMs times its blocks per SM."""
    return int(hw.sm_count * family.split_sm_factor)


def split_rule(family: KernelFamily, hw: HardwareSpec, grid: Num, kv_blocks: Num) -> Num:
    """K/V chunks the family picks for a grid of ``grid`` programs over ``kv_blocks``
    K/V blocks of its split kernel. FlashAttention's rule (``fa2``/``fa3``): none when the
    grid nearly fills the slots (and, for ``fa3``, when there are at most 4 K/V blocks),
    else the fewest splits whose wave efficiency is within 85% of the best; ``one_wave``:
    as many as keep every program in one wave.

    >>> from perfmodel.catalog.hardware import load_hardware
    >>> from perfmodel.catalog.kernels import load_kernel
    >>> fa2, a100 = load_kernel("fa2"), load_hardware("a100")   # 48 programs, 216 slots
    >>> int(split_rule(fa2, a100, np.array([48.0]), np.array([64.0]))[0])
    4
    """
    xp = xp_of(grid, kv_blocks)
    if family.split_kv == "none" or family.max_splits == 1:
        return xp.full_like(grid, 1.0, dtype=np.float64)
    slots = split_slots(family, hw)
    if family.split_kv == "one_wave":
        chosen = xp.minimum(
            xp.minimum(kv_blocks, slots // xp.maximum(grid, 1.0)), family.max_splits
        )
        return xp.maximum(1.0, chosen) + 0.0  # a float (column)
    small = grid < 0.8 * slots
    if family.split_kv == "fa3":
        small = small & (kv_blocks > 4)
    if xp is FLOATS:  # one point
        if not small:
            return 1.0
        return _wave_efficiency_split(grid, kv_blocks, slots, family.max_splits)
    grid_col, kv_col, rows = (cast(Column, v) for v in (grid, kv_blocks, small))
    out = np.ones(grid_col.shape)
    if np.any(rows):
        out[rows] = _wave_efficiency_splits(grid_col[rows], kv_col[rows], slots, family.max_splits)
    return out


@never_negative  # a split count, 1 or more
@opaque
def _wave_efficiency_split(grid: Any, kv_blocks: Any, slots: int, max_splits: int) -> float:
    """:func:`_wave_efficiency_splits` of one point (one operation of a traced point)."""
    return float(_wave_efficiency_best(float(grid), float(kv_blocks), slots, max_splits))


def _wave_efficiency_splits(grid: Column, kv_blocks: Column, slots: int, max_splits: int) -> Column:
    """:func:`_wave_efficiency_best` per distinct (grid, kv_blocks) pair."""
    pairs, inverse = distinct(grid, kv_blocks)
    picked = _wave_efficiency_best(pairs[:, :1], pairs[:, 1:2], slots, max_splits)
    return np.asarray(picked[inverse], dtype=np.float64)


def _wave_efficiency_best(grid: Any, kv_blocks: Any, slots: int, max_splits: int) -> Any:
    """The fewest splits within 85% of the best wave efficiency, over s = 1 ...
    min(max_splits, slots, kv_blocks): of one (grid, kv_blocks) pair of numbers, or of
    pairs given as two columns of shape (k, 1)."""
    s = np.arange(1, min(max_splits, slots) + 1, dtype=np.float64)
    limit = np.minimum(kv_blocks, min(max_splits, slots))
    waves = grid * s / slots
    eff = np.where(s <= limit, waves / np.ceil(waves), -1.0)
    best = eff.max(axis=-1, keepdims=True)
    first = np.argmax(eff >= 0.85 * best, axis=-1)
    return s[first]


def kv_splits(
    family: KernelFamily,
    hw: HardwareSpec,
    *,
    n: Num,
    m: Num,
    d: Num,
    h: Num,
    b: Num,
    pack: Num,
    block_q: Num,
    mask: masks.Mask | None = None,
) -> Num:
    """The family's split-KV choice: programs counted with its split kernel's tiles, over
    the K/V blocks one program walks (all of them; under a ``mask`` only those it visits)."""
    split_bq = block_q if family.split_block_q is None else family.split_block_q
    grid = programs(n, h, b, pack, split_bq)
    xp = xp_of(n, m, d)
    bk: Num
    if family.split_block_k and xp is FLOATS:  # one point
        bk = float(family.split_block_k_for(int(cast(float, d))))
    elif family.split_block_k:
        (bk,) = _by_unique(lambda dim: (family.split_block_k_for(int(dim)),), cast(Column, d))
    else:
        bk = split_bq if xp is FLOATS else np.broadcast_to(split_bq, np.shape(n))
    chosen = split_rule(family, hw, grid, kv_blocks_of(mask, n, m, split_bq, bk, pack))
    if family.split_max_queries is None:
        return chosen
    return xp.where(n <= family.split_max_queries, chosen, 1.0) + 0.0  # a float (column)


def decode_launch(
    family: KernelFamily, n: Num, d_run: Num, block_k: Num, ahead: Num, in_flight: Num, s: Num
) -> tuple[Num, Num, Num]:
    """``(block_k, loads_ahead, bytes_in_flight)`` of each point: the family's decode
    kernel's (``KernelFamily.decode_tiles``) where the query is decode-length (at most
    ``split_max_queries``), the launch's own elsewhere. That kernel's compute warps load
    its K/V tiles (cp.async, no producer warpgroup): its stages' K and V tiles in flight
    a block, loaded a step ahead unless the tile says none are (``Tile.loads_ahead``)."""
    if not family.decode_tiles or family.split_max_queries is None:
        return block_k, ahead, in_flight
    xp = xp_of(n, d_run)

    def tile(dim: float) -> tuple[float, float, float]:
        t = family.decode_tile_for(int(dim))
        if t is None:
            return (np.nan, np.nan, np.nan)
        stages = t.kv_stages or family.kv_stages
        return (float(t.block_k), float(family.loads_ahead(t, producer=False)), float(stages))

    dec_k: Num
    dec_ahead: Num
    dec_stages: Num
    if xp is FLOATS:
        dec_k, dec_ahead, dec_stages = tile(cast(float, d_run))
        if math.isnan(dec_k):  # no decode tile at this head dim
            return block_k, ahead, in_flight
        decode: Num = n <= family.split_max_queries
    else:
        dec_k, dec_ahead, dec_stages = _by_unique(tile, cast(Column, d_run))
        decode = (n <= family.split_max_queries) & ~np.isnan(dec_k)  # a tile stated at d
    dec_in_flight = 2 * dec_k * d_run * s * dec_stages
    return (
        xp.where(decode, dec_k, block_k) + 0.0,
        xp.where(decode, dec_ahead, ahead) + 0.0,
        xp.where(decode, dec_in_flight, in_flight) + 0.0,
    )


def kv_blocks_of(
    mask: masks.Mask | None, n: Num, m: Num, block_q: Any, block_k: Num, pack: Num
) -> Num:
    """K/V blocks one program walks, the count the split rules divide: ``ceil(m /
    block_k)``, or under a mask the most any program visits (``masks.kv_blocks_walked``:
    a window's keys, not the cache's; one point's as a one-row column)."""
    xp = xp_of(n, m, block_k, pack)
    if mask is None or mask.is_dense:
        return xp.ceil(m / block_k)
    if xp is FLOATS:
        rows = (_column(v) for v in (n, m, block_q, block_k, pack))
        return float(kv_blocks_of(mask, *rows)[0])  # type: ignore[index]
    walked = masks.kv_blocks_walked(mask, n=n, m=m, block_q=block_q, block_k=block_k, pack=pack)
    return np.asarray(np.maximum(walked, 1.0), dtype=np.float64)


def resolve(
    family: KernelFamily,
    hw: HardwareSpec,
    *,
    n: Any,
    m: Any,
    d: Any,
    h: Any,
    h_kv: Any,
    b: Any,
    s: Any,
    causal: Any,
    block_q: Any = None,
    block_k: Any = None,
    warps: Any = None,
    splits: Any = None,
    limits: bool = True,
    mask: masks.Mask | None = None,
) -> Launch:
    """Tiles (the family's unless named), packing, splits and on-chip fit for each point
    (numbers or columns; the result is columns). A named tile that does not fit is an
    error naming the limit; the family's own defaults are what its sources say it
    launches. ``limits=False``: no floor will be taken over other launches, the split
    limits are 1 (nothing to try). ``mask`` (``costs.masks``): splits and their limits
    count only the K/V blocks a program visits under it."""
    n, m, d, h, h_kv, b, s = (_column(v) for v in (n, m, d, h, h_kv, b, s))
    size = max(len(v) for v in (n, m, d, h, h_kv, b, s, np.atleast_1d(causal)))
    n, m, d, h, h_kv, b, s = (np.broadcast_to(v, (size,)) for v in (n, m, d, h, h_kv, b, s))
    masked = np.broadcast_to(_column(causal), (size,))
    if splits is not None:
        check_multiple("splits", splits, 1)
        splits = np.broadcast_to(_column(splits), (size,))
    tiles = (block_q, block_k, warps)
    if all(t is None or np.ndim(t) == 0 for t in tiles):  # one block per (d, s, causal)
        d_run, block = _blocks_by_key(family, hw, d, s, masked, *tiles)
    else:
        d_run = np.asarray(padded_head_dim(family.head_dim_padding, d), dtype=np.float64)
        block = _block(family, hw, d_run, s, masked, *tiles)
    sizes = dict(n=n, m=m, d=d, h=h, h_kv=h_kv, b=b, s=s, causal=masked)
    return _assemble(family, hw, block, d_run, sizes, splits, limits, mask)


def _assemble(
    family: KernelFamily,
    hw: HardwareSpec,
    block: _Block | tuple[float, ...],
    d_run: Num,
    sizes: Mapping[str, Num],
    splits: Num | None,
    limits: bool,
    mask: masks.Mask | None = None,
) -> Launch:
    """:func:`resolve`'s second half, from its block (:func:`_block`): what depends on n,
    the heads and the batch. Columns, or one point's numbers (:func:`resolve_point`)."""
    n, m, d, h, h_kv, b, s = (sizes[k] for k in ("n", "m", "d", "h", "h_kv", "b", "s"))
    xp = xp_of(n, m, d, h, h_kv, b, s)
    bq, bk, w, stages, ahead, smem, acc_bytes, regs, threads, producers, blocks, spilled = block
    in_flight = 2 * bk * d_run * s * (stages if family.producer_warps else 1.0)
    bk, ahead, in_flight = decode_launch(family, n, d_run, bk, ahead, in_flight, s)
    group = xp.floor_divide(h, h_kv)
    pack = gqa_pack(family.gqa_packing, n, group, bq)
    copied, copies = pad_copies(
        family, n=n, m=m, d=d, d_run=d_run, h=h, h_kv=h_kv, b=b, s=s, block_q=bq, block_k=bk
    )
    ones = xp.full_like(n, 1.0, dtype=np.float64)

    def limit(at: Num) -> Num:
        return split_limit(
            family, hw, n=n, m=m, h=h, b=b, pack=at, block_q=bq, block_k=bk, mask=mask
        )

    if splits is None:
        chosen = kv_splits(
            family, hw, n=n, m=m, d=d_run, h=h, b=b, pack=pack, block_q=bq, mask=mask
        )
    else:
        chosen = splits
    return Launch(
        block_q=bq,
        block_k=bk,
        warps=w,
        kv_stages=stages,
        pack=pack,
        splits=chosen,
        group=group,
        smem_bytes=smem,
        accumulator_bytes=acc_bytes,
        registers_per_thread=regs,
        threads=threads,
        producer_threads=producers,
        blocks_per_sm=blocks,
        spilled_registers_per_thread=spilled,
        spill_bytes_per_tile=2 * REGISTER_BYTES * spilled * threads,
        bytes_in_flight=in_flight,
        q_tile_bytes=bq * d_run * s,
        edge_bytes=2 * xp.minimum(bq, n * pack) * d_run * s,
        loads_ahead=ahead,
        head_dim=d_run,
        pad_bytes=copied,
        pad_copies=copies,
        xla_kernels=xla_kernels(family, chosen),
        imbalance=schedule_imbalance(
            mask, sizes.get("causal", 0.0), n=n, m=m, h=h, b=b, pack=pack, block_q=bq,
            block_k=bk, splits=chosen, slots=float(hw.sm_count),
        ),
        split_limit_one=limit(ones) if limits else ones,
        split_limit_group=limit(group) if limits else ones,
    )


#: One block of a launch: tile, warps, K/V stages, loads ahead, shared memory,
#: accumulator bytes, registers and threads, producer threads, blocks per SM, spilled
#: registers.
_Block = tuple[Column, ...]


def _block(
    family: KernelFamily,
    hw: HardwareSpec,
    d: Column,
    s: Column,
    masked: Column,
    block_q: Any,
    block_k: Any,
    warps: Any,
) -> _Block:
    """The block each point launches, and how it sits on an SM (``resolve``'s first
    half: it depends on the head dim, element size and mask, not on n or heads)."""
    size = len(d)
    bq_d, bk_d, w_d, stages, ahead = default_tiles(family, d, masked, hw.arch)
    bq = bq_d if block_q is None else np.broadcast_to(_column(block_q), (size,))
    bk = bk_d if block_k is None else np.broadcast_to(_column(block_k), (size,))
    w = w_d if warps is None else np.broadcast_to(_column(warps), (size,))
    if block_q is not None:  # the family's own tiles are checked in default_tiles
        check_multiple("block_q", bq, BLOCK_Q_MULTIPLE)
    if block_k is not None:
        check_multiple("block_k", bk, BLOCK_K_MULTIPLE)
    smem, acc_bytes, regs, threads = footprint(
        block_q=bq, block_k=bk, d=d, s=s, kv_stages=stages, warps=w
    )
    named = block_q is not None or block_k is not None
    check_fits(hw, smem, lambda: _what(bq, bk, d, None if named else family.name))
    producers = np.full(size, float(WARP * family.producer_warps))
    blocks, spilled = capacity(hw, smem, regs, threads, producers)
    own = (bq == bq_d) & (bk == bk_d) & (w == w_d)  # the family's own tile: its register limit
    if own.any():
        blocks = np.where(own, np.minimum(blocks, tile_limit(family, d, masked, hw.arch)), blocks)
    return bq, bk, w, stages, ahead, smem, acc_bytes, regs, threads, producers, blocks, spilled


@functools.lru_cache(maxsize=1024)
def _block_point(
    family: ByIdentity,
    hw: ByIdentity,
    d: float,
    s: float,
    causal: bool,
    block_q: float | None,
    block_k: float | None,
    warps: float | None,
) -> tuple[float, tuple[float, ...]]:
    """The head dim a point runs at and :func:`_block` of it, as numbers, cached (a few
    head dims and dtypes recur while n and the heads vary)."""
    fam = family.obj
    d_run = float(padded_head_dim(fam.head_dim_padding, d))
    out = _block(fam, hw.obj, _column(d_run), _column(s), _column(causal), block_q, block_k, warps)
    return d_run, tuple(float(column[0]) for column in out)


def _blocks_by_key(
    family: KernelFamily, hw: HardwareSpec, d: Column, s: Column, masked: Column, *tiles: Any
) -> tuple[Column, _Block]:
    """The head dim each point runs at and its block: :func:`_block_point` of each
    distinct (d, s, causal), spread over the points (a broadcast view where all share
    one), since a block depends on nothing else."""
    keys, inverse = distinct(d, s, masked)
    scalar = tuple(None if t is None else float(t) for t in tiles)
    found = [
        _block_point(ByIdentity(family), ByIdentity(hw), dim, size, bool(mask), *scalar)
        for dim, size, mask in keys.tolist()
    ]
    table = np.array([[d_run, *block] for d_run, block in found], dtype=np.float64).T
    if len(found) == 1:
        columns = np.broadcast_to(table, (table.shape[0], len(d)))
    else:
        columns = _at_points(table, inverse)
    return columns[0], tuple(columns[1:])


@functools.lru_cache(maxsize=4096)
def _point(family: ByIdentity, hw: ByIdentity, *args: Any) -> Launch:
    n, m, d, h, h_kv, b, s, causal, block_q, block_k, warps, splits, mask = args
    if splits is not None:
        check_multiple("splits", splits, 1)
        splits = float(splits)
    tiles = (None if t is None else float(t) for t in (block_q, block_k, warps))
    d_run, block = _block_point(family, hw, float(d), float(s), bool(causal), *tiles)
    sizes = dict(n=n, m=m, d=d, h=h, h_kv=h_kv, b=b, s=s, causal=causal)
    plain = {k: as_float(v) for k, v in sizes.items()}
    return _assemble(family.obj, hw.obj, block, d_run, plain, splits, True, mask)


def resolve_point(
    family: KernelFamily,
    hw: HardwareSpec,
    *,
    n: float,
    m: float,
    d: float,
    h: float,
    h_kv: float,
    b: float,
    s: float,
    causal: bool,
    block_q: int | None = None,
    block_k: int | None = None,
    warps: int | None = None,
    splits: int | None = None,
    mask: masks.Mask | None = None,
) -> Launch:
    """:func:`resolve` of one point (a one-row launch), cached: ``predict`` asks for the
    same shapes again and again."""
    args = (n, m, d, h, h_kv, b, s, causal, block_q, block_k, warps, splits, mask)
    if is_traced(n, m, h, h_kv, b):  # a point being traced: not a cache key
        return _point.__wrapped__(ByIdentity(family), ByIdentity(hw), *args)
    return _point(ByIdentity(family), ByIdentity(hw), *args)


def launch_of(shape: Shape, hw: HardwareSpec) -> Launch:
    """The one-row launch (plain floats) of a shape with n set: its kernel family, and
    its tiles, warps and splits where it names them; its splits over the K/V blocks its
    mask visits (``Shape.mask``), as ``predict`` launches it."""
    return resolve_point(
        load_kernel(shape.kernel),
        hw,
        **shape.sizes(),
        causal=shape.causal,
        block_q=shape.block_q,
        block_k=shape.block_k,
        warps=shape.warps,
        splits=shape.splits,
        mask=shape.mask(),
    )


class ByIdentity:
    """A cache key that is its object's identity: a frozen spec (family, device)
    states the same facts for as long as a cache entry keeps it alive."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any):
        self.obj = obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ByIdentity) and other.obj is self.obj


def split_limit(
    family: KernelFamily,
    hw: HardwareSpec,
    *,
    n: Num,
    m: Num,
    h: Num,
    b: Num,
    pack: Num,
    block_q: Num,
    block_k: Num,
    mask: masks.Mask | None = None,
) -> Num:
    """The most K/V chunks worth trying for the floor at ``pack``: no more than the
    family's ``max_splits`` or the K/V blocks a program walks (:func:`kv_blocks_of`),
    and no more than fill every SM (past that a split only adds partials and the combine
    kernel's work)."""
    grid = programs(n, h, b, pack, block_q)
    xp = xp_of(grid, m, block_k)
    fill = xp.ceil(hw.sm_count / xp.maximum(grid, 1.0))
    kv_blocks = kv_blocks_of(mask, n, m, block_q, block_k, pack)
    most = xp.minimum(xp.minimum(float(family.max_splits), kv_blocks), fill)
    return xp.maximum(1.0, most) + 0.0  # a float (column)


#: A candidate launch's floor at some rows: (row indices, pack, splits) -> t_lower_s
#: (for a launch of one point's numbers: None, numbers -> a number).
FloorAt = Callable[[Any, Any, Any], Any]


def floor_launches(launch: Launch, t_lower_at: FloorAt) -> list[tuple[Num, Num]]:
    """The launches the floor is taken over besides ``launch`` itself, as (pack,
    splits) columns: one program per query head and the whole GQA group per tile, each
    unsplit and at its best split count from 2 to :func:`split_limit` (numbers for a
    launch of one point's numbers). The floor is the
    least over every launch the family could make, so it is a floor for each of them and
    does not jump with one token.

    The floor of a split launch is convex in the split count (its compute roofs fall as
    C/s until the SMs fill, its memory roofs and the combine kernel grow linearly), so
    the best count is found by bisection on ``t_lower_at``'s differences."""
    own_pack, own_splits, group = launch.pack, launch.splits, launch.group
    xp = xp_of(group)
    ones = xp.full_like(group, 1.0, dtype=np.float64)
    packs = [(ones, launch.split_limit_one)]
    if xp.any(group != 1):
        packs.append((group, launch.split_limit_group))
    out: list[tuple[Num, Num]] = []
    best: Num | None
    for pack, limit in packs:
        if xp.any((pack != own_pack) | (own_splits != 1)):
            out.append((pack, ones))
        if xp is not FLOATS:
            best = _least_split(cast(Column, pack), cast(Column, limit), t_lower_at)
        elif limit >= 2:  # one point that can split
            best = _least_split_one(pack, limit, t_lower_at)
        else:
            best = None
        if best is not None:
            out.append((pack, best))
    return out


@never_negative  # a split count, 2 or more
@searching
def _least_split_one(pack: Any, limit: Any, t_lower_at: FloorAt) -> float:
    """:func:`_least_split` of one point that can split (``limit >= 2``), its
    ``t_lower_at`` taking and giving numbers."""

    lo, hi = 2.0, float(limit)
    while lo < hi:
        lo, hi = _bisect(lo, hi, t_lower_at, None, float(pack), FLOATS)
    return lo


def _least_split(pack: Column, limit: Column, t_lower_at: FloorAt) -> Column | None:
    """Per row, the split count in [2, limit] of the least floor (1 where limit < 2), by
    bisection on the sign of the floor's difference; None where no row can split."""
    rows = np.flatnonzero(limit >= 2)
    if rows.size == 0:
        return None
    lo = np.full(rows.size, 2.0)
    hi = limit[rows].copy()
    while True:
        active = np.flatnonzero(lo < hi)
        if active.size == 0:
            break
        at = rows[active]
        lo[active], hi[active] = _bisect(lo[active], hi[active], t_lower_at, at, pack[at], np)
    best = np.ones(len(limit))
    best[rows] = lo
    return best


def _bisect(lo: Any, hi: Any, t_lower_at: FloorAt, rows: Any, pack: Any, xp: Any) -> Any:
    """One step of the bisection over split counts in [lo, hi] (numbers, or columns with
    ``xp`` numpy): the half that holds the least floor, by the sign of its difference
    at the middle."""
    mid = xp.floor((lo + hi) / 2)
    left = t_lower_at(rows, pack, mid) <= t_lower_at(rows, pack, mid + 1)
    return xp.where(left, lo, mid + 1), xp.where(left, mid, hi)


def _what(bq: Column, bk: Column, d: Column, family: str | None) -> str:
    text = f"tile block_q={_show(bq)}, block_k={_show(bk)} at d={_show(d)}"
    return text + ("" if family is None else f" (kernel family {family!r})")


def _show(v: Column) -> str:
    values = sorted({int(x) for x in np.unique(v)})
    return str(values[0]) if len(values) == 1 else str(values)


def tile_gcd(block_q: Any, block_k: Any, pack: Any) -> Any:
    """gcd(B_r/pack, B_c): the period of the causal diagonal across tiles of any size
    (one point's, cached: a point asks for the same few tiles again and again)."""
    if isinstance(block_q, float | int) and isinstance(pack, float | int):
        return _tile_gcd_of(block_q, block_k, pack)
    return _tile_gcd(block_q, block_k, pack)


@never_negative  # a gcd of whole numbers
@opaque
def _tile_gcd_of(block_q: Any, block_k: Any, pack: Any) -> float:
    return _tile_gcd_point(float(block_q), float(block_k), float(pack))


def _tile_gcd(block_q: Any, block_k: Any, pack: Any) -> Any:
    bq = np.round(np.asarray(block_q, dtype=np.float64) / np.asarray(pack, dtype=np.float64))
    g = np.gcd(bq.astype(np.int64), np.asarray(block_k).astype(np.int64))
    return float(g) if g.ndim == 0 else g.astype(np.float64)


@functools.lru_cache(maxsize=1024)
def _tile_gcd_point(block_q: float, block_k: float, pack: float) -> float:
    return float(_tile_gcd(block_q, block_k, pack))
