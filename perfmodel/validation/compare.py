"""Predictions set against measurements: errors, lower-bound violations, calibration.

Every measured point gets the model's prediction for the same configuration; the
error is ``predicted / measured − 1``. A point faster than ``t_lower_s`` is a model
bug, reported as a violation. Calibration fits five interpretable parameters per
(device, implementation) — the achieved fraction of the matmul roof, of the memory
roofs (HBM and L2), how far the compute roofs overlap, a fixed cost per thread
block, and a fixed overhead per launch — by least squares on log time, and reports
each point's leave-one-out error.

>>> ALGORITHM_OF["cudnn"], ALGORITHM_OF["xla"]
('flash', 'naive')
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from perfmodel import vocabulary
from perfmodel.catalog.calibration import Calibration
from perfmodel.catalog.hardware import HardwareSpec, load_hardware
from perfmodel.errors import PerfmodelError
from perfmodel.evaluate import KernelRoofs, estimate_time, kernel_roofs, model_key, shape_values
from perfmodel.prediction import predict
from perfmodel.validation.fitting import nelder_mead
from perfmodel.validation.measured import Point, Run, load_measurements
from perfmodel.vocabulary import Algorithm, Implementation, symbol_values
from perfmodel.vocabulary import dtype as check_dtype

if TYPE_CHECKING:
    from perfmodel.analysis.kvcache import DecodeStep

#: Which cost model describes each compared implementation (``Implementation.algorithm``;
#: "decode" for the paged decode kernel, ``perfmodel.costs.decode``).
ALGORITHM_OF = {str(i): str(a) for i, a in vocabulary.ALGORITHM_OF.items()}
ALGORITHM_OF[str(Implementation.PAGED_DECODE)] = "decode"
#: Algorithms whose profile the calibration fit can tune (decode uses the default).
FITTED = ("naive", "flash")
#: How each naive-style implementation is compiled (``Implementation.naive``).
NAIVE_OF = {str(i): str(i.naive) for i in Implementation if i.algorithm == Algorithm.NAIVE}
#: Tiles a peer kernel may use (unknown to us): its floor is the lowest over these.
PEER_TILES = ((64, 64), (64, 128), (128, 64), (128, 128), (128, 256), (256, 128))


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
        return (
            f"{p.implementation} n={p.n} d={p.d} b={p.batch} h={p.h} {p.dtype}"
            f"{' causal' if p.causal else ''}"
        )


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
    return str(check_dtype(dtype, framework_names=True))


def _shape(p: Point, tiles: tuple[int, int] | None = None) -> dict:
    bq, bk = tiles or (p.block_q or 128, p.block_k or 128)
    return dict(
        n=p.n,
        kv_len=p.kv_len,
        d=p.d,
        h=p.h,
        h_kv=p.h_kv,
        batch=p.batch,
        dtype=dtype_name(p.dtype),
        causal=p.causal,
        block_q=bq,
        block_k=bk,
        naive=NAIVE_OF.get(p.implementation, "minimal"),
    )


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


def _config_key(p: Point) -> tuple:
    return (
        p.implementation,
        p.n,
        p.kv_len,
        p.d,
        p.h,
        p.h_kv,
        p.batch,
        p.dtype,
        p.causal,
        p.block_q,
        p.block_k,
        p.num_warps,
        p.num_stages,
    )


def select(pairs: Iterable[tuple[Run, Point]], run_prefix: str | None = None) -> list:
    """The newest measurement of each configuration, from runs whose id starts with
    ``run_prefix`` (comma-separated; e.g. "sweep,onehead": leave tuning runs out).
    Older repeats are superseded."""
    prefixes = None if run_prefix is None else tuple(run_prefix.split(","))
    newest: dict[tuple, tuple[Run, Point]] = {}
    for run, p in sorted(pairs, key=lambda rp: rp[0].timestamp):
        if prefixes is None or run.run_id.startswith(prefixes):
            newest[_config_key(p)] = (run, p)
    return list(newest.values())


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
        if algorithm == "decode":
            step = _decode_step(p, spec)
            predicted, floor = step.time_s, step.t_lower_s
        else:
            profile = (calibration or {}).get(p.implementation)
            pred = getattr(
                predict(hw=spec, calibration=_as_algorithm(profile, algorithm), **_shape(p)),
                algorithm,
            )
            predicted, floor = pred.time_s, _floor(p, spec)
        rows.append(Row(run, p, spec, p.median_s, p.min_s or p.median_s, predicted, floor))
    return rows


def _decode_step(p: Point, hw: HardwareSpec) -> DecodeStep:
    """A paged decode point (n query tokens against kv_len cached ones) on the decode model."""
    from perfmodel.analysis.kvcache import decode_step

    return decode_step(
        hw,
        batch=p.batch,
        kv_len=p.kv_len,
        h=p.h,
        h_kv=p.h_kv,
        d=p.d,
        dtype=dtype_name(p.dtype),
        q_len=p.n,
        page_tokens=p.page_size,
        splits=p.splits or 1,
    )


def _as_algorithm(profile: Calibration | None, algorithm: str) -> Calibration | None:
    return None if profile is None else profile.model_copy(update={"algorithm": algorithm})


# --- calibration ----------------------------------------------------------------
#: Fitted parameters, each mapped from an unbounded coordinate into its valid range.
PARAMETERS = (
    "matmul_efficiency",
    "memory_efficiency",
    "compute_overlap",
    "block_overhead_tiles",
    "launch_overhead_s",
    "dispatch_overhead_s",
)


def _sigmoid(u: float) -> float:
    return float(1 / (1 + np.exp(-np.clip(u, -500, 500))))


def _to_params(u: np.ndarray) -> dict[str, float]:
    return {
        "matmul_efficiency": _sigmoid(u[0]),
        "memory_efficiency": _sigmoid(u[1]),
        "compute_overlap": _sigmoid(u[2]),
        "block_overhead_tiles": 8 * _sigmoid(u[3]),
        "launch_overhead_s": 1e-4 * _sigmoid(u[4]),
        "dispatch_overhead_s": 2e-4 * _sigmoid(u[5]),
    }


def _tidy(x: float) -> float:
    """Optimiser dust (1e-200 for a parameter pinned at zero) reads as 0."""
    return 0.0 if abs(x) < 1e-9 else x


def _profile(params: dict[str, float], **labels: Any) -> Calibration:
    memory = params["memory_efficiency"]
    return Calibration.model_construct(
        matmul_efficiency=params["matmul_efficiency"],
        hbm_efficiency=memory,
        l2_efficiency=memory,
        vector_efficiency=1.0,
        exp_efficiency=1.0,
        compute_overlap=params["compute_overlap"],
        block_overhead_tiles=params["block_overhead_tiles"],
        launch_overhead_s=params["launch_overhead_s"],
        dispatch_overhead_s=params["dispatch_overhead_s"],
        **labels,
    )


def _stacked_roofs(rows: Sequence[Row]) -> list[KernelRoofs]:
    """Every row's kernels, stacked into arrays over rows (one algorithm, so same kernels)."""
    per_row = []
    for r in rows:
        shape = _shape(r.point)
        api = {k: shape[k] for k in ("n", "kv_len", "d", "h", "h_kv", "batch", "dtype")}
        values = shape_values(
            r.hw, block_q=shape["block_q"], block_k=shape["block_k"], **symbol_values(**api)
        )
        key = model_key(ALGORITHM_OF[r.point.implementation], shape["naive"])
        per_row.append(
            kernel_roofs(
                key, causal=shape["causal"], hw=r.hw, peak=r.hw.peak(shape["dtype"]), values=values
            )
        )
    stacked = []
    for i, first in enumerate(per_row[0]):
        estimate = {k: np.array([row[i].estimate[k] for row in per_row]) for k in first.estimate}
        blocks = np.array([row[i].blocks_per_tile for row in per_row])
        stacked.append(
            KernelRoofs(first.name, floor={}, estimate=estimate, blocks_per_tile=blocks, times={})
        )
    return stacked


def _log_errors(u: np.ndarray, kernels: list[KernelRoofs], measured: np.ndarray) -> np.ndarray:
    params = _to_params(u)
    predicted = estimate_time(kernels, _profile(params), params["launch_overhead_s"])
    return np.log(predicted / measured)


def _fit_u(kernels: list[KernelRoofs], measured: np.ndarray, weights: np.ndarray) -> np.ndarray:
    def loss(u: np.ndarray) -> float:
        return float(np.sum(weights * _log_errors(u, kernels, measured) ** 2))

    starts = (
        [0.0, 0.0, 0.0, -2.0, -2.0, -2.0],
        [1.0, 1.0, 2.0, -4.0, -4.0, 0.0],
        [-1.0, 0.5, -2.0, 0.0, 0.0, -4.0],
    )
    best = min((nelder_mead(loss, s, iterations=800) for s in starts), key=lambda r: r[1])
    return nelder_mead(loss, best[0], step=0.3, iterations=800)[0]


def fit(rows: Sequence[Row], name: str) -> tuple[Calibration, list[float]]:
    """Least-squares fit (on log time) of one implementation's profile, with the
    leave-one-out error of every point (its prediction from a fit without it)."""
    if len(rows) < len(PARAMETERS) + 1:
        raise PerfmodelError(
            f"calibration {name!r} needs at least {len(PARAMETERS) + 1} points, got {len(rows)}"
        )
    kernels = _stacked_roofs(rows)
    measured = np.array([r.measured_s for r in rows])
    ones = np.ones(len(rows))
    u = _fit_u(kernels, measured, ones)
    loo, loo_params = [], []
    for j in range(len(rows)):
        weights = ones.copy()
        weights[j] = 0.0
        u_j = _fit_u(kernels, measured, weights)
        loo.append(float(np.expm1(_log_errors(u_j, kernels, measured)[j])))
        loo_params.append(_to_params(u_j))
    params = {k: _tidy(v) for k, v in _to_params(u).items()}
    p0, run0 = rows[0].point, rows[0].run
    rms = float(np.sqrt(np.mean(_log_errors(u, kernels, measured) ** 2)))
    ranges = {}
    tiled = any(np.any(k.blocks_per_tile) for k in kernels)
    for k in PARAMETERS:
        values = [_tidy(p[k]) for p in loo_params]
        ranges[f"{k}_loo_range"] = f"{min(values):.3g}..{max(values):.3g}"
    if not tiled:  # no thread-block term in this model: the parameter has no effect
        params["block_overhead_tiles"] = 0.0
        ranges["block_overhead_tiles_loo_range"] = "n/a (no tiled kernel)"
    profile = _profile(
        params,
        name=name,
        description=f"Fitted on {len(rows)} measured points of {p0.implementation} "
        f"on {run0.device_name} (jax {run0.jax_version}, commit {run0.git_commit[:10]})",
        device=rows[0].hw.name,
        implementation=p0.implementation,
        algorithm=ALGORITHM_OF[p0.implementation],
        fit={"points": len(rows), "rms_log_error": rms, **ranges},
        sources={
            "fit": "perfmodel validate --fit: least squares on log time (Nelder-Mead); "
            "ranges are the leave-one-out fits"
        },
    )
    return Calibration.model_validate(profile.model_dump()), loo


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
    run_prefix: str | None = None,
    on_fit: Callable[[str, int, Calibration], None] | None = None,
) -> tuple[list[Row], dict[str, ImplementationSummary]]:
    """Compare the newest measurement of each configuration with the model; optionally
    fit profiles (with leave-one-out errors). ``run_prefix`` keeps matching runs only.
    ``on_fit(implementation, points, profile)`` is called as each profile is fitted (a
    fit takes seconds: the CLI saves each profile then, and reports progress)."""
    pairs: Any = measurements if _is_pairs(measurements) else load_measurements(measurements)  # type: ignore[arg-type]
    rows = compare(select(pairs, run_prefix), hw, calibration)
    if not rows:
        raise PerfmodelError("no measured 'ok' points of a modelled implementation found")
    summary = summarise(rows)
    if fit_profiles:
        for impl, s in summary.items():
            if ALGORITHM_OF[impl] not in FITTED:
                continue
            mine = [r for r in rows if r.point.implementation == impl]
            slug = mine[0].hw.aliases[0] if mine[0].hw.aliases else "device"
            s.calibration, s.loo_errors = fit(mine, f"{slug}-{impl}")
            s.loo_median_abs_error = statistics.median(abs(e) for e in s.loo_errors)
            s.loo_max_abs_error = max(abs(e) for e in s.loo_errors)
            if on_fit is not None:
                on_fit(impl, len(mine), s.calibration)
    return rows, summary


def _is_pairs(obj: object) -> bool:
    return isinstance(obj, list) and bool(obj) and isinstance(obj[0], tuple)
