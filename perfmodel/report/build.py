"""A scaling report as one call: sweep n, conclude, refute the misconceptions, plot.

One varying dimension (n, self-attention) with everything else fixed; naive and
flash side by side; conclusions as "gains become significant beyond n ≈ X", X solved
from the model
(:func:`perfmodel.analysis.asymptotics.crossover_n`). Every number in ``report.md`` is read
from ``predict`` or from the same ``evaluate`` columns that ``sweep`` returns.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from perfmodel.arguments import MAX_REPORT_N, check, check_columns, fail, output_folder, require
from perfmodel.atomic import write_text
from perfmodel.catalog.hardware import load_hardware
from perfmodel.report import figures as plots
from perfmodel.report.conclusions import N_REFERENCE, conclusions
from perfmodel.report.markdown import render_markdown
from perfmodel.report.measured import match_measurements
from perfmodel.shape import Shape


def write_report(
    hw: Any,
    out: str | Path,
    *,
    shape: Shape | None = None,
    measurements: Sequence[str | Path] = (),
    n_values: Sequence[int] | None = None,
    threshold: float = 1.5,
    command: str | None = None,
) -> Path:
    """Write report.md and the six figures into ``out``; return the report's path.

    Everything is checked before anything is written: the shape, the n values (at most
    ``MAX_REPORT_N``: the crossover scan evaluates every n up to the largest), that
    matplotlib is installed and that ``out`` can be created.
    """
    require("matplotlib", "plot", "the report's figures")
    out = output_folder(out, "out")
    spec, shape = load_hardware(hw), shape or Shape()
    check(threshold=threshold, **_shape_fields(shape))
    ns = np.unique(check_columns(n=plots.DEFAULT_N if n_values is None else n_values)["n"])
    if ns[-1] > MAX_REPORT_N:
        raise fail("n", int(ns[-1]), f"exceeds the report's limit {MAX_REPORT_N:,}")
    ns = ns.astype(float)
    measured = match_measurements(measurements, spec, shape) if measurements else None
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    try:
        command = command or f"perfmodel report --hw {hw} --out {out}"
        return _write(spec, out, shape, measured, ns, threshold, command)
    finally:
        if created and not any(out.iterdir()):  # refused or failed before any file
            out.rmdir()


def _shape_fields(shape: Shape) -> dict[str, Any]:
    names = ("d", "h", "h_kv", "batch", "dtype", "causal", "block_q", "block_k", "tokens")
    return {k: getattr(shape, k) for k in names}


def _write(
    spec: Any,
    out: Path,
    shape: Shape,
    measured: Any,
    ns: np.ndarray,
    threshold: float,
    command: str,
) -> Path:
    figures = {}
    for name, fn in plots.FIGURES.items():
        kwargs: dict[str, Any] = {"shape": shape}
        if name == "time_breakdown":
            kwargs["n"] = N_REFERENCE
        elif name == "training":  # model only: the measured files hold forward passes
            kwargs["n_values"] = [int(n) for n in ns]
        else:
            kwargs["measured"] = measured
            if name != "memory":
                kwargs["n_values"] = [int(n) for n in ns]
        if name == "speedup":
            kwargs["threshold"] = threshold
        figures[name] = fn(spec, out / f"{name}.png", **kwargs)
    c = conclusions(spec, shape, threshold=threshold, n_max=int(ns[-1]))
    text = render_markdown(spec, shape, ns, c, figures, measured, command)
    path = out / "report.md"
    write_text(path, text)
    return path
