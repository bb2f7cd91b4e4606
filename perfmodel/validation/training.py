"""The backward and training-step model against measurements it was never fitted to.

Two sources: our H200 run (``specs/measurements/h200-backward-2026-11-30.json``: ours,
cuDNN and XLA's naive attention, forward, backward and train device times) and published
bars: FlashAttention-2's forward+backward on an A100 and an H100
(``specs/published/fa2-{a100,h100}-fwd-bwd-fp16.toml``) and FlashAttention-3's backward
figure on an H100 (``fa3-h100-backward-fp16.toml``: FA-2, cuDNN, FA-3, standard
attention). Every prediction is ``perfmodel.predict`` with the implementation's kernel
family (``IMPLEMENTATIONS``) and its unfitted profile (the device's measured ceilings
where it has them, else the datasheet); nothing here is fitted, so every point is held
out. Error = predicted / measured − 1 on device time.

The backward each family runs is the family's own ``[backward]`` (``specs/kernels``):
ours the Triton two-pass kernels, FA-2 / FA-3 / cuDNN the float32-dQ-atomic structure at
their tiles; the naive side (XLA's, PyTorch's standard attention) the minimal naive
forward and backward (a floor: the fewest n×n trips).

    python -m perfmodel.validation.training          # the table of errors
"""

from __future__ import annotations

import argparse
import statistics
import tomllib
from pathlib import Path
from typing import Any, cast

from perfmodel.catalog.data import data_dir
from perfmodel.costs.nominal import nominal_flops
from perfmodel.prediction import predict
from perfmodel.validation.compare import family_as_run, modelled
from perfmodel.validation.fitting import relative_error
from perfmodel.validation.measured import load_measurements

H200_RUN = "h200-backward-2026-11-30.json"
#: Published bars (``specs/published``): FA-2's forward+backward on an A100 and an H100,
#: FA-3's backward figure on an H100.
PUBLISHED = {
    "fa2-a100": "fa2-a100-fwd-bwd-fp16.toml",
    "fa2-h100": "fa2-h100-fwd-bwd-fp16.toml",
    "fa3-h100": "fa3-h100-backward-fp16.toml",
}
#: Each implementation as the model costs it: the side, and the flash side's kernel family.
IMPLEMENTATIONS: dict[str, tuple[str, str | None]] = {
    "pallas_flash": ("flash", "pallas-triton"),
    "cudnn": ("flash", "cudnn"),
    "fa2": ("flash", "fa2"),
    "fa3": ("flash", "fa3"),
    "naive_jit": ("naive", None),
    "naive": ("naive", None),
}


def predicted(
    impl: str,
    point: dict[str, Any],
    phase: str,
    hw: str,
    dtype: str,
    ceilings: str = "measured",
) -> tuple[float, float]:
    """(time_s, t_lower_s) of one phase ("forward", "backward" or "train") of ``impl``, with
    the backward the point ran where it records one (``Point.backward_family``)."""
    side, family = IMPLEMENTATIONS[impl]
    padding = point.get("sequence_padding")
    kernel: Any = family_as_run(family, point.get("backward_family"), padding)
    pred = predict(
        n=point["n"],
        hw=hw,
        kv_len=point["kv_len"],
        d=point["d"],
        h=point["h"],
        h_kv=point["h_kv"],
        batch=point["batch"],
        dtype=dtype,
        causal=point["causal"],
        kernel=kernel,
        mode=phase,
        ceilings=ceilings,
    )
    part = getattr(pred, side)
    return part.time_s, part.t_lower_s


def _row(
    source: str,
    impl: str,
    phase: str,
    point: dict[str, Any],
    measured_s: float,
    hw: str,
    dtype: str,
    ceilings: str = "measured",
) -> dict[str, Any]:
    time_s, floor_s = predicted(impl, point, phase, hw, dtype, ceilings)
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
    """Every modelled point (ok, not a tuning variant) of the newest run in the H200
    backward file, each at its implementation's default launch."""
    pairs = load_measurements(path or data_dir("measurements") / H200_RUN)
    newest = pairs[-1][0].run_id
    rows = []
    for run, p in pairs:
        if run.run_id != newest or not modelled(p) or p.phase is None:
            continue
        point = p.model_dump()
        dtype = {"bfloat16": "bf16", "float16": "fp16"}[p.dtype]
        timed = cast(float, p.median_s)  # modelled: timed
        rows.append(_row("h200", p.implementation, p.phase, point, timed, "h200", dtype))
    return rows


def published_rows(paths: dict[str, Path] | None = None) -> list[dict[str, Any]]:
    """The published bars, as times from their TFLOP/s (the nominal convention of each
    file's ``mode``: forward + backward 3.5x the forward's FLOPs, backward 2.5x), against
    datasheet-only predictions (``ceilings="datasheet"``): the papers' GPUs are not the
    one our ceilings files measured (issue 21's datasheet-only target)."""
    paths = paths or {k: data_dir("published") / f for k, f in PUBLISHED.items()}
    rows = []
    for source, path in paths.items():
        data = tomllib.loads(Path(path).read_text())
        mode = data.get("mode", "train")
        for p in data["points"]:
            if "tflops" not in p:
                continue
            shape = {k: p[k] for k in ("batch", "h", "n", "kv_len", "d", "causal")}
            seconds = nominal_flops(**shape, mode=mode) / (p["tflops"] * 1e12)
            device, dtype = data["device"], data["dtype"]
            rows.append(_row(source, p["family"], mode, p, seconds, device, dtype, "datasheet"))
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
