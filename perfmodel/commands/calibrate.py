"""``perfmodel calibrate --out FILE``: measure this machine's GPU ceilings into a file.

Runs ``python -m pallas_kernels.ceilings`` (microbenchmarks that are not attention,
about three minutes on one GPU, progress shown) in a child process, checks the file it
wrote (``perfmodel.catalog.ceilings``) and prints it beside the device's datasheet.
``perfmodel.catalog.ceilings.load_ceilings(FILE)`` reads it back by path. ``--sweep``
then times a short attention sweep (``kernel_bench.bench --quick``) and fits a
calibration profile per implementation on it (``perfmodel validate --fit``).

perfmodel itself imports no jax: the kernels run in the child, with this Python.
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from perfmodel.catalog.calibration import Calibration
    from perfmodel.catalog.hardware import HardwareSpec

#: The ceilings script's sections (pallas_kernels/ceilings.py SECTIONS), for --help.
SCRIPT = "pallas_kernels.ceilings"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "calibrate",
        help="measure this GPU's ceilings (and optionally fit profiles) into files",
        description=__doc__.splitlines()[0],
    )
    p.add_argument("--out", required=True, help="the ceilings TOML to write")
    p.add_argument(
        "--device", default="h200", help="the device spec it refines (default: %(default)s)"
    )
    p.add_argument(
        "--budget-s", type=float, default=170.0, help="stop starting work after (%(default)s s)"
    )
    p.add_argument("--sections", default=None, help="comma-separated subset of the script's")
    p.add_argument("--sweep", metavar="FILE", default=None, help="also time a short sweep here")
    p.add_argument(
        "--profiles", metavar="DIR", default=None, help="with --sweep: fitted profiles here"
    )
    p.add_argument(
        "--interpret", action="store_true", help="CPU dry run (Pallas interpreter): nothing real"
    )
    p.set_defaults(func=run)


def _child(args: list[str], what: str) -> None:
    """Run ``python -m ARGS`` with this interpreter, its output shown as it comes."""
    from perfmodel.errors import PerfmodelError

    rc = subprocess.run([sys.executable, "-m", *args], check=False).returncode
    if rc != 0:
        raise PerfmodelError(f"{what} failed (exit {rc}); its output is above")


def run(args: argparse.Namespace) -> int:
    from perfmodel.arguments import fail, output_file, output_folder, require
    from perfmodel.catalog.ceilings import read_ceilings
    from perfmodel.catalog.hardware import load_hardware
    from perfmodel.commands.hw import print_measured

    spec = load_hardware(args.device)
    out = output_file(args.out, "--out", ("toml",))
    if not (math.isfinite(args.budget_s) and args.budget_s > 0):
        raise fail("--budget-s", args.budget_s, "must be a positive number of seconds")
    if args.sweep is not None:
        output_file(args.sweep, "--sweep", ("json",))
    if args.profiles is not None:
        if args.sweep is None:
            raise fail("--profiles", args.profiles, "needs --sweep (profiles are fitted on it)")
        output_folder(args.profiles, "--profiles")
    if args.sections is not None and not args.sections.strip(","):
        raise fail("--sections", args.sections, "names no section; leave it out for all")
    require("jax", "kernels", "perfmodel calibrate")
    script = [SCRIPT, "--out", str(out), "--device", args.device, "--budget-s", str(args.budget_s)]
    if args.sections:
        script += ["--sections", args.sections]
    if args.interpret:
        script.append("--interpret")
    _child(script, f"python -m {SCRIPT}")
    ceilings = read_ceilings(out)
    print_measured(ceilings, spec, title=f"wrote {out}")
    if args.sweep is not None:
        _sweep(args, spec)
    return 0


def _sweep(args: argparse.Namespace, spec: HardwareSpec) -> None:
    """A short attention sweep, then one fitted profile per implementation."""
    from perfmodel.atomic import write_text
    from perfmodel.validation.compare import validate
    from perfmodel.validation.report import profile_toml, report_text

    sweep = Path(args.sweep)
    _child(
        ["kernel_bench.bench", "--quick", "--backend", "auto", "--out", str(sweep)],
        "the attention sweep",
    )
    folder = Path(args.profiles) if args.profiles else sweep.parent

    def save(implementation: str, points: int, profile: Calibration) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        write_text(folder / f"{profile.name}.toml", profile_toml(profile))
        print(f"fitted {implementation} on {points} points: {folder / profile.name}.toml")

    rows, summary = validate(sweep, spec, fit_profiles=True, on_fit=save)
    print(report_text(rows, summary))
