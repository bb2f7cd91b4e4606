"""Attention masks as a tiled kernel walks them: which (Q block, K block) tiles it visits.

A flash kernel skips a tile whose scores are all masked (FlashAttention-2 skips the
tiles above the causal diagonal; FlexAttention's block masks and attention-gym's masks
generalise it): its work and its K/V traffic are those of the *non-empty* tiles. This
module counts them exactly, for

* a **sliding window** (local attention): query ``i`` sees keys ``j`` with
  ``i - left <= j <= i + right`` (``jax.nn.dot_product_attention``'s
  ``local_window_size=(left, right)``; with ``causal`` the right side is 0), ``i`` the
  query's key position: with fewer queries than keys, :func:`query_offset` of the
  window's alignment (``vocabulary.WindowAlign``: the last positions, as a KV cache holds
  new tokens, or the first, as ``jax.nn`` and our kernels place them);
* **packed documents** (``segments``: the lengths of the documents packed into one
  sequence of ``n`` tokens, or one length L: documents of L tokens each, the last one
  what is left, at any n; a query sees only keys of its own document), with a window
  and causality or without;
* a **block mask**: a boolean array over tiles of its own size (FlexAttention's
  ``BlockMask``, ``block_size`` rows and columns a tile), or a callable
  ``mask_mod(b, h, q_idx, kv_idx)`` over element indices as attention-gym defines masks
  (evaluated on numpy index arrays, so it must broadcast).

One function, :func:`tile_mask`, turns a mask into the boolean (T_r, T_c) array of the
tiles a kernel with tiles of ``block_q`` x ``block_k`` visits; :func:`visited` reduces
that array to the counts the cost models use (per (batch, head group)): tiles, scores
computed, K/V rows streamed into SRAM, distinct K/V rows, and K/V rows times the waves
of thread blocks that read them (the DRAM count past L2). Windows and documents are
counted from each Q block's key range, O(T_r·T_c); a callable is evaluated on every
element, O(n·m).

Exact by construction: for a window and documents the keys a query sees form one range
``[lo(q), hi(q)]`` with ``lo`` and ``hi`` non-decreasing in ``q`` and ``hi(q) >= q >=
lo(q + 1) - 1``, so the keys a Q block sees are the one range ``[lo(first row),
hi(last row)]``; ``tests/test_masks.py`` checks every count against the element mask
built by brute force. Self-attention only (``m == n``) for documents.

>>> tm = tile_mask(Mask(causal=True, window=(255, 0)), n=1024, m=1024, block_q=128, block_k=128)
>>> int(tm.sum()), tm.shape   # each Q block sees its own K block and up to 2 before it
(21, (8, 8))
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from perfmodel.errors import PerfmodelError, spell
from perfmodel.vocabulary import WindowAlign

#: FlexAttention's default block size (``torch.nn.attention.flex_attention``'s BLOCK_SIZE).
DEFAULT_BLOCK = 128
#: Rows of Q blocks a callable mask is evaluated over at once (bounds the memory it takes).
_CHUNK_ELEMENTS = 1 << 24


@dataclass(frozen=True)
class Mask:
    """What a query may see: causal, a window (left, right keys; None = unbounded),
    packed document lengths, and a block mask (array over tiles, or a callable).

    Build one with :func:`mask_of`, which checks it against the shape."""

    causal: bool = False
    window: tuple[int | None, int | None] = (None, None)
    segments: tuple[int, ...] | None = None
    #: Documents of this many tokens each (the last one shorter): ``segments=L``, any n.
    doc_length: int | None = None
    #: A boolean array over tiles of ``block_size`` (stored as bytes, so the mask hashes).
    block: bytes | None = None
    block_shape: tuple[int, int] | None = None
    block_size: tuple[int, int] = (DEFAULT_BLOCK, DEFAULT_BLOCK)
    mask_mod: Callable[..., Any] | None = field(default=None, compare=True)
    #: Where fewer queries than keys sit (:func:`query_offset`); the default without a window.
    align: WindowAlign = WindowAlign.BOTTOM_RIGHT

    @property
    def is_dense(self) -> bool:
        """True when nothing beyond causality restricts a query (the model's own forms)."""
        return (
            self.window == (None, None)
            and self.segments is None
            and self.doc_length is None
            and self.block is None
            and self.mask_mod is None
        )

    def block_array(self) -> np.ndarray:
        return np.frombuffer(cast(bytes, self.block), dtype=np.bool_).reshape(self.block_shape)

    def describe(self) -> str:
        """A short name: ``causal window=(4095, 0)``, ``segments=3 docs``, ``block mask``."""
        parts = ["causal"] * self.causal
        if self.window != (None, None):
            parts.append(f"window={self.window}")
            parts += [f"{self.align}"] * (self.align != WindowAlign.BOTTOM_RIGHT)
        if self.segments is not None:
            parts.append(f"segments={len(self.segments)} docs")
        if self.doc_length is not None:
            parts.append(f"documents of {self.doc_length}")
        block = self._block_name()
        return " ".join([*parts, *([block] if block else [])]) or "dense"

    def _block_name(self) -> str | None:
        parts = []
        if self.block is not None:
            parts.append(f"block mask {self.block_shape} of {self.block_size}")
        if self.mask_mod is not None:
            parts.append(f"mask_mod={getattr(self.mask_mod, '__name__', 'callable')}")
        return " ".join(parts) or None

    def recorded(self) -> dict[str, Any]:
        """The mask as ``Prediction.config`` records it (``perfmodel.shape.Shape``'s
        ``window``, ``segments`` and ``block_mask`` fields): the window as (left, right)
        keys and its alignment where not the default, the document lengths, the block
        mask's description (not the array)."""
        return dict(
            window=None if self.window == (None, None) else self.window,
            window_align=None if self.align == WindowAlign.BOTTOM_RIGHT else str(self.align),
            segments=self.doc_length if self.segments is None else self.segments,
            block_mask=self._block_name(),
        )


def _window_side(name: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
        raise PerfmodelError(f"{spell(name, value)} must be a non-negative integer (keys) or None")
    return int(value)


def _spelled(value: Any, name: str = "window") -> str:
    """``name`` as the caller wrote it: ``window=(128, 0)`` from Python, ``--window 128,0``
    from the command line (whose lists are comma-separated)."""
    typed = ",".join(str(v) for v in value) if isinstance(value, tuple | list) else value
    return spell(name, typed, shown=repr(value))


def _window(window: Any, causal: bool) -> tuple[int | None, int | None]:
    """``window`` as (left, right): an int W is (W, 0) when causal, else (W, W)."""
    if window is None:
        return (None, 0 if causal else None)
    if isinstance(window, tuple | list):
        if len(window) != 2:
            raise PerfmodelError(f"{_spelled(window)} must be W or (left, right)")
        left, right = (_window_side("window", w) for w in window)
    else:
        if isinstance(window, bool) or not isinstance(window, int | np.integer) or window <= 0:
            raise PerfmodelError(f"{_spelled(window)} must be a positive integer (keys) or None")
        left, right = int(window), (0 if causal else int(window))
    if causal:
        if right not in (None, 0):
            raise PerfmodelError(f"{_spelled(window)}: a causal mask has no right window")
        right = 0
    if left == 0 and right == 0:
        raise PerfmodelError(f"{_spelled(window)} leaves each query only itself: must be > 0")
    return left, right


def query_offset(align: WindowAlign, n: int, m: int) -> int:
    """The key position of query row 0: row q sits at ``q + query_offset``. With fewer
    queries than keys, ``bottom_right`` puts them at the last n of the m positions (``m -
    n``: a KV cache's new tokens; FlashAttention's ``window_size`` convention, cuDNN's
    BOTTOM_RIGHT diagonal), ``top_left`` at the first (0: ``jax.nn``'s
    ``local_window_size``, our kernels' ``window=``, cross-attention). The one rule of
    the alignment: every count of this module places queries by it.

    >>> query_offset(WindowAlign.BOTTOM_RIGHT, 1, 8), query_offset(WindowAlign.TOP_LEFT, 1, 8)
    (7, 0)
    """
    return m - n if align == WindowAlign.BOTTOM_RIGHT else 0


def checked_align(value: Any) -> WindowAlign:
    """``window_align`` as a :class:`~perfmodel.vocabulary.WindowAlign` (one error naming it)."""
    try:
        return WindowAlign(value)
    except ValueError:
        known = ", ".join(repr(str(a)) for a in WindowAlign)
        raise PerfmodelError(f"{spell('window_align', value)} must be one of {known}") from None


def _segments(segments: Any, n: int) -> tuple[int, ...] | int | None:
    """Document lengths summing to n, or one length (documents of that many tokens)."""
    if segments is None:
        return None
    if isinstance(segments, int | np.integer) and not isinstance(segments, bool):
        if segments <= 0:
            raise PerfmodelError(f"{_spelled(segments, 'segments')} must be a positive document length")
        return int(segments)
    try:
        lengths = [operator_index(s) for s in segments]
    except TypeError:
        raise PerfmodelError(
            f"{_spelled(segments, 'segments')} must be a list of positive document lengths"
        ) from None
    if not lengths or min(lengths) <= 0:
        raise PerfmodelError(f"{_spelled(segments, 'segments')} must be positive document lengths")
    if sum(lengths) != n:
        raise PerfmodelError(f"{_spelled(segments, 'segments')} sum to {sum(lengths)}, not {spell('n', n)}: they must cover it")
    return tuple(lengths)


def operator_index(value: Any) -> int:
    """``value`` as an int (numpy integers too); bools and floats refused."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(value)
    return int(value)


def mask_of(
    n: int,
    m: int,
    *,
    causal: bool = False,
    window: Any = None,
    segments: Any = None,
    block_mask: Any = None,
    block_size: Any = DEFAULT_BLOCK,
    window_align: Any = WindowAlign.BOTTOM_RIGHT,
) -> Mask:
    """A checked :class:`Mask` for an ``n`` x ``m`` attention.

    ``window``: W (``(W, 0)`` causal, ``(W, W)`` otherwise) or ``(left, right)``;
    ``segments``: document lengths summing to ``n``, or one length L (documents of L
    tokens, the last one what is left: one rule at every n); ``block_mask``: a boolean
    array of shape ``(ceil(n/block), ceil(m/block))`` or a callable ``mask_mod(b, h, q_idx,
    kv_idx)``; ``block_size``: the array's tile, one int or (rows, cols);
    ``window_align``: where fewer queries than keys sit (:func:`query_offset`).
    """
    left, right = _window(window, causal)
    align = checked_align(window_align)
    docs = _segments(segments, n)
    if docs is not None and n != m:
        raise PerfmodelError(f"segments need self-attention: kv_len={m} != n={n}")
    if window is not None and n > m and align == WindowAlign.BOTTOM_RIGHT:
        raise PerfmodelError(
            f"{spell('window', window)} with n={n} > kv_len={m}: "
            f"{spell('window_align', 'bottom_right')} puts the queries at the last n of the "
            "kv_len positions (decode, chunked prefill), so n must not exceed kv_len "
            f"({spell('window_align', 'top_left')}: the first n, as jax.nn does)"
        )
    rows, cols = (block_size, block_size) if not isinstance(block_size, tuple) else block_size
    for v in (rows, cols):
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or v <= 0:
            raise PerfmodelError(f"block_size={block_size!r} must be a positive integer")
    kwargs: dict[str, Any] = {}
    if callable(block_mask):
        kwargs["mask_mod"] = block_mask
    elif block_mask is not None:
        arr = np.asarray(block_mask)
        want = (math.ceil(n / rows), math.ceil(m / cols))
        if arr.dtype != bool or arr.shape != want:
            raise PerfmodelError(
                f"block_mask of shape {arr.shape} and dtype {arr.dtype} must be a boolean "
                f"array of shape {want}: ceil(n/{rows}) x ceil(kv_len/{cols}) tiles"
            )
        kwargs.update(block=np.ascontiguousarray(arr).tobytes(), block_shape=want)
    return Mask(
        causal=bool(causal),
        window=(left, right) if window is not None else (None, None),
        segments=docs if isinstance(docs, tuple) else None,
        doc_length=docs if isinstance(docs, int) else None,
        block_size=(int(rows), int(cols)),
        align=align if window is not None else WindowAlign.BOTTOM_RIGHT,
        **kwargs,
    )


def refuse_unmodelled(given: str, *, cp: bool, paged: bool) -> None:
    """One clear error where a mask (``given``: its arguments) is not modelled: flash
    split over devices (its ring and all-gather steps under a window are not counted)
    and a paged K/V cache (the block-table reads of a window's pages are not counted)."""
    if cp:
        raise PerfmodelError(
            f"a mask ({given}) with cp or tp > 1 is not modelled: the split over devices "
            "(perfmodel.parallel) counts dense or causal attention only"
        )
    if paged:
        raise PerfmodelError(
            f"a mask ({given}) with page_tokens (a paged K/V cache) is not modelled: the "
            "block-table reads of the pages a window visits are not counted (contiguous K/V)"
        )


# --- the tiles ------------------------------------------------------------------------
def _key_range(mask: Mask, q: np.ndarray, n: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Per query row ``q``: the first and last key it sees (windows, documents, causal);
    row ``q`` sits at key position ``q + query_offset(mask.align, n, m)``."""
    lo = np.zeros_like(q)
    hi = np.full_like(q, m - 1)
    left, right = mask.window
    at = q + query_offset(mask.align, n, m)
    if mask.causal:
        hi = np.minimum(hi, at)
    if left is not None:
        lo = np.maximum(lo, at - left)
    if right is not None:
        hi = np.minimum(hi, at + right)
    if mask.doc_length is not None:
        start = q // mask.doc_length * mask.doc_length
        lo = np.maximum(lo, start)
        hi = np.minimum(hi, start + mask.doc_length - 1)
    if mask.mask_mod is not None and hasattr(mask.mask_mod, "key_range"):
        first, last = mask.mask_mod.key_range(q)
        lo, hi = np.maximum(lo, first), np.minimum(hi, last)
    if mask.segments is not None:
        ends = np.cumsum(mask.segments)
        doc = np.searchsorted(ends, q, side="right")
        lo = np.maximum(lo, ends[doc] - np.asarray(mask.segments)[doc])
        hi = np.minimum(hi, ends[doc] - 1)
    return lo, hi


def _block_ranges(
    mask: Mask, n: int, m: int, block_q: int, block_k: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per Q block: its first and last K block, and whether it sees any key at all."""
    first = np.arange(math.ceil(n / block_q), dtype=np.int64) * block_q
    last = np.minimum(first + block_q, n) - 1
    lo, _ = _key_range(mask, first, n, m)
    _, hi = _key_range(mask, last, n, m)
    return lo // block_k, hi // block_k, hi >= lo


def steps_per_q_block(mask: Mask, n: int, m: int, block_q: int, block_k: int) -> np.ndarray:
    """Per Q block of ``block_q`` query positions, the K blocks it walks (its first to
    its last visible one; 0 where it sees no key): the inner-loop steps of its program."""
    lo, hi, seen = _block_ranges(mask, n, m, block_q, block_k)
    return np.where(seen, hi - lo + 1, 0)


def _range_tiles(mask: Mask, n: int, m: int, block_q: int, block_k: int) -> np.ndarray:
    """Tiles of a window / documents / causal mask, from each Q block's key range."""
    lo, hi, seen = _block_ranges(mask, n, m, block_q, block_k)
    j = np.arange(math.ceil(m / block_k), dtype=np.int64)
    tiles: np.ndarray = (j >= lo[:, None]) & (j <= hi[:, None]) & seen[:, None]
    return tiles


def _block_tiles(mask: Mask, n: int, m: int, block_q: int, block_k: int) -> np.ndarray:
    """A kernel tile is visited when any mask tile under it is true (2-D prefix sums)."""
    arr = mask.block_array()
    rows, cols = mask.block_size
    t_r, t_c = math.ceil(n / block_q), math.ceil(m / block_k)
    prefix = np.zeros((arr.shape[0] + 1, arr.shape[1] + 1), dtype=np.int64)
    prefix[1:, 1:] = arr.cumsum(0).cumsum(1)
    i = np.arange(t_r)
    j = np.arange(t_c)
    r0, r1 = i * block_q // rows, (np.minimum((i + 1) * block_q, n) - 1) // rows + 1
    c0, c1 = j * block_k // cols, (np.minimum((j + 1) * block_k, m) - 1) // cols + 1
    total = (
        prefix[r1[:, None], c1[None, :]]
        - prefix[r0[:, None], c1[None, :]]
        - prefix[r1[:, None], c0[None, :]]
        + prefix[r0[:, None], c0[None, :]]
    )
    visited: np.ndarray = total > 0
    return visited


def _callable_tiles(mask: Mask, n: int, m: int, block_q: int, block_k: int) -> np.ndarray:
    """A callable mask evaluated on every element, a chunk of Q blocks at a time."""
    t_r, t_c = math.ceil(n / block_q), math.ceil(m / block_k)
    out = np.zeros((t_r, t_c), dtype=np.bool_)
    mask_mod = cast(Callable[..., Any], mask.mask_mod)  # a callable mask
    kv = np.arange(t_c * block_k)
    per_chunk = max(1, _CHUNK_ELEMENTS // (block_q * t_c * block_k))
    for start in range(0, t_r, per_chunk):
        stop = min(t_r, start + per_chunk)
        q = np.arange(start * block_q, stop * block_q)
        try:
            allowed = np.asarray(mask_mod(0, 0, q[:, None], kv[None, :]), dtype=np.bool_)
            allowed = np.broadcast_to(allowed, (q.size, kv.size))
        except Exception as err:  # a user's function: say which one failed and how
            raise PerfmodelError(
                f"block_mask={mask.describe()} failed on numpy index arrays: {err}"
            ) from err
        inside = (q[:, None] < n) & (kv[None, :] < m)
        tiles = (allowed & inside).reshape(stop - start, block_q, t_c, block_k)
        out[start:stop] = tiles.any(axis=(1, 3))
    return out


def tile_mask(mask: Mask, *, n: int, m: int, block_q: int, block_k: int) -> np.ndarray:
    """The boolean (T_r, T_c) array of the tiles a kernel visits: those with any score
    the mask keeps (every part of ``mask`` applies: causal, window, documents, block)."""
    tm = _range_tiles(mask, n, m, block_q, block_k)
    if mask.block is not None:
        tm &= _block_tiles(mask, n, m, block_q, block_k)
    if mask.mask_mod is not None and not _ranged(mask):
        tm &= _callable_tiles(mask, n, m, block_q, block_k)
    return tm


def _ranged(mask: Mask) -> bool:
    """Whether every part of the mask is a key range per query (windows, documents, a
    mask_mod with its ``key_range``): counted from each Q block's range, O(T_r + T_c)."""
    return mask.block is None and (mask.mask_mod is None or hasattr(mask.mask_mod, "key_range"))


@dataclass(frozen=True)
class PrefixLM:
    """attention-gym's prefix-LM mask as a FlexAttention ``mask_mod``: the first
    ``prefix`` keys are seen by every query (bidirectional), the rest causally, ``kv_idx
    <= q_idx or kv_idx < prefix``; with its key range (keys ``0 .. max(q, prefix - 1)``),
    so it is counted at every n in O(T_r) rather than over every score.

    >>> pl = PrefixLM(4)
    >>> pl(0, 0, np.arange(6)[:, None], np.arange(6)[None, :]).sum(axis=1).tolist()
    [4, 4, 4, 4, 5, 6]
    """

    prefix: int

    def __post_init__(self) -> None:
        if isinstance(self.prefix, bool) or not isinstance(self.prefix, int) or self.prefix < 1:
            raise PerfmodelError(f"prefix={self.prefix!r} must be a positive number of tokens")

    @property
    def __name__(self) -> str:  # what Mask.describe shows
        return f"prefix_lm({self.prefix})"

    def __call__(self, b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
        return (kv_idx <= q_idx) | (kv_idx < self.prefix)

    def key_range(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The first and last key query row ``q`` sees (both non-decreasing in q)."""
        return np.zeros_like(q), np.maximum(q, self.prefix - 1)


# --- the counts -----------------------------------------------------------------------
@dataclass(frozen=True)
class Visited:
    """Per (batch, head group): what a tiled kernel does under a mask.

    ``tiles``: (Q block, K block) tiles visited; ``scores``: scores computed (the visited
    tiles' area inside the n x m matrix, times ``pack`` heads a tile); ``kv_rows``: K/V
    rows streamed into SRAM (each visited tile's K block); ``kv_touched``: distinct K/V
    rows read; ``kv_wave_rows``: per K/V head, each row times the waves of thread blocks
    reading it (``resident`` blocks a wave, the grid's Q-block axis fastest, the
    ``groups`` head groups of one K/V head one after the other)."""

    tiles: float
    scores: float
    kv_rows: float
    kv_touched: float
    kv_wave_rows: float
    q_blocks: int


def visited(
    mask: Mask,
    *,
    n: int,
    m: int,
    block_q: int,
    block_k: int,
    pack: int = 1,
    groups: int = 1,
    resident: int = 1,
) -> Visited:
    """The counts of :class:`Visited` for a kernel of ``block_q`` x ``block_k`` tiles
    whose rows hold ``pack`` query heads (a tile covers ``block_q/pack`` positions)."""
    positions = block_q // pack if block_q % pack == 0 else block_q / pack
    if positions != int(positions) or positions < 1:
        raise PerfmodelError(f"block_q={block_q} is not a multiple of pack={pack}")
    return _visited(mask, int(n), int(m), int(positions), int(block_k), pack, groups, resident)


@functools.lru_cache(maxsize=4096)
def _visited(
    mask: Mask, n: int, m: int, bq: int, bk: int, pack: int, groups: int, resident: int
) -> Visited:
    if _ranged(mask):
        lo, hi, seen = _block_ranges(mask, n, m, bq, bk)
        if seen.all():
            return _range_visited(lo, hi, n, m, bq, bk, pack, groups, resident)
    tm = tile_mask(mask, n=n, m=m, block_q=bq, block_k=bk)
    return _array_visited(tm, n, m, bq, bk, pack, groups, resident)


def _array_visited(
    tm: np.ndarray, n: int, m: int, bq: int, bk: int, pack: int, groups: int, resident: int
) -> Visited:
    """:class:`Visited` from the boolean (T_r, T_c) array of visited tiles."""
    t_r, t_c = tm.shape
    rows = np.minimum(bq, n - np.arange(t_r) * bq)
    cols = np.minimum(bk, m - np.arange(t_c) * bk)
    kv_rows = float(tm.sum(axis=0) @ cols)
    touched = float(tm.any(axis=0) @ cols)
    # The programs of one K/V head: ``groups`` head groups of T_r Q blocks, in grid order.
    programs = np.tile(tm, (groups, 1))
    starts = np.arange(0, programs.shape[0], max(int(resident), 1))
    waves = (np.add.reduceat(programs, starts, axis=0) > 0).sum(axis=0)
    return Visited(
        tiles=float(tm.sum()),
        scores=float(pack * (rows @ tm @ cols)),
        kv_rows=kv_rows,
        kv_touched=touched,
        kv_wave_rows=float(waves @ cols),
        q_blocks=t_r,
    )


def _readers(lo: np.ndarray, hi: np.ndarray, t_c: int) -> tuple[np.ndarray, np.ndarray]:
    """Per K block ``j``: the first and last Q block whose range ``[lo, hi]`` holds it
    (ranges with both ends non-decreasing; first > last where none does)."""
    j = np.arange(t_c)
    return np.searchsorted(hi, j, side="left"), np.searchsorted(lo, j, side="right") - 1


@dataclass(frozen=True)
class Backward:
    """Per (batch, query head), one program per query head (no packing): the flash
    backward's two walks over the forward's tiles. ``dq``: the Q-block-major walk (the
    dQ kernel, the forward's loop order); ``dkdv``: the K-block-major walk (the dK/dV
    kernel: one program per K block, the Q blocks streamed past it), counted with the
    roles of Q and K swapped: its ``kv_rows`` are the Q rows streamed, ``kv_touched``
    the distinct Q rows read, ``kv_wave_rows`` Q rows times the waves of K-block
    programs that read them."""

    dq: Visited
    dkdv: Visited


def backward_visited(
    mask: Mask, *, n: int, m: int, block_q: int, block_k: int, resident: int = 1
) -> Backward:
    """:class:`Backward` for a backward of ``block_q`` x ``block_k`` tiles: the forward's
    visited tiles, walked in both loop orders."""
    return _backward(mask, int(n), int(m), int(block_q), int(block_k), int(resident))


@functools.lru_cache(maxsize=4096)
def _backward(mask: Mask, n: int, m: int, bq: int, bk: int, resident: int) -> Backward:
    dq = _visited(mask, n, m, bq, bk, 1, 1, resident)
    if _ranged(mask):
        lo, hi, seen = _block_ranges(mask, n, m, bq, bk)
        first, last = _readers(lo, hi, math.ceil(m / bk))
        if seen.all() and (first <= last).all():
            return Backward(dq, _range_visited(first, last, m, n, bk, bq, 1, 1, resident))
    tm = tile_mask(mask, n=n, m=m, block_q=bq, block_k=bk)
    return Backward(dq, _array_visited(tm.T, m, n, bk, bq, 1, 1, resident))


def _range_visited(
    lo: np.ndarray,
    hi: np.ndarray,
    n: int,
    m: int,
    bq: int,
    bk: int,
    pack: int,
    groups: int,
    resident: int,
) -> Visited:
    """:class:`Visited` from each Q block's K-block range ``[lo, hi]`` (both ends
    non-decreasing, as for windows and documents), without the T_r x T_c array: O(T_r +
    groups·T_c). Equal to the tile-array count (``tests/test_masks.py``)."""
    t_r, t_c = lo.size, math.ceil(m / bk)
    rows = np.minimum(bq, n - np.arange(t_r) * bq)
    cols = np.minimum(bk, m - np.arange(t_c) * bk)
    prefix = np.concatenate(([0], np.cumsum(cols)))
    width = prefix[hi + 1] - prefix[lo]  # K/V rows each Q block streams
    # distinct rows: each range minus what the ranges before it already covered
    covered = np.concatenate(([-1], np.maximum.accumulate(hi)[:-1]))
    start = np.maximum(lo, covered + 1)
    touched = np.where(hi >= start, prefix[hi + 1] - prefix[np.minimum(start, t_c)], 0)
    # readers of K block j: the Q blocks a_j .. b_j (ranges are monotone)
    a, b = _readers(lo, hi, t_c)
    read = a <= b
    g = np.arange(groups)[:, None] * t_r
    first, last = (g + a) // resident, (g + b) // resident  # waves, per head group
    before = np.concatenate((np.full((1, t_c), -1), np.maximum.accumulate(last, 0)[:-1]), 0)
    waves = np.maximum(0, last - np.maximum(first, before + 1) + 1).sum(axis=0) * read
    return Visited(
        tiles=float((hi - lo + 1).sum()),
        scores=float(pack * (rows @ width)),
        kv_rows=float(width.sum()),
        kv_touched=float(touched.sum()),
        kv_wave_rows=float(waves @ cols),
        q_blocks=t_r,
    )


def kv_blocks_walked(
    mask: Mask, *, n: Any, m: Any, block_q: Any, block_k: Any, pack: Any = 1
) -> Any:
    """The most K blocks of ``block_k`` keys one program (a Q block of ``block_q`` rows,
    ``pack`` heads a tile) visits under the mask: what a split-KV kernel divides into
    chunks (FlashAttention-3 splits the keys a local window loads, ``seqlen_k_loaded``,
    not the whole cache). Numbers or columns, broadcast; one count per distinct point."""
    cols = np.broadcast_arrays(*(np.asarray(v) for v in (n, m, block_q, block_k, pack)))
    flat = np.stack([c.reshape(-1) for c in cols], axis=1).astype(np.int64)
    points, inverse = np.unique(flat, axis=0, return_inverse=True)
    out = np.array([_walked(mask, *(int(x) for x in point)) for point in points])
    walked = out[inverse.reshape(-1)].reshape(cols[0].shape)
    return float(walked) if walked.ndim == 0 else walked


@functools.lru_cache(maxsize=4096)
def _walked(mask: Mask, n: int, m: int, bq: int, bk: int, pack: int) -> float:
    positions = max(1, bq // pack)
    if _ranged(mask):
        lo, hi, seen = _block_ranges(mask, n, m, positions, bk)
        return float(np.where(seen, hi - lo + 1, 0).max())
    return float(tile_mask(mask, n=n, m=m, block_q=positions, block_k=bk).sum(axis=1).max())


def keys_seen(mask: Mask, n: int, m: int) -> float:
    """Scores the mask keeps (the useful ones): what an ideal, element-sparse kernel computes."""
    if _ranged(mask):
        lo, hi = _key_range(mask, np.arange(n, dtype=np.int64), n, m)
        return float(np.maximum(hi - lo + 1, 0).sum())
    return float(element_mask(mask, n, m).sum())


def element_mask(mask: Mask, n: int, m: int) -> np.ndarray:
    """The n x m boolean mask, element by element (for tests and small shapes)."""
    q = np.arange(n)[:, None]
    k = np.arange(m)[None, :]
    lo, hi = _key_range(mask, np.arange(n, dtype=np.int64), n, m)
    out = (k >= lo[:, None]) & (k <= hi[:, None])
    if mask.block is not None:
        rows, cols = mask.block_size
        out &= mask.block_array()[q // rows, k // cols]
    if mask.mask_mod is not None:
        out &= np.broadcast_to(np.asarray(mask.mask_mod(0, 0, q, k), dtype=bool), (n, m))
    return out


#: The cost model's mask symbols (``perfmodel.symbols.mask_*``), by Visited field.
SYMBOLS = {
    "tiles": "mask_tiles",
    "scores": "mask_scores",
    "kv_rows": "mask_kv_rows",
    "kv_touched": "mask_kv_touched",
    "kv_wave_rows": "mask_kv_wave_rows",
}
#: The backward's extra symbols: its K-block-major walk's counts (``Backward.dkdv``).
BACKWARD_SYMBOLS = {
    "kv_rows": "mask_q_rows",
    "kv_touched": "mask_q_touched",
    "kv_wave_rows": "mask_q_wave_rows",
}


def symbol_values(mask: Mask, *, backward: bool = False, **shape: Any) -> dict[str, Any]:
    """The ``mask_*`` symbol values for a shape's symbols (``n``, ``m``, ``h``, ``h_kv``,
    ``block_q``, ``block_k``, ``pack``, ``resident_ctas``; numbers or arrays, broadcast):
    :func:`visited` once per distinct point. ``backward``: the flash backward's
    (:func:`backward_visited`: one program per query head, both loop orders)."""
    names = ("n", "m", "h", "h_kv", "block_q", "block_k", "pack", "resident_ctas")
    cols = np.broadcast_arrays(*(np.asarray(shape[k]) for k in names))
    flat = np.stack([c.reshape(-1) for c in cols], axis=1).astype(np.int64)
    points, inverse = np.unique(flat, axis=0, return_inverse=True)
    wanted = {**SYMBOLS, **{f"dkdv.{k}": v for k, v in BACKWARD_SYMBOLS.items()}}
    if not backward:
        wanted = dict(SYMBOLS)
    out = {sym: np.empty(len(points)) for sym in wanted.values()}
    for i, (n, m, h, h_kv, bq, bk, pack, resident) in enumerate(points):
        if backward:
            walks = backward_visited(mask, n=n, m=m, block_q=bq, block_k=bk, resident=resident)
            found = {"": walks.dq, "dkdv.": walks.dkdv}
        else:
            groups = max(1, h // (h_kv * pack))
            v = visited(
                mask, n=n, m=m, block_q=bq, block_k=bk, pack=pack, groups=groups, resident=resident
            )
            found = {"": v}
        for key, sym in wanted.items():
            walk, _, field_ = key.rpartition(".")
            out[sym][i] = getattr(found[walk + "." if walk else ""], field_)
    scalar = all(np.ndim(shape[k]) == 0 for k in names)
    return {
        sym: float(col[inverse][0]) if scalar else col[inverse.reshape(-1)].reshape(cols[0].shape)
        for sym, col in out.items()
    }
