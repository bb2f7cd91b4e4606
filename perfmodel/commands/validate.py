"""``perfmodel validate FILE...``: predicted against measured, per implementation."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from perfmodel.validation.compare import ImplementationSummary, Row


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("validate", help="compare predictions with measured points")
    p.add_argument(
        "files", nargs="+", help="measurement JSON files (perfmodel.validation.measured)"
    )
    p.add_argument(
        "--hw", default=None, help="device name or .toml path (default: each run's device name)"
    )
    p.add_argument("--fit", action="store_true", help="fit calibration profiles, report LOO error")
    p.add_argument(
        "--save-calibration",
        metavar="DIR",
        default=None,
        help="write fitted profiles as TOML into DIR (implies --fit)",
    )
    p.add_argument("--plot", metavar="DIR", default=None, help="write parity and time-vs-n PNGs")
    p.add_argument(
        "--runs",
        default=None,
        metavar="PREFIXES",
        help="keep runs whose id starts with one of these: sweep,onehead",
    )
    p.add_argument(
        "--holdout",
        default=None,
        metavar="SPEC",
        help="fit on the other points, report the error on these: e.g. run=heldout or "
        "d>=256,causal=true (perfmodel.validation.holdout); --published adds the papers' tables",
    )
    p.add_argument("--published", action="store_true", help="with --holdout: published tables too")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def _holdout(args: argparse.Namespace) -> int:
    from perfmodel.validation.holdout import holdout, published_rows, report, report_json
    from perfmodel.validation.measured import load_measurements

    figures = holdout(load_measurements(args.files), args.holdout, args.hw)
    published = published_rows() if args.published else []
    if args.json:
        print(json.dumps(report_json(figures, published), indent=2))
    else:
        print(report(figures, published))
    return 0


def _refuse_unused(args: argparse.Namespace) -> None:
    """Options the chosen form does not read (--holdout or the fit) are refused."""
    from perfmodel.arguments import fail

    fit_only = dict(fit=False, save_calibration=None, plot=None, runs=None)
    unused = fit_only if args.holdout is not None else dict(published=False)
    for dest, default in unused.items():
        if getattr(args, dest) != default:
            form = "--holdout" if dest == "published" else "the fit (without --holdout)"
            raise fail(
                "--" + dest.replace("_", "-"), getattr(args, dest), f"is read by {form} only"
            )
    if args.runs is not None and not args.runs.strip(","):
        raise fail("--runs", args.runs, "names no run prefix; leave it out for every run")


def run(args: argparse.Namespace) -> int:
    _refuse_unused(args)
    if args.holdout is not None:
        return _holdout(args)
    from perfmodel.arguments import output_folder, require
    from perfmodel.atomic import write_text
    from perfmodel.validation.compare import validate
    from perfmodel.validation.report import profile_toml, report_json, report_text

    # Before the fit (tens of seconds): where the results go, and what the figures need.
    for name, folder in (("--save-calibration", args.save_calibration), ("--plot", args.plot)):
        if folder is not None:
            output_folder(folder, name)
    if args.plot:
        require("matplotlib", "plot", "validate --plot")
    fit = args.fit or args.save_calibration is not None

    def fitted(implementation: str, points: int, profile: Any) -> None:
        """Save each profile as soon as it is fitted (Ctrl-C keeps those), say so."""
        if args.save_calibration:
            out = Path(args.save_calibration)
            out.mkdir(parents=True, exist_ok=True)
            write_text(out / f"{profile.name}.toml", profile_toml(profile))
        if sys.stderr.isatty():  # progress for a person; pipes and tests get one line or none
            print(f"perfmodel: fitted {implementation} ({points} points)", file=sys.stderr)

    rows, summary = validate(
        args.files, args.hw, fit_profiles=fit, run_prefix=args.runs, on_fit=fitted
    )
    if args.plot:
        _plots(args, rows, summary)
    print(
        json.dumps(report_json(rows, summary), indent=2)
        if args.json
        else report_text(rows, summary)
    )
    return 1 if any(s.violations for s in summary.values()) else 0


def _plots(
    args: argparse.Namespace, rows: list[Row], summary: dict[str, ImplementationSummary]
) -> None:
    """Parity (datasheet and, with --fit, leave-one-out) and time against n (the fitted
    profiles' predictions when fitted, else the datasheet model's)."""
    from perfmodel.validation.compare import validate
    from perfmodel.validation.figures import parity_plot, time_vs_n_plot

    out = Path(args.plot)
    out.mkdir(parents=True, exist_ok=True)
    fitted = {k: s.calibration for k, s in summary.items() if s.calibration is not None}
    loo = {k: s.loo_errors for k, s in summary.items() if s.loo_errors}
    parity_plot(rows, out / "parity.png", loo or None)
    if fitted:
        rows, _ = validate(args.files, args.hw, calibration=fitted, run_prefix=args.runs)
    time_vs_n_plot(rows, out / "time_vs_n.png", "fitted profiles" if fitted else "datasheet model")
