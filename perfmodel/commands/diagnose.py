"""``perfmodel diagnose``: a bottleneck verdict from utilisation figures."""

from __future__ import annotations

import argparse
import dataclasses
import json

from perfmodel.vocabulary import SHAPE_DEFAULTS as SHAPE


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "diagnose",
        help="bandwidth-bound, compute-bound or elsewhere: does flash help?",
        description="Give --hbm-util and --sm-util (fractions of peak, from a profiler), or "
        "--time-s with --n and --hw to derive them from the model's counts.",
    )
    p.add_argument("--hbm-util", type=float, help="HBM bandwidth utilisation, 0..1")
    p.add_argument("--sm-util", type=float, help="SM (tensor-core) utilisation, 0..1")
    p.add_argument("--time-s", type=float, help="a measured attention time, seconds")
    p.add_argument("--n", type=int, help="query length of the measured shape")
    p.add_argument("--hw", help="device name, alias or spec .toml path (perfmodel hw list)")
    p.add_argument(
        "--algorithm",
        default="naive",
        choices=("naive", "flash"),
        help="which implementation was measured",
    )
    p.add_argument(
        "--hbm-bw",
        type=float,
        default=None,
        help="measured HBM rate, bytes/s (read + write); default: datasheet",
    )
    p.add_argument(
        "--matmul-peak",
        type=float,
        default=None,
        help="measured matmul rate, FLOP/s; default: datasheet dtype peak",
    )
    p.add_argument(
        "--attention-only",
        action="store_true",
        help="--hbm-util/--sm-util cover attention kernels alone, not a whole step",
    )
    # the shape's defaults are predict()'s (None here: not given, so a value equal to the
    # default is still seen as given, and refused by the utilisation form)
    p.add_argument(
        "--d", type=int, help=f"head dimension of the measured shape (default: {SHAPE['d']})"
    )
    p.add_argument("--h", type=int, help=f"query heads (default: {SHAPE['h']})")
    p.add_argument("--h-kv", type=int, help="key/value heads (default --h)")
    p.add_argument("--batch", type=int, help=f"sequences (default: {SHAPE['batch']})")
    p.add_argument("--dtype", help="element type: {known:dtypes} (default: fp16)")
    p.add_argument("--causal", action="store_true", help="the measured run was causal")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    # each option's default, kept with the arguments: what differs from it was given
    p.set_defaults(func=run, defaults={a.dest: a.default for a in p._actions})


def run(args: argparse.Namespace) -> int:
    from perfmodel.analysis.diagnose import diagnose, diagnose_time
    from perfmodel.errors import PerfmodelError

    utils = (args.hbm_util, args.sm_util)
    _refuse_unused(args)
    if args.time_s is not None:
        if any(u is not None for u in utils):
            raise PerfmodelError("give either --hbm-util/--sm-util or --time-s, not both")
        if args.n is None or args.hw is None:
            raise PerfmodelError("--time-s needs --n and --hw (the measured shape and device)")
        result = diagnose_time(
            args.time_s,
            args.n,
            args.hw,
            algorithm=args.algorithm,
            hbm_bytes_per_s=args.hbm_bw,
            matmul_flops_per_s=args.matmul_peak,
            causal=args.causal,
            **{k: v for k in _SHAPE if (v := getattr(args, k)) is not None},
        )
    elif None in utils:
        raise PerfmodelError("give both --hbm-util and --sm-util, or --time-s with --n and --hw")
    else:
        result = diagnose(
            args.hbm_util,
            args.sm_util,
            attention_only=args.attention_only,
            algorithm=args.algorithm,
        )
    print(json.dumps(dataclasses.asdict(result), indent=2) if args.json else result)
    return 0


#: Options of one form only: the measured shape and rates of --time-s, and
#: --attention-only of the utilisation figures.
_SHAPE = ("d", "h", "h_kv", "batch", "dtype")
_TIME_ONLY = ("n", "hw", "hbm_bw", "matmul_peak", *_SHAPE, "causal")


def _refuse_unused(args: argparse.Namespace) -> None:
    """An option the chosen form does not read is refused, not ignored."""
    from perfmodel.arguments import fail

    defaults = args.defaults
    unused = ("attention_only",) if args.time_s is not None else _TIME_ONLY
    for dest in unused:
        if getattr(args, dest) != defaults[dest]:
            form = "--hbm-util/--sm-util" if dest == "attention_only" else "--time-s"
            raise fail(
                "--" + dest.replace("_", "-"), getattr(args, dest), f"is read with {form} only"
            )
