"""Text, JSON and TOML renderings of a validation (see ``perfmodel.validation.compare``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from perfmodel.catalog.calibration import Calibration
from perfmodel.units import si
from perfmodel.validation.compare import ImplementationSummary, Row


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def report_text(rows: Sequence[Row], summary: dict[str, ImplementationSummary]) -> str:
    w = max([14, *(len(s.implementation) for s in summary.values())])
    lines = [
        f"{len(rows)} measured points; error = predicted / measured - 1",
        f"{'implementation':<{w}} {'points':>6} {'median err':>10} {'median|err|':>12} "
        f"{'max|err|':>9} {'LOO median':>11} {'LOO max':>8} {'below floor':>11}",
    ]
    for s in summary.values():
        lines.append(
            f"{s.implementation:<{w}} {s.count:>6} {s.median_error:>+10.1%} "
            f"{_pct(s.median_abs_error):>12} "
            f"{_pct(s.max_abs_error):>9} {_pct(s.loo_median_abs_error):>11} "
            f"{_pct(s.loo_max_abs_error):>8} {len(s.violations):>11}"
        )
    for s in summary.values():
        if s.calibration is not None:
            lines.append(fit_line(s.calibration))
    lines.append("worst points (uncalibrated):")
    for s in summary.values():
        for r in s.worst:
            lines.append(
                f"  {r.label():<48} measured {si(r.measured_s, 's'):>9} "
                f"predicted {si(r.predicted_s, 's'):>9} ({r.error:+.1%})"
            )
    violations = [r for s in summary.values() for r in s.violations]
    if violations:
        lines.append(f"LOWER-BOUND VIOLATIONS ({len(violations)}): the model is wrong here")
        for r in violations:
            lines.append(
                f"  {r.label()}: fastest {si(r.fastest_s, 's')} < t_lower {si(r.t_lower_s, 's')}"
            )
    else:
        lines.append("lower bound: no measured point is faster than t_lower")
    return "\n".join(lines)


#: Fitted parameters as the report shows them: label, format.
_SHOWN = {
    "matmul_efficiency": ("matmul", "{:.3f}"),
    "memory_efficiency": ("memory", "{:.3f}"),
    "compute_overlap": ("compute overlap", "{:.2f}"),
    "block_overhead_tiles": ("block overhead (tiles)", "{:.2f}"),
    "launch_overhead_s": ("launch", None),
    "dispatch_overhead_s": ("dispatch", None),
}


def fit_line(c: Calibration) -> str:
    """One fitted profile: each free parameter with its standard error and LOO range."""
    values = c.model_dump()
    values["memory_efficiency"] = c.hbm_efficiency
    parts = []
    for key, (label, fmt) in _SHOWN.items():
        if f"{key}_stderr" not in c.fit:
            continue
        err = float(c.fit[f"{key}_stderr"])
        show = (lambda v: si(v, "s")) if fmt is None else fmt.format  # noqa: E731
        text = f"{label} {show(values[key])} ± {show(err)}"
        if f"{key}_loo_range" in c.fit:
            text += f" [{c.fit[f'{key}_loo_range']}]"
        if f"{key}_at_bound" in c.fit:
            text += " (at bound)"
        if f"{key}_determined" in c.fit:
            text = f"{label}: not determined by these points"
        parts.append(text)
    return f"fit {c.name} (± stderr, [LOO range]): " + ", ".join(parts)


def report_json(rows: Sequence[Row], summary: dict[str, ImplementationSummary]) -> dict[str, Any]:
    return {
        "summary": {
            k: {
                "points": s.count,
                "median_error": s.median_error,
                "median_abs_error": s.median_abs_error,
                "max_abs_error": s.max_abs_error,
                "loo_median_abs_error": s.loo_median_abs_error,
                "loo_max_abs_error": s.loo_max_abs_error,
                "violations": len(s.violations),
                "calibration": None if s.calibration is None else s.calibration.model_dump(),
            }
            for k, s in summary.items()
        },
        "points": [
            {
                "label": r.label(),
                "measured_s": r.measured_s,
                "predicted_s": r.predicted_s,
                "t_lower_s": r.t_lower_s,
                "error": r.error,
            }
            for r in rows
        ],
    }


def _toml_value(v: object) -> str:
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, tuple | list):  # matmul_efficiency_by_d: an array of [d, fraction]
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return repr(v)


def profile_toml(c: Calibration) -> str:
    """A calibration profile as TOML (the format ``load_calibration`` reads)."""
    data = c.model_dump(exclude_none=True)
    tables = {k: data.pop(k) for k in ("fit", "sources") if k in data}
    lines = [f"{k} = {_toml_value(v)}" for k, v in data.items()]
    for name, table in tables.items():
        lines += ["", f"[{name}]"] + [f"{k} = {_toml_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"
