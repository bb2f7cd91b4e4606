"""Predicted against measured on the committed H200 data: parity and time-vs-n figures.

    python examples/plot_validation.py [OUT_DIR]

Writes parity.png (datasheet model, and each point's leave-one-out prediction from a
profile fitted without it) and time_vs_n.png (measured points over the fitted model).
"""

from __future__ import annotations

import sys
from pathlib import Path

from perfmodel.catalog.data import data_dir
from perfmodel.validation.compare import validate
from perfmodel.validation.figures import parity_plot, time_vs_n_plot
from perfmodel.validation.report import report_text


def main(out: str | Path = "validation-out") -> list[Path]:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    data = sorted(data_dir("measurements").glob("h200-2*.json"))
    rows, summary = validate(data, fit_profiles=True, run_prefix="sweep")
    print(report_text(rows, summary))
    fitted = {k: s.calibration for k, s in summary.items() if s.calibration is not None}
    loo = {k: s.loo_errors for k, s in summary.items()}
    fitted_rows, _ = validate(data, calibration=fitted, run_prefix="sweep")
    return [
        parity_plot(rows, out / "parity.png", loo),
        time_vs_n_plot(fitted_rows, out / "time_vs_n.png", "fitted profiles"),
    ]


if __name__ == "__main__":
    print(*main(*sys.argv[1:2]), sep="\n")
