"""Kernel families as data: the structural facts of each attention implementation.

A family (``specs/kernels/<name>.toml``) says how an implementation is built — where
its softmax runs relative to the two matmuls, which matrix instruction it issues, how
many warps and pipeline stages a thread block has, its default tile per head dim,
whether the query heads of a GQA group share one K/V read, how it splits K/V for
decode, and what extra passes it makes — each fact with a public source (paper
section, library source file, documentation). Facts that no public source gives are
listed in ``assumed``. The rules that turn these facts into a launch for a shape (tile
choice, on-chip fit, packing, splits) are ``perfmodel.launch``. A family's time
defaults come from these facts and the device's datasheet, never from a fit to
measurements.

>>> fam = load_kernel("fa2")
>>> fam.softmax, fam.tile_for(128, causal=False, arch=None).block_k
('between', 64)
>>> load_kernel("fa3").tile_for(128, causal=False, arch="sm90").block_k
176
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from perfmodel.catalog import registry as _registry
from perfmodel.catalog.fields import INTEGER, Count, Flag, within
from perfmodel.errors import PerfmodelError

_frozen = ConfigDict(frozen=True, extra="forbid")
#: Warps of a block that only load (FA-3's producer warpgroup: 4): 0 to 32.
ProducerWarps = Annotated[int, INTEGER, within(0, 32)]
#: Fields that name or describe a family rather than state a fact about it.
_LABELS = {"name", "aliases", "description", "algorithm", "sources", "assumed"}

#: Where the softmax runs: between the two matmuls in the same warps (FA-2), or
#: overlapped with another warpgroup's matmuls (FA-3 ping-pong).
Softmax = Literal["between", "overlapped"]
#: Matrix instruction: warp-level ``mma.sync`` (Ampere-style) or Hopper's ``wgmma``.
MatmulUnit = Literal["mma", "wgmma"]
#: When the query heads of a GQA group are packed into one tile (one K/V read per group):
#: never, only for one query token (FA-2's decode swap), when it fills the tile better
#: (FA-3's heuristic), or always.
GqaPacking = Literal["none", "decode", "when_short", "always"]
#: Split-KV rule for short queries: none, FA-2's / FA-3's wave-efficiency heuristic,
#: or as many chunks as keep every program in one wave (ours).
SplitRule = Literal["none", "fa2", "fa3", "one_wave"]
#: Extra passes over score-sized or partial data, beyond the algorithm's own traffic.
ExtraPass = Literal["causal_mask_f32", "softmax_row_spill", "split_combine_xla"]


class Tile(BaseModel):
    """One default tile: for head dims up to ``d_max`` (and the given arch / causal)."""

    model_config = _frozen

    d_max: Count
    block_q: Count
    block_k: Count
    warps: Count
    #: K/V shared-memory stages of this launch where they differ from the family's
    kv_stages: Count | None = None
    arch: str | None = None
    causal: Flag | None = None

    def matches(self, d: int, causal: bool, arch: str | None) -> bool:
        return (
            d <= self.d_max
            and (self.arch is None or self.arch == arch)
            and (self.causal is None or self.causal == causal)
        )


#: Element formats an FP8 attention kernel holds its operands and results in.
Precision = Literal["e4m3", "e5m2", "bf16", "fp16", "fp32"]


class Fp8(BaseModel):
    """How a family runs FP8 attention: which operands are FP8 and what stays wider.

    ``q_k_v``: the inputs; ``p``: P as the PV matmul reads it (``e4m3`` runs PV at the
    FP8 rate; a 16-bit P would run it at the 16-bit rate); ``accumulator``: S and O in
    the matmuls; ``softmax``: the online-softmax statistics and exps; ``output``: O as
    written to HBM; ``scales``: one float32 descale factor per tensor, per (batch,
    K/V head), or per block; ``amax``: the kernel also reduces max|S| and max|O| (for
    the next step's scales); ``backward``: an FP8 backward exists."""

    model_config = _frozen

    q_k_v: Precision
    p: Precision
    accumulator: Precision
    softmax: Precision
    output: Precision
    scales: Literal["per_tensor", "per_head", "per_block"]
    amax: bool = False
    backward: bool = False


class KernelFamily(BaseModel):
    """The structure of one attention implementation, each fact sourced."""

    model_config = _frozen

    name: str
    aliases: tuple[str, ...] = ()
    description: str
    algorithm: Literal["flash", "naive"]
    framework: str
    matmul: MatmulUnit
    softmax: Softmax
    producer_warps: ProducerWarps = 0
    kv_stages: Count
    gqa_packing: GqaPacking
    split_kv: SplitRule
    split_sm_factor: Count = 1
    max_splits: Count = 1
    split_block_q: Count | None = None
    split_block_k: dict[int, Count] = {}
    extra_passes: tuple[ExtraPass, ...] = ()
    #: Of the softmax's exp and vector time, how much hides under the matmuls, as a
    #: fraction of the matmul time (0: none, the softmax between the matmuls of the same
    #: warps; 1: up to the whole matmul time). None: 0 for "between", 1 for "overlapped".
    softmax_overlap: Annotated[float, Field(ge=0, le=1)] | None = None
    tiles: tuple[Tile, ...] = ()
    #: Compute capabilities the family's kernels run on ("sm90"); empty: any device.
    archs: tuple[str, ...] = ()
    #: FP8 attention as the family runs it; None: the family has no FP8 kernel.
    fp8: Fp8 | None = None
    assumed: tuple[str, ...] = ()
    sources: dict[str, str]

    @model_validator(mode="after")
    def _every_fact_has_a_source(self) -> KernelFamily:
        facts = set(type(self).model_fields) - _LABELS
        given = {f for f in facts if f in self.model_fields_set}
        missing = sorted(given - set(self.sources))
        if missing:
            raise ValueError(f"kernel family {self.name!r} gives no source for {missing}")
        unknown = sorted(set(self.assumed) - facts)
        if unknown:
            raise ValueError(f"kernel family {self.name!r} assumes unknown facts {unknown}")
        return self

    @property
    def compute_overlap(self) -> float:
        """How much of the softmax hides under the matmuls inside one block, as a fraction
        of the matmul time (``roofline.combine``): the family's ``softmax_overlap`` where
        it states one, else 0 when the softmax sits between the matmuls of the same warps
        and 1 when another warpgroup's matmuls can hide it."""
        if self.softmax_overlap is not None:
            return self.softmax_overlap
        return 1.0 if self.softmax == "overlapped" else 0.0

    def tile_for(self, d: int, *, causal: bool, arch: str | None) -> Tile:
        """The family's default tile for head dim ``d`` (first matching entry)."""
        for tile in self.tiles:
            if tile.matches(d, causal, arch):
                return tile
        raise PerfmodelError(
            f"kernel family {self.name!r} has no tile for head dim d={d}"
            + (f" (largest: {max(t.d_max for t in self.tiles)})" if self.tiles else "")
        )

    def split_block_k_for(self, d: int) -> int:
        """B_c of the family's split kernel at head dim ``d`` (its K/V blocks per chunk)."""
        for d_max in sorted(self.split_block_k):
            if d <= d_max:
                return self.split_block_k[d_max]
        return self.tiles[-1].block_k if self.tiles else 128


@functools.cache
def registry() -> dict[str, KernelFamily]:
    return _registry.build("kernels", KernelFamily, "kernel family")


def known_kernels() -> list[str]:
    return _registry.names(registry())


def load_kernel(kernel: str | Path | KernelFamily) -> KernelFamily:
    """A family by name or alias (case-insensitive), or from a TOML file."""
    if isinstance(kernel, KernelFamily):
        return kernel
    return _registry.lookup(kernel, registry(), KernelFamily, "kernel family")
