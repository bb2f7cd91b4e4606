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

import numpy as np
import sympy as sp

from perfmodel import roofline
from perfmodel.catalog.calibration import Calibration
from perfmodel.catalog.hardware import HardwareSpec
from perfmodel.compile import Compiled, compiled
from perfmodel.costs import MODES, symbolic, terms
from perfmodel.costs.naive import IMPLEMENTATIONS as NAIVE_IMPLEMENTATIONS
from perfmodel.errors import PerfmodelError
from perfmodel.roofline import Num
from perfmodel.vocabulary import ROOFS, Roof

ALGORITHMS = ("naive", "flash")
_PER_KERNEL = ("matmul_flops", "vector_flops", "exp_count", "hbm_bytes", "l2_bytes")
_PER_MODEL = ("extra_memory_bytes", "hbm_bytes_no_cache", "sram_bytes", "register_bytes")


def model_key(
    algorithm: str, naive: str = "minimal", mode: str = "forward", dq: str = "atomic"
) -> str:
    """The model of one side: ``naive-xla`` for naive as XLA compiles it, else the algorithm;
    then ``/backward`` or ``/train`` (``costs.MODES``) and, for flash, ``/two_pass`` when
    its backward sums dQ in a second pass (``costs.backward.DQ_FAMILIES``)."""
    if naive not in NAIVE_IMPLEMENTATIONS:
        raise PerfmodelError(f"unknown naive={naive!r}; known: {NAIVE_IMPLEMENTATIONS}")
    if mode not in MODES:
        raise PerfmodelError(f"unknown mode={mode!r}; known: {MODES}")
    key = algorithm if algorithm == "flash" or naive == "minimal" else f"naive-{naive}"
    if mode == "forward":
        return key
    return f"{key}/{mode}" if dq == "atomic" or algorithm != "flash" else f"{key}/{mode}/{dq}"


@functools.cache
def _model(algorithm: str, causal: bool, l2: bool):
    """A ``model_key``: ``naive``, ``naive-xla`` or ``flash``, with its mode and dQ family."""
    side, *rest = algorithm.split("/")
    mode = rest[0] if rest else "forward"
    dq = rest[1] if len(rest) > 1 else "atomic"
    base, _, variant = side.partition("-")
    return symbolic(base, causal=causal, l2=l2, naive=variant or "minimal", mode=mode, dq=dq)


@functools.cache
def _compiled_model(algorithm: str, causal: bool, l2: bool) -> tuple[Compiled, tuple[str, ...]]:
    """All of a model's expressions as one lambdified tuple (shared subexpressions)."""
    names, exprs = model_expressions(algorithm, causal, l2)
    return compiled(exprs), names


@functools.cache
def model_expressions(
    algorithm: str, causal: bool, l2: bool
) -> tuple[tuple[str, ...], tuple[sp.Expr, ...]]:
    """The sympy expressions :func:`evaluate` starts from, by name: ``<kernel>:<field>`` per
    kernel, then the per-model fields and ``footprint_bytes`` (``perfmodel explore`` prints
    the same list to JavaScript)."""
    model = _model(algorithm, causal, l2)
    exprs, names = [], []
    for kernel in model.kernels:
        for field in (*_PER_KERNEL, "work_items", "tiles"):
            value = getattr(kernel, field)
            exprs.append(0 * kernel.hbm_bytes if value is None else value)
            names.append(f"{kernel.name}:{field}")
    for field in _PER_MODEL:
        exprs.append(getattr(model, field))
        names.append(field)
    # Q, K, V, O and what the algorithm keeps besides: what must fit in device memory.
    io = terms.q_bytes + terms.k_bytes + terms.v_bytes + terms.o_bytes
    exprs.append(model.extra_memory_bytes + io)
    names.append("footprint_bytes")
    return tuple(names), tuple(sp.sympify(e) for e in exprs)


def shape_values(hw: HardwareSpec, **shape: object) -> dict[str, object]:
    """Symbol values for a shape on a device (the L2 model's hardware symbols included)."""
    return {**shape, "l2_capacity": hw.l2_bytes or 0, "resident_ctas": hw.sm_count}


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
    return roofline.roof_times({r: raw[f"{kernel}:{r.work}"] for r in ROOFS}, rates)


def _raw(algorithm: str, causal: bool, hw: HardwareSpec, values: dict) -> tuple[dict, list]:
    l2 = hw.l2_bytes is not None
    fn, names = _compiled_model(algorithm, causal, l2)
    raw = dict(zip(names, fn(**values), strict=True))
    return raw, [k.name for k in _model(algorithm, causal, l2).kernels]


@dataclass(frozen=True)
class KernelRoofs:
    """One kernel's roof times at full efficiency: for the floor (idle SMs only) and for
    the estimate (wave quantisation too), and its thread blocks per inner-loop step."""

    name: str  #: the kernel's name in its cost model ("qk", "softmax", "pv", "flash", ...)
    floor: dict[str, Num]
    estimate: dict[str, Num]
    blocks_per_tile: Num
    times: dict[str, Num]  #: the plain roof times, no idle SMs


def kernel_roofs(
    algorithm: str, *, causal: bool, hw: HardwareSpec, peak: Num, values: dict
) -> list[KernelRoofs]:
    """Per kernel, its roof times before any derating. Calibration fits work on these."""
    raw, kernels = _raw(algorithm, causal, hw, values)
    return _roofs_from_raw(raw, kernels, roof_rates(hw, peak), hw)


def _roofs_from_raw(raw: dict, kernels: list[str], rates: dict, hw: HardwareSpec) -> list:
    out = []
    for k in kernels:
        work_items, tiles = raw[f"{k}:work_items"], raw[f"{k}:tiles"]
        times = _kernel_roofs(raw, k, rates)
        floor, estimate = _with_parallelism(times, work_items, hw)
        if isinstance(tiles, float):
            blocks = work_items / tiles if tiles else 0.0
        else:
            blocks = np.divide(work_items, tiles, out=np.zeros_like(tiles), where=tiles > 0)
        out.append(KernelRoofs(k, floor, estimate, blocks, times))
    return out


def _max2(a: Num, b: Num) -> Num:
    return max(a, b) if isinstance(a, float) else np.maximum(a, b)


def estimate_time(kernels: list[KernelRoofs], calibration: Calibration, launch: Num) -> Num:
    """The model's estimate: each kernel at its calibrated fractions plus its launch gap,
    or the host's time to issue them all, whichever is longer."""
    efficiency = {r: calibration.efficiency(r) for r in ROOFS}
    total: Num = 0.0
    for k in kernels:
        stretch = 1 + calibration.block_overhead_tiles * k.blocks_per_tile
        device = roofline.kernel_estimate(
            k.estimate,
            efficiency,
            compute_overlap=calibration.compute_overlap,
            fill_stretch=stretch,
        )
        total = total + device + launch
    # Host dispatch runs ahead of the device (asynchronous launches): it only shows
    # when the kernels are shorter than the time to issue them.
    return _max2(total, calibration.dispatch_overhead_s * len(kernels))


def evaluate(
    algorithm: str,
    *,
    causal: bool,
    hw: HardwareSpec,
    peak: Num | float,
    values: dict,
    calibration: Calibration,
) -> dict[str, Num]:
    """Every reported quantity of one algorithm, as arrays broadcast over ``values``."""
    raw, kernels = _raw(algorithm, causal, hw, values)
    rates = roof_rates(hw, peak)
    launch = calibration.launch_overhead_s
    launch = hw.launch_overhead_s if launch is None else launch

    out: dict[str, Num] = {f: raw[f] for f in (*_PER_MODEL, "footprint_bytes")}
    out["fits_memory"] = _fits(raw["footprint_bytes"], hw.hbm_capacity_bytes)
    for f in _PER_KERNEL:
        out[f] = sum(raw[f"{k}:{f}"] for k in kernels)
    roof_totals: dict[str, Num] = {}
    t_compute: Num = 0.0
    t_memory: Num = 0.0
    t_lower: Num = 0.0
    roofs = _roofs_from_raw(raw, kernels, rates, hw)
    for kernel in roofs:
        floor_times = kernel.floor
        for roof, t in kernel.times.items():
            roof_totals[roof] = roof_totals.get(roof, 0.0) + t
        t_compute = t_compute + roofline.lower_bound(
            {r: t for r, t in floor_times.items() if r in roofline.COMPUTE_ROOFS}
        )
        t_memory = t_memory + roofline.lower_bound(
            {r: t for r, t in floor_times.items() if r in roofline.MEMORY_ROOFS}
        )
        t_lower = t_lower + roofline.lower_bound(floor_times)
    time = estimate_time(roofs, calibration, launch)
    flops = out["matmul_flops"] + out["vector_flops"]
    out.update(
        flops=flops,
        intensity=roofline.arithmetic_intensity(flops, out["hbm_bytes"]),
        t_compute_s=t_compute,
        t_memory_s=t_memory,
        t_lower_s=t_lower,
        time_s=time,
        attainable_flops_per_s=out["matmul_flops"] / t_lower,
        bound=_bound(t_compute, t_memory),
        binding_roof=roofline.binding_roof(roof_totals),
        **{f"t_{roof}_s": t for roof, t in roof_totals.items()},
    )
    if hw.l2_bytes is None:
        out["l2_bytes"] = flops * np.nan
    return out


def _with_parallelism(times: dict, work_items, hw: HardwareSpec) -> tuple[dict, dict]:
    """Compute roofs stretched by idle SMs: for the floor, only SMs with no block at all;
    for the estimate, wave quantisation too. A kernel without ``work_items`` fills the chip."""
    if not (work_items if isinstance(work_items, float) else np.any(work_items)):
        return times, times
    floor = roofline.busy_fraction(work_items, hw.sm_count)
    waves = roofline.wave_efficiency(work_items, hw.sm_count)
    stretch = {r: (floor, waves) if r in roofline.COMPUTE_ROOFS else (1.0, 1.0) for r in times}
    return (
        {r: t / stretch[r][0] for r, t in times.items()},
        {r: t / stretch[r][1] for r, t in times.items()},
    )


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
