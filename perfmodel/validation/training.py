"""The backward and training-step model against measurements it was never fitted to.

Two sources: our H200 run (``specs/measurements/h200-backward-*.json``: ours, cuDNN and
XLA's naive attention, forward, backward and train device times) and the
FlashAttention-2 forward+backward bars on an A100 and an H100
(``specs/published/fa2-{a100,h100}-fwd-bwd-fp16.toml``). Every prediction uses the default
profile (datasheet roofs derated by the shipped defaults); nothing here is fitted, so
every point is held out. Error = predicted / measured − 1 on device time.

How each implementation is modelled (``IMPLEMENTATIONS``): ours is the two-pass dQ
family with its measured backward tile; cuDNN and FlashAttention-2 the atomic family
(FA-2 Algorithm 2); XLA's naive attention and PyTorch's standard attention the minimal
naive forward and backward (a floor: the fewest n×n trips).

    python -m perfmodel.validation.training          # the table of errors
"""

from __future__ import annotations

import argparse
import json
import statistics
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfmodel.catalog.calibration import load_calibration
from perfmodel.catalog.data import data_dir
from perfmodel.catalog.hardware import HardwareSpec, load_hardware
from perfmodel.costs.nominal import nominal_flops
from perfmodel.evaluate import evaluate, model_key, shape_values
from perfmodel.validation.fitting import relative_error
from perfmodel.vocabulary import symbol_values

H200_RUN = "h200-backward-2026-11-30.json"
#: Published forward+backward bars (``specs/published``): FA-2 on an A100 and an H100.
PUBLISHED = {"fa2-a100": "fa2-a100-fwd-bwd-fp16.toml", "fa2-h100": "fa2-h100-fwd-bwd-fp16.toml"}


@dataclass(frozen=True)
class Family:
    """How one implementation is modelled: algorithm, dQ family, forward and backward tiles."""

    algorithm: str
    dq: str
    forward_tile: tuple[int, int]
    backward_tile: tuple[int, int]


IMPLEMENTATIONS = {
    "pallas_flash": Family("flash", "two_pass", (128, 128), (64, 64)),
    "cudnn": Family("flash", "atomic", (128, 128), (64, 128)),
    "xla_naive": Family("naive", "atomic", (128, 128), (128, 128)),
    "fa2": Family("flash", "atomic", (128, 128), (64, 128)),
    "naive": Family("naive", "atomic", (128, 128), (128, 128)),
}


def predicted(
    family: Family, point: dict[str, Any], phase: str, hw: str | HardwareSpec, dtype: str
) -> tuple[float, float]:
    """(time_s, t_lower_s) of one phase: "forward", "backward" or "train"."""
    spec = load_hardware(hw)
    profile = load_calibration(None)
    out = []
    for mode in ("forward", "backward") if phase == "train" else (phase,):
        bq, bk = family.forward_tile if mode == "forward" else family.backward_tile
        sizes = {k: point[k] for k in ("n", "kv_len", "d", "h", "h_kv", "batch")}
        api = dict(sizes, dtype=dtype, block_q=bq, block_k=bk)
        values = shape_values(spec, **symbol_values(**api))
        key = model_key(family.algorithm, mode=mode, dq=family.dq)
        r = evaluate(
            key,
            causal=point["causal"],
            hw=spec,
            peak=spec.peak(dtype),
            values=values,
            calibration=profile,
        )
        out.append((float(r["time_s"]), float(r["t_lower_s"])))  # one point: numbers
    return sum(t for t, _ in out), sum(f for _, f in out)


def _row(
    source: str,
    impl: str,
    phase: str,
    point: dict[str, Any],
    measured_s: float,
    family: Family,
    hw: str,
    dtype: str,
) -> dict[str, Any]:
    time_s, floor_s = predicted(family, point, phase, hw, dtype)
    keys = ("n", "d", "h", "h_kv", "batch", "causal")
    return {
        "source": source,
        "implementation": impl,
        "phase": phase,
        **{k: point[k] for k in keys},
        "measured_s": measured_s,
        "predicted_s": time_s,
        "floor_s": floor_s,
        "error": relative_error(time_s, measured_s),
        "below_floor": measured_s < floor_s,
    }


def h200_rows(path: Path | None = None) -> list[dict[str, Any]]:
    """Every ok, non-tuning point of the newest run in the H200 backward file."""
    path = path or data_dir("measurements") / H200_RUN
    run = json.loads(path.read_text())["runs"][-1]
    rows = []
    for p in run["points"]:
        if p.get("tuning") or p["status"] != "ok":
            continue
        family = IMPLEMENTATIONS[p["implementation"]]
        if p["implementation"] == "pallas_flash" and p.get("backward_config"):
            cfg = p["backward_config"]
            family = Family("flash", "two_pass", (128, 128), (cfg["block_q"], cfg["block_k"]))
        rows.append(
            _row(
                "h200",
                p["implementation"],
                p["phase"],
                p,
                p["device_time_s"],
                family,
                "h200",
                "bf16",
            )
        )
    return rows


def published_rows(paths: dict[str, Path] | None = None) -> list[dict[str, Any]]:
    """The FA-2 paper's forward+backward bars, as times from their TFLOP/s."""
    paths = paths or {k: data_dir("published") / f for k, f in PUBLISHED.items()}
    rows = []
    for source, path in paths.items():
        data = tomllib.loads(Path(path).read_text())
        for p in data["points"]:
            shape = {k: p[k] for k in ("batch", "h", "n", "kv_len", "d", "causal")}
            # the published convention: nominal FLOPs, backward 2.5x the forward
            seconds = nominal_flops(**shape, mode="train") / (p["tflops"] * 1e12)
            family = IMPLEMENTATIONS[p["family"]]
            row = _row(
                source, p["family"], "train", p, seconds, family, data["device"], data["dtype"]
            )
            rows.append(row)
    return rows


def summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Median and max |error| per (source, implementation, phase), points below the floor."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["source"], r["implementation"], r["phase"]), []).append(r)
    out = []
    for (source, impl, phase), rs in sorted(groups.items()):
        errors = [r["error"] for r in rs]
        out.append(
            {
                "source": source,
                "implementation": impl,
                "phase": phase,
                "points": len(rs),
                "median_abs_error": statistics.median(abs(e) for e in errors),
                "max_abs_error": max(abs(e) for e in errors),
                "median_error": statistics.median(errors),
                "below_floor": sum(r["below_floor"] for r in rs),
            }
        )
    return out


def markdown(stats: list[dict[str, Any]]) -> str:
    lines = [
        "| data | implementation | phase | points | median abs err | max abs err | "
        "median err | below floor |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in stats:
        lines.append(
            f"| {s['source']} | {s['implementation']} | {s['phase']} | {s['points']} | "
            f"{s['median_abs_error']:.1%} | {s['max_abs_error']:.1%} | "
            f"{s['median_error']:+.1%} | {s['below_floor']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, help="write every row and the summary as JSON")
    args = ap.parse_args(argv)
    rows = h200_rows() + published_rows()
    stats = summary(rows)
    print(markdown(stats), end="")
    if args.out:
        from perfmodel.atomic import write_json

        write_json(args.out, {"summary": stats, "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
