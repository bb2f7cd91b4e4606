"""Numbers from the symbolic models: compiled costs, then roofs, for one point or columns.

This is the one place where a cost model meets a device, and the one door to its
numbers: ``predict`` and ``sweep`` call :func:`evaluate_flash` and :func:`evaluate`; the
analysis, validation and report layers use the public functions below
(:func:`evaluate`, :func:`kernel_roofs`, :func:`estimate_time`, :func:`roof_rates`,
:func:`shape_values`, :func:`model_key`) and hold no formula of their own.

A model's time is built in two named steps. The floor (:func:`floor_of`):
``t_lower_s``, each kernel's largest roof with idle SMs stretching its compute roofs,
summed over the kernels, of the best launch the kernel family could make
(``perfmodel.launch.floor_launches``); ``t_compute_s``, ``t_memory_s``, the roof times,
``bound`` and the matmul rate come from that same launch. The estimate
(:func:`estimate_steps`): ``time_s``, the floor plus each named effect of
:data:`EFFECTS`, one function each, applied in order to every kernel of the launch
evaluated (``effect_<name>_s`` is what each adds).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, cast

import numpy as np
import numpy.typing as npt

from perfmodel import roofline, trace
from perfmodel.catalog.calibration import Calibration
from perfmodel.catalog.ceilings import interpolate
from perfmodel.catalog.hardware import HardwareSpec
from perfmodel.catalog.kernels import WIDE_HEAD_DIM, KernelFamily
from perfmodel.compile import Compiled, compiled_named
from perfmodel.costs import MODES, masks
from perfmodel.errors import PerfmodelError
from perfmodel.launch import ByIdentity, Launch, floor_launches, tile_gcd
from perfmodel.roofline import Array, Num
from perfmodel.vocabulary import ALGORITHMS, DQ_FAMILIES, ROOFS, Algorithm, NaiveCompile, Roof

if TYPE_CHECKING:  # the sympy models load where a model is built (``_model``)
    import sympy as sp

    from perfmodel.costs.base import CostModel

_PER_KERNEL = (
    "matmul_flops",
    "vector_flops",
    "exp_count",
    "hbm_bytes",
    "l2_bytes",
    "l2_reduce_bytes",
)
#: A model's whole-model fields (beside its kernels').
PER_MODEL = ("extra_memory_bytes", "hbm_bytes_no_cache", "sram_bytes", "register_bytes")
#: Each roof with the kernel field it bounds (``Roof.work``), looked up once.
_WORK = tuple((r, r.work) for r in ROOFS)
#: Each roof's result column (``t_matmul_s``...), and the model's own columns.
_COLUMN: dict[str, str] = {r: f"t_{r}_s" for r in ROOFS}
_MODEL_COLUMNS = (*PER_MODEL, "footprint_bytes")
_COMPUTE = frozenset(roofline.COMPUTE_ROOFS)
_MEMORY = frozenset(roofline.MEMORY_ROOFS)


@dataclass(frozen=True)
class ModelKey:
    """Which cost model a side uses; build one with :func:`model_key`, which checks it.

    ``naive``: how naive attention is compiled (naive only); ``mode``: forward, backward
    or train (``costs.MODES``); ``dq``: how flash's backward sums dQ
    (``costs.backward.DQ_FAMILIES``; flash backward and train only); ``split`` and
    ``paged``: the forward flash launch with flash-decoding's partials and combine
    kernel, and with a paged cache's block table. Fields that do not apply keep their
    default, so one model has one key. Hashable: caches key on it; ``str(key)`` names it
    where a string is needed (``naive-xla/train``, ``flash-split-paged``)."""

    algorithm: Algorithm
    naive: NaiveCompile = NaiveCompile.MINIMAL
    mode: str = "forward"
    dq: str = "atomic"
    split: bool = False
    paged: bool = False
    #: Flash under a mask (``costs.masks``; forward and backward), and FP8 as a family runs it.
    masked: bool = False
    fp8: bool = False

    def __str__(self) -> str:
        side = "-".join(
            [self.algorithm]
            + [self.naive] * (self.naive != NaiveCompile.MINIMAL)
            + ["split"] * self.split
            + ["paged"] * self.paged
            + ["masked"] * self.masked
            + ["fp8"] * self.fp8
        )
        if self.mode == "forward":
            return side
        return "/".join([side, self.mode] + [self.dq] * (self.dq != "atomic"))


def _known(name: str, value: Any, known: tuple[str, ...]) -> Any:
    if value not in known:
        raise PerfmodelError(f"unknown {name}={value!r}; known: {known}")
    return value


@functools.cache
def model_key(
    algorithm: str,
    naive: str = "minimal",
    mode: str = "forward",
    dq: str = "atomic",
    *,
    split: bool = False,
    paged: bool = False,
    masked: bool = False,
    fp8: bool = False,
) -> ModelKey:
    """The model of one side (:class:`ModelKey`); each name checked, and the ones that do
    not apply dropped: ``naive`` for flash, ``dq`` but for flash's backward and train.
    ``split`` and ``paged`` exist only for the forward flash launch. Cached: a key is
    looked up, not rebuilt, on every call of ``predict``."""
    algorithm = Algorithm(_known("algorithm", algorithm, ALGORITHMS))
    naive = NaiveCompile(_known("naive", naive, tuple(NaiveCompile)))
    _known("mode", mode, MODES)
    _known("dq", dq, DQ_FAMILIES)
    flash_forward = algorithm == Algorithm.FLASH and mode == "forward"
    masked_ok = algorithm == Algorithm.FLASH and mode in ("forward", "backward")
    if ((split or paged or fp8) and not flash_forward) or (masked and not masked_ok):
        raise PerfmodelError(
            f"split={split!r}, paged={paged!r}, masked={masked!r}, fp8={fp8!r}: only the "
            f"forward flash model has them, and masked the flash backward "
            f"(algorithm={algorithm!r}, mode={mode!r})"
        )
    if algorithm == Algorithm.FLASH:
        naive = NaiveCompile.MINIMAL
    if algorithm != Algorithm.FLASH or mode == "forward":
        dq = "atomic"
    return ModelKey(algorithm, naive, mode, dq, bool(split), bool(paged), bool(masked), bool(fp8))


def _as_key(key: ModelKey | str) -> ModelKey:
    """A :class:`ModelKey`; a bare algorithm name is its forward model."""
    return key if isinstance(key, ModelKey) else model_key(key)


@functools.cache
def _model(key: ModelKey, causal: bool, l2: bool) -> CostModel:
    """The cost model of ``key``. The forward ``flash`` is the model as a kernel family
    launches it (GQA packing, K/V splits, tiles of any size); ``split`` adds
    flash-decoding's partials and combine kernel, ``paged`` a paged cache's block table."""
    from perfmodel.costs import flash, symbolic

    if key.algorithm == Algorithm.FLASH and key.mode == "forward":
        return flash.build(
            causal=causal,
            l2=l2,
            split=key.split,
            paged=key.paged,
            launch=True,
            masked=key.masked,
            fp8=key.fp8,
        )
    model = functools.partial(symbolic, naive=key.naive, mode=key.mode, dq=key.dq)
    return model(key.algorithm, causal=causal, l2=l2, masked=key.masked)


#: The name of one of a model's expressions: ``(kernel, field)`` for a kernel's field,
#: the field alone for the whole model's (``extra_memory_bytes``, ``footprint_bytes``...).
ExprName = str | tuple[str, str]


@functools.cache
def _compiled_model(
    key: ModelKey, causal: bool, l2: bool
) -> tuple[Compiled, tuple[ExprName, ...], list[str]]:
    """All of a model's expressions as one lambdified tuple (shared subexpressions), their
    names, and the model's kernels by name (``compile.compiled_named``: printed once,
    then read back by later processes without sympy)."""

    def build() -> tuple[tuple[sp.Expr, ...], dict[str, Any]]:
        names, exprs = model_expressions(key, causal, l2)
        kernels = [k.name for k in _model(key, causal, l2).kernels]
        return exprs, {
            "names": [list(x) if isinstance(x, tuple) else x for x in names],
            "kernels": kernels,
        }

    fn, extra = compiled_named(f"model {key!s} causal={causal} l2={l2}", build)
    names = tuple(tuple(x) if isinstance(x, list) else x for x in extra["names"])
    return fn, names, list(extra["kernels"])


def model_expressions(
    key: ModelKey | str, causal: bool, l2: bool
) -> tuple[tuple[ExprName, ...], tuple[sp.Expr, ...]]:
    """The sympy expressions :func:`evaluate` starts from, by name (:data:`ExprName`):
    ``(kernel, field)`` per kernel, then the per-model fields and ``footprint_bytes``
    (``perfmodel explore`` prints the same list to JavaScript)."""
    return _expressions(_as_key(key), causal, l2)


@functools.cache
def _expressions(
    key: ModelKey, causal: bool, l2: bool
) -> tuple[tuple[ExprName, ...], tuple[sp.Expr, ...]]:
    import sympy as sp

    from perfmodel.costs import terms

    model = _model(key, causal, l2)
    exprs: list[sp.Expr] = []
    names: list[ExprName] = []
    for kernel in model.kernels:
        for field in (*_PER_KERNEL, "work_items", "tiles", "floor_work_items"):
            value = getattr(kernel, field)
            exprs.append(0 * kernel.hbm_bytes if value is None else value)
            names.append((kernel.name, field))
        exprs.append(sp.Integer(1) if kernel.launches is None else kernel.launches)
        names.append((kernel.name, "launches"))
    for field in PER_MODEL:
        exprs.append(getattr(model, field))
        names.append(field)
    # Q, K, V, O and what the algorithm keeps besides: what must fit in device memory.
    io = terms.q_bytes + terms.k_bytes + terms.v_bytes + terms.o_bytes
    exprs.append(model.extra_memory_bytes + io)
    names.append("footprint_bytes")
    return tuple(names), tuple(sp.sympify(e) for e in exprs)


def shape_values(
    hw: HardwareSpec, *, reads: Collection[str] | None = None, **shape: Any
) -> dict[str, Any]:
    """Symbol values for a shape on a device: the L2 model's hardware symbols, and the
    launch's GQA packing, K/V splits and blocks per SM (1 each unless given) and K/V
    stages (the paper model's ``costs.flash.KV_STAGES`` unless given: a kernel family's
    launch gives its own, :func:`flash_values`); with a ``mask`` (``costs.masks.Mask``),
    its visited-tile counts at this launch. ``reads``: the symbols the model evaluated
    reads (:func:`model_symbols`; None: any); the tiles' gcds are computed only for a
    model that reads them (the causal and backward ones)."""
    values = {"pack": 1, "splits": 1, "page": 1, "group_split": 1, "group_reduce": 0, **shape}
    if "kv_stages" not in values:
        from perfmodel.costs.flash import KV_STAGES

        values["kv_stages"] = KV_STAGES
    blocks_per_sm = values.pop("blocks_per_sm", 1)
    mask = values.pop("mask", None)
    if "block_q" in values:
        # a two-pass backward's dQ kernel: its own tile where the launch gives one
        own_dq = "dq_block_q" in values or "dq_block_k" in values
        values.setdefault("dq_block_q", values["block_q"])
        values.setdefault("dq_block_k", values["block_k"])
        if reads is None or "tile_gcd" in reads or "dq_tile_gcd" in reads:
            values.update(_tile_gcds(values, own_dq))
    values["l2_capacity"] = hw.l2_bytes or 0
    values["resident_ctas"] = hw.sm_count * blocks_per_sm
    if mask is not None:
        values.update(masks.symbol_values(mask, **values))
    return values


def _tile_gcds(values: dict[str, Any], own_dq: bool) -> dict[str, Any]:
    """The gcd of the tile (``tile_gcd``) and of the dQ kernel's tile (``dq_tile_gcd``)."""
    gcd = tile_gcd(values["block_q"], values["block_k"], values["pack"])
    if not own_dq and _unpacked_columns(values["pack"], gcd):
        return {"tile_gcd": gcd, "dq_tile_gcd": gcd}  # the same gcd: its columns computed once
    return {
        "tile_gcd": gcd,
        "dq_tile_gcd": tile_gcd(values["dq_block_q"], values["dq_block_k"], 1.0),
    }


def model_symbols(key: ModelKey | str, causal: bool, hw: HardwareSpec) -> tuple[str, ...]:
    """The symbols a model's compiled expressions read (``shape_values``'s ``reads``)."""
    return _compiled_model(_as_key(key), causal, hw.l2_bytes is not None)[0].names


def _unpacked_columns(pack: Any, gcd: Any) -> bool:
    """Whether a tile's gcd is a column (the dQ kernel's at the same tile is then the
    same column) found at no GQA packing: ``pack`` 1, as a number or at every row."""
    if not isinstance(gcd, np.ndarray):
        return False  # one point: each gcd is cached (``launch._tile_gcd_point``)
    if isinstance(pack, roofline.NUMBERS):
        return bool(pack == 1)
    return bool(np.all(np.asarray(pack) == 1))


def roof_rates(hw: HardwareSpec, peak: Num) -> dict[str, Num | None]:
    """Each roof's full rate on ``hw``: FLOP/s, exp/s or bytes/s (``peak``: the dtype's matmul)."""
    return {
        Roof.MATMUL: peak,
        Roof.VECTOR: hw.vector_fp32_flops_per_s,
        Roof.EXP: hw.exp_per_s,
        Roof.HBM: hw.hbm_bandwidth_bytes_per_s,
        Roof.L2: hw.l2_bandwidth_bytes_per_s,
        Roof.L2_REDUCE: hw.l2_reduce_base_bytes_per_s,
    }


def _kernel_roofs(
    raw: dict[ExprName, Num], kernel: str, rates: Mapping[str, Num | None]
) -> dict[str, Num]:
    return roofline.roof_times({r: raw[kernel, work] for r, work in _WORK}, rates)


def _raw(
    key: ModelKey | str, causal: bool, hw: HardwareSpec, values: dict[str, Num]
) -> tuple[dict[ExprName, Num], list[str]]:
    fn, names, kernels = _compiled_model(_as_key(key), causal, hw.l2_bytes is not None)
    # a term that is a constant of the model (a roof it has no work on, one launch) stays
    # a number: what follows from it costs no pass over the points
    return dict(zip(names, fn.numbers_or_columns(**values), strict=True)), kernels


@dataclass(frozen=True)
class OnChip:
    """How the fused kernel's blocks sit on an SM (``perfmodel.launch``): blocks resident
    at once, and local-memory bytes each inner-loop step moves for spills."""

    blocks_per_sm: Num = 1
    spill_bytes_per_tile: Num = 0.0
    #: Bytes one block keeps in flight from memory (its K/V loads ahead of use).
    bytes_in_flight: Num = 0.0
    #: Q bytes one block loads before its first inner-loop step can start.
    q_tile_bytes: Num = 0.0
    #: Tiles a block has in flight ahead of the one it computes on (None: not stated,
    #: no exposed latency): the :func:`exposed_latency` effect.
    loads_ahead: Num | None = None
    #: The copies into and out of padded buffers around the kernel: bytes, kernels.
    pad_bytes: Num = 0.0
    pad_copies: Num = 0.0
    #: XLA kernels around the modelled ones (``launch.xla_kernels``).
    xla_kernels: Num = 0.0
    #: The busiest SM's steps over equal work's (``Launch.imbalance``): the compute stretch.
    imbalance: Num = 1.0
    #: Dependent loads before a block's first step (:func:`prologue`): 1, its first K/V
    #: tile; 2 behind a block table (paged K/V: the table's entries, then the page they
    #: name).
    prologue_loads: Num = 1.0
    #: The same stretch of the other tiled kernels, by kernel name (the backward's dK/dV
    #: and dQ kernels: ``launch.backward_imbalance``); a kernel not named has none.
    kernel_imbalance: tuple[tuple[str, Num], ...] = ()
    #: A kernel's matmul rate over the profile's, by kernel name, where its products run
    #: at a narrower tile than the rate was measured at (the two-pass dQ kernel's key
    #: tile below 64: :func:`narrow_dq_ratio`); a kernel not named has 1.
    kernel_matmul_ratio: tuple[tuple[str, Num], ...] = ()
    #: A kernel's HBM rate over the profile's, by kernel name, where the profile measured
    #: that kernel's own (the naive side's XLA library calls: :func:`kernel_memory`); a
    #: kernel not named has 1.
    kernel_memory_ratio: tuple[tuple[str, Num], ...] = ()
    #: Seconds a step of the tiled kernel's loop waits, in one CTA, for products it
    #: depends on to drain out of the tensor cores (:func:`drains`; 0: none stated).
    drain_per_step_s: Num = 0.0
    #: Bytes one block moves outside its loop, once (a forward's Q tile in and O tile out,
    #: a backward's K, V in and dK, dV out): of the kernel's HBM bytes, the part not
    #: streamed step by step (:func:`exposed_latency`).
    edge_bytes: Num = 0.0


#: A kernel with no on-chip facts of its own (every kernel but the fused one).
_NO_ONCHIP = OnChip()


def onchip_of(launch: Launch, paged: bool = False) -> OnChip:
    """The on-chip facts of a resolved launch (``perfmodel.launch.resolve``); ``paged``:
    its K/V pages are found through a block table."""
    return OnChip(
        launch.blocks_per_sm,
        launch.spill_bytes_per_tile,
        launch.bytes_in_flight,
        launch.q_tile_bytes,
        launch.loads_ahead,
        launch.pad_bytes,
        launch.pad_copies,
        launch.xla_kernels,
        launch.imbalance,
        2.0 if paged else 1.0,
        edge_bytes=launch.edge_bytes,
    )


@dataclass(frozen=True)
class KernelRoofs:
    """One kernel's roof times at full efficiency: for the floor (idle SMs only) and for
    the estimate (wave quantisation, and the bandwidth idle SMs cannot pull), its thread
    blocks per inner-loop step, blocks per SM and spill time."""

    name: str  #: the kernel's name in its cost model ("qk", "softmax", "pv", "flash", ...)
    floor: dict[str, Num]
    estimate: dict[str, Num]
    blocks_per_tile: Num
    times: dict[str, Num]  #: the plain roof times, no idle SMs
    blocks_per_sm: Num = 1
    spill_s: Num = 0.0  #: registers spilled to local memory, written and read each step
    #: Each wave's blocks start by waiting for memory (one latency) and for their Q
    #: tile at one SM's share of the HBM bandwidth (datasheet): :func:`prologue`.
    prologue_latency_s: Num = 0.0
    prologue_bytes_s: Num = 0.0
    #: For :func:`exposed_latency`: inner-loop steps each busy SM runs, blocks resident
    #: to interleave them, tiles in flight ahead of use, and the memory latency.
    steps_per_sm: Num = 0.0
    resident: Num = 1.0
    loads_ahead: Num = 0.0
    latency_s: Num = 0.0
    #: The padding copies around the kernel (:func:`pad_copies`): their bytes at the
    #: datasheet HBM bandwidth, and how many kernels they are.
    pad_s: Num = 0.0
    pad_copies: Num = 0.0
    #: XLA kernels the wrapper adds (:func:`xla_glue`), and the memory latency each such
    #: untiled kernel (a copy, a glue kernel) waits for its first operands.
    xla_kernels: Num = 0.0
    first_load_s: Num = 0.0
    #: The busiest SM's compute over the wave terms' (:func:`imbalance`; 1: equal work).
    imbalance: Num = 1.0
    #: Kernels the entry stands for at each point (``Kernel.launches``): each pays the
    #: launch gap (:func:`kernel_launch`); 0 where the family does not run it there.
    launches: Num = 1.0
    #: Its matmul rate over the profile's (``OnChip.kernel_matmul_ratio``; 1: the same).
    matmul_ratio: Num = 1.0
    #: Its HBM rate over the profile's (``OnChip.kernel_memory_ratio``; 1: the same).
    memory_ratio: Num = 1.0
    #: The drains its busiest SM waits through (:func:`drains`): each step's
    #: ``OnChip.drain_per_step_s`` over the blocks resident to fill them.
    drain_s: Num = 0.0
    #: Of its HBM bytes, the share its loop streams step by step (the rest moves once a
    #: block: ``OnChip.edge_bytes``): :func:`exposed_latency`'s bytes a step.
    streamed_share: Num = 1.0


def kernel_roofs(
    key: ModelKey | str,
    *,
    causal: bool,
    hw: HardwareSpec,
    peak: Num,
    values: dict[str, Num],
    onchip: OnChip | None = None,
) -> list[KernelRoofs]:
    """Per kernel, its roof times before any derating. Calibration fits work on these."""
    raw, kernels = _raw(key, causal, hw, values)
    return _roofs_from_raw(raw, kernels, roof_rates(hw, peak), hw, onchip or _NO_ONCHIP)


def _roofs_from_raw(
    raw: dict[ExprName, Num],
    kernels: list[str],
    rates: Mapping[str, Num | None],
    hw: HardwareSpec,
    onchip: OnChip,
) -> list[KernelRoofs]:
    out = []
    # the tiled kernel, where on-chip facts apply: the first with tiles (a backward's
    # dK/dV kernel comes after its preprocess)
    tiled = next((k for k in kernels if roofline.any_nonzero(raw[k, "tiles"])), None)
    for i, k in enumerate(kernels):
        work_items, tiles = raw[k, "work_items"], raw[k, "tiles"]
        times = _kernel_roofs(raw, k, rates)
        fused = k == tiled
        fill = _fill(work_items, hw, onchip) if fused else None  # once for its three uses
        floor, estimate = _with_parallelism(
            times, work_items, hw, onchip if fused else _NO_ONCHIP, fill
        )
        if roofline.any_nonzero(raw[k, "floor_work_items"]):  # more blocks than it launches
            floor = _with_parallelism(times, raw[k, "floor_work_items"], hw)[0]
        blocks = roofline.ratio_or_zero(work_items, tiles)
        spill = tiles * onchip.spill_bytes_per_tile / rates["l2"] if fused and rates["l2"] else 0.0
        per_sm = onchip.blocks_per_sm if fused else 1
        launches = raw[k, "launches"]  # kernels the entry stands for (a tiled one: 1)
        latency, load = _prologue(work_items, hw, onchip, rates, fill) if fill else _first_load(hw)
        if not fused:  # each kernel it stands for waits for its first operands
            latency = latency * launches
        steps, resident, ahead, wait = _pipeline(work_items, tiles, hw, onchip, fill)
        hbm = cast(Num, rates["hbm"])  # every device has one
        pad_s: Num = onchip.pad_bytes / hbm if i == 0 else 0.0  # once per model
        out.append(
            KernelRoofs(
                k,
                floor,
                estimate,
                blocks,
                times,
                per_sm,
                spill,
                latency,
                load,
                steps_per_sm=steps,
                resident=resident,
                loads_ahead=ahead,
                latency_s=wait,
                pad_s=pad_s,
                pad_copies=onchip.pad_copies if i == 0 else 0.0,
                xla_kernels=onchip.xla_kernels if i == 0 else 0.0,
                first_load_s=_first_load(hw)[0],
                imbalance=dict(onchip.kernel_imbalance).get(k, onchip.imbalance if fused else 1.0),
                launches=1.0 if fused else launches,
                matmul_ratio=dict(onchip.kernel_matmul_ratio).get(k, 1.0),
                memory_ratio=dict(onchip.kernel_memory_ratio).get(k, 1.0),
                drain_s=_drain_s(work_items, tiles, hw, onchip, fill) if fill else 0.0,
                streamed_share=_streamed_share(raw[k, "hbm_bytes"], work_items, onchip)
                if fused
                else 1.0,
            )
        )
    return out


class _Fill(NamedTuple):
    """How a tiled kernel's ``work_items`` blocks fill the SMs, found once for the memory
    reach, the prologue and the pipeline: the share of SMs busy, the blocks resident on
    a busy SM (:func:`_resident`) and the latency their loads see (:func:`_stream_latency`)."""

    busy: Num
    resident: Num
    latency: Num


def _fill(work_items: Num, hw: HardwareSpec, onchip: OnChip, busy: Num | None = None) -> _Fill:
    """:class:`_Fill` of a kernel (``busy``: its share of busy SMs, where known)."""
    busy = roofline.busy_fraction(work_items, hw.sm_count) if busy is None else busy
    resident = _resident(work_items, hw, onchip)
    return _Fill(busy, resident, _stream_latency(busy, resident, hw, onchip))


def _resident(work_items: Num, hw: HardwareSpec, onchip: OnChip) -> Num:
    """Blocks resident at once on a busy SM: the launch's blocks per SM, fewer where the
    grid has fewer blocks per SM, and at least one."""
    return roofline.minimum(onchip.blocks_per_sm, roofline.maximum(1.0, work_items / hw.sm_count))


def _pipeline(
    work_items: Num, tiles: Num, hw: HardwareSpec, onchip: OnChip, fill: _Fill | None = None
) -> tuple[Num, Num, Num, Num]:
    """:class:`KernelRoofs`' exposed-latency facts of a tiled kernel whose launch states its
    loads ahead (zeros elsewhere, and on a device without a measured memory latency)."""
    if onchip.loads_ahead is None or not hw.memory_latency_s or not roofline.any_nonzero(tiles):
        return (0.0, 1.0, 0.0, 0.0)
    resident = fill.resident if fill else _resident(work_items, hw, onchip)
    return (_steps_per_sm(work_items, tiles, hw), resident, onchip.loads_ahead, hw.memory_latency_s)


def _streamed_share(hbm_bytes: Num, work_items: Num, onchip: OnChip) -> Num:
    """:class:`KernelRoofs`' ``streamed_share``: the kernel's HBM bytes less each block's
    ``edge_bytes``, over its HBM bytes (0 where none are left or it moves none)."""
    edges = work_items * onchip.edge_bytes
    return roofline.ratio_or_zero(roofline.maximum(0.0, hbm_bytes - edges), hbm_bytes)


def _steps_per_sm(work_items: Num, tiles: Num, hw: HardwareSpec) -> Num:
    """Inner-loop steps each busy SM runs: the kernel's steps over the SMs its blocks
    occupy."""
    return roofline.ratio_or_zero(tiles, roofline.minimum(work_items, float(hw.sm_count)))


def _drain_s(work_items: Num, tiles: Num, hw: HardwareSpec, onchip: OnChip, fill: _Fill) -> Num:
    """:class:`KernelRoofs`' ``drain_s`` of a tiled kernel (:func:`drains`): each step's
    drain over the blocks resident to fill it, whether or not the launch states a
    pipeline or the device a memory latency."""
    if not roofline.any_nonzero(onchip.drain_per_step_s):
        return 0.0
    return _steps_per_sm(work_items, tiles, hw) * onchip.drain_per_step_s / fill.resident


def _first_load(hw: HardwareSpec) -> tuple[Num, Num]:
    """An untiled kernel's prologue (a combine, a copy, a naive pass): its threads wait
    one memory latency for their first operands, with nothing in flight yet (the idle
    latency where the device states it), which nothing hides."""
    return (latency_at(hw, 0.0), 0.0)


def latency_at(hw: HardwareSpec, demand: Num) -> Num:
    """The memory latency when loads ask for ``demand`` bytes per second: the idle
    latency (``idle_memory_latency_s``, a pointer chase) growing linearly with the share
    of the HBM bandwidth asked for, to the loaded latency (``memory_latency_s``, Little's
    law on a streaming kernel near full bandwidth) at the whole bandwidth and above; the
    loaded latency where the device states no idle one."""
    loaded = hw.memory_latency_s or 0.0
    idle = hw.idle_memory_latency_s
    if idle is None or not loaded:
        return loaded
    share = roofline.minimum(1.0, demand / hw.hbm_bandwidth_bytes_per_s)
    return idle + (loaded - idle) * share


def _prologue(
    work_items: Num,
    hw: HardwareSpec,
    onchip: OnChip,
    rates: Mapping[str, Num | None],
    fill: _Fill | None = None,
) -> tuple[Num, Num]:
    """Per wave of the fused kernel's blocks (``work_items`` over the SMs' resident
    blocks): one memory latency per dependent load before the first inner-loop step can
    run (``OnChip.prologue_loads``: the pipeline is empty then), and one Q tile at an
    SM's share of the HBM bandwidth."""
    resident = hw.sm_count * onchip.blocks_per_sm
    xp = roofline.xp_of(work_items, resident)
    waves = xp.ceil(work_items / resident)
    chain = onchip.prologue_loads * (fill or _fill(work_items, hw, onchip)).latency
    latency = waves * chain
    load = waves * onchip.q_tile_bytes * hw.sm_count / cast(Num, rates["hbm"])  # every device
    return latency, load


# --- the estimate: the floor plus each named effect ----------------------------------
class _KernelTimeFields(NamedTuple):
    times: dict[str, Num]
    overlap: Num | None = None  #: None: the floor (the busiest compute roof alone)
    stretch: Num = 1.0
    serial: Num = 0.0
    fixed: Num = 0.0


#: "Not given" for :meth:`KernelTime._replace`.
_SAME: Any = object()
_new_tuple = tuple.__new__


class KernelTime(_KernelTimeFields):
    """One kernel's time as the estimate builds it: roof times, how far its compute
    roofs overlap, the per-block stretch, time in series with its compute (spills), and
    a fixed cost per launch. :meth:`seconds` combines them (``roofline.combine``)."""

    __slots__ = ()

    def _replace(
        self,
        *,
        times: Any = _SAME,
        overlap: Any = _SAME,
        stretch: Any = _SAME,
        serial: Any = _SAME,
        fixed: Any = _SAME,
    ) -> KernelTime:
        """The same state with some fields changed (what ``NamedTuple._replace`` does,
        without its per-call cost: every effect of every kernel makes one)."""
        t, o, st, se, f = self
        return _new_tuple(
            KernelTime,
            (
                t if times is _SAME else times,
                o if overlap is _SAME else overlap,
                st if stretch is _SAME else stretch,
                se if serial is _SAME else serial,
                f if fixed is _SAME else fixed,
            ),
        )

    def seconds(self) -> Num:
        time: Num = roofline.combine(self.times, self.overlap, self.stretch, serial=self.serial)
        return time


@dataclass(frozen=True)
class Context:
    """What the effects read besides the kernel: the calibration's fractions and the
    launch gap per kernel."""

    calibration: Calibration
    efficiency: dict[str, Num]
    launch_s: Num
    #: The compute overlap at each point's head dim (:func:`compute_overlap_at`); None:
    #: the calibration's ``compute_overlap``.
    overlap: Num | None = None


#: The result columns a caller asks for (None: every one). ``time_s`` is always there.
Fields = frozenset[str] | None
#: The columns of a model's work and traffic (:func:`_counts`).
COUNT_FIELDS = frozenset(
    (*PER_MODEL, "footprint_bytes", "fits_memory", *_PER_KERNEL, "flops", "intensity")
)


def _wants(fields: Fields, names: frozenset[str]) -> bool:
    return fields is None or not fields.isdisjoint(names)


#: The floor's columns (:meth:`Floor.columns`).
FLOOR_FIELDS = frozenset(
    (
        "t_compute_s",
        "t_memory_s",
        "t_lower_s",
        "attainable_flops_per_s",
        "bound",
        "binding_roof",
        "floor_pack",
        "floor_splits",
        *(f"t_{r}_s" for r in ROOFS),
    )
)


#: One effect: a kernel's time before it, the kernel's roofs, the context -> after it.
Effect = Callable[[KernelTime, KernelRoofs, Context], KernelTime]


def waves(t: KernelTime, k: KernelRoofs, c: Context) -> KernelTime:
    """Wave quantisation on the compute roofs (instead of idle SMs alone), and the HBM
    and L2 bandwidth the busy SMs cannot pull on the memory roofs."""
    return t._replace(times=k.estimate)


def imbalance(t: KernelTime, k: KernelRoofs, c: Context) -> KernelTime:
    """Programs of unequal work (causal, a mask), taken longest first: the busiest SM's
    steps, not the mean's, set the compute roofs (``launch.schedule_imbalance``)."""
    if not trace.is_traced(k.imbalance) and not roofline.any_nonzero(k.imbalance - 1.0):
        return t  # (a traced point scales by its 1: the same numbers, one branch fewer)
    scaled = {r: v * k.imbalance if r in _COMPUTE else v for r, v in t.times.items()}
    return t._replace(times=scaled)


def efficiency(t: KernelTime, k: KernelRoofs, c: Context) -> KernelTime:
    """Each roof at its achievable fraction (the calibration's deratings), a kernel's
    matmul at its own tile's share of it (``KernelRoofs.matmul_ratio``) and its HBM
    traffic at its own measured share (``KernelRoofs.memory_ratio``)."""
    times = roofline.derated(t.times, c.efficiency)
    if not _same(k.matmul_ratio, 1.0) and Roof.MATMUL in times:
        times[Roof.MATMUL] = times[Roof.MATMUL] / k.matmul_ratio
    if not _same(k.memory_ratio, 1.0) and Roof.HBM in times:
        times[Roof.HBM] = times[Roof.HBM] / k.memory_ratio
    return t._replace(times=times)


def kernel_memory(
    calibration: Calibration, values: dict[str, Num], masked: bool
) -> OnChip | None:
    """The on-chip facts that carry each kernel's own HBM rate over the profile's, where
    the profile measured kernels' own (``Calibration.hbm_ratio_by_kernel``, at each
    point's value of the variable it goes by); None where it measured none. The naive
    side's "xla" compile (the three-step baseline's library calls, as measured) reads
    them; the textbook "minimal" compile and jax.nn's "sdpa" (float32 logits) do not.
    Under a mask (``masked``) the score kernel is another call (a cuBLAS product writing
    float32 scores, then a fusion that masks and rounds: ``xla_rows.scores_apart``), not
    the one measured: it keeps the profile's rate, as the pass after it (``scores_pass``,
    a mask's or a GQA group's transpose) does."""
    by_kernel = calibration.hbm_ratio_by_kernel
    if not by_kernel:
        return None
    return OnChip(
        kernel_memory_ratio=tuple(
            (kernel, interpolate(table, values[variable]))
            for kernel, variable, table in by_kernel
            if not (masked and kernel == "qk")
        )
    )


def narrow_dq_ratio(calibration: Calibration, dq_block_k: Num) -> Num:
    """The two-pass dQ kernel's matmul rate over the profile's: two of its three products
    (S = Q Kᵀ, dP = dO Vᵀ) have N = its key tile, at the measured rate of that N where it
    is below 64 (``Calibration.matmul_narrow_ratio_by_n``, ``r``), the third (dQ = dS K,
    N = d) at the profile's: ``1 / (1/3 + 2/(3·r))``; 1 without the table."""
    table = calibration.matmul_narrow_ratio_by_n
    if not table:
        return 1.0
    r = interpolate((*table, (64, 1.0)), np.minimum(dq_block_k, 64.0))  # 1 from N = 64 on
    out = 1.0 / (1.0 / 3.0 + 2.0 / (3.0 * r))
    return float(out) if np.ndim(out) == 0 else out


def overlap(t: KernelTime, k: KernelRoofs, c: Context) -> KernelTime:
    """Compute roofs overlapping only as far as the structure lets them: the family's
    softmax overlap (``roofline.combine``). Other resident blocks do not add to it: on
    the H200 our Triton kernel with 2-5 blocks per SM runs as its softmax and matmuls
    added up (docs/model.md)."""
    return t._replace(overlap=c.calibration.compute_overlap if c.overlap is None else c.overlap)


def compute_overlap_at(calibration: Calibration, d: Num | None) -> Num:
    """The profile's compute overlap at head dim ``d`` (numbers or columns): its
    ``wide_compute_overlap`` above ``WIDE_HEAD_DIM`` where it states one, else (and with
    no ``d``) its ``compute_overlap``."""
    wide = calibration.wide_compute_overlap
    if wide is None or d is None:
        return calibration.compute_overlap
    out = np.where(np.greater(d, WIDE_HEAD_DIM), wide, calibration.compute_overlap)
    return float(out) if np.ndim(out) == 0 else out


def exposed_latency(t: KernelTime, k: KernelRoofs, c: Context) -> KernelTime:
    """Loads an unpipelined loop cannot hide: a block that issues its next tiles only
    when it needs them (``loads_ahead`` 0: a Triton launch of one stage, our d > 128
    kernels, cuDNN's decode engine at d = 256) waits each inner-loop step for one memory
    latency and for the step's bytes from HBM (``hbm_step``: the HBM roof time of the
    bytes the loop streams, ``streamed_share`` of it, over the steps per SM: the SM's
    share of the bandwidth; bytes read again from L2 add nothing), in series with its
    compute; ``step`` being one step's compute at the SM's rate, the SM idles only while
    all its ``resident`` blocks wait, so the compute stretches by
    ``max(1, (step + latency + hbm_step) / (resident·step))``."""
    if not roofline.any_nonzero(k.steps_per_sm):
        return t
    compute = {r: v for r, v in t.times.items() if r in _COMPUTE}
    step = roofline.ratio_or_zero(roofline.combine(compute, t.overlap), k.steps_per_sm)
    # A load in flight ahead of use is taken as hidden: with one or more, the bandwidth
    # the SMs can pull is the ``waves`` effect's Little's-law reach, not a wait per step.
    unpipelined = roofline.choose(roofline.gt(k.loads_ahead, 0.0), 0.0, 1.0)
    hbm_step = roofline.ratio_or_zero(t.times.get("hbm", 0.0) * k.streamed_share, k.steps_per_sm)
    wait = unpipelined * (k.latency_s + hbm_step)
    factor = roofline.maximum(1.0, roofline.ratio_or_zero(step + wait, k.resident * step))
    return t._replace(stretch=t.stretch * factor)


def spills(t: KernelTime, k: KernelRoofs, c: Context) -> KernelTime:
    """Registers spilled to local memory, written and read each step, in series with
    the compute."""
    return t._replace(serial=t.serial + k.spill_s)


def drains(t: KernelTime, k: KernelRoofs, c: Context) -> KernelTime:
    """Products a step waits for before the work that depends on them (a backward's S and
    dP before dS, its dQ before the reduce-add): each wait exposes the tensor cores'
    drain of a dependent product (``Calibration.wgmma_drain_s_by_d``, measured), in
    series with the compute, shared by the blocks resident on the SM (one fills another's
    drain): ``steps · waits · drain / (warpgroups · resident)``."""
    return t._replace(serial=t.serial + k.drain_s)


def block_overhead(t: KernelTime, k: KernelRoofs, c: Context) -> KernelTime:
    """A fixed cost per thread block, in inner-loop steps (``block_overhead_tiles``),
    stretching the compute."""
    per_block = 1 + c.calibration.block_overhead_tiles * k.blocks_per_tile
    return t._replace(stretch=t.stretch * per_block)


def kernel_launch(t: KernelTime, k: KernelRoofs, c: Context) -> KernelTime:
    """The gap between kernels on the device (``launch_overhead_s``), once per kernel
    the entry stands for (``KernelRoofs.launches``)."""
    launches = k.launches
    return t._replace(fixed=c.launch_s if _same(launches, 1.0) else c.launch_s * launches)


def prologue(t: KernelTime, k: KernelRoofs, c: Context) -> KernelTime:
    """Each wave of a tiled kernel's blocks waits, before its first step, for one memory
    latency and its Q tile (at the estimate's HBM fraction), in series with the rest:
    the pipeline is empty then (``_prologue``)."""
    load = k.prologue_bytes_s / c.efficiency["hbm"]
    return t._replace(fixed=t.fixed + k.prologue_latency_s + load)


def pad_copies(t: KernelTime, k: KernelRoofs, c: Context) -> KernelTime:
    """The copies a kernel's wrapper makes into zero-padded inputs and out of the padded
    output (``launch.pad_copies``), in series with it: their bytes at the estimate's HBM
    fraction and one launch gap each, as the ``kernel_launch`` effect gives every kernel."""
    load = k.pad_s / c.efficiency["hbm"]
    return t._replace(fixed=t.fixed + load + k.pad_copies * (c.launch_s + k.first_load_s))


def xla_glue(t: KernelTime, k: KernelRoofs, c: Context) -> KernelTime:
    """The XLA kernels a wrapper runs around the modelled ones (``launch.xla_kernels``:
    our paged decode's query-row pad, and the fusions XLA makes of its combine beyond the
    one the cost model counts), in series: each a kernel's device minimum and one memory
    latency for its first operands (their bytes are the combine kernel's)."""
    return t._replace(fixed=t.fixed + k.xla_kernels * (c.launch_s + k.first_load_s))


#: The effects ``time_s`` adds to the floor of the launch evaluated, in order. A new
#: effect is one function here (its column ``effect_<name>_s`` follows).
EFFECTS: tuple[Effect, ...] = (
    waves,
    imbalance,
    efficiency,
    overlap,
    exposed_latency,
    spills,
    drains,
    block_overhead,
    kernel_launch,
    prologue,
    pad_copies,
    xla_glue,
)
#: The name of each effect's column; the first, "launch", is the step from the best
#: launch's floor to the floor of the launch evaluated.
EFFECT_NAMES = ("launch", *(e.__name__ for e in EFFECTS))
EFFECT_COLUMNS = tuple(f"effect_{name}_s" for name in EFFECT_NAMES)


def _changed(old: KernelTime, new: KernelTime) -> bool:
    """Whether an effect changed what :meth:`KernelTime.seconds` reads (its roofs,
    overlap, stretch or serial time; not the fixed cost): its seconds are computed again."""
    times, overlap, stretch, serial, _ = old  # unpacked: a field read is a call
    times_new, overlap_new, stretch_new, serial_new, _ = new
    return not (
        times is times_new
        and _same(overlap, overlap_new)
        and _same(stretch, stretch_new)
        and _same(serial, serial_new)
    )


def _same(a: Any, b: Any) -> bool:
    """The same object, or equal plain floats (columns are compared by identity only)."""
    return a is b or (type(a) is float and type(b) is float and a == b)


def estimate_steps(
    kernels: list[KernelRoofs],
    calibration: Calibration,
    launch: Num,
    *,
    every: bool = True,
    d: Num | None = None,
    fp16: Num | None = None,
    blocked: Num | None = None,
) -> list[Num]:
    """The model's device time after the floor of ``kernels`` and after each effect of
    :data:`EFFECTS` (only the last with ``every=False``): each kernel's largest roof,
    then each effect applied to every kernel, summed over the kernels. ``d``: the head
    dim, where the profile's matmul fraction was measured by head dim; ``fp16``: 1 where
    the point is fp16 (the profile's ``matmul_fp16_ratio`` applies), else 0."""
    fractions = roof_fractions(calibration, d, fp16, blocked)
    context = Context(calibration, fractions, launch, compute_overlap_at(calibration, d))
    states = [KernelTime(k.floor) for k in kernels]
    if not every:
        for effect in EFFECTS:
            states = [effect(s, k, context) for s, k in zip(states, kernels, strict=True)]
        return [_total(states, [s.seconds() for s in states])]
    seconds = [s.seconds() for s in states]
    totals = [_total(states, seconds)]
    for effect in EFFECTS:
        for i, kernel in enumerate(kernels):
            old = states[i]
            states[i] = new = effect(old, kernel, context)
            if _changed(old, new):
                seconds[i] = new.seconds()
        totals.append(_total(states, seconds))
    return totals


def _total(states: list[KernelTime], seconds: list[Num]) -> Num:
    """The kernels' time: each one's seconds and fixed cost, summed in order."""
    total: Num = 0.0
    for state, time in zip(states, seconds, strict=True):
        total = total + time + state.fixed
    return total


def estimate_time(kernels: list[KernelRoofs], calibration: Calibration, launch: Num) -> Num:
    """The model's device time: the floor plus every effect (:func:`estimate_steps`).
    Host dispatch is not device time (``call_latency``)."""
    return estimate_steps(kernels, calibration, launch, every=False)[-1]


def roof_fractions(
    calibration: Calibration,
    d: Num | None,
    fp16: Num | None = None,
    blocked: Num | None = None,
) -> dict[str, Num]:
    """Each roof's fraction; the matmul's at each point's head dim where the profile
    measured it by head dim (``Calibration.matmul_efficiency_by_d``), times the measured
    fp16/bf16 rate ratio where the point is fp16 (``fp16``: 1 there, else 0), and where
    the point runs the family's blocked layout (``blocked``: 1 there, else 0) with both
    products at its column blocks' rates (:func:`blocked_matmul`)."""
    fractions = _efficiency(ByIdentity(calibration))
    table = calibration.matmul_efficiency_by_d
    ratio = calibration.matmul_fp16_ratio
    if not table or d is None:
        matmul = fractions[Roof.MATMUL]
    elif isinstance(d, roofline.NUMBERS):  # one point: a few head dims recur
        matmul = _interpolated(table, float(d))
    else:
        matmul = interpolate(table, d)
    if fp16 is not None and ratio != 1.0:
        matmul = matmul * (1.0 - fp16 * (1.0 - ratio))
    if blocked is not None and d is not None and calibration.matmul_blocked_ratio_by_d:
        matmul = blocked_matmul(matmul, calibration.matmul_blocked_ratio_by_d, d, blocked)
    if matmul is fractions[Roof.MATMUL]:
        return fractions
    return {**fractions, Roof.MATMUL: matmul}


def blocked_matmul(matmul: Num, table: tuple[tuple[int, float], ...], d: Num, blocked: Num) -> Num:
    """The matmul fraction where the blocked layout runs (``blocked`` 1): ``matmul · c``,
    ``c`` the blocked layout's rate over the tiled one's at the head dim
    (``catalog.ceilings.blocked_ratios``; 1 where ``table`` has none)."""
    ratio = dict(table)
    if isinstance(d, roofline.NUMBERS):
        c: Num = ratio.get(int(d), 1.0)
    else:
        c = np.select([np.asarray(d) == k for k in ratio], list(ratio.values()), 1.0)
    return matmul + blocked * (matmul * c - matmul)


@functools.lru_cache(maxsize=1024)
def _interpolated(table: tuple[tuple[int, float], ...], d: float) -> float:
    """``interpolate`` at one head dim, cached."""
    return float(interpolate(table, d))


@functools.lru_cache(maxsize=256)
def _efficiency(calibration: ByIdentity) -> dict[str, Num]:
    """Each roof's achievable fraction in a (frozen) profile, read once per profile."""
    return {r: calibration.obj.efficiency(r) for r in ROOFS}


def call_latency(time_s: Num, kernels: Num, calibration: Calibration, framework_s: Num) -> Num:
    """One synchronous call as a user's script sees it: the host issues the kernels, the
    device runs them, the call returns. A fitted host dispatch per kernel (profiles fitted
    on synchronous timings) stands in for the framework's measured call latency."""
    fitted = calibration.dispatch_overhead_s
    return time_s + (fitted * kernels if fitted else framework_s)


# --- the floor ------------------------------------------------------------------------
@dataclass(frozen=True)
class Floor:
    """The floor of one launch: each kernel's largest roof (idle SMs stretch the
    compute roofs) summed over the kernels, its compute and memory parts, each roof's
    plain time summed over the kernels, and the matmul work it divides."""

    t_compute_s: Num
    t_memory_s: Num
    t_lower_s: Num
    roof_times: dict[str, Num]
    matmul_flops: Num
    pack: Num = 1.0
    splits: Num = 1.0

    def columns(self, fields: Fields = None) -> dict[str, Num]:
        """The floor's result columns (``perfmodel.results.AlgorithmPrediction``); with
        ``fields``, the ones it names that take work to compute (the rate, ``bound``,
        ``binding_roof``) only if named."""
        out: dict[str, Num] = {
            "t_compute_s": self.t_compute_s,
            "t_memory_s": self.t_memory_s,
            "t_lower_s": self.t_lower_s,
            "floor_pack": self.pack,
            "floor_splits": self.splits,
        }
        if fields is None or "attainable_flops_per_s" in fields:
            out["attainable_flops_per_s"] = roofline.matmul_rate_at_floor(
                self.matmul_flops, self.t_lower_s
            )
        if fields is None or "bound" in fields:
            out["bound"] = _bound(self.t_compute_s, self.t_memory_s)
        if fields is None or "binding_roof" in fields:
            out["binding_roof"] = roofline.binding_roof(self.roof_times)
        for roof, t in self.roof_times.items():
            out[_COLUMN[roof]] = t
        return out

    def flat(self) -> dict[str, Num]:
        """The floor as flat columns (``floor.*``), to merge row by row."""
        out = {flat: getattr(self, k) for k, flat in _FLAT_FIELDS}
        out.update((_FLAT_ROOFS[r], t) for r, t in self.roof_times.items())
        return out

    @classmethod
    def from_flat(cls, columns: dict[str, Num]) -> Floor:
        """The floor :meth:`flat` wrote (the other columns left out)."""
        roofs = {r: columns[flat] for r, flat in _FLAT_ROOFS.items() if flat in columns}
        fields = {k: columns[flat] for k, flat in _FLAT_FIELDS}
        return cls(roof_times=roofs, **fields)


_FLOOR_FIELDS = ("t_compute_s", "t_memory_s", "t_lower_s", "matmul_flops", "pack", "splits")
#: The flat column of each floor field and of each roof's time (``Floor.flat``).
_FLAT_FIELDS = tuple((k, f"floor.{k}") for k in _FLOOR_FIELDS)
_FLAT_ROOFS: dict[str, str] = {r: f"floor.roof.{r}" for r in ROOFS}
_FLAT = (*(flat for _, flat in _FLAT_FIELDS), *_FLAT_ROOFS.values())


def floor_of(
    roofs: list[KernelRoofs], matmul_flops: Num, pack: Num = 1.0, splits: Num = 1.0
) -> Floor:
    """Each kernel's floor over its compute roofs, over its memory roofs and over all of
    them (idle SMs only), summed over the kernels: t_compute, t_memory and t_lower."""
    t_compute: Num = 0.0
    t_memory: Num = 0.0
    t_lower: Num = 0.0
    for kernel in roofs:
        floor = kernel.floor
        t_compute = t_compute + roofline.largest([t for r, t in floor.items() if r in _COMPUTE])
        t_memory = t_memory + roofline.largest([t for r, t in floor.items() if r in _MEMORY])
        t_lower = t_lower + roofline.lower_bound(floor)
    totals = {r: sum([k.times[r] for k in roofs], 0.0) for r in roofs[0].times}
    return Floor(t_compute, t_memory, t_lower, totals, matmul_flops, pack, splits)


def _lower(best: Floor, other: Floor) -> Floor:
    """Row by row, the floor with the smaller ``t_lower_s`` (``best`` where equal)."""
    better = roofline.less(other.t_lower_s, best.t_lower_s)
    if not trace.is_traced(better) and not roofline.any_nonzero(better):
        return best  # (a traced point selects: the same numbers, one branch fewer)
    choose = roofline.choose
    return Floor(
        choose(better, other.t_compute_s, best.t_compute_s),
        choose(better, other.t_memory_s, best.t_memory_s),
        choose(better, other.t_lower_s, best.t_lower_s),
        {r: choose(better, other.roof_times[r], t) for r, t in best.roof_times.items()},
        choose(better, other.matmul_flops, best.matmul_flops),
        choose(better, other.pack, best.pack),
        choose(better, other.splits, best.splits),
    )


def evaluate(
    key: ModelKey | str,
    *,
    causal: bool,
    hw: HardwareSpec,
    peak: Num,
    values: dict[str, Num],
    calibration: Calibration,
    onchip: OnChip | None = None,
    effects: bool = True,
    fields: Fields = None,
) -> dict[str, Num]:
    """Every reported quantity of one model (``key``: a :class:`ModelKey`, or an
    algorithm's name for its forward model), as arrays broadcast over ``values``: its
    counts, its floor (:func:`floor_of`) and its estimate (:func:`estimate_steps`);
    ``effects=False`` leaves out the ``effect_*_s`` columns; ``fields`` names the
    columns wanted, the counts and the floor's labels computed only where named."""
    raw, kernels = _raw(key, causal, hw, values)
    if onchip is None and _as_key(key).naive == NaiveCompile.XLA:
        onchip = kernel_memory(calibration, values, causal)
    onchip = onchip or _NO_ONCHIP
    roofs = _roofs_from_raw(raw, kernels, roof_rates(hw, peak), hw, onchip)
    out = _counts(raw, kernels, hw) if _wants(fields, _RATE_AND_COUNTS) else {}
    matmul = out["matmul_flops"] if out else 0.0
    if effects or _wants(fields, FLOOR_FIELDS):
        out.update(floor_of(roofs, matmul).columns(fields))
    out.update(_estimate(roofs, calibration, hw, effects, values.get("d"), values.get("fp16")))
    if effects:
        out[EFFECT_COLUMNS[0]] = 0.0 * out["t_lower_s"]  # one launch: it is the best
    return out


#: The counts, and the floor's matmul rate (which divides one of them).
_RATE_AND_COUNTS = COUNT_FIELDS | {"attainable_flops_per_s"}


#: The columns of a floor (``Floor.columns``) but its pack and splits.
_FLOOR_COLUMNS = tuple(f for f in sorted(FLOOR_FIELDS) if f not in ("floor_pack", "floor_splits"))


def lower_floor(out: dict[str, Num], other: dict[str, Num]) -> dict[str, Num]:
    """``out`` with, row by row, ``other``'s floor where it is lower (the floor is the
    least over what the implementation could run: the naive side's over its compiles,
    :func:`evaluate` of each), the step between them its ``launch`` effect."""
    better = roofline.less(other["t_lower_s"], out["t_lower_s"])
    if not roofline.any_nonzero(better):
        return out
    merged = dict(out)
    for key in _FLOOR_COLUMNS:
        if key in other:
            merged[key] = roofline.choose(better, other[key], out[key])
    if EFFECT_COLUMNS[0] in out:
        merged[EFFECT_COLUMNS[0]] = out["t_lower_s"] - merged["t_lower_s"]
    return merged


def _counts(raw: dict[ExprName, Num], kernels: list[str], hw: HardwareSpec) -> dict[str, Num]:
    """The model's work and traffic: per-model fields, per-kernel fields summed, FLOPs,
    intensity, and whether its tensors fit the device's memory."""
    out: dict[str, Num] = {f: raw[f] for f in _MODEL_COLUMNS}
    out["fits_memory"] = _fits(raw["footprint_bytes"], hw.hbm_capacity_bytes)
    for f in _PER_KERNEL:
        out[f] = sum([raw[k, f] for k in kernels])
    flops = out["matmul_flops"] + out["vector_flops"]
    out["flops"] = flops
    out["intensity"] = roofline.arithmetic_intensity(flops, out["hbm_bytes"])
    if hw.l2_bytes is None:
        out["l2_bytes"] = flops * np.nan
        out["l2_reduce_bytes"] = flops * np.nan
    return out


def _estimate(
    roofs: list[KernelRoofs],
    calibration: Calibration,
    hw: HardwareSpec,
    effects: bool,
    d: Num | None = None,
    fp16: Num | None = None,
    blocked: Num | None = None,
) -> dict[str, Num]:
    """``time_s`` and, with ``effects``, what each effect of :data:`EFFECTS` adds to the
    floor of the launch evaluated (``effect_<name>_s``); ``blocked``: 1 where the fused
    kernel runs its family's blocked layout (:func:`blocked_of`)."""
    launch = calibration.launch_overhead_s
    launch = hw.launch_overhead_s if launch is None else launch
    steps = estimate_steps(
        roofs, calibration, launch, every=effects, d=d, fp16=fp16, blocked=blocked
    )
    out: dict[str, Num] = {"time_s": steps[-1]}
    if effects:
        for i, column in enumerate(EFFECT_COLUMNS[1:]):
            out[column] = steps[i + 1] - steps[i]
    return out


def blocked_of(calibration: Calibration, shape: dict[str, Num]) -> Num | None:
    """1 where the point's n or kv_len (``shape``'s n, m) is not a multiple of the
    family's ``blocked_multiple`` (its fused forward then runs the blocked layout), else
    0; None where the profile has no such rule."""
    multiple = calibration.blocked_multiple
    if not multiple or not calibration.matmul_blocked_ratio_by_d:
        return None
    n, m = shape["n"], shape["m"]
    if isinstance(n, roofline.NUMBERS) and isinstance(m, roofline.NUMBERS):
        return float(n % multiple != 0 or m % multiple != 0)
    off: np.ndarray = (np.asarray(n) % multiple != 0) | (np.asarray(m) % multiple != 0)
    return off.astype(float)


def _with_parallelism(
    times: dict[str, Num],
    work_items: Num,
    hw: HardwareSpec,
    onchip: OnChip | None = None,
    fill: _Fill | None = None,
) -> tuple[dict[str, Num], dict[str, Num]]:
    """Roofs stretched by idle SMs. Floor: compute roofs by the share of SMs with no
    block at all (a true bound). Estimate: compute roofs by wave quantisation, and the
    memory roofs by the bandwidth the busy SMs can pull (``_memory_reach``). A kernel
    without ``work_items`` fills the chip."""
    if not roofline.any_nonzero(work_items):
        return times, times
    floor = fill.busy if fill else roofline.busy_fraction(work_items, hw.sm_count)
    waves = roofline.wave_efficiency(work_items, hw.sm_count)
    reach = _memory_reach(floor, work_items, hw, onchip or _NO_ONCHIP, fill)
    estimate = {
        r: t / waves if r in roofline.COMPUTE_ROOFS else t * reach.get(r, 1.0)
        for r, t in times.items()
    }
    floor_times = {r: t / floor if r in roofline.COMPUTE_ROOFS else t for r, t in times.items()}
    return floor_times, estimate


def _memory_reach(
    busy: Num, work_items: Num, hw: HardwareSpec, onchip: OnChip, fill: _Fill | None = None
) -> dict[str, Num]:
    """Stretch of the memory roofs when the busy SMs cannot pull the full bandwidth.

    Each SM's port to L2 carries at most its share of the L2 bandwidth; and by Little's
    law an SM's blocks pull at most the bytes they keep in flight per memory latency
    (``memory_latency_s``, where the device spec has it). So a grid of few blocks, or of
    blocks with little in flight, cannot reach full HBM bandwidth: the programs per SM
    needed to hide memory latency, not one wave."""
    if not hw.l2_bandwidth_bytes_per_s:
        return {}
    top, low = roofline.maximum, roofline.minimum
    per_sm: Num = hw.l2_bandwidth_bytes_per_s / hw.sm_count  # one SM's port, all SMs pulling
    if hw.memory_latency_s and roofline.any_nonzero(onchip.bytes_in_flight):
        fill = fill or _fill(work_items, hw, onchip, busy)
        per_sm = low(per_sm, fill.resident * onchip.bytes_in_flight / fill.latency)
    reach = busy * hw.sm_count * per_sm
    return {
        "l2": top(1.0, hw.l2_bandwidth_bytes_per_s / reach),
        "hbm": top(1.0, hw.hbm_bandwidth_bytes_per_s / reach),
    }


def _stream_latency(busy: Num, resident: Num, hw: HardwareSpec, onchip: OnChip) -> Num:
    """The latency a tiled kernel's loads see (:func:`latency_at`): the bandwidth its
    busy SMs ask for, each with its ``resident`` blocks' bytes in flight per idle latency."""
    idle = hw.idle_memory_latency_s or hw.memory_latency_s or 0.0
    if not idle:
        return 0.0
    demand = busy * hw.sm_count * resident * onchip.bytes_in_flight / idle
    return latency_at(hw, demand)


def _fits(footprint: Num, capacity: int) -> Num:
    """Whether an algorithm's tensors fit in the device's memory."""
    if isinstance(footprint, float):
        return footprint <= capacity
    return np.asarray(footprint) <= capacity


#: Labels of ``bound`` as one shared object per label (8 bytes a point, not a string each).
_BOUNDS = np.array(["memory", "compute"], dtype=object)


def _bound(t_compute: Num, t_memory: Num) -> Any:
    if isinstance(t_compute, float) and isinstance(t_memory, float):
        return trace.select(t_compute >= t_memory, "compute", "memory")
    return _BOUNDS[(np.asarray(t_compute) >= t_memory).astype(np.intp)]


# --- a kernel family's launch, evaluated ---------------------------------------------
def flash_values(
    hw: HardwareSpec,
    shape: dict[str, Num],
    launch: Launch,
    pack: Num,
    splits: Num,
    reads: Collection[str] | None = None,
) -> dict[str, Num]:
    """Symbol values of the forward flash model at ``launch`` (its tiles, K/V stages and
    blocks per SM) with ``pack`` and ``splits``; ``reads``: as :func:`shape_values`'."""
    return shape_values(
        hw,
        reads=reads,
        **shape,
        block_q=launch.block_q,
        block_k=launch.block_k,
        kv_stages=launch.kv_stages,
        pack=pack,
        splits=splits,
        blocks_per_sm=launch.blocks_per_sm,
    )


Columns = dict[str, Num]


def _per_split(split: Num, run: Callable[[Any, bool], Columns]) -> Columns:
    """``run(rows, split)`` on the rows that split K/V (flash-decoding's two kernels) and
    on those that do not (one kernel), merged row by row; ``rows`` None: every row.

    Where both occur, the more common form runs on every row (its inputs need no
    gathering: a row's columns depend on that row alone) and the other on its own rows,
    which then overwrite those rows."""
    if not roofline.any_nonzero(split):
        return run(None, False)
    if roofline.all_nonzero(split):
        return run(None, True)
    mask = cast(Array, split)  # some rows split, others not: a column
    size = len(mask)
    few = int(np.count_nonzero(mask)) * 2 <= size  # True: the split rows are the fewer
    rows = np.flatnonzero(mask if few else ~mask)
    every, part = run(None, not few), run(rows, few)
    out: Columns = {}
    for key, sample in part.items():
        column = np.empty(size, dtype=np.asarray(sample).dtype)
        column[...] = every[key]
        column[rows] = sample
        out[key] = column
    return out


def _at(launch: Launch, shape: dict[str, Num], rows: Any) -> tuple[Launch, dict[str, Num]]:
    """The launch and shape at some rows (all of them for None)."""
    if rows is None:
        return launch, shape
    return launch.rows(rows), {k: roofline.rows(v, rows) for k, v in shape.items()}


def evaluate_flash(
    launch: Launch,
    family: KernelFamily,
    *,
    causal: bool,
    hw: HardwareSpec,
    peak: Num,
    shape: dict[str, Num],
    calibration: Calibration,
    framework_latency_s: Num = float("nan"),
    paged: bool = False,
    floor: bool = True,
    effects: bool = True,
    mask: Any = None,
    fp8: dict[str, Any] | None = None,
    fields: Fields = None,
) -> dict[str, Num]:
    """The fused kernel as its family launches it (``launch``: tiles, GQA packing, K/V
    splits, blocks per SM): its counts and its estimate; its floor that of the best
    launch the family could make (``perfmodel.launch.floor_launches``), so that it stays
    a floor for every launch, and cannot jump with one token (``floor=False``: the
    floor of ``launch`` alone). ``mask``: the tiles it visits (``costs.masks``, counted
    at each launch); ``fp8``: the FP8 form's values (``s_out``, ``fp8_*_ops``)."""
    forms = dict(paged=paged, masked=mask is not None, fp8=fp8 is not None)
    extra = {**({} if mask is None else {"mask": mask}), **(fp8 or {})}

    def roofs_at(
        rows: Any,
        split: bool,
        pack: Num,
        splits: Num,
        onchip: OnChip,
        at: Launch,
        sub: dict[str, Num],
    ) -> tuple[dict[ExprName, Num], list[str], list[KernelRoofs]]:
        key = model_key("flash", split=split, **forms)
        reads = model_symbols(key, causal, hw)
        values = flash_values(hw, {**sub, **extra}, at, pack, splits, reads)
        raw, kernels = _raw(key, causal, hw, values)
        rates = roof_rates(hw, roofline.rows(peak, rows))
        return raw, kernels, _roofs_from_raw(raw, kernels, rates, hw, onchip)

    def own(rows: Any, split: bool) -> Columns:
        at, sub = _at(launch, shape, rows)
        onchip = onchip_of(at, paged)
        raw, kernels, roofs = roofs_at(rows, split, at.pack, at.splits, onchip, at, sub)
        out = _counts(raw, kernels, hw) if with_counts else {}
        matmul = out["matmul_flops"] if with_counts else 0.0
        if with_floor:
            out.update(floor_of(roofs, matmul, at.pack, at.splits).flat())
        blocked = blocked_of(calibration, sub)
        out.update(
            _estimate(roofs, calibration, hw, effects, sub.get("d"), sub.get("fp16"), blocked)
        )
        return out

    def floor_at(rows: Any, pack: Num, splits: Num) -> Floor:
        def run(part: Any, split: bool) -> Columns:
            where = part if rows is None else (rows if part is None else rows[part])
            at, sub = _at(launch, shape, where)
            p, s = roofline.rows(pack, part), roofline.rows(splits, part)
            raw, kernels, roofs = roofs_at(where, split, p, s, _NO_ONCHIP, at, sub)
            matmul = sum([raw[k, "matmul_flops"] for k in kernels])
            return floor_of(roofs, matmul, p, s).flat()

        return Floor.from_flat(_per_split(roofline.gt(splits, 1.0), run))

    def t_lower_at(rows: Any, pack: npt.NDArray[Any], splits: npt.NDArray[Any]) -> Any:
        if isinstance(launch.block_q, float):  # one point: numbers (``floor_launches``)
            return floor_at(None, pack, splits).t_lower_s
        return floor_at(rows, pack, splits).t_lower_s

    with_counts = _wants(fields, _RATE_AND_COUNTS)
    with_floor = floor or effects or _wants(fields, FLOOR_FIELDS)
    out = _per_split(roofline.gt(launch.splits, 1.0), own)
    if with_floor:
        own_floor = Floor.from_flat(out)
        best = own_floor
        others = floor_launches(launch, t_lower_at) if floor else []
        for pack, splits in others:
            best = _lower(best, floor_at(None, pack, splits))
        for key in _FLAT:
            out.pop(key, None)
        out.update(best.columns(fields))
        if effects:
            out[EFFECT_COLUMNS[0]] = own_floor.t_lower_s - best.t_lower_s
    if fields is None or "call_latency_s" in fields:
        kernels_run = roofline.choose(roofline.gt(launch.splits, 1.0), 2.0, 1.0)  # + combine
        out["call_latency_s"] = call_latency(
            out["time_s"], kernels_run, calibration, framework_latency_s
        )
    out["pack"] = launch.pack
    out["splits"] = launch.splits
    out["blocks_per_sm"] = launch.blocks_per_sm
    out["spilled_registers_per_thread"] = launch.spilled_registers_per_thread
    return out


#: Columns of a phase that add up over forward then backward, and those that take the
#: larger of the two (memory held, on-chip footprint); the rest follow from these.
_ADDITIVE = (
    "flops",
    "matmul_flops",
    "vector_flops",
    "exp_count",
    "hbm_bytes",
    "hbm_bytes_no_cache",
    "l2_bytes",
    "l2_reduce_bytes",
    "t_compute_s",
    "t_memory_s",
    "t_lower_s",
    "time_s",
    *EFFECT_COLUMNS,
)
_LARGER = ("extra_memory_bytes", "sram_bytes", "register_bytes", "footprint_bytes")


def forward_then_backward(forward: dict[str, Num], backward: dict[str, Num]) -> dict[str, Num]:
    """One training step as the forward's launch followed by the backward's kernels."""
    out = dict(forward)
    for key in forward:
        if key in _ADDITIVE or (key.startswith("t_") and key in backward):
            if key in backward:
                out[key] = forward[key] + backward[key]
        elif key in _LARGER and key in backward:
            out[key] = roofline.maximum(forward[key], backward[key])
    if "fits_memory" in backward:
        out["fits_memory"] = np.logical_and(forward["fits_memory"], backward["fits_memory"])
    roofs = {k[2:-2]: out[k] for k in out if k.startswith("t_") and k[2:-2] in roofline.ROOF_SET}
    out.update(
        intensity=roofline.arithmetic_intensity(out["flops"], out["hbm_bytes"]),
        attainable_flops_per_s=roofline.matmul_rate_at_floor(out["matmul_flops"], out["t_lower_s"]),
        bound=_bound(out["t_compute_s"], out["t_memory_s"]),
        binding_roof=roofline.binding_roof(roofs),
    )
    if "call_latency_s" in out:
        out["call_latency_s"] = out["call_latency_s"] + backward["time_s"]
    return out
