"""``perfmodel report``: a scaling report over n (report.md plus five figures)."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfmodel.vocabulary import SHAPE_DEFAULTS as SHAPE

if TYPE_CHECKING:
    from perfmodel.shape import Shape


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("report", help="sweep n: conclusions, misconceptions, figures")
    p.add_argument(
        "--hw", required=True, help="device name, alias or spec .toml path (perfmodel hw list)"
    )
    p.add_argument("--out", required=True, help="folder for report.md and the PNGs")
    p.add_argument(
        "--measurements",
        nargs="+",
        action="extend",
        default=[],
        metavar="FILE",
        help="measured points (perfmodel.validation.measured JSON) to show beside the model",
    )
    p.add_argument("--d", type=int, default=SHAPE["d"], help="head dimension")
    p.add_argument(
        "--h",
        type=int,
        default=None,
        help=f"query heads (default {SHAPE['h']}, or the measurements' own)",
    )
    p.add_argument("--h-kv", type=int, default=None, help="key/value heads (GQA)")
    p.add_argument("--batch", type=int, default=SHAPE["batch"], help="sequences")
    p.add_argument(
        "--tokens",
        type=int,
        default=None,
        help="instead of --batch: batch = max(1, TOKENS // n) at each n "
        "(default: the measurements' own, when they keep b·n fixed)",
    )
    p.add_argument(
        "--dtype", default=None, help="{known:dtypes} (default fp16, or the measurements' own)"
    )
    p.add_argument("--causal", action="store_true", help="causal mask (default: none)")
    p.add_argument("--block-q", type=int, default=128, help="B_r")
    p.add_argument("--block-k", type=int, default=128, help="B_c")
    p.add_argument(
        "--n",
        type=int,
        nargs="+",
        default=None,
        help="the n values of the sweep (default: powers of two, 128 to 128K)",
    )
    p.add_argument("--cp", type=int, default=1, help="also: the sequence split over CP devices")
    p.add_argument("--cp-scheme", default="ring", help="ring (default), allgather or ulysses")
    p.add_argument("--tp", type=int, default=1, help="also: the heads split over TP devices")
    p.add_argument(
        "--threshold",
        type=float,
        default=1.5,
        help="speedup that counts as significant (1.5: flash 50%% faster)",
    )
    p.add_argument("--json", action="store_true", help="the written files, machine-readable")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from perfmodel.arguments import output_folder, require
    from perfmodel.report.build import write_report
    from perfmodel.shape import Shape

    require("matplotlib", "plot", "perfmodel report")  # before any work: say what to install
    output_folder(args.out, "--out")
    _defaults_from_measurements(args)  # the shape and n are checked by write_report
    shape = Shape(
        d=args.d,
        h=args.h,
        h_kv=args.h_kv,
        batch=args.batch,
        dtype=args.dtype,
        causal=args.causal,
        block_q=args.block_q,
        block_k=args.block_k,
        tokens=args.tokens,
    )
    split = (args.cp, args.tp, args.cp_scheme) != (1, 1, "ring")
    if split:  # before anything is written: a split that cannot run is one error
        _append_split(None, args, shape)
    command = "perfmodel " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    path = write_report(
        args.hw,
        args.out,
        shape=shape,
        measurements=args.measurements,
        n_values=args.n,
        threshold=args.threshold,
        command=command if sys.argv[1:2] == ["report"] else None,
    )
    if split:
        _append_split(path, args, shape)
    if args.json:
        files = sorted(str(f) for f in path.parent.iterdir() if not f.name.startswith("."))
        print(json.dumps({"report": str(path), "files": files}, indent=2))
    else:
        print(path)
    return 0


def _append_split(path: Path | None, args: argparse.Namespace, shape: Shape) -> None:
    """The report's section on the split over devices (``perfmodel.report.parallel``);
    with ``path`` None, only build it (the check before the report is written)."""
    from perfmodel.atomic import write_text
    from perfmodel.report.parallel import split_section

    ns = args.n or [4096, 16384, 65536, 262144, 1048576]
    text = split_section(
        args.hw,
        n_values=ns,
        cp=args.cp,
        scheme=args.cp_scheme,
        tp=args.tp,
        d=shape.d,
        h=shape.h,
        h_kv=shape.h_kv,
        batch=shape.batch,
        dtype=shape.dtype,
        causal=shape.causal,
    )
    if path is not None:
        write_text(path, path.read_text() + "\n" + text)


def _defaults_from_measurements(args: argparse.Namespace) -> None:
    """Unset --h, --dtype and --tokens follow the measured points (their most common
    value), so that ``--measurements FILE`` alone compares like with like; with no
    measurements they default to one head, fp16, batch 1."""
    from collections import Counter

    from perfmodel.validation.compare import dtype_name
    from perfmodel.validation.measured import load_measurements

    points = [p for _, p in load_measurements(args.measurements)] if args.measurements else []
    points = [p for p in points if p.implementation in ("pallas_flash", "naive")]

    def most_common(values: list[Any]) -> Any:
        return Counter(values).most_common(1)[0][0] if values else None

    if args.h is None:
        args.h = most_common([p.h for p in points]) or 1
    if args.dtype is None:
        measured = most_common([p.dtype for p in points])
        args.dtype = dtype_name(str(measured)) if measured else "fp16"
    tokens = {p.batch * p.n for p in points if p.batch > 1}
    if args.tokens is None and args.batch == 1 and len(tokens) == 1:
        args.tokens = tokens.pop()
