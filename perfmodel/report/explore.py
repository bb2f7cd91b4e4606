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
from perfmodel.analysis.asymptotics import RATE, Shape, asymptotic_speedup
from perfmodel.catalog.calibration import Calibration, known_calibrations
from perfmodel.catalog.hardware import HardwareSpec, known_names, load_hardware
from perfmodel.costs import MODES
from perfmodel.costs.naive import IMPLEMENTATIONS as NAIVE_IMPLEMENTATIONS
from perfmodel.errors import PerfmodelError
from perfmodel.evaluate import ALGORITHMS, model_expressions, model_key, roof_rates, shape_values
from perfmodel.prediction import calibration_profiles, predict
from perfmodel.report.conclusions import N_REFERENCE
from perfmodel.vocabulary import BYTES_PER_ELEMENT, SYMBOL_OF

ROOFS = roofline.COMPUTE_ROOFS + roofline.MEMORY_ROOFS
_WORK = {
    "matmul": "matmul_flops",
    "vector": "vector_flops",
    "exp": "exp_count",
    "hbm": "hbm_bytes",
    "l2": "l2_bytes",
}
_PER_MODEL = ("extra_memory_bytes", "hbm_bytes_no_cache", "sram_bytes", "register_bytes")

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
    "block_q": "number (power of two)",
    "block_k": "number (power of two)",
    "kv_len": "number (blank: n)",
    "calibration": "select of the profiles valid on the device",
    "naive": "select",
    "mode": "select",
}
#: predict() parameters the page leaves out, and why. Each must leave the naive and
#: flash columns as they are (tests/test_explore.py checks), or it needs a control.
NOT_SHOWN = {
    "cp": "multi-device split: Prediction.parallel (perfmodel.parallel), not drawn",
    "cp_scheme": "multi-device split: Prediction.parallel (perfmodel.parallel), not drawn",
    "tp": "multi-device split: Prediction.parallel (perfmodel.parallel), not drawn",
    # issue 10: the kernel family's launch (tiles, warps, GQA packing, split-KV, paged
    # cache); the page's program does not port perfmodel.kernel_config yet
    "kernel": "kernel family (specs/kernels): not yet in the page's program",
    "warps": "kernel family launch: not yet in the page's program",
    "splits": "kernel family launch (split-KV): not yet in the page's program",
    "page_tokens": "paged KV cache (decode): not yet in the page's program",
}


# --- the program: evaluate's pipeline as sympy -------------------------------------------
def _sym(name: str) -> sp.Symbol:
    return sp.Symbol(name, positive=True)


#: Device and calibration inputs of the program (per algorithm where a profile differs).
RATES = {r: _sym(f"rate_{r}") for r in ROOFS}  #: full rate of each roof; absent: Infinity
EFF = {r: _sym(f"eff_{r}") for r in ROOFS}
OVERLAP, STRETCH, LAUNCH, DISPATCH = (
    _sym(x) for x in ("compute_overlap", "block_overhead_tiles", "launch_s", "dispatch_s")
)
UNITS, CAPACITY = _sym("sm_count"), _sym("hbm_capacity")


@dataclass(frozen=True)
class Program:
    """Straight-line code: ``raw`` names their cost expressions (shape symbols only);
    each ``steps`` entry assigns a name from earlier names and the device inputs;
    ``outputs`` are the columns ``evaluate`` reports, in order."""

    raw: tuple[tuple[str, sp.Expr], ...]
    steps: tuple[tuple[str, sp.Expr], ...]
    outputs: tuple[str, ...]


def _v(name: str) -> sp.Symbol:
    """A program variable (a JS identifier)."""
    return sp.Symbol("v_" + name.replace(":", "__"))


def _max(*args: sp.Expr) -> sp.Expr:
    """``Max`` as written, without sympy's pairwise simplification (slow and not needed)."""
    return args[0] if len(args) == 1 else sp.Max(*args, evaluate=False)


def _parallelism(times: dict, work_items: sp.Expr) -> tuple[dict, dict]:
    """evaluate's idle-SM floor and wave quantisation, on compute roofs only."""
    if work_items == 0:  # a kernel without work_items fills the chip
        return times, times
    w = work_items
    floor = sp.Min(1, w / UNITS, evaluate=False)
    waves = w / (sp.ceiling(w / UNITS) * UNITS)
    stretch = {r: (floor, waves) if r in roofline.COMPUTE_ROOFS else (1, 1) for r in times}
    return (
        {r: t / stretch[r][0] for r, t in times.items()},
        {r: t / stretch[r][1] for r, t in times.items()},
    )


@functools.cache
def program(key: str, causal: bool, l2: bool) -> Program:
    """``evaluate(key, causal=..., hw with/without L2)`` as one straight-line program."""
    names, exprs = model_expressions(key, causal, l2)
    raw = tuple(zip(names, exprs, strict=True))
    kernels = list(dict.fromkeys(n.split(":")[0] for n in names if ":" in n))
    steps: list[tuple[str, sp.Expr]] = []

    def let(name: str, expr: sp.Expr) -> sp.Symbol:
        steps.append((name, sp.sympify(expr)))
        return _v(name)

    zero = dict(raw)
    totals = {r: sp.Integer(0) for r in ROOFS}
    t_compute = t_memory = t_lower = total = sp.Integer(0)
    for k in kernels:
        work = {r: _v(f"{k}:{_WORK[r]}") for r in ROOFS}
        times = roofline.roof_times(work, RATES)
        times = {r: let(f"{k}:t_{r}", t) for r, t in times.items()}
        items = zero[f"{k}:work_items"]
        w = sp.Integer(0) if items == 0 else _v(f"{k}:work_items")
        floor, estimate = _parallelism(times, w)
        floor = {r: let(f"{k}:floor_{r}", t) for r, t in floor.items()}
        estimate = {r: let(f"{k}:est_{r}", t) for r, t in estimate.items()}
        for r in ROOFS:
            totals[r] = totals[r] + times[r]
        t_compute += _max(*(floor[r] for r in roofline.COMPUTE_ROOFS))
        t_memory += _max(*(floor[r] for r in roofline.MEMORY_ROOFS))
        t_lower += _max(*floor.values())
        tiles = zero[f"{k}:tiles"]
        blocks = 0 if tiles == 0 else _v(f"{k}:work_items") / _v(f"{k}:tiles")
        device = roofline.combine(
            roofline.derated(estimate, EFF),
            OVERLAP,
            1 + STRETCH * blocks,
            top=_max,
            total=sp.Add,
        )
        total += let(f"{k}:device_s", device) + LAUNCH
    for field in _WORK.values():
        let(field, sp.Add(*(_v(f"{k}:{field}") for k in kernels)))
    for r in ROOFS:
        let(f"t_{r}_s", totals[r])
    flops = let("flops", _v("matmul_flops") + _v("vector_flops"))
    let("intensity", flops / _v("hbm_bytes"))
    tc, tm, tl = (
        let("t_compute_s", t_compute),
        let("t_memory_s", t_memory),
        let("t_lower_s", t_lower),
    )
    let("time_s", _max(total, DISPATCH * len(kernels)))
    let("attainable_flops_per_s", _v("matmul_flops") / tl)
    let("bound_compute", sp.Piecewise((1, tc >= tm), (0, True)))
    let("fits_memory", sp.Piecewise((1, _v("footprint_bytes") <= CAPACITY), (0, True)))
    outputs = (
        *_PER_MODEL,
        "footprint_bytes",
        "fits_memory",
        *_WORK.values(),
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
    }
    return out


def evaluate_program(
    key: str, causal: bool, spec: HardwareSpec, values: dict, inputs: dict
) -> dict:
    """Run :func:`program` in Python with plain floats: the page's code, printed to Python
    by the same :func:`straight_line` (for tests; the page runs the JavaScript twin)."""
    fn = _python_function(key, causal, spec.l2_bytes is not None)
    return fn({str(k): float(v) for k, v in values.items()} | dict(inputs))


@functools.cache
def _python_function(key: str, causal: bool, l2: bool):
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
    out = {}
    for algorithm in ALGORITHMS:
        for naive in NAIVE_IMPLEMENTATIONS:
            for mode in MODES:
                key = model_key(algorithm, naive, mode)
                for causal in (False, True):
                    for l2 in (False, True):
                        name = f"{key}|{int(causal)}|{int(l2)}"
                        if name not in out:
                            out[name] = _js_function(program(key, causal, l2))
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


def _profiles_for(spec: HardwareSpec) -> dict[str, dict[str, dict[str, float]]]:
    """Per calibration choice valid on ``spec``, per algorithm, per dtype: the inputs."""
    out = {}
    for name in profile_names(spec):
        chosen = calibration_profiles(None if name == "default" else name, spec)
        out[name] = {
            a: {t: device_inputs(spec, t, chosen[a]) for t in dtypes(spec)} for a in ALGORITHMS
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


@functools.cache
def asymptote_expressions(hw: str) -> dict[str, sp.Expr | None]:
    """The n→∞ naive/flash time ratio (default profile, forward) per causality ("0", "1"),
    with the derated roof rates as symbols ``R_<roof>``; None where no tile fits."""
    spec = load_hardware(hw)
    out: dict[str, sp.Expr | None] = {}
    dtype = min(dtypes(spec), key=lambda t: BYTES_PER_ELEMENT[t])  # symbolic in s anyway
    for causal in (False, True):
        out[str(int(causal))] = None
        for tile in (64, 32, 16):  # the limit is symbolic in the tiles: any that fits will do
            shape = Shape(d=64, dtype=dtype, causal=causal, block_q=tile, block_k=tile)
            try:
                expr = asymptotic_speedup(spec, shape=shape).expr
            except PerfmodelError:
                continue
            subs = {RATE[r]: sp.Symbol(f"R_{r}") for r in RATE}
            out[str(int(causal))] = expr.xreplace(subs)
            break
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
            "hbm_capacity_bytes": spec.hbm_capacity_bytes,
            "dtypes": dtypes(spec),
            "bytes": {t: BYTES_PER_ELEMENT[t] for t in dtypes(spec)},
            "ridge": {t: spec.ridge_point(t) for t in dtypes(spec)},
            "profiles": _profiles_for(spec),
            "asymptote": {
                c: None if e is None else jscode(e) for c, e in asymptote_expressions(name).items()
            },
        }
    return out


def measured_points(paths: list[str | Path]) -> list[dict[str, Any]]:
    """Measured attention points of the files, as the page overlays them."""
    from perfmodel.validation.compare import ALGORITHM_OF, dtype_name
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
        out.append(
            dict(
                device=device,
                implementation=str(p.implementation),
                algorithm=algorithm,
                n=p.n,
                kv_len=p.kv_len,
                d=p.d,
                h=p.h,
                h_kv=p.h_kv,
                batch=p.batch,
                dtype=dtype_name(p.dtype),
                causal=p.causal,
                time_s=time,
                basis="device" if p.device_time_s else "median",
            )
        )
    return out


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
        "modes": list(MODES),
        "n_reference": N_REFERENCE,
        "measured": measured_points(measurements or []),
        "symbol_of": SYMBOL_OF,
        "keys": {
            a: {v: {mode: model_key(a, v, mode) for mode in MODES} for v in NAIVE_IMPLEMENTATIONS}
            for a in ALGORITHMS
        },
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
