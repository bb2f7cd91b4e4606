"""Least-squares fit of a calibration profile: log time, bounded parameters, standard errors.

The residual of a point is ``log(predicted / measured)``; ``scipy.optimize.least_squares``
(trust-region reflective, with bounds) minimises their sum of squares. Each fitted
parameter carries its standard error from the Jacobian at the solution,
``sqrt(diag((JᵀJ)⁺)·σ²)`` with ``σ² = Σr²/(N − P)`` (the usual linearised estimate); a
parameter at a bound is reported as such, its error then meaning little.

>>> import numpy as np
>>> x = np.linspace(1.0, 2.0, 9)
>>> r = fit_log_time(lambda p: np.log(p["a"] * x / (0.5 * x)), {"a": (0.1, 1.0, 0.3)})
>>> round(r.values["a"], 6), r.at_bound["a"]
(0.5, False)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from perfmodel.errors import PerfmodelError

#: (lower, upper, start) of each parameter; its scale for the optimiser is its upper bound.
Bounds = Mapping[str, tuple[float, float, float]]


def relative_error(predicted_s: float, measured_s: float) -> float:
    """The error every validation figure reports: ``predicted / measured − 1`` (+10 %: the
    model says 10 % slower than measured); a fit's residual is its ``log1p``."""
    return predicted_s / measured_s - 1


@dataclass(frozen=True)
class FitResult:
    values: dict[str, float]
    stderr: dict[str, float]
    at_bound: dict[str, bool]
    rms_log_error: float
    residuals: np.ndarray


def fit_log_time(
    residuals: Callable[[dict[str, float]], np.ndarray],
    bounds: Bounds,
    *,
    weights: np.ndarray | None = None,
    start: Mapping[str, float] | None = None,
) -> FitResult:
    """Minimise Σ w·r² over the parameters in ``bounds`` (each scaled by its upper bound),
    from the given ``start`` or, without one, from the bounds' starts and two spread points
    (the residuals are not convex in the parameters: the best of the three)."""
    try:
        from scipy.optimize import least_squares
    except ModuleNotFoundError as err:
        raise PerfmodelError("fitting a calibration needs scipy: pip install -e '.[fit]'") from err

    names = list(bounds)
    scale = np.array([bounds[k][1] for k in names])
    lo = np.array([bounds[k][0] for k in names]) / scale
    hi = np.ones(len(names))
    x0 = np.array([(start or {}).get(k, bounds[k][2]) for k in names]) / scale
    x0 = np.clip(x0, lo + 1e-9, hi - 1e-9)
    w = None if weights is None else np.sqrt(np.asarray(weights, dtype=float))

    def to_params(x: np.ndarray) -> dict[str, float]:
        return {k: float(v) for k, v in zip(names, x * scale, strict=True)}

    def fun(x: np.ndarray) -> np.ndarray:
        r = residuals(to_params(x))
        return r if w is None else w * r

    starts = [x0] if start is not None else [x0, lo + 0.25 * (hi - lo), lo + 0.75 * (hi - lo)]
    sols = [
        least_squares(
            fun, np.clip(x, lo + 1e-9, hi - 1e-9), bounds=(lo, hi), method="trf", x_scale="jac"
        )
        for x in starts
    ]
    sol = min(sols, key=lambda r: r.cost)
    values = to_params(sol.x)
    r = residuals(values)
    used = r if w is None else r[w > 0]
    dof = max(1, used.size - len(names))
    sigma2 = float(np.sum(sol.fun**2)) / dof
    cov = np.linalg.pinv(sol.jac.T @ sol.jac) * sigma2
    stderr = np.sqrt(np.clip(np.diag(cov), 0, None)) * scale
    # a parameter no point's time depends on (zero Jacobian column) is not determined
    stderr[np.linalg.norm(sol.jac, axis=0) == 0] = np.nan
    at_bound = {
        k: bool(np.isclose(sol.x[i], lo[i], atol=1e-6) or np.isclose(sol.x[i], hi[i], atol=1e-6))
        for i, k in enumerate(names)
    }
    return FitResult(
        values=values,
        stderr={k: float(e) for k, e in zip(names, stderr, strict=True)},
        at_bound=at_bound,
        rms_log_error=float(np.sqrt(np.mean(used**2))),
        residuals=r,
    )
