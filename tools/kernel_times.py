"""Per-kernel model times beside the kernels CUPTI listed (details files' kernel lists).

The development check of where a call's time goes (issue 21): for each committed point
whose details record a kernel list (``[name, seconds]`` per kernel of one call), today's
model time of each kernel it evaluates (the floor plus every effect, per kernel) and the
measured kernels, both in call order::

    python tools/kernel_times.py --impl cudnn --phase train          # every details file
    python tools/kernel_times.py --only heldout11 --impl cudnn --d 256
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import perfmodel.evaluate as ev
from perfmodel import predict
from perfmodel.catalog.data import data_dir

_SHORT = (
    ("fprop", "fprop"), ("bprop", "bprop"), ("compute_dot_do_o", "dot_do_o"),
    ("convert_dq", "convert_dq"), ("fmha_reduce_head", "reduce_head"),
    ("lean_reduction", "combine"), ("flash_decode", "decode"),
)  # fmt: skip


def model_kernels(**shape: Any) -> list[tuple[str, float]]:
    """(name, seconds) of each kernel the model evaluates for one prediction's flash side,
    after every effect (``evaluate.EFFECTS``), in the model's order."""
    seen: list[list[tuple[str, float]]] = []
    original = ev.estimate_steps

    def recording(kernels, calibration, launch, **kw):
        out = original(kernels, calibration, launch, **kw)
        fractions = ev.roof_fractions(calibration, kw.get("d"), kw.get("fp16"), kw.get("blocked"))
        context = ev.Context(
            calibration, fractions, launch, ev.compute_overlap_at(calibration, kw.get("d"))
        )
        rows = []
        for k in kernels:
            state = ev.KernelTime(k.floor)
            for effect in ev.EFFECTS:
                state = effect(state, k, context)
            rows.append((k.name, float(state.seconds() + state.fixed)))
        seen.append(rows)
        return out

    ev.estimate_steps = recording
    try:
        predict(**shape)
    finally:
        ev.estimate_steps = original
    # the flash side's kernels: the naive side's cost models name their passes
    naive = {"qk", "softmax", "pv", "bwd_dv", "bwd_dp", "bwd_ds", "bwd_dk"}
    return [row for rows in seen if not naive & {k for k, _ in rows} for row in rows]


def short(name: str) -> str:
    for part, label in _SHORT:
        if part in name:
            return label
    return name[:28]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="comma-separated parts of details file names")
    ap.add_argument("--impl", default="cudnn")
    ap.add_argument("--phase", default="", help="forward, train, decode (default: every)")
    ap.add_argument("--d", type=int, default=0, help="one head dim only")
    ap.add_argument("--hw", default="h200")
    args = ap.parse_args(argv)
    only = [w for w in args.only.split(",") if w]
    for path in sorted(Path(data_dir("measurements"), "details").glob("*.details.json")):
        if only and not any(w in path.name for w in only):
            continue
        for p in json.loads(path.read_text()).get("points", []):
            kernels = p.get("kernel_list")
            if p.get("implementation") != args.impl or not isinstance(kernels, list):
                continue
            phase = p.get("phase") or "decode"
            if (args.phase and phase != args.phase) or (args.d and p["d"] != args.d):
                continue
            if p.get("status", "ok") != "ok":
                continue
            mode = {"train": "train", "decode": "forward"}.get(phase, "forward")
            family = p.get("family") or args.impl
            dtype = {"float16": "fp16", "bfloat16": "bf16"}.get(p["dtype"], p["dtype"])
            try:
                model = model_kernels(
                    hw=args.hw, n=p["n"], kv_len=p["kv_len"], d=p["d"], h=p["h"],
                    h_kv=p["h_kv"], batch=p["batch"], dtype=dtype, causal=p["causal"],
                    kernel=family, mode=mode,
                )  # fmt: skip
            except Exception as err:  # noqa: BLE001 - a shape the model refuses
                print(f"{path.name}: {err}")
                continue
            measured = sum(t for _, t in kernels)
            predicted = sum(t for _, t in model)
            print(
                f"{path.name.split('.')[0]} {phase} b={p['batch']} n={p['n']} m={p['kv_len']} "
                f"h={p['h']}/{p['h_kv']} d={p['d']} c={int(p['causal'])} {dtype}: "
                f"model {predicted * 1e6:.1f} us, kernels {measured * 1e6:.1f} us "
                f"({predicted / measured - 1:+.1%})"
            )
            print("   model:    " + ", ".join(f"{k} {t * 1e6:.1f}" for k, t in model))
            print("   measured: " + ", ".join(f"{short(k)} {t * 1e6:.1f}" for k, t in kernels))
    return 0


if __name__ == "__main__":
    sys.exit(main())
