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
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from perfmodel.catalog import registry as _registry
from perfmodel.catalog.fields import INTEGER, Count, Flag, Overhead, within
from perfmodel.catalog.fields import NonNegativeCount as NonNegative
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
    #: K/V tiles a block has in flight ahead of the one it computes on, where the stages
    #: do not say it (a Triton launch of ``num_stages`` N keeps N - 1; 0: no prefetch).
    #: Otherwise :meth:`KernelFamily.loads_ahead`.
    loads_ahead: NonNegative | None = None
    #: The most blocks an SM holds at this tile, where the registers the compiler gives a
    #: thread (operands and addressing besides the accumulators ``launch.capacity``
    #: counts) allow fewer than shared memory and the accumulators: ``launch.tile_limit``.
    blocks_per_sm: Count | None = None
    arch: str | None = None
    causal: Flag | None = None
    #: A backward view's dQ kernel tile, where it differs (``BackwardTile.dq_block_*``)
    dq_block_q: Count | None = None
    dq_block_k: Count | None = None

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


#: The head dim a kernel runs a call at: d itself, the next power of two (at least 16:
#: Q, K and V zero-padded, our Triton kernels), the next multiple of 16 (the wgmma K
#: step: our Mosaic kernel), the next multiple of 64 padded on chip (the kernel's
#: tiles are 64 columns wide; no copies: cuDNN's forward, ``ON_CHIP_HEAD_DIM_PADDING``),
#: or the next power of two from 64 on padded on chip (a kernel built for 64, 128 and
#: 256 only: cuDNN's backward).
HeadDimPadding = Literal[
    "none", "power_of_two", "multiple_of_16", "multiple_of_64_on_chip", "power_of_two_on_chip"
]
#: Head dims above this are "wide" (``KernelFamily.wide_softmax_overlap``).
WIDE_HEAD_DIM = 128
#: The rules under which the kernel itself pads (its tiles wider than d, the inputs as
#: they are): no XLA copies around it (``launch.pad_copies``).
ON_CHIP_HEAD_DIM_PADDING = frozenset({"multiple_of_64_on_chip", "power_of_two_on_chip"})
_HEAD_DIM_STEP = {"multiple_of_16": 16.0, "multiple_of_64_on_chip": 64.0}
_POWER_OF_TWO_FROM = {"power_of_two": 16.0, "power_of_two_on_chip": 64.0}


def padded_head_dim(rule: str, d: Any) -> Any:
    """The head dim a kernel with padding ``rule`` runs ``d`` at (numbers or arrays)."""
    if rule == "none":
        return d
    arr = np.asarray(d, dtype=np.float64)
    if rule in _POWER_OF_TWO_FROM:
        out = np.maximum(_POWER_OF_TWO_FROM[rule], 2.0 ** np.ceil(np.log2(arr)))
    else:
        step = _HEAD_DIM_STEP[rule]
        out = np.ceil(arr / step) * step
    return float(out) if np.ndim(out) == 0 else out


#: How a kernel's wrapper pads the sequences before the fused kernel (zero rows copied
#: in by XLA, O sliced out after): not at all, Q to a multiple of the tile's rows and K/V
#: of its keys (our Triton kernel), or Q to 64 rows per consumer warpgroup a query head
#: has (one when the group's heads pair up in a block, else both) and K/V to the tile's
#: keys (our Mosaic kernel), or both to whole CTAs of two consumers' 128 rows (our Mosaic
#: backward).
SequencePadding = Literal["none", "tile", "per_consumer", "cta_rows"]


#: How a backward sums dQ over K/V blocks (``perfmodel.costs.backward.DQ_FAMILIES``): a
#: separate dQ pass in the forward's loop order (7 products), or float32 atomics from the
#: dK/dV loop into a buffer a small kernel converts (5 products).
DqRule = Literal["two_pass", "atomic"]
#: How a backward's dK/dV kernel sums a GQA group: ``"none"``, one program sums the whole
#: group on chip (grid b·h_kv·T_c); ``"fill_waves"``, the group's query heads are split
#: into the shares (a divisor of the group) whose grid fills its waves best, the smallest
#: of the best, each share's float32 dK, dV partials summed after
#: (``kernel_rules.group_split``, which our kernel and ``launch.backward_launch`` both run).
GroupSplit = Literal["none", "fill_waves"]
#: How an atomic backward (one dK/dV program per query head) sums a GQA group's dK, dV:
#: "none" where the model leaves that summing out (FlashAttention-2's caller, FA-3's
#: float32 accumulators); "kernels": written per query head in the input dtype, then
#: one kernel each for dK and dV sums the group (cuDNN: ``costs.backward``'s group_reduce).
GroupReduce = Literal["none", "kernels"]
#: How an atomic backward's dQ reaches its float32 buffer in L2: ``"element"``, one
#: atomic add per element (FA-2's atomicAdd, Triton's atomic_add); ``"bulk"``, a tile at
#: a time by the TMA's bulk reduce-add (FA-3). Each has its measured rate
#: (``perfmodel.catalog.ceilings``: the L2-reduce roof's fraction).
DqAtomics = Literal["element", "bulk"]


class BackwardTile(BaseModel):
    """The backward's launch for head dims up to ``d_max``: the dK/dV kernel's tile (its
    K/V block ``block_k`` stays on chip while Q blocks of ``block_q`` rows stream past),
    warps and pipeline stages, and the separate dQ pass's where it has one."""

    model_config = _frozen

    d_max: Count
    block_q: Count
    block_k: Count
    warps: Count
    #: Pipeline stages of the streamed Q/dO tiles (Triton's ``num_stages``; FA-3's Stages_dO).
    stages: Count
    causal: Flag | None = None
    arch: str | None = None
    dq_block_q: Count | None = None
    dq_block_k: Count | None = None
    dq_warps: Count | None = None
    dq_stages: Count | None = None

    def matches(self, d: int, causal: bool, arch: str | None = None) -> bool:
        return (
            d <= self.d_max
            and (self.causal is None or self.causal == causal)
            and (self.arch is None or self.arch == arch)
        )


class Backward(BaseModel):
    """How a family runs the backward of attention (``mode="backward"``, the second half
    of ``mode="train"``), each fact sourced in its own ``sources``.

    The passes and the products of each follow from ``dq`` (``costs.backward.PASSES``):
    both recompute S and P = exp(scale·S − LSE) from the forward's log-sum-exp; the
    two-pass family recomputes them, and dP, once more in its dQ pass."""

    model_config = _frozen

    dq: DqRule
    matmul: MatmulUnit
    producer_warps: ProducerWarps = 0
    #: As the forward's ``softmax_overlap``: how much of the exp and vector work per
    #: score hides under the matmuls, as a share of the matmul time.
    softmax_overlap: Annotated[float, Field(ge=0, le=1)]
    tiles: tuple[BackwardTile, ...]
    #: The family whose backward runs where no tile here matches (a larger head dim,
    #: another architecture): ours falls back from the Mosaic to the Triton kernels.
    fallback: str | None = None
    #: How the backward's wrapper pads the sequences, where it differs from the family's
    #: forward (``KernelFamily.sequence_padding``).
    sequence_padding: SequencePadding | None = None
    #: The head dim it runs at, where it differs from the family's forward.
    head_dim_padding: HeadDimPadding | None = None
    #: How the dK/dV kernel spreads a GQA group over programs (``GroupSplit``), at head
    #: dims up to ``group_split_d_max`` (the kernels above it sum the group on chip).
    group_split: GroupSplit = "none"
    group_split_d_max: Annotated[int, INTEGER, within(0, 4096)] = 0
    #: When (ISO 8601, UTC) the kernels began to split the group: measurements made
    #: before it ran ``"none"`` (``validation.compare.as_run``).
    group_split_since: str | None = None
    #: How the group's dK, dV are summed where each query head has its programs.
    group_reduce: GroupReduce = "none"
    #: The form of the atomic family's dQ adds (None: not atomic, or not stated).
    dq_atomics: DqAtomics | None = None
    #: Products a computing warpgroup waits for, each step of the dK/dV loop, before the
    #: work that depends on them can start (the ``drains`` effect): S and dP before the
    #: softmax's recompute and dS, dQ before its reduce-add leaves. 0: not stated.
    dependent_waits: Annotated[int, INTEGER, within(0, 16)] = 0
    assumed: tuple[str, ...] = ()
    sources: dict[str, str]

    @model_validator(mode="after")
    def _every_fact_has_a_source(self) -> Backward:
        facts = set(type(self).model_fields) - {"sources", "assumed"}
        missing = sorted(facts & self.model_fields_set - set(self.sources))
        if missing:
            raise ValueError(f"backward gives no source for {missing}")
        unknown = sorted(set(self.assumed) - facts)
        if unknown:
            raise ValueError(f"backward assumes unknown facts {unknown}")
        return self

    def tile_for(self, d: int, *, causal: bool, arch: str | None = None) -> BackwardTile:
        """The backward's tile for head dim ``d`` (first matching entry)."""
        found = self.find_tile(d, causal=causal, arch=arch)
        if found is None:
            largest = max(t.d_max for t in self.tiles)
            raise PerfmodelError(f"backward has no tile for head dim d={d} (largest: {largest})")
        return found

    def find_tile(self, d: int, *, causal: bool, arch: str | None = None) -> BackwardTile | None:
        """The first tile matching, or None."""
        return next((t for t in self.tiles if t.matches(d, causal, arch)), None)


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
    #: The most query positions for which the family splits K/V (None: any): a family
    #: whose split kernel serves decode only runs its one kernel on longer queries.
    split_max_queries: Count | None = None
    extra_passes: tuple[ExtraPass, ...] = ()
    #: XLA kernels the family's wrapper runs around the kernels the cost model counts
    #: (the fused one and, split, its combine), by split count: ``(fewest splits,
    #: kernels)`` pairs in rising order, the last that applies; empty: none.
    xla_kernels: tuple[tuple[Count, NonNegative], ...] = ()
    head_dim_padding: HeadDimPadding = "none"
    sequence_padding: SequencePadding = "none"
    #: A backward view's dK/dV grid rule and the head dims it applies to
    #: (``KernelFamily.backward_view`` copies ``Backward``'s; ``launch.backward_launch``
    #: applies it per point); ``"none"`` for a forward.
    group_split: GroupSplit = "none"
    group_split_d_max: Annotated[int, INTEGER, within(0, 4096)] = 0
    group_reduce: GroupReduce = "none"
    #: A backward view's dQ atomics (``Backward.dq_atomics``); None for a forward.
    dq_atomics: DqAtomics | None = None
    #: A backward view's dependent waits a step (``Backward.dependent_waits``); 0 for a
    #: forward.
    dependent_waits: Annotated[int, INTEGER, within(0, 16)] = 0
    #: The fused forward holds d in column blocks of shared memory (one wgmma of O += P V
    #: per block) where n or kv_len is not a multiple of this (None: never): ours on Mosaic
    blocked_multiple: Count | None = None
    #: The columns of one block by head dim, where a block is narrower than d
    blocked_cols: dict[int, Count] = {}
    #: Device time each of the family's kernels costs beyond the device's measured kernel
    #: minimum (``ceilings.kernel_min_s``), where its kernels do setup a minimal one does not
    #: (a closed-source kernel's fixed cost); 0: none. Not added to datasheet launch gaps.
    kernel_fixed_s: Overhead = 0.0
    #: Of the softmax's exp and vector time, how much hides under the matmuls, as a
    #: fraction of the matmul time (0: none, the softmax between the matmuls of the same
    #: warps; 1: up to the whole matmul time). None: 0 for "between", 1 for "overlapped".
    softmax_overlap: Annotated[float, Field(ge=0, le=1)] | None = None
    #: The same share at head dims above ``WIDE_HEAD_DIM`` (the O accumulator of a 64-row
    #: consumer is then over 64 float32 registers a thread, the key tile half as wide),
    #: where it differs; None: ``softmax_overlap`` at every d.
    wide_softmax_overlap: Annotated[float, Field(ge=0, le=1)] | None = None
    tiles: tuple[Tile, ...] = ()
    #: The tiles of the kernel the family runs on decode-length queries (at most
    #: ``split_max_queries``) where that is another kernel than its ``tiles``' (cuDNN's
    #: sm80 decode engine): its key tile and the K/V tiles it has in flight ahead of use
    #: (``Tile.loads_ahead``, else its stages' loads, issued by its compute warps), read
    #: by ``launch.decode_launch``; empty: the family's tiles at every length.
    decode_tiles: tuple[Tile, ...] = ()
    #: Compute capabilities the family's kernels run on ("sm90"); empty: any device.
    archs: tuple[str, ...] = ()
    #: FP8 attention as the family runs it; None: the family has no FP8 kernel.
    fp8: Fp8 | None = None
    #: The backward as the family runs it; None: none stated (costed as FlashAttention-2's).
    backward: Backward | None = None
    #: The family whose backward kernels run after this family's forward (ours: every
    #: forward backend is differentiated by the one Triton backward); None: its own.
    backward_family: str | None = None
    assumed: tuple[str, ...] = ()
    sources: dict[str, str]

    @model_validator(mode="after")
    def _every_fact_has_a_source(self) -> KernelFamily:
        facts = set(type(self).model_fields) - _LABELS - {"backward"}  # it sources its own
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

    def backward_as_run(
        self, d: int | None = None, *, causal: bool = False, arch: str | None = "sm90"
    ) -> KernelFamily:
        """The family whose ``[backward]`` runs after this family's forward at head dim
        ``d`` (None: any) on ``arch``: ``backward_family`` where it names one, else
        itself, then its backward's ``fallback`` where none of its tiles matches."""
        owner = self if self.backward_family is None else load_kernel(self.backward_family)
        if owner is not self and owner.backward is None:
            raise PerfmodelError(
                f"kernel family {self.name!r} runs the backward of {owner.name!r}, which "
                "states no [backward]"
            )
        bwd = owner.backward
        if d is None or bwd is None or bwd.fallback is None:
            return owner
        run_d = int(padded_head_dim(bwd.head_dim_padding or owner.head_dim_padding, d))
        if bwd.find_tile(run_d, causal=causal, arch=arch) is not None:
            return owner
        fallback = load_kernel(bwd.fallback)  # its own [backward], no further fallback
        if fallback.backward is None:
            raise PerfmodelError(
                f"the backward of {owner.name!r} falls back to {fallback.name!r}, which "
                "states no [backward]"
            )
        return fallback

    def backward_view(
        self, d: int | None = None, *, causal: bool = False, arch: str | None = "sm90"
    ) -> tuple[KernelFamily, DqRule]:
        """The backward that runs after this family's forward (:meth:`backward_as_run`)
        as a family of its own, for the rules that read one (its tiles, instruction,
        producer warps, softmax overlap and padding: ``launch.backward_launch``,
        ``calibration.family_default``), and how it sums dQ. A family that states no
        backward is costed as FlashAttention-2's Algorithm 2 at its own forward tiles."""
        owner = self.backward_as_run(d, causal=causal, arch=arch)
        bwd = owner.backward
        if bwd is None:
            return self, "atomic"
        tiles = tuple(
            Tile(
                d_max=t.d_max,
                block_q=t.block_q,
                block_k=t.block_k,
                warps=t.warps,
                kv_stages=t.stages,
                loads_ahead=t.stages - 1,  # Triton's num_stages, FA-3's Stages_dO
                causal=t.causal,
                arch=t.arch,
                dq_block_q=t.dq_block_q,
                dq_block_k=t.dq_block_k,
            )
            for t in bwd.tiles
        )
        view = owner.model_copy(
            update=dict(
                name=f"{owner.name}/backward",
                matmul=bwd.matmul,
                producer_warps=bwd.producer_warps,
                softmax="overlapped" if bwd.producer_warps else "between",
                softmax_overlap=bwd.softmax_overlap,
                wide_softmax_overlap=None,
                sequence_padding=bwd.sequence_padding or owner.sequence_padding,
                head_dim_padding=bwd.head_dim_padding or owner.head_dim_padding,
                group_split=bwd.group_split,
                group_split_d_max=bwd.group_split_d_max,
                group_reduce=bwd.group_reduce,
                dq_atomics=bwd.dq_atomics,
                dependent_waits=bwd.dependent_waits,
                tiles=tiles,
                backward=None,
                backward_family=None,
            )
        )
        return view, bwd.dq

    def loads_ahead(self, tile: Tile, producer: bool | None = None) -> int:
        """K/V tiles in flight ahead of use at ``tile``: what the tile states, else a
        producer warpgroup's ring of ``kv_stages`` buffers keeps ``kv_stages - 1`` loading
        while one is computed on, and a kernel whose compute warps load (cp.async, FA-2's
        K prefetch) issues its ``kv_stages`` loads one step ahead. ``producer``: whether
        the tile's kernel has a producer warpgroup (None: the family's, ``producer_warps``;
        a decode tile's kernel has none)."""
        if tile.loads_ahead is not None:
            return tile.loads_ahead
        stages = tile.kv_stages or self.kv_stages
        has_producer = bool(self.producer_warps) if producer is None else producer
        return stages - 1 if has_producer else stages

    def tile_for(self, d: int, *, causal: bool, arch: str | None) -> Tile:
        """The family's default tile for head dim ``d`` (first matching entry)."""
        for tile in self.tiles:
            if tile.matches(d, causal, arch):
                return tile
        raise PerfmodelError(
            f"kernel family {self.name!r} has no tile for head dim d={d}"
            + (f" (largest: {max(t.d_max for t in self.tiles)})" if self.tiles else "")
        )

    def decode_tile_for(self, d: int) -> Tile | None:
        """The decode kernel's tile for head dim ``d`` (first matching entry), None where
        the family states none (or none up to ``d``)."""
        return next((t for t in self.decode_tiles if d <= t.d_max), None)

    def split_block_k_for(self, d: int) -> int:
        """B_c of the family's split kernel at head dim ``d`` (its K/V blocks per chunk)."""
        for d_max in sorted(self.split_block_k):
            if d <= d_max:
                return self.split_block_k[d_max]
        return self.tiles[-1].block_k if self.tiles else 128


#: ``backward_of``'s views by the identity of the family and the point's (d, causal, arch),
#: the family kept alive beside them.
_BACKWARD_VIEWS: dict[tuple[Any, ...], tuple[KernelFamily, tuple[KernelFamily, DqRule]]] = {}


def backward_of(
    family: KernelFamily, d: int | None = None, *, causal: bool = False, arch: str | None = "sm90"
) -> tuple[KernelFamily, DqRule]:
    """:meth:`KernelFamily.backward_view`, made once per family object (frozen) and point."""
    key = (id(family), d, causal, arch)
    found = _BACKWARD_VIEWS.get(key)
    if found is None or found[0] is not family:
        view = family.backward_view(d, causal=causal, arch=arch)
        found = _BACKWARD_VIEWS[key] = (family, view)
    return found[1]


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
