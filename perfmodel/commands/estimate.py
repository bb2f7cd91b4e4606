"""``perfmodel estimate``: a whole model on a device — TTFT, TPOT, throughput, memory."""

from __future__ import annotations

import argparse
import json

from perfmodel.errors import PerfmodelError

SWEEPABLE = ("prompt", "batch")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("estimate", help="whole-model prefill, decode and memory")
    p.add_argument("--model", required=True, help="model name, alias or .toml path: {known:models}")
    p.add_argument(
        "--hw", required=True, help="device name, alias or spec .toml path (perfmodel hw list)"
    )
    p.add_argument("--prompt", type=int, default=2048, help="prompt tokens per request")
    p.add_argument("--output", type=int, default=256, help="generated tokens per request")
    p.add_argument("--batch", type=int, default=1, help="requests served together")
    p.add_argument(
        "--attention",
        default=None,
        help="naive or flash (fa2, flash2); default flash (with --sweep: both, side by side)",
    )
    p.add_argument(
        "--kernel",
        default=None,
        help="fitted kernel family: pallas, cudnn (flash) or xla (naive); default: the "
        "datasheet profile",
    )
    p.add_argument("--kv", default="paged", help="KV cache layout: contiguous or paged")
    p.add_argument("--page-tokens", type=int, default=16, help="tokens per KV page")
    p.add_argument(
        "--context",
        type=int,
        default=None,
        help="KV length of the TPOT step (default: prompt + output/2)",
    )
    p.add_argument("--dtype", default="bf16", help="weights and KV dtype: {known:dtypes}")
    p.add_argument("--tp", type=int, default=1, help="tensor parallel devices (one node)")
    p.add_argument(
        "--sweep", default=None, help="prompt=512,1024 or batch=1,8: naive and flash side by side"
    )
    p.add_argument("--plot", default=None, help="with --sweep: write a figure here")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def _parse_sweep(text: str) -> tuple[str, list[int]]:
    name, _, values = text.partition("=")
    if name not in SWEEPABLE or not values:
        raise PerfmodelError(f"--sweep {text!r} must look like prompt=512,1024 or batch=1,8")
    try:
        return name, [int(v) for v in values.split(",")]
    except ValueError:
        raise PerfmodelError(f"--sweep {text!r}: values must be integers") from None


def run(args: argparse.Namespace) -> int:
    from perfmodel.analysis.estimate import estimate, estimate_sweep, sweep_table

    common = dict(
        model=args.model,
        hw=args.hw,
        prompt=args.prompt,
        output=args.output,
        batch=args.batch,
        kernel=args.kernel,
        dtype=args.dtype,
        kv=args.kv,
        page_tokens=args.page_tokens,
        context=args.context,
        tp=args.tp,
    )
    if args.sweep is None:
        if args.plot is not None:
            raise PerfmodelError("--plot needs --sweep")
        e = estimate(attention="flash" if args.attention is None else args.attention, **common)
        print(json.dumps(e.to_dict(), indent=1) if args.json else e, end="")
        return 0
    if args.attention is not None:
        raise PerfmodelError(
            f"--attention {args.attention} with --sweep: the sweep shows naive and flash side "
            "by side; drop --attention (or --sweep for one)"
        )
    name, values = _parse_sweep(args.sweep)
    if args.plot is not None:
        from perfmodel.arguments import output_file, require

        require("matplotlib", "plot", "--plot")
        output_file(args.plot, "--plot", _figure_formats())
    rows = estimate_sweep(**{**common, name: values})
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        print(sweep_table(rows, name), end="")
    if args.plot:
        from perfmodel.estimate_plot import plot_sweep

        try:
            plot_sweep(rows, name, args.plot)
        except OSError as err:
            raise PerfmodelError(f"--plot={args.plot!r} cannot be written: {err}") from None
    return 0


def _figure_formats() -> tuple[str, ...]:
    """The file suffixes matplotlib can write (png, pdf, svg, ...)."""
    from matplotlib.backend_bases import FigureCanvasBase

    return tuple(FigureCanvasBase.get_supported_filetypes())
