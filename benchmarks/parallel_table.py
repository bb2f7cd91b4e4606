"""Context-parallel attention: measured against the model, as a markdown table.

    python3 benchmarks/parallel_table.py specs/measurements/h200x2-parallel-2026-11-30.json
    python3 benchmarks/parallel_table.py FILE --links measured   # the links the run measured
    python3 benchmarks/parallel_table.py --predict 4 8 --n 65536 131072   # before a run

Each multi-GPU point: measured time (calls queued back to back), the model's time
(``perfmodel.parallel.predict_parallel`` with the single-GPU profile
``h200-pallas_flash``) and its error ``predicted / measured - 1``; the measured speed-up
over one GPU at the same total n, and the model's. ``--links datasheet`` (the default)
is the prediction written before the run: NVLink at the datasheet's 450 GB/s, no
latency. ``--links measured`` uses the ppermute / all-gather / all-to-all bandwidths
this run measured at 1 GiB per device (``specs/devices/h200-sxm.toml``, links.measured).
"""

from __future__ import annotations

import argparse
import json
import statistics

from perfmodel.catalog.hardware import load_hardware
from perfmodel.parallel import LinkRates, predict_parallel
from perfmodel.validation.fitting import relative_error

PROFILE = "h200-pallas_flash"


def _links(scheme: str, which: str) -> LinkRates:
    spec = load_hardware("h200")
    return LinkRates.of(spec, None if which == "datasheet" else scheme)


def rows(data: dict, which: str = "datasheet") -> list[dict]:
    """One row per multi-GPU point, with its one-GPU peer from the same run."""
    points = [p for p in data["points"] if p["status"] == "ok"]
    key = lambda p: (p["n"], p["h"], p["h_kv"], p["causal"])  # noqa: E731
    one = {key(p): p["time_s"] for p in points if p["scheme"] == "one_gpu"}
    out = []
    for p in points:
        if p["scheme"] == "one_gpu" or key(p) not in one:
            continue
        pred = predict_parallel(
            p["n"],
            "h200",
            cp=p["devices"],
            scheme=p["scheme"],
            h=p["h"],
            h_kv=p["h_kv"],
            d=p["d"],
            causal=p["causal"],
            balance=p["balance"],
            dtype="bf16",
            calibration=PROFILE,
            links=_links(p["scheme"], which),
        )
        out.append(
            dict(
                n=p["n"],
                heads=f"{p['h']}/{p['h_kv']}",
                causal=p["causal"],
                scheme=p["scheme"],
                balance=p["balance"],
                measured_s=p["time_s"],
                predicted_s=pred.time_s,
                error=relative_error(pred.time_s, p["time_s"]),
                one_gpu_s=one[key(p)],
                speedup=one[key(p)] / p["time_s"],
                predicted_speedup=pred.speedup,
                speedup_error=relative_error(pred.speedup, one[key(p)] / p["time_s"]),
            )
        )
    return out


def markdown(table: list[dict]) -> str:
    head = (
        "| n | heads | causal | scheme | balance | one GPU ms | measured ms | model ms | "
        "error | speed-up | model speed-up | speed-up error |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    body = "".join(
        f"| {r['n']} | {r['heads']} | {r['causal']} | {r['scheme']} | {r['balance']} | "
        f"{r['one_gpu_s'] * 1e3:.2f} | {r['measured_s'] * 1e3:.2f} | "
        f"{r['predicted_s'] * 1e3:.2f} | "
        f"{r['error']:+.1%} | {r['speedup']:.2f} | {r['predicted_speedup']:.2f} | "
        f"{r['speedup_error']:+.1%} |\n"
        for r in sorted(table, key=lambda r: (r["heads"], r["n"], r["causal"], r["scheme"]))
    )
    return head + body


def summary(table: list[dict]) -> str:
    errs = [abs(r["error"]) for r in table]
    sp = [abs(r["speedup_error"]) for r in table]
    inside = sum(e <= 0.15 for e in errs)
    return (
        f"{len(table)} points: time error median {statistics.median(errs):.1%}, "
        f"max {max(errs):.1%}, {inside}/{len(table)} within 15%; "
        f"speed-up error median {statistics.median(sp):.1%}, max {max(sp):.1%}"
    )


def predictions(devices, sizes, which: str = "measured") -> str:
    """The model's table before a run: each scheme's time and speed-up on each count."""
    lines = [
        "| GPUs | n | heads | causal | one GPU ms | ring ms | all-gather ms | Ulysses ms "
        "| speed-up ring / ag / Ulysses |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    schemes = ("ring", "allgather", "ulysses")
    for p in devices:
        for h, h_kv in ((16, 16), (16, 2)):
            for n in sizes:
                for causal in (False, True):
                    kw = dict(h=h, h_kv=h_kv, causal=causal, calibration=PROFILE, dtype="bf16")
                    r = {
                        s: predict_parallel(n, "h200", cp=p, scheme=s, links=_links(s, which), **kw)
                        for s in schemes
                    }
                    times = " | ".join(f"{r[s].time_s * 1e3:.1f}" for s in schemes)
                    ups = " / ".join(f"{r[s].speedup:.2f}" for s in schemes)
                    one = r["ring"].one_device_s * 1e3
                    lines.append(
                        f"| {p} | {n} | {h}/{h_kv} | {causal} | {one:.1f} | {times} | {ups} |"
                    )
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("measurements", nargs="?")
    ap.add_argument(
        "--links",
        choices=("datasheet", "measured"),
        default=None,
        help="default: datasheet against a measurements file, measured for --predict",
    )
    ap.add_argument("--predict", type=int, nargs="+", help="no file: predictions for these counts")
    ap.add_argument("--n", type=int, nargs="+", default=[65536, 131072, 262144, 524288])
    args = ap.parse_args(argv)
    if args.predict:
        print(predictions(args.predict, args.n, args.links or "measured"))
        return 0
    if not args.measurements:
        ap.error("give a measurements file, or --predict")
    with open(args.measurements) as f:
        data = json.load(f)
    table = rows(data, args.links or "datasheet")
    print(markdown(table))
    print(summary(table))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
