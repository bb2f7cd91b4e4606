"""Numbers from the symbolic models: compiled costs, then roofs, for scalars or arrays.

This is the one place where a cost model meets a device, and the one door to its
numbers: ``predict`` and ``sweep`` call :func:`evaluate`; the analysis, validation and
report layers use the public functions below (:func:`evaluate`, :func:`kernel_roofs`,
:func:`estimate_time`, :func:`roof_rates`, :func:`shape_values`, :func:`model_key`) and
hold no formula of their own.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
import sympy as sp

from perfmodel import roofline
from perfmodel.catalog.calibration import Calibration
from perfmodel.catalog.hardware import HardwareSpec
from perfmodel.compile import Compiled, compiled
from perfmodel.costs import MODES, flash, masks, symbolic, terms
from perfmodel.costs.backward import DQ_FAMILIES
from perfmodel.errors import PerfmodelError
from perfmodel.kernel_config import ByIdentity, tile_gcd
from perfmodel.onchip import effective_overlap
from perfmodel.roofline import NUMBERS, Num, is_scalar
from perfmodel.vocabulary import ALGORITHMS, ROOFS, Algorithm, NaiveCompile, Roof

_PER_KERNEL = ("matmul_flops", "vector_flops", "exp_count", "hbm_bytes", "l2_bytes")
#: A model's whole-model fields (beside its kernels').
PER_MODEL = ("extra_memory_bytes", "hbm_bytes_no_cache", "sram_bytes", "register_bytes")
#: Each roof with the kernel field it bounds (``Roof.work``), looked up once.
_WORK = tuple((r, r.work) for r in ROOFS)
#: Each roof's result column (``t_matmul_s``...), and the model's own columns.
_COLUMN = {r: f"t_{r}_s" for r in ROOFS}
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
    #: Forward flash under a mask (``costs.masks``), and FP8 as a family runs it.
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


def _known(name: str, value: Any, known: tuple) -> Any:
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
    if (split or paged or masked or fp8) and not flash_forward:
        raise PerfmodelError(
            f"split={split!r}, paged={paged!r}, masked={masked!r}, fp8={fp8!r}: only the "
            f"forward flash model has them (algorithm={algorithm!r}, mode={mode!r})"
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
def _model(key: ModelKey, causal: bool, l2: bool):
    """The cost model of ``key``. The forward ``flash`` is the model as a kernel family
    launches it (GQA packing, K/V splits, tiles of any size); ``split`` adds
    flash-decoding's partials and combine kernel, ``paged`` a paged cache's block table."""
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
    return symbolic(key.algorithm, causal=causal, l2=l2, naive=key.naive, mode=key.mode, dq=key.dq)


#: The name of one of a model's expressions: ``(kernel, field)`` for a kernel's field,
#: the field alone for the whole model's (``extra_memory_bytes``, ``footprint_bytes``...).
ExprName = str | tuple[str, str]


@functools.cache
def _compiled_model(
    key: ModelKey, causal: bool, l2: bool
) -> tuple[Compiled, tuple[ExprName, ...], list[str]]:
    """All of a model's expressions as one lambdified tuple (shared subexpressions), their
    names, and the model's kernels by name."""
    names, exprs = model_expressions(key, causal, l2)
    return compiled(exprs), names, [k.name for k in _model(key, causal, l2).kernels]


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
    model = _model(key, causal, l2)
    exprs: list = []
    names: list[ExprName] = []
    for kernel in model.kernels:
        for field in (*_PER_KERNEL, "work_items", "tiles"):
            value = getattr(kernel, field)
            exprs.append(0 * kernel.hbm_bytes if value is None else value)
            names.append((kernel.name, field))
    for field in PER_MODEL:
        exprs.append(getattr(model, field))
        names.append(field)
    # Q, K, V, O and what the algorithm keeps besides: what must fit in device memory.
    io = terms.q_bytes + terms.k_bytes + terms.v_bytes + terms.o_bytes
    exprs.append(model.extra_memory_bytes + io)
    names.append("footprint_bytes")
    return tuple(names), tuple(sp.sympify(e) for e in exprs)


def shape_values(hw: HardwareSpec, **shape: Any) -> dict[str, Any]:
    """Symbol values for a shape on a device: the L2 model's hardware symbols, and the
    launch's GQA packing, K/V splits and blocks per SM (1 each unless given); with a
    ``mask`` (``costs.masks.Mask``), its visited-tile counts at this launch."""
    values = {"pack": 1, "splits": 1, "page": 1, **shape}
    blocks_per_sm = values.pop("blocks_per_sm", 1)
    mask = values.pop("mask", None)
    if "block_q" in values:
        values["tile_gcd"] = tile_gcd(values["block_q"], values["block_k"], values["pack"])
    values["l2_capacity"] = hw.l2_bytes or 0
    values["resident_ctas"] = hw.sm_count * blocks_per_sm
    if mask is not None:
        values.update(masks.symbol_values(mask, **values))
    return values


def roof_rates(hw: HardwareSpec, peak: Num) -> dict[str, Num]:
    """Each roof's full rate on ``hw``: FLOP/s, exp/s or bytes/s (``peak``: the dtype's matmul)."""
    return {
        Roof.MATMUL: peak,
        Roof.VECTOR: hw.vector_fp32_flops_per_s,
        Roof.EXP: hw.exp_per_s,
        Roof.HBM: hw.hbm_bandwidth_bytes_per_s,
        Roof.L2: hw.l2_bandwidth_bytes_per_s,
    }


def _kernel_roofs(raw: dict, kernel: str, rates: dict) -> dict[str, Num]:
    return roofline.roof_times({r: raw[kernel, work] for r, work in _WORK}, rates)


def _raw(key: ModelKey | str, causal: bool, hw: HardwareSpec, values: dict) -> tuple[dict, list]:
    fn, names, kernels = _compiled_model(_as_key(key), causal, hw.l2_bytes is not None)
    return dict(zip(names, fn(**values), strict=True)), kernels


@dataclass(frozen=True)
class OnChip:
    """How the fused kernel's blocks sit on an SM (``perfmodel.kernel_config``): blocks
    resident at once, and local-memory bytes each inner-loop step moves for spills."""

    blocks_per_sm: Num = 1
    spill_bytes_per_tile: Num = 0.0
    #: Bytes one block keeps in flight from memory (its K/V loads ahead of use).
    bytes_in_flight: Num = 0.0


#: A kernel with no on-chip facts of its own (every kernel but the fused one).
_NO_ONCHIP = OnChip()


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


def kernel_roofs(
    key: ModelKey | str,
    *,
    causal: bool,
    hw: HardwareSpec,
    peak: Num,
    values: dict,
    onchip: OnChip | None = None,
) -> list[KernelRoofs]:
    """Per kernel, its roof times before any derating. Calibration fits work on these."""
    raw, kernels = _raw(key, causal, hw, values)
    return _roofs_from_raw(raw, kernels, roof_rates(hw, peak), hw, onchip or _NO_ONCHIP)


def _roofs_from_raw(
    raw: dict, kernels: list[str], rates: dict, hw: HardwareSpec, onchip: OnChip
) -> list[KernelRoofs]:
    out = []
    for i, k in enumerate(kernels):
        work_items, tiles = raw[k, "work_items"], raw[k, "tiles"]
        times = _kernel_roofs(raw, k, rates)
        fused = i == 0 and _any(tiles)  # the tiled kernel: on-chip facts apply
        floor, estimate = _with_parallelism(times, work_items, hw, onchip if fused else _NO_ONCHIP)
        if isinstance(tiles, float):
            blocks = work_items / tiles if tiles else 0.0
        else:
            blocks = np.divide(work_items, tiles, out=np.zeros_like(tiles), where=tiles > 0)
        spill = tiles * onchip.spill_bytes_per_tile / rates["l2"] if fused and rates["l2"] else 0.0
        per_sm = onchip.blocks_per_sm if fused else 1
        out.append(KernelRoofs(k, floor, estimate, blocks, times, per_sm, spill))
    return out


def _any(value: Num) -> bool:
    """Whether any element is nonzero (a float answers without numpy)."""
    return bool(value) if isinstance(value, NUMBERS) else bool(np.any(value))


def estimate_time(kernels: list[KernelRoofs], calibration: Calibration, launch: Num) -> Num:
    """The model's device time: each kernel at its calibrated fractions plus its launch
    gap. A fused kernel's compute overlap grows with the blocks an SM holds at once
    (``perfmodel.onchip.effective_overlap``); spilled registers add their traffic in
    series with the compute. Host dispatch is not device time (``call_latency``)."""
    efficiency = _efficiency(ByIdentity(calibration))
    total: Num = 0.0
    for k in kernels:
        stretch = 1 + calibration.block_overhead_tiles * k.blocks_per_tile
        device = roofline.kernel_estimate(
            k.estimate,
            efficiency,
            compute_overlap=effective_overlap(calibration.compute_overlap, k.blocks_per_sm),
            fill_stretch=stretch,
            serial=k.spill_s,
        )
        total = total + device + launch
    return total


@functools.lru_cache(maxsize=256)
def _efficiency(calibration: ByIdentity) -> dict[str, float]:
    """Each roof's achievable fraction in a (frozen) profile, read once per profile."""
    return {r: calibration.obj.efficiency(r) for r in ROOFS}


def call_latency(time_s: Num, kernels: int, calibration: Calibration, framework_s: Num) -> Num:
    """One synchronous call as a user's script sees it: the host issues the kernels, the
    device runs them, the call returns. A fitted host dispatch per kernel (profiles fitted
    on synchronous timings) stands in for the framework's measured call latency."""
    fitted = calibration.dispatch_overhead_s
    return time_s + (fitted * kernels if fitted else framework_s)


def evaluate(
    key: ModelKey | str,
    *,
    causal: bool,
    hw: HardwareSpec,
    peak: Num | float,
    values: dict,
    calibration: Calibration,
    onchip: OnChip | None = None,
) -> dict[str, Num]:
    """Every reported quantity of one model (``key``: a :class:`ModelKey`, or an
    algorithm's name for its forward model), as arrays broadcast over ``values``."""
    raw, kernels = _raw(key, causal, hw, values)
    rates = roof_rates(hw, peak)
    launch = calibration.launch_overhead_s
    launch = hw.launch_overhead_s if launch is None else launch

    out: dict[str, Num] = {f: raw[f] for f in _MODEL_COLUMNS}
    out["fits_memory"] = _fits(raw["footprint_bytes"], hw.hbm_capacity_bytes)
    for f in _PER_KERNEL:
        out[f] = sum([raw[k, f] for k in kernels])
    roofs = _roofs_from_raw(raw, kernels, rates, hw, onchip or _NO_ONCHIP)
    # each roof's time summed over the kernels (all have the roofs that ``rates`` has)
    roof_totals = {r: sum([k.times[r] for k in roofs], 0.0) for r in roofs[0].times}
    t_compute, t_memory, t_lower = _floors(roofs)
    time = estimate_time(roofs, calibration, launch)
    flops = out["matmul_flops"] + out["vector_flops"]
    out.update(
        flops=flops,
        intensity=roofline.arithmetic_intensity(flops, out["hbm_bytes"]),
        t_compute_s=t_compute,
        t_memory_s=t_memory,
        t_lower_s=t_lower,
        time_s=time,
        attainable_flops_per_s=roofline.matmul_rate_at_floor(out["matmul_flops"], t_lower),
        bound=_bound(t_compute, t_memory),
        binding_roof=roofline.binding_roof(roof_totals),
    )
    for roof, t in roof_totals.items():
        out[_COLUMN[roof]] = t
    if hw.l2_bytes is None:
        out["l2_bytes"] = flops * np.nan
    return out


def _floors(roofs: list[KernelRoofs]) -> tuple[Num, Num, Num]:
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
    return t_compute, t_memory, t_lower


def _floor_only(
    key: ModelKey,
    *,
    causal: bool,
    hw: HardwareSpec,
    peak: Num,
    values: dict,
    calibration: Calibration,
    onchip: OnChip | None = None,
) -> dict[str, Num]:
    """Of :func:`evaluate`'s columns ``t_lower_s`` alone: the floor, with no estimate
    (the same arguments as :func:`evaluate`; the floor needs no calibration)."""
    raw, kernels = _raw(key, causal, hw, values)
    roofs = _roofs_from_raw(raw, kernels, roof_rates(hw, peak), hw, onchip or _NO_ONCHIP)
    return {"t_lower_s": _floors(roofs)[2]}


def _with_parallelism(
    times: dict, work_items: Num, hw: HardwareSpec, onchip: OnChip | None = None
) -> tuple[dict, dict]:
    """Roofs stretched by idle SMs. Floor: compute roofs by the share of SMs with no
    block at all (a true bound). Estimate: compute roofs by wave quantisation, and the
    memory roofs by the bandwidth the busy SMs can pull (``_memory_reach``). A kernel
    without ``work_items`` fills the chip."""
    if not _any(work_items):
        return times, times
    floor = roofline.busy_fraction(work_items, hw.sm_count)
    waves = roofline.wave_efficiency(work_items, hw.sm_count)
    reach = _memory_reach(floor, work_items, hw, onchip or _NO_ONCHIP)
    estimate = {
        r: t / waves if r in roofline.COMPUTE_ROOFS else t * reach.get(r, 1.0)
        for r, t in times.items()
    }
    floor_times = {r: t / floor if r in roofline.COMPUTE_ROOFS else t for r, t in times.items()}
    return floor_times, estimate


def _memory_reach(busy: Num, work_items: Num, hw: HardwareSpec, onchip: OnChip) -> dict:
    """Stretch of the memory roofs when the busy SMs cannot pull the full bandwidth.

    Each SM's port to L2 carries at most its share of the L2 bandwidth; and by Little's
    law an SM's blocks pull at most the bytes they keep in flight per memory latency
    (``memory_latency_s``, where the device spec has it). So a grid of few blocks, or of
    blocks with little in flight, cannot reach full HBM bandwidth: the programs per SM
    needed to hide memory latency, not one wave."""
    if not hw.l2_bandwidth_bytes_per_s:
        return {}
    top = max if isinstance(busy, float) else np.maximum
    low = min if isinstance(busy, float) else np.minimum
    per_sm = hw.l2_bandwidth_bytes_per_s / hw.sm_count  # one SM's port, all SMs pulling
    if hw.memory_latency_s and _any(onchip.bytes_in_flight):
        resident = low(onchip.blocks_per_sm, top(1.0, work_items / hw.sm_count))
        per_sm = low(per_sm, resident * onchip.bytes_in_flight / hw.memory_latency_s)
    reach = busy * hw.sm_count * per_sm
    return {
        "l2": top(1.0, hw.l2_bandwidth_bytes_per_s / reach),
        "hbm": top(1.0, hw.hbm_bandwidth_bytes_per_s / reach),
    }


def _fits(footprint: Num, capacity: int) -> Num:
    """Whether an algorithm's tensors fit in the device's memory."""
    if isinstance(footprint, float):
        return footprint <= capacity
    return np.asarray(footprint) <= capacity


#: Labels of ``bound`` as one shared object per label (8 bytes a point, not a string each).
_BOUNDS = np.array(["memory", "compute"], dtype=object)


def _bound(t_compute, t_memory):
    if isinstance(t_compute, float) and isinstance(t_memory, float):
        return "compute" if t_compute >= t_memory else "memory"
    return _BOUNDS[(np.asarray(t_compute) >= t_memory).astype(np.intp)]


# --- a kernel family's launch, evaluated ---------------------------------------------
def onchip_of(config: Any) -> OnChip:
    """The on-chip facts of a resolved launch (``perfmodel.kernel_config.KernelConfig``)."""
    spill = 2 * 4 * config.spilled_registers_per_thread * config.footprint.threads
    return OnChip(config.blocks_per_sm, spill, config.bytes_in_flight)


def _pick(mask: Any, yes: dict, no: dict) -> dict:
    """Column by column, ``yes`` where ``mask`` holds, else ``no`` (arrays or scalars)."""
    if isinstance(mask, bool | np.bool_):
        return yes if mask else no
    return {k: np.where(mask, yes[k], no[k]) for k in no}


def evaluate_flash(
    config: Any,
    *,
    causal: bool,
    hw: HardwareSpec,
    peak: Num,
    shape: dict,
    calibration: Calibration,
    framework_latency_s: Num = float("nan"),
    paged: bool = False,
    mask: Any = None,
    fp8: dict | None = None,
) -> dict[str, Num]:
    """The fused kernel as its family launches it (tiles, GQA packing, K/V splits, blocks
    per SM); ``t_lower_s`` is the least over the packings and splits any kernel could
    use, so it stays a floor for every implementation. ``mask``: the tiles it visits
    (``costs.masks``); ``fp8``: the FP8 form's values (``s_out``, ``fp8_*_ops``)."""
    group = _num(_ratio(shape["h"], shape["h_kv"]))
    forms = dict(paged=paged, masked=mask is not None, fp8=fp8 is not None)
    whole = model_key("flash", **forms)  # one kernel; split: flash-decoding's two
    extra = {**({} if mask is None else {"mask": mask}), **(fp8 or {})}

    def run(pack: Any, splits: Any, onchip: OnChip | None, model: Any = evaluate) -> dict:
        values = shape_values(
            hw,
            **shape,
            block_q=config.block_q,
            block_k=config.block_k,
            pack=pack,
            splits=splits,
            blocks_per_sm=config.blocks_per_sm,
            **extra,
        )
        split = _split(splits)
        common = dict(causal=causal, hw=hw, peak=peak, values=values, calibration=calibration)
        if not _any(split):
            return model(whole, **common, onchip=onchip)
        out = model(model_key("flash", split=True, **forms), **common, onchip=onchip)
        if is_scalar(split) or np.all(split):
            return out
        return _pick(split, out, model(whole, **common, onchip=onchip))

    out = run(config.pack, config.splits, onchip_of(config))
    seen = [(_num(config.pack), _num(config.splits))]
    floors = [out["t_lower_s"]]
    splits_of = seen[0][1]
    for pack, splits in ((1.0, 1.0), (group, 1.0), (1.0, splits_of), (group, splits_of)):
        if any(_same(pack, p) and _same(splits, q) for p, q in seen):
            continue
        seen.append((pack, splits))
        floors.append(run(pack, splits, None, _floor_only)["t_lower_s"])
    lowest = functools.reduce(np.minimum, floors) if len(floors) > 1 else floors[0]
    out["t_lower_s"] = float(lowest) if is_scalar(lowest) else lowest
    out["attainable_flops_per_s"] = roofline.matmul_rate_at_floor(
        out["matmul_flops"], out["t_lower_s"]
    )
    kernels = 2 if _any(_split(config.splits)) else 1  # the combine kernel
    out["call_latency_s"] = call_latency(out["time_s"], kernels, calibration, framework_latency_s)
    for f in ("pack", "splits", "blocks_per_sm"):
        out[f] = getattr(config, f)
    out["spilled_registers_per_thread"] = config.spilled_registers_per_thread
    return out


def _split(splits: Any) -> Any:
    """Where the launch splits K/V (flash-decoding's partials and combine kernel)."""
    return splits > 1 if is_scalar(splits) else np.asarray(splits) > 1


def _ratio(a: Any, b: Any) -> Any:
    return a / b if is_scalar(a, b) else np.asarray(a) / np.asarray(b)


def _same(a: Any, b: Any) -> bool:
    """Whether two packings or splits (from :func:`_num`) are the same at every point."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b
    return bool(np.all(np.asarray(a) == np.asarray(b)))


def _num(v: Any) -> Any:
    return float(v) if is_scalar(v) else np.asarray(v, dtype=float)


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
    "t_compute_s",
    "t_memory_s",
    "t_lower_s",
    "time_s",
)
_LARGER = ("extra_memory_bytes", "sram_bytes", "register_bytes", "footprint_bytes")


def forward_then_backward(forward: dict[str, Num], backward: dict[str, Num]) -> dict[str, Num]:
    """One training step as the forward's launch followed by the backward's kernels."""
    out = dict(forward)
    for key in forward:
        if key in _ADDITIVE or (key.startswith("t_") and key in backward):
            out[key] = forward[key] + backward[key]
        elif key in _LARGER and key in backward:
            out[key] = np.maximum(forward[key], backward[key])
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
    if is_scalar(out["t_lower_s"]):
        out = {k: (float(v) if isinstance(v, np.floating) else v) for k, v in out.items()}
    return out
