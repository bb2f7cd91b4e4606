"""Predictions set against measurements: errors, lower-bound violations, calibration.

Every measured point gets the model's prediction for the same configuration; the
error is ``predicted / measured − 1``. A point faster than ``t_lower_s`` is a model
bug, reported as a violation. Calibration fits three interpretable parameters per
(device, implementation) — the achieved fraction of the matmul roof, of the memory
roofs (HBM and L2), and a fixed overhead per launch — by least squares on log time
over a grid, so the leave-one-out fits come from the same table for free.

>>> ALGORITHM_OF["cudnn"], ALGORITHM_OF["xla"]
('flash', 'naive')
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from perfmodel.calibration import Calibration
from perfmodel.errors import PerfmodelError
from perfmodel.evaluate import kernel_roofs, shape_values
from perfmodel.hardware import BYTES_PER_ELEMENT, HardwareSpec, load_hardware
from perfmodel.measured import Point, Run, load_measurements
from perfmodel.predict import predict

#: Which cost model describes each measured implementation. XLA's unfused path
#: materialises the scores like the naive model; cuDNN is a fused flash kernel.
ALGORITHM_OF = {"pallas_flash": "flash", "cudnn": "flash", "naive": "naive", "xla": "naive"}
#: Tiles a peer kernel may use (unknown to us): its floor is the lowest over these.
PEER_TILES = ((64, 64), (64, 128), (128, 64), (128, 128), (128, 256), (256, 128))
_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
# Calibration grid: efficiencies and launch overhead (seconds).
_EFF = np.round(np.arange(0.05, 1.0001, 0.0125), 4)
_LAUNCH = np.arange(0.0, 62e-6, 2e-6)


@dataclass(frozen=True)
class Row:
    """One measured point with its prediction."""

    run: Run
    point: Point
    hw: HardwareSpec
    measured_s: float
    fastest_s: float
    predicted_s: float
    t_lower_s: float

    @property
    def error(self) -> float:
        return self.predicted_s / self.measured_s - 1

    @property
    def violates_lower_bound(self) -> bool:
        return self.fastest_s < self.t_lower_s

    def label(self) -> str:
        p = self.point
        return (f"{p.implementation} n={p.n} d={p.d} b={p.batch} h={p.h} {p.dtype}"
                f"{' causal' if p.causal else ''}")  # fmt: skip


@dataclass
class ImplementationSummary:
    implementation: str
    count: int
    median_abs_error: float
    max_abs_error: float
    violations: list[Row]
    worst: list[Row]
    loo_median_abs_error: float | None = None
    loo_max_abs_error: float | None = None
    calibration: Calibration | None = None
    loo_errors: list[float] = field(default_factory=list)


def dtype_name(dtype: str) -> str:
    """The model's dtype name for a measured one (``bfloat16`` -> ``bf16``)."""
    name = _DTYPES.get(dtype, dtype)
    if name not in BYTES_PER_ELEMENT:
        raise PerfmodelError(f"measured dtype {dtype!r} is unknown to the model")
    return name


def _shape(p: Point, tiles: tuple[int, int] | None = None) -> dict:
    bq, bk = tiles or (p.block_q or 128, p.block_k or 128)
    return dict(n=p.n, kv_len=p.kv_len, d=p.d, h=p.h, h_kv=p.h_kv, batch=p.batch,
                dtype=dtype_name(p.dtype), causal=p.causal, block_q=bq, block_k=bk)  # fmt: skip


def _floor(p: Point, hw: HardwareSpec) -> float:
    algorithm = ALGORITHM_OF[p.implementation]
    if p.block_q is not None or algorithm == "naive":
        return getattr(predict(hw=hw, **_shape(p)), algorithm).t_lower_s
    floors = []
    for tiles in PEER_TILES:
        try:
            floors.append(predict(hw=hw, **_shape(p, tiles)).flash.t_lower_s)
        except PerfmodelError:  # tile does not fit this device's SRAM
            continue
    return min(floors)


def resolve_hardware(run: Run, hw: str | Path | HardwareSpec | None) -> HardwareSpec:
    return load_hardware(hw if hw is not None else run.device_name)


def compare(
    pairs: Iterable[tuple[Run, Point]],
    hw: str | Path | HardwareSpec | None = None,
    calibration: dict[str, Calibration] | None = None,
) -> list[Row]:
    """A Row per measured 'ok' point of the implementations the model describes."""
    rows = []
    for run, p in pairs:
        if p.status != "ok" or p.implementation not in ALGORITHM_OF or p.median_s is None:
            continue
        spec = resolve_hardware(run, hw)
        algorithm = ALGORITHM_OF[p.implementation]
        profile = (calibration or {}).get(p.implementation)
        pred = getattr(predict(hw=spec, calibration=_as_algorithm(profile, algorithm),
                               **_shape(p)), algorithm)  # fmt: skip
        rows.append(
            Row(run, p, spec, p.median_s, p.min_s or p.median_s, pred.time_s, _floor(p, spec))
        )
    return rows


def _as_algorithm(profile: Calibration | None, algorithm: str) -> Calibration | None:
    return None if profile is None else profile.model_copy(update={"algorithm": algorithm})


# --- calibration ----------------------------------------------------------------
def _roof_table(rows: Sequence[Row]) -> list[list[dict]]:
    """Per row, per kernel: estimate roof times at full efficiency."""
    table = []
    for r in rows:
        spec = r.hw
        shape = _shape(r.point)
        values = shape_values(
            spec, n=shape["n"], m=shape["kv_len"], d=shape["d"], h=shape["h"],
            h_kv=shape["h_kv"], b=shape["batch"], block_q=shape["block_q"],
            block_k=shape["block_k"], s=BYTES_PER_ELEMENT[shape["dtype"]],
        )  # fmt: skip
        kernels = kernel_roofs(ALGORITHM_OF[r.point.implementation], causal=shape["causal"],
                               hw=spec, peak=spec.peak(shape["dtype"]), values=values)  # fmt: skip
        table.append([estimate for _floor_times, estimate in kernels])
    return table


def _grid_log_errors(rows: Sequence[Row]) -> np.ndarray:
    """log(predicted/measured) for every grid point (matmul eff, memory eff, launch) x row."""
    table = _roof_table(rows)
    em, ex, la = np.meshgrid(_EFF, _EFF, _LAUNCH, indexing="ij")
    em, ex, la = em.ravel(), ex.ravel(), la.ravel()
    out = np.empty((em.size, len(rows)), dtype=np.float32)
    for j, (r, kernels) in enumerate(zip(rows, table, strict=True)):
        total = np.zeros_like(em)
        for roofs in kernels:
            derated = [
                roofs[k] / (em if k == "matmul" else ex if k in ("hbm", "l2") else 1.0)
                for k in roofs
            ]
            total = total + np.maximum.reduce(np.broadcast_arrays(*derated)) + la
        out[:, j] = np.log(total / r.measured_s)
    return out


def _params(index: int) -> tuple[float, float, float]:
    i, j, k = np.unravel_index(index, (_EFF.size, _EFF.size, _LAUNCH.size))
    return float(_EFF[i]), float(_EFF[j]), float(_LAUNCH[k])


def fit(rows: Sequence[Row], name: str) -> tuple[Calibration, list[float]]:
    """Least-squares fit of one implementation's profile, and its leave-one-out errors."""
    if len(rows) < 3:
        raise PerfmodelError(f"calibration {name!r} needs at least 3 points, got {len(rows)}")
    errs = _grid_log_errors(rows)
    sq = errs.astype(np.float64) ** 2
    total = sq.sum(axis=1)
    best = int(np.argmin(total))
    loo, loo_params = [], []
    for j in range(len(rows)):
        k = int(np.argmin(total - sq[:, j]))
        loo.append(float(np.expm1(errs[k, j])))
        loo_params.append(_params(k))
    spread = np.array(loo_params)
    matmul, memory, launch = _params(best)
    p0, run0 = rows[0].point, rows[0].run
    profile = Calibration(
        name=name,
        description=f"Fitted on {len(rows)} measured points of {p0.implementation} "
        f"on {run0.device_name} (jax {run0.jax_version}, commit {run0.git_commit[:10]})",
        device=rows[0].hw.name,
        implementation=p0.implementation,
        algorithm=ALGORITHM_OF[p0.implementation],  # type: ignore[arg-type]
        matmul_efficiency=matmul,
        hbm_efficiency=memory,
        l2_efficiency=memory,
        launch_overhead_s=launch,
        fit={
            "points": len(rows),
            "rms_log_error": float(np.sqrt(total[best] / len(rows))),
            "matmul_efficiency_loo_range": f"{spread[:, 0].min():.4g}..{spread[:, 0].max():.4g}",
            "memory_efficiency_loo_range": f"{spread[:, 1].min():.4g}..{spread[:, 1].max():.4g}",
            "launch_overhead_s_loo_range": f"{spread[:, 2].min():.3g}..{spread[:, 2].max():.3g}",
        },
        sources={"fit": "perfmodel validate --fit (least squares on log time, grid search)"},
    )
    return profile, loo


# --- the report -----------------------------------------------------------------
def summarise(rows: Sequence[Row], worst: int = 3) -> dict[str, ImplementationSummary]:
    out: dict[str, ImplementationSummary] = {}
    for impl in sorted({r.point.implementation for r in rows}):
        mine = [r for r in rows if r.point.implementation == impl]
        errors = [abs(r.error) for r in mine]
        out[impl] = ImplementationSummary(
            implementation=impl,
            count=len(mine),
            median_abs_error=statistics.median(errors),
            max_abs_error=max(errors),
            violations=[r for r in mine if r.violates_lower_bound],
            worst=sorted(mine, key=lambda r: -abs(r.error))[:worst],
        )
    return out


def validate(
    measurements: str | Path | Iterable[str | Path] | list[tuple[Run, Point]],
    hw: str | Path | HardwareSpec | None = None,
    *,
    calibration: dict[str, Calibration] | None = None,
    fit_profiles: bool = False,
) -> tuple[list[Row], dict[str, ImplementationSummary]]:
    """Compare every measured point with the model; optionally fit profiles (with LOO)."""
    pairs: Any = measurements if _is_pairs(measurements) else load_measurements(measurements)  # type: ignore[arg-type]
    rows = compare(pairs, hw, calibration)
    if not rows:
        raise PerfmodelError("no measured 'ok' points of a modelled implementation found")
    summary = summarise(rows)
    if fit_profiles:
        for impl, s in summary.items():
            mine = [r for r in rows if r.point.implementation == impl]
            slug = mine[0].hw.aliases[0] if mine[0].hw.aliases else "device"
            s.calibration, s.loo_errors = fit(mine, f"{slug}-{impl}")
            s.loo_median_abs_error = statistics.median(abs(e) for e in s.loo_errors)
            s.loo_max_abs_error = max(abs(e) for e in s.loo_errors)
    return rows, summary


def _is_pairs(obj: object) -> bool:
    return isinstance(obj, list) and bool(obj) and isinstance(obj[0], tuple)
