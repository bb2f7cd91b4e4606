"""The dK/dV kernel's GQA split: CTAs per group that fill the waves best."""

from __future__ import annotations

from typing import Any

import numpy as np

#: Two fills closer than this are equal (floating point, not a preference).
_TIE = 1e-9


def group_split(programs: Any, group: Any, sm_count: int) -> Any:
    """Of the divisors ``s`` of each GQA ``group`` (query heads per K/V head), the
    smallest whose grid of ``programs · s`` CTAs fills its waves best, the fill being
    the grid over ``sm_count`` times its waves. ``programs``: the grid before the split
    (batch · K/V heads · K/V blocks). Each share beyond one costs a float32 partial of
    dK and dV and their sum, so a grid that fills its waves as well unsplit stays at 1.

    Numbers give a number, columns a float64 column:

    >>> int(group_split(24, 6, 132)), int(group_split(264, 4, 132))
    (3, 1)
    """
    programs_ = np.asarray(programs, dtype=np.float64)
    group_ = np.asarray(group, dtype=np.float64)
    best_fill = np.zeros(np.broadcast(programs_, group_).shape)
    best = np.ones_like(best_fill)
    for share in range(1, int(np.max(group_, initial=1)) + 1):
        grid = programs_ * share
        fill = grid / (sm_count * np.ceil(grid / sm_count))
        better = (np.mod(group_, share) == 0) & (fill > best_fill + _TIE)
        best = np.where(better, share, best)
        best_fill = np.where(better, fill, best_fill)
    return best if best.ndim else float(best)
