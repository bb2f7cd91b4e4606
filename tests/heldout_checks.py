"""What each held-out draw's tests read (tests/test_heldout_draws.py):
a draw's figures from its committed predictions and from today's model, and the points
below a floor. The tests keep their assertions and their recorded figures."""

from __future__ import annotations

from pathlib import Path

from kernel_bench.heldout_draw import scored
from perfmodel.validation.compare import (
    compare,
    error_figures,
    errors_by_group,
    every_point,
    select,
)
from perfmodel.validation.measured import load_measurements

Figures = tuple[int, float, float, float]  # points, signed median, median |err|, max |err|


#: A draw's measurements: one file, or the files of the calls that timed its jobs.
Measured = Path | list[Path]


def _paths(measured: Measured) -> list[Path]:
    return [measured] if isinstance(measured, Path) else list(measured)


def committed(predictions: Path, measured: Measured, key: str) -> Figures:
    """A group's figures as the predictions committed before the run give them."""
    return error_figures(r[0] for r in scored(predictions, _paths(measured))[key])


def today(measured: Measured, key: str) -> Figures:
    """A group's figures as today's model gives them on the draw's measurements."""
    rows = compare(select(load_measurements(_paths(measured))))
    return error_figures(errors_by_group(rows)[key])


def statistic(figures: Figures, name: str) -> float:
    """A target's statistic: ``signed`` (|signed median|), ``median`` or ``max``."""
    _, signed, absolute, top = figures
    return {"signed": abs(signed), "median": absolute, "max": top}[name]


def below_floor(predictions: Path, measured: Measured) -> tuple[int, list[str], list[str]]:
    """Points compared, those faster than today's floor, groups with a point faster than
    the committed one."""
    rows = compare(every_point(load_measurements(_paths(measured))))
    committed_rows = scored(predictions, _paths(measured))
    below = [g for g, rs in committed_rows.items() if any(f < lo for _, f, lo, _ in rs)]
    return len(rows), [r.label() for r in rows if r.violates_lower_bound], below
