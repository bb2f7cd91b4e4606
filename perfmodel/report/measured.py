"""Measured points beside the model's numbers for the same shape."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfmodel.analysis.asymptotics import along_n
from perfmodel.analysis.diagnose import diagnose, utilisation_from_time
from perfmodel.catalog.hardware import HardwareSpec, load_hardware
from perfmodel.prediction import predict
from perfmodel.shape import Shape
from perfmodel.validation.compare import ALGORITHM_OF, dtype_name
from perfmodel.validation.measured import Point, load_measurements

if TYPE_CHECKING:
    from perfmodel.report.conclusions import Conclusions


@dataclass(frozen=True)
class ModelledPoint:
    """A measured point (:class:`~perfmodel.validation.measured.Point`, the one measured
    type) beside the model's numbers for its own shape, and a diagnosis of its time."""

    point: Point
    algorithm: str  #: the cost model that describes its implementation
    predicted_s: float
    model_flops: float
    model_intensity: float
    model_footprint_bytes: float
    hbm_util: float | None = None  #: model HBM bytes / measured time / run's copy rate
    sm_util: float | None = None  #: model matmul FLOPs / measured time / run's matmul rate
    verdict: str | None = None  #: perfmodel.analysis.diagnose's verdict on those


def match_measurements(paths: Sequence[str | Path], hw: Any, shape: Shape) -> list[ModelledPoint]:
    """Points of the files with this shape's d, h, h_kv, dtype and causality (any batch).

    Per (implementation, n, batch) the fastest 'ok' point is kept (a tuning run times
    several tiles), or else the last failed one. The model is evaluated at the point's
    own batch and tiles. The model is linear in batch (up to launches and idle SMs), so
    tokens/s and TFLOP/s of a point at another batch compare with the curves.
    """
    spec = load_hardware(hw)
    h_kv = shape.h if shape.h_kv is None else shape.h_kv
    want = (shape.d, shape.h, h_kv, shape.dtype, shape.causal)
    best: dict[tuple[str, int, int], Any] = {}
    for run, p in load_measurements(list(paths)):
        if p.implementation not in ALGORITHM_OF or p.kv_len != p.n:
            continue
        if (p.d, p.h, p.h_kv, dtype_name(p.dtype), p.causal) != want:
            continue
        key = (p.implementation, p.n, p.batch)
        old = best.get(key, (None, None))[1]
        if old is None or (p.status == "ok" and (old.status != "ok" or p.median_s < old.median_s)):
            best[key] = (run, p)
    return [_measured_point(spec, shape, run, p) for run, p in best.values()]


def _measured_point(spec: HardwareSpec, shape: Shape, run: Any, p: Any) -> ModelledPoint:
    algo = ALGORITHM_OF[p.implementation]
    at = replace(
        shape,
        batch=p.batch,
        tokens=None,
        block_q=p.block_q or shape.block_q,
        block_k=p.block_k or shape.block_k,
    )
    model = getattr(predict(n=p.n, hw=spec, **at.kwargs(p.n)), algo)
    hbm = sm = verdict = None
    if p.status == "ok":
        ceil = run.ceilings  # the rates measured in the same run, where they apply
        peak = ceil.matmul_bf16_flops_per_s if ceil and at.dtype == "bf16" else None
        hbm, sm = utilisation_from_time(
            p.median_s,
            p.n,
            spec,
            algorithm=algo,
            hbm_bytes_per_s=ceil.copy_bytes_per_s if ceil else None,
            matmul_flops_per_s=peak,
            **at.kwargs(p.n),
        )
        verdict = (
            diagnose(hbm, sm, attention_only=True).verdict
            if max(hbm, sm) <= 1
            else "faster than the run's measured rates"
        )
    return ModelledPoint(
        point=p,
        algorithm=algo,
        predicted_s=model.time_s,
        model_flops=model.flops,
        model_intensity=model.intensity,
        model_footprint_bytes=_footprint(spec, p.n, at, algo),
        hbm_util=hbm,
        sm_util=sm,
        verdict=verdict,
    )


def _footprint(spec: HardwareSpec, n: int, shape: Shape, algo: str) -> float:
    return float(along_n(spec, [n], shape)[f"{algo}.footprint_bytes"][0])


def measured_pairs(points: Sequence[ModelledPoint]) -> list[tuple[ModelledPoint, ModelledPoint]]:
    """(naive, pallas_flash) pairs timed at the same n and batch, by n."""
    ok: dict[tuple[str, int, int], ModelledPoint] = {
        (q.point.implementation, q.point.n, q.point.batch): q
        for q in points
        if q.point.median_s is not None
    }
    return sorted(
        (
            (nv, ok[("pallas_flash", n, b)])
            for (impl, n, b), nv in ok.items()
            if impl == "naive" and ("pallas_flash", n, b) in ok
        ),
        key=lambda q: q[0].point.n,
    )


def measured_headline(points: Sequence[ModelledPoint], c: Conclusions) -> str | None:
    """The headline sentence from measured naive / pallas_flash pairs, or None without pairs."""
    pairs = measured_pairs(points)
    if not pairs:
        return None
    speed = [(nv.point.n, nv.point.median_s / fl.point.median_s) for nv, fl in pairs]  # type: ignore[operator]
    p = f"{(c.threshold - 1) * 100:.0f}%"
    below = [n for n, r in speed if r < c.threshold]
    after = [n for n, _ in speed if not below or n > max(below)]
    if not after:
        head = f"Measured: flash is not {p} faster at the largest measured n"
    elif not below:
        head = (
            f"Measured: flash is at least {p} faster at every measured n "
            f"({speed[0][0]:,} … {speed[-1][0]:,})"
        )
    else:
        head = f"Measured: gains are significant from n = {after[0]:,} (flash at least {p} faster)"
    ref = [(nv.point, fl.point) for nv, fl in pairs if nv.point.n == c.n_reference]
    if ref:
        nv, fl = ref[0]
        gain = nv.median_s / fl.median_s - 1  # type: ignore[operator]
        head += f"; at n={c.n_reference:,} throughput is {gain:+.0%}"
        if nv.peak_memory_bytes and fl.peak_memory_bytes:
            head += f" and peak memory −{1 - fl.peak_memory_bytes / nv.peak_memory_bytes:.1%}"
    return head + " (naive against pallas_flash, median times)."
