"""One attention problem: the shape every layer passes around.

A :class:`Shape` is what ``predict`` takes besides the device and the model choices
(calibration, how naive is compiled, parallelism): sequence lengths, heads, batch,
dtype, masking, mode and the fused kernel's launch (family, tiles, warps, K/V splits).
``predict`` returns the shape it costed, resolved (``Prediction.config``: kv_len, h_kv,
tiles, warps, splits and GQA packing filled in). A sweep along n keeps n unset and may
fix the number of tokens per point instead of the batch (``tokens``); :meth:`Shape.at`
gives the shape at one n. A measured point's shape is ``Point.shape()``.

>>> s = Shape(d=64, h=8, tokens=16384)
>>> s.at(4096).batch, s.at(32768).batch
(4, 1)
>>> Shape(n=2048, h=16, causal=True).kwargs()["causal"]
True
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from perfmodel.catalog.kernels import load_kernel
from perfmodel.errors import PerfmodelError
from perfmodel.vocabulary import SHAPE_DEFAULTS, symbol_values

if TYPE_CHECKING:
    from perfmodel.catalog.hardware import HardwareSpec

#: Fields that are ``predict`` keyword arguments only when set (None: the default).
_OPTIONAL = ("n", "kv_len", "warps", "splits", "window", "window_align", "segments")


@dataclass(frozen=True)
class Shape:
    """An attention shape; None fields are the default (kv_len = n, h_kv = h, the kernel
    family's tiles, warps and splits)."""

    n: int | None = None  #: query length; None in a sweep's template
    kv_len: int | None = None  #: keys and values per sequence (None: = n)
    d: int = SHAPE_DEFAULTS["d"]
    h: int = SHAPE_DEFAULTS["h"]
    h_kv: int | None = None  #: K/V heads (None: = h; fewer: GQA)
    batch: int = SHAPE_DEFAULTS["batch"]
    dtype: str = SHAPE_DEFAULTS["dtype"]
    causal: bool = False
    block_q: int | None = None
    block_k: int | None = None
    #: What is costed: "forward", "backward" or "train" (forward then backward).
    mode: str = "forward"
    kernel: str = "fa2"  #: the fused side's kernel family (``specs/kernels``)
    warps: int | None = None
    splits: int | None = None  #: K/V chunks per (batch, head group, Q block)
    pack: int | None = None  #: query heads of a GQA group sharing one tile (resolved only)
    #: A sweep's rule instead of ``batch``: ``max(1, tokens // n)`` sequences at each n.
    tokens: int | None = None
    #: The mask (``perfmodel.costs.masks``), as ``predict`` resolved it: the window in
    #: (left, right) keys, packed document lengths, and a block mask's description (the
    #: array or callable itself is not kept, so :meth:`kwargs` refuses to replay it).
    window: tuple[int | None, int | None] | None = None
    #: Where fewer queries than keys sit under the window (None: ``predict``'s default,
    #: "bottom_right"; ``perfmodel.costs.masks.query_offset``).
    window_align: str | None = None
    segments: tuple[int, ...] | int | None = None  #: lengths, or L: documents of L tokens
    block_mask: str | None = None

    def batch_at(self, n: Any) -> Any:
        """The batch at sequence length n (an int, or an array for an array of n)."""
        sympy = sys.modules.get("sympy")  # n = sympy.oo only where sympy is in use
        if sympy is not None and n is sympy.oo:  # the n→∞ limit: one sequence
            return 1 if self.tokens else self.batch
        if self.tokens is None:
            return self.batch if np.ndim(n) == 0 else np.full(np.shape(n), self.batch)
        return (
            max(1, self.tokens // int(n))
            if np.ndim(n) == 0
            else np.maximum(1, self.tokens // np.asarray(n, dtype=np.int64))
        )

    def at(self, n: int) -> Shape:
        """This shape at query length n, its batch fixed (``tokens`` applied)."""
        return replace(self, n=n, batch=self.batch_at(n), tokens=None)

    def kwargs(self, n: Any = None) -> dict[str, Any]:
        """``predict`` keyword arguments (n, kv_len, warps and splits only where set); with
        ``n`` given, the batch at that n and no ``n`` key (the caller passes n)."""
        if self.block_mask is not None:
            raise PerfmodelError(
                f"block_mask={self.block_mask!r}: a shape keeps only the block mask's "
                "description; pass the array or callable to predict again"
            )
        skip = {"pack", "tokens", "block_mask"}
        skip |= {k for k in _OPTIONAL if getattr(self, k) is None}
        if self.mode == "forward":
            skip.add("mode")
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in skip}
        if n is not None:
            out.pop("n", None)
            out["batch"] = self.batch_at(n)
        return out

    def mask(self) -> Any:
        """The shape's mask (``perfmodel.costs.masks.Mask``: its window and documents, as
        ``predict`` checks them), None without one; a block mask cannot be rebuilt."""
        if self.window is None and self.segments is None:
            return None
        from perfmodel.costs import masks

        if self.n is None:
            raise PerfmodelError("Shape.mask() needs n (a sweep's template has none)")
        m = self.n if self.kv_len is None else self.kv_len
        align = {} if self.window_align is None else {"window_align": self.window_align}
        return masks.mask_of(
            self.n, m, causal=self.causal, window=self.window, segments=self.segments, **align
        )

    def sizes(self) -> dict[str, Any]:
        """The cost models' size symbols of a shape with n set: n, m (= n unless kv_len),
        d, h, h_kv (= h unless given), b and s (bytes per element)."""
        return symbol_values(
            n=self.n,
            kv_len=self.n if self.kv_len is None else self.kv_len,
            d=self.d,
            h=self.h,
            h_kv=self.h if self.h_kv is None else self.h_kv,
            batch=self.batch,
            dtype=self.dtype,
        )

    def tiles(self, spec: HardwareSpec) -> tuple[int, int]:
        """(block_q, block_k): as given, else the kernel family's for this head dim."""
        tile = load_kernel(self.kernel).tile_for(self.d, causal=self.causal, arch=spec.arch)
        return (self.block_q or tile.block_q, self.block_k or tile.block_k)

    def symbol_values(self, n: Any, spec: HardwareSpec) -> dict[str, Any]:
        """The cost models' symbol values at n (``vocabulary.symbol_values``), n and m
        aside; tiles as given, else the kernel family's."""
        block_q, block_k = self.tiles(spec)
        return symbol_values(
            d=self.d,
            h=self.h,
            h_kv=self.h if self.h_kv is None else self.h_kv,
            batch=self.batch_at(n),
            dtype=self.dtype,
            block_q=block_q,
            block_k=block_k,
        )

    def label(self) -> str:
        """``d=128, h=16, batch=4, bf16, causal``: the fields a sweep's figures hold fixed."""
        kv = "" if self.h_kv in (None, self.h) else f", h_kv={self.h_kv}"
        batch = f"batch=max(1, {self.tokens}//n)" if self.tokens else f"batch={self.batch}"
        return (
            f"d={self.d}, h={self.h}{kv}, {batch}, {self.dtype}{', causal' if self.causal else ''}"
        )
