"""What a kernel family launches for a shape: tiles, warps, GQA packing, K/V splits, and
how its thread blocks sit on an SM (blocks per SM, spilled registers).

The family's rules (``specs/kernels``) decide each of these unless the caller names
it; the device's on-chip capacity (``perfmodel.onchip``) decides what fits. Works on
numbers or numpy arrays (a sweep), element by element.

>>> from perfmodel.catalog.hardware import load_hardware
>>> from perfmodel.catalog.kernels import load_kernel
>>> c = resolve(load_kernel("fa3"), load_hardware("h200"), n=8192, m=8192, d=128, h=16,
...             h_kv=16, b=1, s=2, causal=False)
>>> c.block_q, c.block_k, c.pack, c.splits
(128, 176, 1, 1)
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, fields, replace
from typing import Any, NamedTuple

import numpy as np

from perfmodel import onchip
from perfmodel.catalog.kernels import KernelFamily, load_kernel
from perfmodel.errors import PerfmodelError
from perfmodel.roofline import NUMBERS, is_repeated, is_scalar
from perfmodel.shape import Shape

#: Tile sides must be multiples of the matrix instruction's shape: 16 query rows
#: (mma.sync m16n8k16; wgmma's 64 rows are per warpgroup) and 8 keys (its n).
BLOCK_Q_MULTIPLE = 16
BLOCK_K_MULTIPLE = 8


@dataclass(frozen=True)
class KernelConfig:
    """One launch configuration per point (numbers, or arrays over a sweep)."""

    block_q: Any
    block_k: Any
    warps: Any
    pack: Any  #: query heads sharing one tile (one K/V read per group when > 1)
    splits: Any  #: K/V chunks per (batch, head group, Q block)
    blocks_per_sm: Any
    spilled_registers_per_thread: Any
    smem_bytes: Any
    registers_per_thread: Any
    footprint: onchip.Footprint
    #: K/V bytes one block has in flight from memory: one step's K and V tiles, or
    #: ``kv_stages`` of them where a producer (TMA) issues the loads ahead.
    bytes_in_flight: Any = 0.0


def default_tiles(family: KernelFamily, d: Any, causal: Any, arch: str | None):
    """The family's (block_q, block_k, warps, kv_stages) for each head dim and causal flag
    (a tile's own ``kv_stages`` where it states one, else the family's)."""
    if is_scalar(d, causal):
        return _tile_tuple(family, family.tile_for(int(d), causal=bool(causal), arch=arch))
    d_arr, c_arr = np.broadcast_arrays(np.asarray(d), np.asarray(causal, dtype=bool))
    # one int key per (d, causal): a 1-D unique is far faster than np.unique(axis=0)
    keys = d_arr.ravel().astype(np.int64) * 2 + c_arr.ravel()
    uniq, inverse = np.unique(keys, return_inverse=True)
    table = np.array(
        [
            _tile_tuple(family, family.tile_for(int(k // 2), causal=bool(k % 2), arch=arch))
            for k in uniq
        ]
    )
    picked = table[inverse.ravel()]
    return tuple(picked[:, i].reshape(d_arr.shape) for i in range(4))


def _tile_tuple(family: KernelFamily, t: Any) -> tuple[int, int, int, int]:
    return (t.block_q, t.block_k, t.warps, t.kv_stages or family.kv_stages)


def check_tile(name: str, value: Any, multiple: int) -> None:
    """A tile side the hardware allows: a positive multiple of the instruction shape."""
    if isinstance(value, int):
        if value <= 0 or value % multiple:
            raise PerfmodelError(f"{name}={value!r} must be a positive multiple of {multiple}")
        return
    arr = np.asarray(value)
    bad = (arr <= 0) | (arr % multiple != 0)
    if np.any(bad):
        shown = arr[bad].flat[0].item() if arr.ndim else arr.item()
        raise PerfmodelError(f"{name}={shown!r} must be a positive multiple of {multiple}")


def gqa_pack(family: KernelFamily, n: Any, group: Any, block_q: Any) -> Any:
    """Query heads per tile: the whole group when the family packs it, else 1."""
    if is_scalar(n, group, block_q):
        return _pack_one(family.gqa_packing, int(n), int(group), int(block_q))
    n, group, block_q = np.broadcast_arrays(np.asarray(n), np.asarray(group), np.asarray(block_q))
    up = lambda a: np.ceil(a / block_q) * block_q  # noqa: E731
    packed = {
        "none": np.zeros(n.shape, dtype=bool),
        "always": np.ones(n.shape, dtype=bool),
        "decode": n == 1,
        # FlashAttention-3's rule: pack when it fills the tiles at least 1/0.9 better
        "when_short": n / up(n) < 0.9 * (n * group) / up(n * group),
    }[family.gqa_packing]
    return np.where(packed & (group > 1), group, 1).astype(float)


def _pack_one(rule: str, n: int, group: int, block_q: int) -> int:
    up = lambda a: math.ceil(a / block_q) * block_q  # noqa: E731
    packed = {
        "none": False,
        "always": True,
        "decode": n == 1,
        "when_short": n / up(n) < 0.9 * (n * group) / up(n * group),
    }[rule]
    return group if packed and group > 1 else 1


def kv_splits(family: KernelFamily, *, n, m, d, h, pack, b, block_q, sm_count) -> Any:
    """The family's split-KV choice: programs counted with its split kernel's tiles."""
    split_bq = family.split_block_q or block_q
    if is_scalar(n, m, d, h, pack, b, split_bq):
        programs = int(b) * (int(h) // int(pack)) * -(-int(n) * int(pack) // int(split_bq))
        bk = family.split_block_k_for(int(d)) if family.split_block_k else int(split_bq)
        return family.splits(programs=programs, kv_blocks=-(-int(m) // bk), sm_count=sm_count)
    arrays = np.broadcast_arrays(*(np.asarray(v) for v in (n, m, d, h, pack, b, split_bq)))
    n_, m_, d_, h_, p_, b_, bq_ = (a.astype(np.int64, copy=False) for a in arrays)
    programs = b_ * (h_ // p_) * -(-(n_ * p_) // bq_)
    if family.split_block_k:
        dims, where = np.unique(d_, return_inverse=True)
        bk = np.array([family.split_block_k_for(int(x)) for x in dims])[where].reshape(d_.shape)
    else:
        bk = bq_
    kv_blocks = -(-m_ // bk)
    out = np.ones(programs.shape)
    if family.split_kv == "none" or family.max_splits == 1:
        return out
    slots = sm_count * family.split_sm_factor
    # only grids that leave slots idle split (both heuristics); evaluate those rows once each
    small = programs < (0.8 * slots if family.split_kv != "one_wave" else slots)
    pairs = np.stack([programs[small], kv_blocks[small]], axis=1)
    if pairs.size:
        uniq, inverse = np.unique(pairs, axis=0, return_inverse=True)
        chosen = np.array(
            [family.splits(programs=int(p), kv_blocks=int(k), sm_count=sm_count) for p, k in uniq]
        )
        out[small] = chosen[inverse.ravel()]
    return out


def resolve(
    family: KernelFamily,
    hw: Any,
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
) -> KernelConfig:
    """Tiles (the family's unless named), packing, splits and on-chip fit for each point.

    A named tile that does not fit is an error naming the limit; the family's own
    defaults are what its sources say it launches."""
    if splits is not None:
        check_tile("splits", splits, 1)
    tile = (d, s, causal, block_q, block_k, warps)
    if all(v is None or isinstance(v, NUMBERS) for v in tile):  # one point: cached
        block = _block_of_one(ByIdentity(family), ByIdentity(hw), *tile)
    elif any(repeated := [is_repeated(v) for v in tile]) and all(
        r or v is None or is_scalar(v) for v, r in zip(tile, repeated, strict=True)
    ):
        # a sweep's fixed tile: worked out on its first point, then broadcast
        size = np.broadcast_shapes(*(np.shape(v) for v in tile))
        first = (v[:1] if r else v for v, r in zip(tile, repeated, strict=True))
        block = _spread(_block(family, hw, *first), size)
    else:
        block = _block(family, hw, *tile)
    bq = block.block_q
    group = h // h_kv if is_scalar(h, h_kv) else np.asarray(h) // np.asarray(h_kv)
    group = int(group) if is_scalar(group) else group
    pack = gqa_pack(family, n, group, bq)
    if splits is None:
        splits = kv_splits(
            family, n=n, m=m, d=d, h=h, pack=pack, b=b, block_q=bq, sm_count=hw.sm_count
        )
    fp, cap = block.footprint, block.capacity
    return KernelConfig(
        block_q=bq,
        block_k=block.block_k,
        warps=block.warps,
        pack=pack,
        splits=splits,
        blocks_per_sm=cap.blocks_per_sm,
        spilled_registers_per_thread=cap.spilled_registers_per_thread,
        smem_bytes=fp.smem_bytes,
        registers_per_thread=fp.registers_per_thread,
        footprint=fp,
        bytes_in_flight=block.bytes_in_flight,
    )


class _Block(NamedTuple):
    """What a thread block's tile decides whatever the sequence lengths and heads."""

    block_q: Any
    block_k: Any
    warps: Any
    footprint: onchip.Footprint
    capacity: onchip.Capacity
    bytes_in_flight: Any


def _block(
    family: KernelFamily,
    hw: Any,
    d: Any,
    s: Any,
    causal: Any,
    block_q: Any,
    block_k: Any,
    warps: Any,
) -> _Block:
    """The tile (the family's unless named), its on-chip footprint and fit, and the K/V
    bytes a block keeps in flight."""
    named = block_q is not None or block_k is not None
    bq_d, bk_d, w_d, stages = default_tiles(family, d, causal, hw.arch)
    bq = bq_d if block_q is None else block_q
    bk = bk_d if block_k is None else block_k
    w = w_d if warps is None else warps
    check_tile("block_q", bq, BLOCK_Q_MULTIPLE)
    check_tile("block_k", bk, BLOCK_K_MULTIPLE)
    fp = onchip.footprint(
        block_q=bq,
        block_k=bk,
        d=d,
        s=s,
        kv_stages=stages,
        warps=w,
        producer_warps=family.producer_warps,
    )
    onchip.check_fits(hw, fp, what=lambda: _what(bq, bk, d, None if named else family.name))
    cap = onchip.capacity(hw, fp)
    in_flight = 2 * bk * d * s * (stages if family.producer_warps else 1)
    return _Block(bq, bk, w, fp, cap, in_flight)


def _spread(block: _Block, shape: tuple[int, ...]) -> _Block:
    """A block worked out on one point (1-element arrays) as arrays of ``shape``: each
    field that is an array over the points is broadcast, the others kept as they are."""

    def wide(value: Any) -> Any:
        return np.broadcast_to(value, shape) if np.ndim(value) == 1 else value

    def each(facts: Any) -> Any:
        return replace(facts, **{f.name: wide(getattr(facts, f.name)) for f in fields(facts)})

    bq, bk, w, fp, cap, in_flight = block
    return _Block(wide(bq), wide(bk), wide(w), each(fp), each(cap), wide(in_flight))


class ByIdentity:
    """A cache key that is its object's identity: a frozen spec (family, device,
    calibration) states the same facts for as long as a cache entry keeps it alive."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any):
        self.obj = obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ByIdentity) and other.obj is self.obj


@functools.lru_cache(maxsize=1024, typed=True)
def _block_of_one(family: ByIdentity, hw: ByIdentity, *tile: Any) -> _Block:
    """:func:`_block` for one point (plain numbers), cached: ``predict`` asks for the same
    few tiles of a family on a device again and again."""
    return _block(family.obj, hw.obj, *tile)


def launch_of(shape: Shape, hw: Any) -> KernelConfig:
    """:func:`resolve` for a shape with n set: its kernel family, and its tiles, warps and
    splits where it names them."""
    return resolve(
        load_kernel(shape.kernel),
        hw,
        **shape.sizes(),
        causal=shape.causal,
        block_q=shape.block_q,
        block_k=shape.block_k,
        warps=shape.warps,
        splits=shape.splits,
    )


def _what(bq: Any, bk: Any, d: Any, family: str | None) -> str:
    text = f"tile block_q={_show(bq)}, block_k={_show(bk)} at d={_show(d)}"
    return text + ("" if family is None else f" (kernel family {family!r})")


def _show(v: Any) -> str:
    a = np.asarray(v)
    return str(a.item()) if a.ndim == 0 else str(sorted({x.item() for x in np.unique(a)}))


def tile_gcd(block_q: Any, block_k: Any, pack: Any) -> Any:
    """gcd(B_r/pack, B_c): the period of the causal diagonal across tiles of any size."""
    if is_scalar(block_q, block_k, pack):
        return float(math.gcd(round(block_q / pack), int(block_k)))
    bq = np.asarray(block_q) / np.asarray(pack)
    g = np.gcd(np.round(bq).astype(np.int64), np.asarray(block_k).astype(np.int64))
    return float(g) if g.ndim == 0 else g.astype(float)
