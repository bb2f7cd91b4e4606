"""A small Nelder–Mead minimiser (numpy only), for fitting a handful of parameters.

>>> x, f = nelder_mead(lambda v: float(((v - 3.0) ** 2).sum()), [0.0, 0.0])
>>> [round(float(t), 3) for t in x], round(f, 6)
([3.0, 3.0], 0.0)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np


def nelder_mead(
    loss: Callable[[np.ndarray], float],
    start: Sequence[float] | np.ndarray,
    *,
    step: float = 1.0,
    iterations: int = 600,
    tolerance: float = 1e-10,
) -> tuple[np.ndarray, float]:
    """Minimise ``loss`` from ``start``; returns (best point, its loss)."""
    x0 = np.asarray(start, dtype=float)
    simplex = [x0] + [x0 + step * e for e in np.eye(x0.size)]
    values = [loss(x) for x in simplex]
    for _ in range(iterations):
        order = np.argsort(values)
        simplex = [simplex[i] for i in order]
        values = [values[i] for i in order]
        if values[-1] - values[0] < tolerance:
            break
        centroid = np.mean(simplex[:-1], axis=0)
        worst = simplex[-1]
        reflected = centroid + (centroid - worst)
        f_r = loss(reflected)
        if f_r < values[0]:
            expanded = centroid + 2 * (centroid - worst)
            f_e = loss(expanded)
            simplex[-1], values[-1] = (expanded, f_e) if f_e < f_r else (reflected, f_r)
        elif f_r < values[-2]:
            simplex[-1], values[-1] = reflected, f_r
        else:
            contracted = centroid + 0.5 * (worst - centroid)
            f_c = loss(contracted)
            if f_c < values[-1]:
                simplex[-1], values[-1] = contracted, f_c
            else:  # shrink toward the best point
                simplex = [simplex[0]] + [simplex[0] + 0.5 * (x - simplex[0]) for x in simplex[1:]]
                values = [values[0]] + [loss(x) for x in simplex[1:]]
    best = int(np.argmin(values))
    return simplex[best], float(values[best])
