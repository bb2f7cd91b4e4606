"""The shape of a cost model: kernels, each with its work and its traffic, as sympy."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

import sympy as sp


@dataclass(frozen=True)
class Kernel:
    """One launch: its work by execution unit and its memory traffic.

    ``hbm_bytes`` is DRAM traffic; ``l2_bytes`` is traffic between L2 and the SMs
    (every global load and store); None means no reuse, the same as ``hbm_bytes``.
    ``l2_reduce_bytes``: bytes sent to L2 as reductions done there (atomic adds whose
    result no one reads), not in ``l2_bytes``: they have their own roof.
    """

    name: str
    matmul_flops: sp.Expr
    vector_flops: sp.Expr
    exp_count: sp.Expr
    hbm_bytes: sp.Expr
    l2_bytes: sp.Expr | None = None
    #: Independent thread blocks in the grid, where few enough to leave SMs idle (else None).
    work_items: sp.Expr | None = None
    #: Inner-loop steps over all blocks (tiled kernels): the unit of per-block fill cost.
    tiles: sp.Expr | None = None
    #: The most thread blocks any implementation of this kernel could launch, where more
    #: than ``work_items`` (the floor's idle SMs; None: ``work_items``).
    floor_work_items: sp.Expr | None = None
    #: Kernels this entry stands for at a point (None: 1): one entry may count a family's
    #: kernels that run only at some shapes (0 there), or several kernels of one kind.
    launches: sp.Expr | None = None
    l2_reduce_bytes: sp.Expr | None = None

    def __post_init__(self) -> None:
        if self.l2_bytes is None:  # streaming kernel: every byte passes L2 once
            object.__setattr__(self, "l2_bytes", self.hbm_bytes)
        if self.l2_reduce_bytes is None:
            object.__setattr__(self, "l2_reduce_bytes", 0 * self.hbm_bytes)

    @property
    def flops(self) -> sp.Expr:
        return self.matmul_flops + self.vector_flops


@dataclass(frozen=True)
class CostModel:
    """An algorithm as a sequence of kernels plus its memory footprint.

    >>> from perfmodel.costs import symbolic
    >>> symbolic("naive").extra_memory_bytes
    2*b*h*m*n*s
    """

    name: str
    kernels: tuple[Kernel, ...]
    extra_memory_bytes: sp.Expr
    #: Bytes the algorithm would move if no re-read hit a cache (for flash: every K/V
    #: re-read of every Q block from DRAM, the FlashAttention paper's IO count).
    hbm_bytes_no_cache: sp.Expr
    #: On-chip working set of one thread block: shared memory (SRAM) and registers.
    sram_bytes: sp.Expr = sp.Integer(0)
    register_bytes: sp.Expr = sp.Integer(0)
    notes: dict[str, str] = field(default_factory=dict)

    @property
    def matmul_flops(self) -> sp.Expr:
        return sp.Add(*(k.matmul_flops for k in self.kernels))

    @property
    def vector_flops(self) -> sp.Expr:
        return sp.Add(*(k.vector_flops for k in self.kernels))

    @property
    def exp_count(self) -> sp.Expr:
        return sp.Add(*(k.exp_count for k in self.kernels))

    @property
    def flops(self) -> sp.Expr:
        return self.matmul_flops + self.vector_flops

    @property
    def hbm_bytes(self) -> sp.Expr:
        return sp.Add(*(k.hbm_bytes for k in self.kernels))

    @property
    def intensity(self) -> sp.Expr:
        """Arithmetic intensity, FLOP per HBM byte."""
        return self.flops / self.hbm_bytes

    def subs(self, values: Mapping[Any, Any]) -> CostModel:
        """This model with ``values`` substituted in every expression (its kernels' and
        its own; the name and notes kept)."""

        def each(obj: Any) -> dict[str, Any]:
            found = ((f.name, getattr(obj, f.name)) for f in fields(obj))
            return {k: v.subs(values) for k, v in found if isinstance(v, sp.Basic)}

        kernels = tuple(replace(k, **each(k)) for k in self.kernels)
        return replace(self, kernels=kernels, **each(self))
