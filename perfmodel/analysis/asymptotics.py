"""The model along n: sweep columns, the n→∞ speedup limit, the crossover and the OOM point.

A scaling study varies one dimension, the sequence length n (self-attention,
kv_len = n), with everything else fixed. This module answers its three questions
from the cost models themselves:

* :func:`asymptotic_speedup` — the limit of naive time / flash time as n→∞, from
  the n² coefficient of every roof's symbolic work (``sp.ceiling(x)`` → x where x
  grows, → 1 where x shrinks to 0; a ``Piecewise`` takes the branch that holds for
  large n). The relative gain "grows with n" only up to this limit.
* :func:`crossover_n` — the smallest n at which the predicted speedup reaches a
  threshold, by evaluating the model at every integer n (not by bisection: the
  speedup need not be monotone in n).
* :func:`naive_oom_n` — the smallest n at which naive attention's footprint
  (Q, K, V, O plus S and P) exceeds the device's HBM.

>>> lim = asymptotic_speedup("h200")
>>> round(lim.value, 2), lim.naive_roofs, lim.flash_roofs
(1.58, ('hbm', 'hbm', 'hbm'), ('matmul',))
>>> x = crossover_n("h200", 1.5, metric="t_lower_s")
>>> before, at = speedup_at("h200", [x - 1, x], metric="t_lower_s")
>>> bool(before < 1.5 <= at)
True
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import sympy as sp

from perfmodel.arguments import PositiveInt, Real
from perfmodel.catalog.calibration import Calibration
from perfmodel.catalog.hardware import HardwareSpec, load_hardware
from perfmodel.catalog.kernels import load_kernel
from perfmodel.compile import Compiled, compiled
from perfmodel.costs import symbolic
from perfmodel.costs import terms as t
from perfmodel.errors import PerfmodelError
from perfmodel.evaluate import roof_fractions, roof_rates, shape_values
from perfmodel.prediction import calibration_profiles, predict, sweep
from perfmodel.roofline import Num, combine
from perfmodel.shape import Shape
from perfmodel.symbols import m, n
from perfmodel.vocabulary import ALGORITHMS, ROOFS

#: One rate symbol per roof (FLOP/s, exp/s or bytes/s), for the symbolic limit.
RATE = {r: sp.Symbol(f"R_{r}", positive=True) for r in ROOFS}
#: Largest n the crossover scan evaluates (one vectorised pass per power-of-two window).
N_SCAN_MAX = 1 << 20
#: Lengths evaluated at once by a scan: its memory stays bounded whatever n_max is.
SCAN_WINDOW = 1 << 16
#: What the scans accept: bounds of n up to N_SCAN_MAX, a finite positive speedup.
SCAN = PositiveInt("a bound of the scan over n", limit=N_SCAN_MAX)
SPEEDUP = Real("a speedup", low=0, open_low=True, high=1e6)

Hw = str | Path | HardwareSpec


def _shape(shape: Shape | None, kw: dict[str, Any]) -> Shape:
    if shape is not None and kw:
        raise PerfmodelError(f"give either shape= or keyword fields, not both: {sorted(kw)}")
    try:
        return shape or Shape(**kw)
    except TypeError as e:
        raise PerfmodelError(str(e)) from None


# --- sweep columns along n -------------------------------------------------------------
def along_n(
    hw: Hw,
    n_values: Any,
    shape: Shape | None = None,
    calibration: Any = None,
    window: Any = None,
    **kw: Any,
) -> dict[str, np.ndarray]:
    """``sweep``'s columns for an array of n, everything else fixed (self-attention;
    ``window``: a sliding window, the same at every n).

    Adds ``*.io_bytes`` (Q, K, V, O) and ``*.footprint_bytes`` (io + extra memory).

    >>> cols = along_n("h200", [1024, 4096])
    >>> cols["naive.extra_memory_bytes"].tolist()
    [4194304.0, 67108864.0]
    """
    spec, shape = load_hardware(hw), _shape(shape, kw)
    ns = np.asarray(n_values)
    if ns.ndim != 1 or ns.size == 0 or np.any(ns < 1) or np.any(ns != np.floor(ns)):
        raise PerfmodelError(f"n={n_values!r} must be a non-empty list of positive integers")
    ns = ns.astype(np.int64)
    kwargs = {**shape.kwargs(0 if shape.tokens is None else 1), "batch": shape.batch_at(ns)}
    out: dict[str, np.ndarray] = dict(
        sweep(spec, n=ns, calibration=calibration, grid=False, window=window, **kwargs)
    )
    if not np.all(out["flash.fits_sram"]):
        predict(n=int(ns[0]), hw=spec, **shape.kwargs(int(ns[0])))  # raises, naming the tile
    values = shape_values(spec, n=ns, m=ns, **shape.symbol_values(ns, spec))
    io = _io_bytes()(**values)
    for a in ALGORITHMS:
        out[f"{a}.io_bytes"] = io
        out[f"{a}.footprint_bytes"] = io + out[f"{a}.extra_memory_bytes"]
    return out


@functools.cache
def _io_bytes() -> Compiled:
    return compiled(t.q_bytes + t.k_bytes + t.v_bytes + t.o_bytes)


def speedup_at(
    hw: Hw,
    n_values: Any,
    *,
    metric: str = "time_s",
    shape: Shape | None = None,
    calibration: Any = None,
    window: Any = None,
    **kw: Any,
) -> np.ndarray:
    """naive/flash ratio of ``metric`` ("time_s": the estimate; "t_lower_s": the roofline)."""
    if metric not in ("time_s", "t_lower_s"):
        raise PerfmodelError(f"metric={metric!r} must be 'time_s' or 't_lower_s'")
    cols = along_n(hw, n_values, shape, calibration, window, **kw)
    ratio: np.ndarray = cols[f"naive.{metric}"] / cols[f"flash.{metric}"]
    return ratio


# --- the crossover ------------------------------------------------------------------
def crossover_n(
    hw: Hw,
    threshold: float,
    *,
    metric: str = "time_s",
    n_min: int = 1,
    n_max: int = N_SCAN_MAX,
    sustained: bool = False,
    shape: Shape | None = None,
    calibration: Any = None,
    window: Any = None,
    **kw: Any,
) -> int | None:
    """Smallest integer n in [n_min, n_max] with predicted speedup >= ``threshold``
    (``window``: under that sliding window).

    Every integer is evaluated (the speedup need not be monotone in n). With
    ``sustained``, the smallest X such that the speedup stays >= threshold for every n
    in [X, n_max] ("gains are significant beyond X"). None when there is no such n.
    """
    threshold = SPEEDUP.scalar("threshold", threshold)
    n_min, n_max = (SCAN.scalar(k, v) for k, v in (("n_min", n_min), ("n_max", n_max)))
    if not n_min <= n_max:
        raise PerfmodelError(f"need 1 <= n_min <= n_max; got n_min={n_min!r}, n_max={n_max!r}")

    def reached(ns: np.ndarray) -> np.ndarray:
        return (
            speedup_at(
                hw, ns, metric=metric, shape=shape, calibration=calibration, window=window, **kw
            )
            >= threshold
        )

    if not sustained:
        return _first_n(reached, n_min, n_max)
    hi = n_max  # the last n below the threshold, window by window from the top
    while hi >= n_min:
        lo = max(n_min, hi - SCAN_WINDOW + 1)
        ns = np.arange(lo, hi + 1)
        below = np.flatnonzero(~reached(ns))
        if below.size:
            last = int(ns[below[-1]])
            return None if last == n_max else last + 1
        hi = lo - 1
    return n_min


def naive_oom_n(
    hw: Hw, shape: Shape | None = None, n_max: int = N_SCAN_MAX, **kw: Any
) -> int | None:
    """Smallest n at which naive attention's footprint (Q, K, V, O, S, P) exceeds HBM.

    Every integer n is evaluated, as in :func:`crossover_n`; None if not up to ``n_max``.
    """
    spec, shape = load_hardware(hw), _shape(shape, kw)
    return _first_n(
        lambda ns: along_n(spec, ns, shape)["naive.footprint_bytes"] > spec.hbm_capacity_bytes,
        1,
        SCAN.scalar("n_max", n_max),
    )


def _first_n(hits: Any, n_min: int, n_max: int) -> int | None:
    """Smallest integer n in [n_min, n_max] where ``hits(ns)`` is True, window by window."""
    lo = n_min
    while lo <= n_max:
        hi = min(n_max, max(2 * lo - 1, lo + 1023))
        ns = np.arange(lo, hi + 1)
        found = np.flatnonzero(hits(ns))
        if found.size:
            return int(ns[found[0]])
        lo = hi + 1
    return None


def _sym_values(shape: Shape, spec: HardwareSpec) -> dict[sp.Symbol, Any]:
    from perfmodel import symbols

    values = shape_values(spec, **shape.symbol_values(sp.oo, spec))  # with tokens: batch 1
    return {getattr(symbols, k): v for k, v in values.items()}


# --- the n→∞ limit ------------------------------------------------------------------
def large_n(expr: sp.Expr) -> sp.Expr:
    """``expr`` (m = n) with ceilings, floors and piecewise branches as they are for large n."""
    expr = sp.sympify(expr).subs(m, n)
    if not expr.args:
        return expr
    args = [large_n(a) for a in expr.args]
    if isinstance(expr, sp.ceiling | sp.floor):
        lim = sp.limit(args[0], n, sp.oo)
        if lim in (sp.oo, -sp.oo):
            return args[0]
        return type(expr)(lim) if lim != 0 else sp.Integer(isinstance(expr, sp.ceiling))
    if isinstance(expr, sp.Piecewise) and any(n in c.free_symbols for _, c in expr.args):
        for value, cond in args:  # ExprCondPair (value, condition), in order
            if _eventually(cond):
                return value
        raise PerfmodelError(f"no branch of {expr} holds for large n")
    return expr.func(*args)  # a Piecewise on tile sizes alone stays one


def _eventually(cond: sp.Basic) -> bool:
    """Whether a relational condition holds for all large n."""
    if cond in (sp.true, sp.false):
        return bool(cond)
    if isinstance(cond, sp.core.relational.Relational):
        gap = sp.limit(cond.lhs - cond.rhs, n, sp.oo)
        sign = {sp.oo: 1, -sp.oo: -1}.get(gap)
        if sign is None and gap.is_number:
            sign = int(sp.sign(gap))
        if sign is None:
            raise PerfmodelError(f"cannot decide {cond} for large n (limit {gap})")
        return bool(cond.func(sign, 0)) if sign else bool(cond.func(0, 0))
    raise PerfmodelError(f"cannot decide {cond} for large n")


@functools.cache
def leading_coefficients(algorithm: str, causal: bool = False, l2: bool = True) -> dict[str, Any]:
    """Per kernel, per roof: lim work/n² as n→∞ (sympy, in the shape symbols).

    >>> leading_coefficients("naive")["softmax"]["hbm"]
    2*b*h*s
    """
    out = {}
    for kernel in symbolic(algorithm, causal=causal, l2=l2).kernels:
        out[kernel.name] = {
            r: sp.simplify(sp.limit(large_n(getattr(kernel, r.work)) / n**2, n, sp.oo))
            for r in ROOFS
        }
    return out


@dataclass(frozen=True)
class Asymptote:
    """The n→∞ naive/flash time ratio on one device for one fixed shape."""

    value: float
    #: The limit with roof rates as symbols R_<roof> (already derated for ``time_s``).
    expr: sp.Expr
    naive_roofs: tuple[str, ...]  #: binding roof of each naive kernel at large n
    flash_roofs: tuple[str, ...]
    metric: str


def _limit_time(
    coeffs: dict[str, Any], values: dict[str, Any], rates: dict[str, Any], overlap: float = 1.0
) -> tuple[sp.Expr, sp.Expr, list[str]]:
    """Σ_kernels (roofs combined as the estimate does), symbolic and numeric, with each
    kernel's binding roof. Per-block and launch costs vanish as n → ∞."""
    sym, num, roofs = [], [], []
    for per_roof in coeffs.values():
        terms = {r: c for r, c in per_roof.items() if rates.get(r) and c != 0}
        symbolic_times = {r: c / RATE[r] for r, c in terms.items()}
        sym.append(combine(symbolic_times, overlap, top=sp.Max, total=sp.Add))
        times = {r: float(c.subs(values)) / rates[r] for r, c in terms.items()}
        roofs.append(max(times, key=lambda r: times[r]))
        num.append(combine(times, overlap))
    return sp.Add(*sym), sp.Float(sum(num)), roofs


def asymptotic_speedup(
    hw: Hw,
    *,
    metric: str = "time_s",
    shape: Shape | None = None,
    calibration: Calibration | str | None = None,
    **kw: Any,
) -> Asymptote:
    """lim n→∞ of naive/flash ``metric`` ("time_s" derates each roof; "t_lower_s" does not).

    Launch overheads vanish against n² work; what stays is, per kernel, the slowest
    roof's n² coefficient over its rate.
    """
    spec, shape = load_hardware(hw), _shape(shape, kw)
    if metric not in ("time_s", "t_lower_s"):
        raise PerfmodelError(f"metric={metric!r} must be 'time_s' or 't_lower_s'")
    family = load_kernel(shape.kernel)
    n_big = 1 << 24
    predict(n=n_big, hw=spec, **shape.kwargs(n_big))  # checks the shape
    profiles = calibration_profiles(calibration, spec, family)
    values = _sym_values(shape, spec)
    parts: dict[str, tuple[Any, Any]] = {}
    roofs: dict[str, list[str]] = {}
    for a in ALGORITHMS:
        # each roof's fraction as the estimate takes it: the matmul's at the head dim and,
        # for fp16, at the measured fp16/bf16 rate ratio (``evaluate.roof_fractions``)
        fractions = roof_fractions(profiles[a], float(shape.d), float(shape.dtype == "fp16"))
        eff: dict[str, Num] = {r: fractions[r] if metric == "time_s" else 1.0 for r in ROOFS}
        raw = roof_rates(spec, spec.peak(shape.dtype))
        rates = {r: (rate * eff[r] if rate else None) for r, rate in raw.items()}
        coeffs = leading_coefficients(a, shape.causal, spec.l2_bytes is not None)
        overlap = profiles[a].compute_overlap if metric == "time_s" else 1.0
        sym, num, roofs[a] = _limit_time(coeffs, values, rates, overlap)
        parts[a] = (sym, num)
    return Asymptote(
        value=float(parts["naive"][1] / parts["flash"][1]),
        expr=parts["naive"][0] / parts["flash"][0],
        naive_roofs=tuple(roofs["naive"]),
        flash_roofs=tuple(roofs["flash"]),
        metric=metric,
    )


# --- under a sliding window: the gain has no limit ------------------------------------
@dataclass(frozen=True)
class WindowGain:
    """naive/flash under a sliding window of ``window`` keys: flash's work is linear in n
    (each query row sees at most window + 1 keys), naive's stays n² (it computes every
    score, then masks), so the speedup grows without bound, ``per_token·n`` for large n,
    where without a window it tends to ``dense_limit``."""

    window: int
    metric: str
    n: tuple[int, ...]
    speedup: tuple[float, ...]  #: at each n, with the window
    dense_speedup: tuple[float, ...]  #: at each n, without (same causal flag)
    per_token: float  #: lim speedup(n) / n
    dense_limit: float  #: lim speedup(n) without the window (:func:`asymptotic_speedup`)
    crossover: int | None  #: first n with speedup >= threshold, with the window
    dense_crossover: int | None  #: the same without (``sustained``: from there on)
    threshold: float


def window_gain(
    hw: Hw,
    window: int,
    *,
    metric: str = "time_s",
    n_values: Any = (1024, 4096, 16384, 65536, 262144),
    threshold: float = 1.5,
    shape: Shape | None = None,
    sustained: bool = False,
    **kw: Any,
) -> WindowGain:
    """How the gain grows with n under a sliding window, and where the crossover moves.

    ``per_token`` is the leading coefficient: naive's time per n² over flash's per n,
    from the model at n = 2^20 and 2^21 (flash's time is affine in n there, naive's
    quadratic: the differences cancel the lower terms). The crossovers are
    :func:`crossover_n`'s up to ``max(n_values)`` (``sustained``: slower, every n above
    the window is evaluated with its mask).

    >>> g = window_gain("h200", 4095, shape=Shape(causal=True, h=32, h_kv=8, dtype="bf16"))
    >>> g.speedup[-1] > 10 * g.dense_limit, g.per_token > 0
    (True, True)
    """
    spec, shape = load_hardware(hw), _shape(shape, kw)
    big = 1 << 20
    ns = np.asarray([*n_values, big, 2 * big])
    args: dict[str, Any] = dict(metric=metric, shape=shape, window=window)
    cols = along_n(spec, ns, shape, window=window)
    naive, flash = cols[f"naive.{metric}"], cols[f"flash.{metric}"]
    # t_naive ~ A·n², t_flash ~ B·n: A from t(2N) - t(N) = 3·A·N², B from t(2N) - t(N) = B·N
    per_token = float((naive[-1] - naive[-2]) / (3 * big**2) / ((flash[-1] - flash[-2]) / big))
    dense = speedup_at(spec, ns[:-2], metric=metric, shape=shape)
    top = int(max(n_values))
    scan: dict[str, Any] = dict(n_max=top, sustained=sustained)
    dense_x = crossover_n(spec, threshold, metric=metric, shape=shape, **scan)
    # Up to n = window + 1 every query sees all its keys: the window changes nothing there
    reach = window + 1
    x = dense_x
    if sustained:
        x = crossover_n(spec, threshold, **scan, **args)
    elif (dense_x is None or dense_x > reach) and reach < top:
        x = crossover_n(spec, threshold, n_min=reach + 1, **scan, **args)
    return WindowGain(
        window=window,
        metric=metric,
        n=tuple(int(x) for x in ns[:-2]),
        speedup=tuple(float(x) for x in (naive / flash)[:-2]),
        dense_speedup=tuple(float(x) for x in dense),
        per_token=per_token,
        dense_limit=asymptotic_speedup(spec, metric=metric, shape=shape).value,
        crossover=x,
        dense_crossover=dense_x,
        threshold=threshold,
    )
