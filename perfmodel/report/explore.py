"""``perfmodel explore``: one self-contained HTML page that evaluates the model live.

The page runs the same formulas as :func:`perfmodel.predict`, printed to JavaScript
from sympy at build time (``sympy.printing.jscode``), never retyped:

* the cost expressions, from :func:`perfmodel.evaluate.model_expressions` (the list
  ``evaluate`` lambdifies), for every model key, causality and cache model;
* the roofline glue of ``evaluate`` (idle SMs and wave quantisation, the per-kernel
  floors, :func:`perfmodel.roofline.combine` with ``sympy.Max``/``sympy.Add`` for the
  estimate, launches and host dispatch), as a straight-line sympy program
  (:func:`program`) over the cost values, device rates and calibration fractions;
* the n→∞ speedup, :attr:`perfmodel.analysis.asymptotics.Asymptote.expr`.

Device data comes from the spec files through :func:`perfmodel.evaluate.roof_rates`
and :func:`perfmodel.evaluate.shape_values`; calibration profiles from the catalog.
:func:`evaluate_program` runs the same program in Python, and the tests hold it (and
the page, in a browser) to ``predict()`` at 1e-9 relative, so a step added to
``evaluate`` that the program lacks fails loudly.
"""

from __future__ import annotations

import functools
import html
import inspect
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sympy as sp
from sympy.printing.jscode import jscode

from perfmodel import roofline
from perfmodel.analysis.asymptotics import leading_coefficients
from perfmodel.catalog.calibration import Calibration, known_calibrations
from perfmodel.catalog.frameworks import call_latency_of
from perfmodel.catalog.hardware import HardwareSpec, known_names, load_hardware
from perfmodel.catalog.kernels import known_kernels, load_kernel
from perfmodel.costs import MODES
from perfmodel.costs.naive import IMPLEMENTATIONS as NAIVE_IMPLEMENTATIONS
from perfmodel.errors import PerfmodelError
from perfmodel.evaluate import (
    ALGORITHMS,
    PER_MODEL,
    ExprName,
    ModelKey,
    call_latency,
    forward_then_backward,
    model_expressions,
    model_key,
    onchip_of,
    roof_rates,
    shape_values,
)
from perfmodel.kernel_config import resolve
from perfmodel.prediction import calibration_profiles, flash_family, predict
from perfmodel.report.conclusions import N_REFERENCE
from perfmodel.vocabulary import (
    BYTES_PER_ELEMENT,
    MEMORY_ROOFS,
    ROOFS,
    SYMBOL_OF,
    bytes_per_element,
    symbol_values,
)

#: predict() parameters the page offers as a control. A parameter added to predict()
#: and missing here fails tests/test_explore.py: the page must learn it first.
CONTROLS = {
    "n": "number",
    "hw": "device select",
    "d": "number",
    "h": "number",
    "h_kv": "number (blank: h)",
    "batch": "number",
    "dtype": "select",
    "causal": "checkbox",
    "block_q": "number (blank: the family's tile)",
    "block_k": "number (blank: the family's tile)",
    "kv_len": "number (blank: n)",
    "calibration": "select of the profiles valid on the device",
    "naive": "select",
    "mode": "select",
    "kernel": "select of the flash kernel families (auto: the profile's, else fa2)",
    "warps": "number (blank: the family's)",
    "splits": "number (blank: the family's split-KV rule)",
    "page_tokens": "number (blank: contiguous KV cache)",
}
#: predict() parameters the page leaves out, and why. Each must leave the naive and
#: flash columns as they are (tests/test_explore.py checks), or it needs a control.
NOT_SHOWN = {
    "cp": "multi-device split: Prediction.parallel (perfmodel.parallel), not drawn",
    "cp_scheme": "multi-device split: Prediction.parallel (perfmodel.parallel), not drawn",
    "tp": "multi-device split: Prediction.parallel (perfmodel.parallel), not drawn",
    # issue 24: the window control and the mask picker are still to come (docs/variants.md)
    "window": "sliding window: not on the page yet (sweep(window=W) gives its columns)",
    "segments": "packed documents: not on the page yet (predict(segments=[...]))",
    "block_mask": "block mask: not on the page yet (predict(block_mask=...))",
    "block_size": "the block mask's tile: not on the page yet",
    "fp8_as_run": "FP8 as a family runs it (costs.precision): not on the page yet",
}


# --- the program: evaluate's pipeline as sympy -------------------------------------------
def _sym(name: str) -> sp.Symbol:
    return sp.Symbol(name, positive=True)


#: Device and calibration inputs of the program (per algorithm where a profile differs).
RATES = {r: _sym(f"rate_{r}") for r in ROOFS}  #: full rate of each roof; absent: Infinity
EFF = {r: _sym(f"eff_{r}") for r in ROOFS}
OVERLAP, STRETCH, LAUNCH = (
    _sym(x) for x in ("compute_overlap", "block_overhead_tiles", "launch_s")
)
UNITS, CAPACITY = _sym("sm_count"), _sym("hbm_capacity")
#: The fused kernel's on-chip facts (perfmodel.evaluate.OnChip; from kernel_config.resolve).
BLOCKS_PER_SM = _sym("blocks_per_sm")
SPILL = sp.Symbol("spill_bytes_per_tile", nonnegative=True)
IN_FLIGHT = sp.Symbol("bytes_in_flight", nonnegative=True)
#: Device facts of the memory reach (0: the spec lacks them).
LATENCY = sp.Symbol("memory_latency_s", nonnegative=True)
HAS_L2_RATE = sp.Symbol("has_l2_rate", nonnegative=True)


@dataclass(frozen=True)
class Program:
    """Straight-line code: ``raw`` names their cost expressions (shape symbols only);
    each ``steps`` entry assigns a name from earlier names and the device inputs;
    ``outputs`` are the columns ``evaluate`` reports, in order."""

    raw: tuple[tuple[ExprName, sp.Expr], ...]
    steps: tuple[tuple[ExprName, sp.Expr], ...]
    outputs: tuple[str, ...]


def _v(name: ExprName) -> sp.Symbol:
    """A program variable (a JS identifier): ``v_<field>``, or ``v_<kernel>__<field>``
    for a kernel's ``(kernel, field)``; the one place a name becomes a string."""
    return sp.Symbol("v_" + (name if isinstance(name, str) else "__".join(name)))


def _max(*args: sp.Expr) -> sp.Expr:
    """``Max`` as written, without sympy's pairwise simplification (slow and not needed)."""
    return args[0] if len(args) == 1 else sp.Max(*args, evaluate=False)


def _min(*args: sp.Expr) -> sp.Expr:
    return sp.Min(*args, evaluate=False)


def _parallelism(times: dict, work_items: sp.Expr, fused: bool) -> tuple[dict, dict]:
    """evaluate's idle SMs: the floor stretches compute roofs by the busy share; the
    estimate by wave quantisation, and memory roofs by the reach of the busy SMs."""
    if work_items == 0:  # a kernel without work_items fills the chip
        return times, times
    w = work_items
    busy = _min(1, w / UNITS)
    waves = w / (sp.ceiling(w / UNITS) * UNITS)
    reach = _memory_reach(busy, w, fused)
    floor = {r: t / busy if r in roofline.COMPUTE_ROOFS else t for r, t in times.items()}
    estimate = {
        r: t / waves if r in roofline.COMPUTE_ROOFS else t * reach.get(r, 1)
        for r, t in times.items()
    }
    return floor, estimate


def _memory_reach(busy: sp.Expr, w: sp.Expr, fused: bool) -> dict:
    """evaluate's memory reach: each busy SM pulls at most its port's share of the L2
    bandwidth and, by Little's law, what its resident blocks keep in flight."""
    per_sm = RATES["l2"] / UNITS
    if fused:
        resident = _min(BLOCKS_PER_SM, _max(1, w / UNITS))
        little = _min(per_sm, resident * IN_FLIGHT / LATENCY)
        per_sm = sp.Piecewise((little, sp.And(LATENCY > 0, IN_FLIGHT > 0)), (per_sm, True))
    reach = busy * UNITS * per_sm
    return {
        r: sp.Piecewise((_max(1, RATES[r] / reach), HAS_L2_RATE > 0), (1, True))
        for r in MEMORY_ROOFS
    }


@functools.cache
def program(key: ModelKey, causal: bool, l2: bool) -> Program:
    """``evaluate(key, causal=..., hw with/without L2, onchip=...)`` as one straight-line
    program; the first tiled kernel gets the launch's on-chip inputs."""
    names, exprs = model_expressions(key, causal, l2)
    raw = tuple(zip(names, exprs, strict=True))
    kernels = list(dict.fromkeys(n[0] for n in names if not isinstance(n, str)))
    steps: list[tuple[ExprName, sp.Expr]] = []

    def let(name: ExprName, expr: sp.Expr) -> sp.Symbol:
        steps.append((name, sp.sympify(expr)))
        return _v(name)

    zero = dict(raw)
    totals = {r: sp.Integer(0) for r in ROOFS}
    t_compute = t_memory = t_lower = total = sp.Integer(0)
    for i, k in enumerate(kernels):
        work = {r: _v((k, r.work)) for r in ROOFS}
        times = roofline.roof_times(work, RATES)
        times = {r: let((k, f"t_{r}"), t) for r, t in times.items()}
        items = zero[k, "work_items"]
        w = sp.Integer(0) if items == 0 else _v((k, "work_items"))
        tiles = zero[k, "tiles"]
        fused = i == 0 and tiles != 0  # the tiled kernel: on-chip facts apply
        floor, estimate = _parallelism(times, w, fused)
        floor = {r: let((k, f"floor_{r}"), t) for r, t in floor.items()}
        estimate = {r: let((k, f"est_{r}"), t) for r, t in estimate.items()}
        for r in ROOFS:
            totals[r] = totals[r] + times[r]
        t_compute += _max(*(floor[r] for r in roofline.COMPUTE_ROOFS))
        t_memory += _max(*(floor[r] for r in roofline.MEMORY_ROOFS))
        t_lower += _max(*floor.values())
        blocks = 0 if tiles == 0 else _v((k, "work_items")) / _v((k, "tiles"))
        per_sm = BLOCKS_PER_SM if fused else 1
        spill = _v((k, "tiles")) * SPILL / RATES["l2"] if fused else 0
        device = roofline.combine(
            roofline.derated(estimate, EFF),
            1 - (1 - OVERLAP) / per_sm,  # perfmodel.onchip.effective_overlap
            1 + STRETCH * blocks,
            top=_max,
            total=sp.Add,
            serial=spill,
        )
        total += let((k, "device_s"), device) + LAUNCH
    for field in (r.work for r in ROOFS):
        let(field, sp.Add(*(_v((k, field)) for k in kernels)))
    for r in ROOFS:
        let(f"t_{r}_s", totals[r])
    flops = let("flops", _v("matmul_flops") + _v("vector_flops"))
    let("intensity", flops / _v("hbm_bytes"))
    tc, tm, tl = (
        let("t_compute_s", t_compute),
        let("t_memory_s", t_memory),
        let("t_lower_s", t_lower),
    )
    let("time_s", total)
    let("attainable_flops_per_s", roofline.matmul_rate_at_floor(_v("matmul_flops"), tl))
    let("bound_compute", sp.Piecewise((1, tc >= tm), (0, True)))
    let("fits_memory", sp.Piecewise((1, _v("footprint_bytes") <= CAPACITY), (0, True)))
    outputs = (
        *PER_MODEL,
        "footprint_bytes",
        "fits_memory",
        *(r.work for r in ROOFS),
        "flops",
        "intensity",
        "t_compute_s",
        "t_memory_s",
        "t_lower_s",
        "time_s",
        "attainable_flops_per_s",
        "bound_compute",
        *(f"t_{r}_s" for r in ROOFS),
    )
    return Program(raw, tuple(steps), outputs)


def device_inputs(spec: HardwareSpec, dtype: str, profile: Calibration) -> dict[str, float]:
    """The program's device and calibration inputs, from the spec and the profile."""
    rates = roof_rates(spec, spec.peak(dtype))
    launch = profile.launch_overhead_s
    out = {f"rate_{r}": math.inf if rate is None else float(rate) for r, rate in rates.items()}
    out |= {f"eff_{r}": profile.efficiency(r) for r in ROOFS}
    out |= {
        "compute_overlap": profile.compute_overlap,
        "block_overhead_tiles": profile.block_overhead_tiles,
        "launch_s": spec.launch_overhead_s if launch is None else launch,
        "dispatch_s": profile.dispatch_overhead_s,
        "sm_count": float(spec.sm_count),
        "hbm_capacity": float(spec.hbm_capacity_bytes),
        "memory_latency_s": spec.memory_latency_s or 0.0,
        "has_l2_rate": 1.0 if spec.l2_bandwidth_bytes_per_s else 0.0,
    }
    return out | NO_ONCHIP


#: The on-chip inputs of a kernel launched without a family's facts (``OnChip()``).
NO_ONCHIP = {"blocks_per_sm": 1.0, "spill_bytes_per_tile": 0.0, "bytes_in_flight": 0.0}


def onchip_inputs(config: Any) -> dict[str, float]:
    """The program's on-chip inputs of a resolved launch (``evaluate.onchip_of``)."""
    facts = onchip_of(config)
    return {
        "blocks_per_sm": float(facts.blocks_per_sm),
        "spill_bytes_per_tile": float(facts.spill_bytes_per_tile),
        "bytes_in_flight": float(facts.bytes_in_flight),
    }


def evaluate_program(
    key: ModelKey, causal: bool, spec: HardwareSpec, values: dict, inputs: dict
) -> dict:
    """Run :func:`program` in Python with plain floats: the page's code, printed to Python
    by the same :func:`straight_line` (for tests; the page runs the JavaScript twin)."""
    fn = _python_function(key, causal, spec.l2_bytes is not None)
    return fn({str(k): float(v) for k, v in values.items()} | dict(inputs))


def flash_key(splits: float, paged: bool) -> ModelKey:
    """The forward flash model a launch uses (``evaluate.evaluate_flash``)."""
    return model_key("flash", split=bool(splits > 1), paged=paged)


def page_columns(cfg: dict) -> dict[str, dict[str, float]]:
    """What the page computes for one setting of its controls (``cfg``: predict()'s
    arguments, ``kernel``/``calibration`` "auto"/"default" for none), in Python: the
    tests hold it to predict(); page.js runs the same steps (``evaluate`` function)
    with the launch resolved by its copy of ``perfmodel.kernel_config.resolve``."""
    spec = load_hardware(cfg["hw"])
    calibration = None if cfg["calibration"] == "default" else cfg["calibration"]
    kernel = cfg.get("kernel", "auto")
    family = flash_family(None if kernel == "auto" else kernel, calibration)
    profiles = calibration_profiles(calibration, spec, family)
    m = cfg.get("kv_len") or cfg["n"]
    h_kv = cfg.get("h_kv") or cfg["h"]
    shape = symbol_values(n=cfg["n"], kv_len=m, d=cfg["d"], h=cfg["h"], h_kv=h_kv)
    shape["b"] = cfg["batch"]
    s = bytes_per_element(cfg["dtype"])
    causal, mode, paged = cfg["causal"], cfg["mode"], bool(cfg.get("page_tokens"))
    config = resolve(
        family,
        spec,
        **shape,
        s=s,
        causal=causal,
        **{k: cfg.get(k) for k in ("block_q", "block_k", "warps", "splits")},
    )
    tiles = dict(block_q=config.block_q, block_k=config.block_k)
    naive_in = device_inputs(spec, cfg["dtype"], profiles["naive"])
    flash_in = device_inputs(spec, cfg["dtype"], profiles["flash"])
    naive = evaluate_program(
        model_key("naive", cfg["naive"], mode),
        causal,
        spec,
        shape_values(spec, s=s, **shape, **tiles),
        naive_in,
    )

    def run(pack: float, splits: float, onchip: dict) -> dict:
        values = shape_values(
            spec,
            **shape,
            s=s,
            page=cfg.get("page_tokens") or 1,
            **tiles,
            pack=pack,
            splits=splits,
            blocks_per_sm=config.blocks_per_sm,
        )
        return evaluate_program(flash_key(splits, paged), causal, spec, values, flash_in | onchip)

    forward = run(config.pack, config.splits, onchip_inputs(config))
    group = shape["h"] / shape["h_kv"]
    floors = [forward["t_lower_s"]]
    seen = {(float(config.pack), float(config.splits))}
    for pack, splits in ((1, 1), (group, 1), (1, config.splits), (group, config.splits)):
        if (float(pack), float(splits)) not in seen:
            seen.add((float(pack), float(splits)))
            floors.append(run(pack, splits, NO_ONCHIP)["t_lower_s"])
    forward["t_lower_s"] = min(floors)
    forward["attainable_flops_per_s"] = roofline.matmul_rate_at_floor(
        forward["matmul_flops"], forward["t_lower_s"]
    )
    kernels = 2 if config.splits > 1 else 1
    framework_s = call_latency_of(family.framework)
    forward["call_latency_s"] = call_latency(
        forward["time_s"], kernels, profiles["flash"], framework_s
    )
    if mode == "forward":
        flash = forward
    else:
        values = shape_values(spec, s=s, **shape, **tiles)
        key = model_key("flash", cfg["naive"], "backward")
        backward = evaluate_program(key, causal, spec, values, flash_in)
        flash = backward if mode == "backward" else forward_then_backward(forward, backward)
        flash = {k: v for k, v in flash.items() if k not in ("bound", "binding_roof")}
        flash["bound_compute"] = float(flash["t_compute_s"] >= flash["t_memory_s"])
        flash["fits_memory"] = float(flash["fits_memory"])
    return {"naive": naive, "flash": {k: float(v) for k, v in flash.items()}}


def auto_kernel(calibration: str | None) -> dict[str, str]:
    """The family predict() picks when ``kernel`` is not given (``flash_family``):
    ``{"kernel": name}``, or ``{"error": message}`` where predict() refuses it."""
    try:
        return {"kernel": flash_family(None, calibration).name}
    except PerfmodelError as e:
        return {"error": str(e)}


@functools.cache
def _python_function(key: ModelKey, causal: bool, l2: bool):
    from sympy.printing.pycode import pycode

    prog = program(key, causal, l2)
    lines, outputs = straight_line(prog, lambda e: pycode(e, fully_qualified_modules=True))
    body = "\n  ".join(lines)
    source = f"def f(x):\n  {body}\n  return {{{outputs}}}\n"
    scope: dict[str, Any] = {"math": math}
    exec(compile(source, f"<explore {key}>", "exec"), scope)  # code printed by sympy above
    return scope["f"]


# --- JavaScript ------------------------------------------------------------------------
def straight_line(prog: Program, printer: Any, const: str = "") -> tuple[list[str], str]:
    """``prog`` as assignments in a C-like language (``printer``: sympy's ``jscode`` or
    ``pycode``): read inputs from ``x``, the cost expressions with shared subexpressions,
    then the steps; and the outputs as ``"name": variable`` pairs."""
    inputs = sorted(
        {str(s) for _, e in prog.raw + prog.steps for s in e.free_symbols}
        - {str(_v(n)) for n, _ in prog.raw + prog.steps},
    )
    lines = [f"{const}{s} = x[{json.dumps(s)}]" for s in inputs]
    subs, reduced = sp.cse([e for _, e in prog.raw], symbols=sp.numbered_symbols("c"))
    lines += [f"{const}{sym} = {printer(e)}" for sym, e in subs]
    lines += [f"{const}{_v(n)} = {printer(e)}" for (n, _), e in zip(prog.raw, reduced, strict=True)]
    lines += [f"{const}{_v(n)} = {printer(e)}" for n, e in prog.steps]
    return lines, ", ".join(f"{json.dumps(n)}: {_v(n)}" for n in prog.outputs)


def _js_function(prog: Program) -> str:
    """One JS function of the symbol values ``x`` returning the outputs by name."""
    lines, outputs = straight_line(prog, jscode, const="const ")
    body = ";\n  ".join(lines)
    return f"function (x) {{\n  {body};\n  return {{{outputs}}};\n}}"


@functools.cache
def _variants() -> dict[str, str]:
    """Each model's JS functions, by ``str(key)``, as ``[causal][l2]`` (page.js ``model``)."""
    keys = [
        model_key(a, v, mode) for a in ALGORITHMS for v in NAIVE_IMPLEMENTATIONS for mode in MODES
    ]
    keys += [flash_key(s, paged) for s in (1, 2) for paged in (False, True)]
    out = {}
    for key in dict.fromkeys(keys):  # one model, one key: each once
        rows = (
            ", ".join(_js_function(program(key, c, l2)) for l2 in (False, True))
            for c in (False, True)
        )
        out[str(key)] = "[" + ", ".join(f"[{row}]" for row in rows) + "]"
    return out


# --- data from the catalog ---------------------------------------------------------------
def profile_names(spec: HardwareSpec) -> list[str]:
    """The calibration choices valid on ``spec``: "default", then the profiles fitted on it."""
    out = ["default"]
    for name in known_calibrations():
        try:
            calibration_profiles(name, spec)
        except PerfmodelError:
            continue  # fitted on another device
        out.append(name)
    return out


def _profiles_for(spec: HardwareSpec) -> dict[str, dict[str, Any]]:
    """Per calibration choice valid on ``spec``, per flash kernel family, per algorithm,
    per dtype: the inputs (or the error predict() gives for that pair)."""
    out: dict[str, dict[str, Any]] = {}
    for name in profile_names(spec):
        out[name] = {}
        for kernel in flash_families():
            try:
                chosen = calibration_profiles(
                    None if name == "default" else name, spec, load_kernel(kernel)
                )
            except PerfmodelError as e:
                out[name][kernel] = {"error": str(e)}
                continue
            out[name][kernel] = {
                a: {t: device_inputs(spec, t, chosen[a]) for t in dtypes(spec)} for a in ALGORITHMS
            }
    return out


def family_table() -> dict[str, dict[str, Any]]:
    """The flash kernel families as the page's copy of ``kernel_config.resolve`` needs
    them (all from specs/kernels)."""
    out = {}
    for name in flash_families():
        f = load_kernel(name)
        out[name] = {
            "name": f.name,
            "tiles": [t.model_dump() for t in f.tiles],
            "gqa_packing": f.gqa_packing,
            "split_kv": f.split_kv,
            "split_sm_factor": f.split_sm_factor,
            "max_splits": f.max_splits,
            "split_block_q": f.split_block_q,
            "split_block_k": sorted(f.split_block_k.items()),
            "kv_stages": f.kv_stages,
            "producer_warps": f.producer_warps,
            "framework_s": call_latency_of(f.framework),
        }
    return out


def dtypes(spec: HardwareSpec) -> list[str]:
    return [t for t in BYTES_PER_ELEMENT if _has_peak(spec, t)]


def _has_peak(spec: HardwareSpec, dtype: str) -> bool:
    try:
        spec.peak(dtype)
    except PerfmodelError:
        return False
    return True


#: The compute overlap of each side in the n→∞ limit (the flash side's with its blocks
#: per SM, ``perfmodel.onchip.effective_overlap``): inputs of the asymptote expression.
LIMIT_OVERLAP = {a: sp.Symbol(f"overlap_{a}", nonnegative=True) for a in ALGORITHMS}


@functools.cache
def asymptote_expressions(hw: str) -> dict[str, sp.Expr]:
    """The n→∞ naive/flash time ratio (forward) per causality ("0", "1"), as
    :func:`perfmodel.analysis.asymptotics.asymptotic_speedup` forms it: per kernel the
    leading n² coefficient of each roof over its derated rate ``R_<side>_<roof>``, combined as
    the estimate combines roofs, with each side's compute overlap a symbol
    (:data:`LIMIT_OVERLAP`) since the flash side's depends on the launch."""
    spec = load_hardware(hw)
    l2 = spec.l2_bytes is not None
    out = {}
    for causal in (False, True):
        side = {}
        for a in ALGORITHMS:
            rates = {r: sp.Symbol(f"R_{a}_{r}", positive=True) for r in ROOFS}
            side[a] = sp.Add(
                *(
                    roofline.combine(
                        {r: c / rates[r] for r, c in per_roof.items() if c != 0},
                        LIMIT_OVERLAP[a],
                        top=_max,
                        total=sp.Add,
                    )
                    for per_roof in leading_coefficients(a, causal, l2).values()
                )
            )
        out[str(int(causal))] = side["naive"] / side["flash"]
    return out


@functools.cache
def device_table() -> dict[str, dict[str, Any]]:
    """Every shipped device as the page needs it (all from the spec files)."""
    out = {}
    for name in known_names():
        spec = load_hardware(name)
        consts = shape_values(spec)
        out[name] = {
            "name": spec.name,
            "l2": spec.l2_bytes is not None,
            "l2_capacity": float(consts["l2_capacity"]),
            "resident_ctas": float(consts["resident_ctas"]),
            "sram_per_sm_bytes": spec.sram_per_sm_bytes,
            "smem_per_block_bytes": spec.smem_per_block_bytes,
            "registers_per_sm": spec.registers_per_sm,
            "max_registers_per_thread": spec.max_registers_per_thread,
            "max_threads_per_sm": spec.max_threads_per_sm,
            "max_blocks_per_sm": spec.max_blocks_per_sm,
            "sm_count": spec.sm_count,
            "arch": spec.arch,
            "hbm_capacity_bytes": spec.hbm_capacity_bytes,
            "dtypes": dtypes(spec),
            "bytes": {t: BYTES_PER_ELEMENT[t] for t in dtypes(spec)},
            "ridge": {t: spec.ridge_point(t) for t in dtypes(spec)},
            "profiles": _profiles_for(spec),
            "asymptote": {c: jscode(e) for c, e in asymptote_expressions(name).items()},
        }
    return out


#: The shape fields of a measured point the page matches against its controls.
POINT_FIELDS = ("n", "kv_len", "d", "h", "h_kv", "batch", "dtype", "causal")


def measured_points(paths: list[str | Path]) -> list[dict[str, Any]]:
    """Measured attention points of the files, as the page overlays them."""
    from perfmodel.validation.compare import ALGORITHM_OF
    from perfmodel.validation.measured import load_measurements

    out = []
    for run, p in load_measurements(list(paths)):
        algorithm = ALGORITHM_OF.get(str(p.implementation))
        time = p.device_time_s or p.median_s
        if algorithm not in ALGORITHMS or p.status != "ok" or time is None:
            continue
        try:
            device = load_hardware(run.device_name).name
        except PerfmodelError:
            continue
        shape = p.shape()
        out.append(
            dict(
                device=device,
                implementation=str(p.implementation),
                algorithm=algorithm,
                **{k: getattr(shape, k) for k in POINT_FIELDS},
                time_s=time,
                basis="device" if p.device_time_s else "median",
            )
        )
    return out


def columns() -> tuple[str, ...]:
    """Every column the page shows per side: the program's, then the call latency."""
    return (*program(model_key("flash"), False, True).outputs, "call_latency_s")


def flash_families() -> list[str]:
    """The kernel families the page offers for the fused side."""
    return [k for k in known_kernels() if load_kernel(k).algorithm == "flash"]


def check_controls() -> list[str]:
    """predict() parameters the page has no control for (empty when it has all)."""
    known = CONTROLS.keys() | NOT_SHOWN.keys()
    return [p for p in inspect.signature(predict).parameters if p not in known]


def build_page(measurements: list[str | Path] | None = None) -> str:
    """The whole page as one HTML string (no network access needed to view it)."""
    missing = check_controls()
    if missing:
        raise PerfmodelError(
            f"perfmodel explore has no control for predict() argument(s) {missing}"
        )
    data = {
        "devices": device_table(),
        "naive": list(NAIVE_IMPLEMENTATIONS),
        "families": family_table(),
        "auto_kernel": {
            c: auto_kernel(None if c == "default" else c) for c in known_calibrations()
        },
        "modes": list(MODES),
        "n_reference": N_REFERENCE,
        "measured": measured_points(measurements or []),
        "symbol_of": SYMBOL_OF,
        "keys": {
            a: {
                v: {mode: str(model_key(a, v, mode)) for mode in MODES}
                for v in NAIVE_IMPLEMENTATIONS
            }
            for a in ALGORITHMS
        },
        # the forward flash launch's model, by [split][paged] (evaluate.evaluate_flash)
        "launch_keys": [[str(flash_key(s, p)) for p in (False, True)] for s in (1, 2)],
    }
    models = ",\n".join(f"{json.dumps(k)}: {v}" for k, v in _variants().items())
    asset = Path(__file__).with_name("explore_page")
    page = (asset / "page.html").read_text(encoding="utf-8")
    script = (asset / "page.js").read_text(encoding="utf-8")
    generated = f"const DATA = {json.dumps(data)};\nconst MODELS = {{\n{models}\n}};\n"
    return (
        page.replace("/*GENERATED*/", generated)
        .replace("/*PAGE_JS*/", script)
        .replace("{{TITLE}}", html.escape("perfmodel explore"))
    )


def write_page(path: str | Path, measurements: list[str | Path] | None = None) -> Path:
    """Write the page atomically."""
    from perfmodel.atomic import write_text

    out = Path(path)
    write_text(out, build_page(measurements))
    return out
