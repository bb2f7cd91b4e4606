"""``perfmodel predict``: the roofline placement of naive and flash attention for one shape."""

from __future__ import annotations

import argparse
import json
from typing import cast

from perfmodel.vocabulary import SHAPE_DEFAULTS as SHAPE


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("predict", help="naive vs flash attention on one device")
    p.add_argument("--n", type=int, required=True, help="query length, tokens")
    p.add_argument(
        "--hw", required=True, help="device name, alias or spec .toml path: {known:devices}"
    )
    p.add_argument("--d", type=int, default=SHAPE["d"], help="head dimension")
    p.add_argument("--h", type=int, default=SHAPE["h"], help="query heads")
    p.add_argument("--h-kv", type=int, default=None, help="key/value heads (GQA; default --h)")
    p.add_argument("--batch", type=int, default=SHAPE["batch"], help="sequences")
    p.add_argument(
        "--dtype",
        default=None,
        help=f"element type: {{known:dtypes}} (default {SHAPE['dtype']}, or the device's own "
        f"16-bit matrix type where it has no {SHAPE['dtype']} peak: bf16 on TPUs)",
    )
    p.add_argument("--kv-len", type=int, default=None, help="key length (default n)")
    p.add_argument("--causal", action="store_true", help="causal mask (default: none)")
    p.add_argument("--block-q", type=int, default=None, help="B_r (default: the family's)")
    p.add_argument("--block-k", type=int, default=None, help="B_c (default: the family's)")
    p.add_argument(
        "--kernel",
        default=None,
        help="kernel family of the fused side: {known:kernels}, or a .toml path "
        "(default fa2, or the family a --calibration refines)",
    )
    p.add_argument(
        "--calibration",
        action="append",
        default=None,
        help="profile name or .toml path, repeatable: {known:calibrations} "
        "(default: datasheet deratings)",
    )
    p.add_argument(
        "--mode",
        default="forward",
        help="forward (default), backward, or train (forward + backward of the attention call)",
    )
    p.add_argument("--cp", type=int, default=1, help="devices the sequence is split over")
    p.add_argument("--cp-scheme", default="ring", help="ring (default), allgather or ulysses")
    p.add_argument("--tp", type=int, default=1, help="devices the heads are split over")
    p.add_argument(
        "--window",
        default=None,
        help="sliding window: W keys (W,0 with --causal, else W,W) or LEFT,RIGHT (default: none)",
    )
    p.add_argument(
        "--window-align",
        default=None,
        help="with --kv-len > n, where the queries sit under --window: bottom_right (the "
        "last n positions, a KV cache's new tokens; default) or top_left (the first n, as "
        "jax.nn and our kernels)",
    )
    p.add_argument(
        "--segments",
        default=None,
        help="packed documents: L (documents of L tokens) or L1,L2,... summing to n "
        "(default: one sequence)",
    )
    p.add_argument(
        "--ceilings",
        default="measured",
        help="measured (default: the device's ceilings file, its missing figures a sibling's "
        "of the same architecture) or datasheet (the sibling's fractions alone, else "
        "default.toml's deratings)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def _ints(option: str, text: str | None) -> tuple[int, ...] | None:
    """``"4095"`` or ``"512,512"`` as integers (the model checks their meaning)."""
    from perfmodel.arguments import fail

    if text is None:
        return None
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        raise fail(option, text, "must be an integer or integers separated by commas") from None


def _window(values: tuple[int, ...] | None) -> int | tuple[int | None, int | None] | None:
    """One integer is W; more are (left, right), their count checked by predict."""
    if values is None or len(values) != 1:
        return cast("tuple[int | None, int | None] | None", values)
    return values[0]


def _segments(values: tuple[int, ...] | None) -> int | list[int] | None:
    """One integer is L (documents of L tokens); more are the documents' lengths."""
    return values if values is None else values[0] if len(values) == 1 else list(values)


def run(args: argparse.Namespace) -> int:
    from perfmodel.catalog.hardware import load_hardware
    from perfmodel.prediction import predict

    spec = load_hardware(args.hw)
    pred = predict(
        n=args.n,
        hw=spec,
        d=args.d,
        h=args.h,
        h_kv=args.h_kv,
        batch=args.batch,
        dtype=spec.default_dtype() if args.dtype is None else args.dtype,
        causal=args.causal,
        block_q=args.block_q,
        block_k=args.block_k,
        kernel=args.kernel,
        kv_len=args.kv_len,
        calibration=args.calibration,
        mode=args.mode,
        cp=args.cp,
        cp_scheme=args.cp_scheme,
        tp=args.tp,
        window=_window(_ints("--window", args.window)),
        **({} if args.window_align is None else {"window_align": args.window_align}),
        segments=_segments(_ints("--segments", args.segments)),
        ceilings=args.ceilings,
    )
    if args.json:
        print(json.dumps({**pred.model_dump(mode="json"), "speedup": pred.speedup}, indent=2))
    else:
        print(pred)
    return 0
