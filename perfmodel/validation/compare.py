"""Predictions set against measurements: errors, lower-bound violations, calibration.

Every measured point gets the model's prediction for the same configuration, through
the kernel family that implementation belongs to; the error is ``predicted / measured
− 1``. A point faster than ``t_lower_s`` is a model bug, reported as a violation. Device
time is compared with ``time_s``; a synchronous single-call timing (the older harness)
with ``call_latency_s``.

Calibration refines one family on one device: up to six interpretable parameters — the
achieved fraction of the matmul roof, of the memory roofs (HBM and L2), how far the
compute roofs of one block overlap, a fixed cost per thread block, a fixed gap per
launch, and (for call timings only) the host's dispatch — fitted by bounded least
squares on log time (``perfmodel.validation.fitting``), each with its standard error,
and each point's leave-one-out error.

>>> ALGORITHM_OF["cudnn"], ALGORITHM_OF["xla"], FAMILY_OF["pallas_flash"]
('flash', 'naive', 'pallas-triton')
"""

from __future__ import annotations

import functools
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from pathlib import Path
from typing import Any, cast

import numpy as np

from perfmodel import vocabulary
from perfmodel.catalog.calibration import Calibration, family_default
from perfmodel.catalog.hardware import HardwareSpec, load_hardware
from perfmodel.catalog.kernels import load_kernel
from perfmodel.errors import PerfmodelError
from perfmodel.evaluate import (
    KernelRoofs,
    estimate_time,
    flash_values,
    kernel_roofs,
    model_key,
    onchip_of,
    shape_values,
)
from perfmodel.launch import launch_of
from perfmodel.prediction import predict
from perfmodel.shape import Shape
from perfmodel.validation.fitting import fit_log_time, relative_error
from perfmodel.validation.measured import Point, Run, load_measurements
from perfmodel.vocabulary import dtype as check_dtype

#: Which cost model describes each compared implementation that names no kernel family
#: (``vocabulary.ALGORITHM_OF``); a point's family (``specs/kernels``) decides otherwise.
ALGORITHM_OF = {str(i): str(a) for i, a in vocabulary.ALGORITHM_OF.items()}
#: The kernel family (``specs/kernels``) of each implementation in the older files, which
#: do not record it (newer points carry ``family``).
FAMILY_OF = {
    "pallas_flash": "pallas-triton",
    "cudnn": "cudnn",
    "paged_decode": "pallas-paged",
    "mgpu_attention": "pallas-mosaic",
}
#: How each naive-style implementation is compiled (``perfmodel.costs.naive``): our
#: three-step baseline's HLO is known; jax.nn.dot_product_attention's XLA path as its
#: source writes it (``"sdpa"``: float32 logits); a user's one jitted function (XLA fuses
#: it differently: with a causal mask it beats the three-step passes' floor) is held to
#: the minimal trips.
NAIVE_OF = {"naive": "xla", "naive_jit": "minimal", "xla": "sdpa"}
#: Tiles a peer kernel may use when its point does not say: its floor is the lowest.
PEER_TILES = ((64, 64), (64, 128), (128, 64), (128, 128), (128, 176), (128, 256), (256, 128))


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
    #: "device" (device time: kernel durations) or "queued" (older files: wall time per
    #: call with calls queued back to back, host dispatch showing where kernels are short)
    timing: str = "queued"

    @property
    def error(self) -> float:
        return relative_error(self.predicted_s, self.measured_s)

    @property
    def violates_lower_bound(self) -> bool:
        return self.fastest_s < self.t_lower_s

    def label(self) -> str:
        p = self.point
        return (
            f"{p.implementation} n={p.n} d={p.d} b={p.batch} h={p.h} {p.dtype}"
            f"{' causal' if p.causal else ''}{'' if p.window is None else f' window={p.window}'}"
        )


@dataclass
class ImplementationSummary:
    implementation: str  #: the group's label (:func:`group_of`)
    count: int
    median_abs_error: float
    max_abs_error: float
    #: signed: below 0 the model is too fast (optimistic)
    median_error: float
    violations: list[Row]
    worst: list[Row]
    loo_median_abs_error: float | None = None
    loo_max_abs_error: float | None = None
    calibration: Calibration | None = None
    loo_errors: list[float] = field(default_factory=list)


def dtype_name(dtype: str) -> str:
    """The model's dtype name for a measured one (``bfloat16`` -> ``bf16``)."""
    return str(check_dtype(dtype, framework_names=True))


def timing_of(p: Point) -> str:
    """What a point's ``median_s`` is: "device" time, or (older files) "queued" wall time."""
    return "device" if p.basis() == "device" else "queued"


def family_of(p: Point) -> str | None:
    """The kernel family of an implementation (the point's own field where it has one)."""
    return p.family or FAMILY_OF.get(p.implementation)


def algorithm_of(p: Point) -> str | None:
    family = family_of(p)
    if family is not None:
        return load_kernel(family).algorithm
    return ALGORITHM_OF.get(p.implementation)


def _launch(p: Point, tiles: tuple[int | None, int | None] | None = None) -> Shape:
    """A point's shape as its kernel family launched it: its own tiles, warps and splits
    where it recorded them (a naive point: the fused side's defaults, nothing named)."""
    shape = p.shape()
    if algorithm_of(p) != "flash":
        return replace(shape, block_q=None, block_k=None, warps=None, splits=None)
    bq, bk = tiles or (p.block_q, p.block_k)
    warps = p.num_warps if bq is not None else None
    return replace(shape, kernel=family_of(p) or shape.kernel, block_q=bq, block_k=bk, warps=warps)


def _shape(p: Point, tiles: tuple[int | None, int | None] | None = None) -> dict[str, Any]:
    """``predict`` arguments for a point (:func:`_launch`), and how its naive side compiles."""
    out = {
        **_launch(p, tiles).kwargs(),
        "naive": NAIVE_OF.get(p.implementation, "minimal"),
        "mode": p.phase or "forward",
    }
    if algorithm_of(p) != "flash":
        del out["kernel"]  # the fused side is not what was timed
        return out
    return {**out, "kernel": _family_as_run(p), "page_tokens": p.page_size}


def _family_as_run(p: Point) -> Any:
    """The point's kernel family as the point ran it (:func:`family_as_run`)."""
    return family_as_run(family_of(p), p.backward_family, p.sequence_padding, p.group_split)


def as_run(run: Run, p: Point) -> Point:
    """The point with what its run's time says it ran: ``Point.group_split`` "none" for a
    run before its family's backward began to split GQA groups (``group_split_since``)."""
    name = family_of(p)
    if p.group_split is not None or name is None or p.phase not in ("backward", "train"):
        return p
    bwd = load_kernel(p.backward_family or name).backward
    since = bwd.group_split_since if bwd is not None else None
    if since is None or datetime.fromisoformat(run.timestamp) >= datetime.fromisoformat(since):
        return p
    return p.model_copy(update={"group_split": "none"})


def family_as_run(
    name: str | None,
    backward_family: str | None = None,
    sequence_padding: str | None = None,
    group_split: str | None = None,
) -> Any:
    """Kernel family ``name`` with the backward a point ran (``Point.backward_family``:
    runs made before today's backward existed), the forward's sequence padding
    (``Point.sequence_padding``: runs made before today's padding) and the backward's GQA
    group rule (``Point.group_split``: runs before today's split) where it records them."""
    if name is None or (backward_family is None and sequence_padding is None and not group_split):
        return name
    family = with_backward(name, backward_family) if backward_family else load_kernel(name)
    if group_split is not None and family.backward is not None:
        bwd = family.backward.model_copy(update={"group_split": group_split})
        family = family.model_copy(
            update={"name": f"{family.name}+group-{group_split}", "backward": bwd}
        )
    if sequence_padding is None:
        return family
    return family.model_copy(
        update={
            "name": f"{family.name}+{sequence_padding}-padding",
            "sequence_padding": sequence_padding,
        }
    )


@functools.cache
def with_backward(family: str, backward: str) -> Any:
    """``family`` whose backward is ``backward``'s own ``[backward]`` (no fallback), with
    that backward's paddings, whatever the family runs today."""
    own = load_kernel(backward)
    assert own.backward is not None, backward
    solo = own.backward.model_copy(
        update={
            "fallback": None,
            "head_dim_padding": own.backward.head_dim_padding or own.head_dim_padding,
            "sequence_padding": own.backward.sequence_padding or own.sequence_padding,
        }
    )
    update = {"name": f"{family}+{backward}-backward", "backward_family": None, "backward": solo}
    return load_kernel(family).model_copy(update=update)


def _floor(p: Point, hw: HardwareSpec) -> float:
    """The least t_lower_s over what the point's implementation could have launched: its
    recorded tiles, else its family's default and every peer tile that fits."""
    algorithm = cast(str, algorithm_of(p))  # a modelled point: naive or flash
    if p.block_q is not None or algorithm == "naive":
        floor: float = getattr(predict(hw=hw, **_shape(p)), algorithm).t_lower_s
        return floor
    floors = [predict(hw=hw, **_shape(p)).flash.t_lower_s]
    for tiles in PEER_TILES:
        try:
            floors.append(predict(hw=hw, **_shape(p, tiles)).flash.t_lower_s)
        except PerfmodelError:  # tile does not fit this device's shared memory
            continue
    return min(floors)


def _config_key(p: Point) -> tuple[Any, ...]:
    return (
        p.implementation,
        p.family,
        p.phase,
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
        p.page_size,
        p.splits,
        p.window,
        p.variant,  # a tuning variant does not supersede the default launch beside it
        timing_of(p),
    )


def select(pairs: Iterable[tuple[Run, Point]], run_prefix: str | None = None) -> list[Any]:
    """The newest measurement of each configuration, from runs whose id starts with
    ``run_prefix`` (comma-separated; e.g. "sweep,onehead": leave tuning runs out).
    Older repeats are superseded (``every_point`` keeps them: the floor check)."""
    prefixes = None if run_prefix is None else tuple(run_prefix.split(","))
    newest: dict[tuple[Any, ...], tuple[Run, Point]] = {}
    for run, p in sorted(pairs, key=lambda rp: rp[0].timestamp):
        if prefixes is None or run.run_id.startswith(prefixes):
            newest[_config_key(p)] = (run, p)
    return list(newest.values())


def every_point(pairs: Iterable[tuple[Run, Point]], run_prefix: str | None = None) -> list[Any]:
    """Every measured point of every run (no superseding), from matching runs."""
    prefixes = None if run_prefix is None else tuple(run_prefix.split(","))
    return [(r, p) for r, p in pairs if prefixes is None or r.run_id.startswith(prefixes)]


def resolve_hardware(run: Run, hw: str | Path | HardwareSpec | None) -> HardwareSpec:
    return load_hardware(hw if hw is not None else run.device_name)


def modelled(p: Point) -> bool:
    """A point the model is compared with: measured, of a modelled implementation, and
    not a tuning sweep's variant launch (``Point.tuning``)."""
    ok = p.status == "ok" and p.median_s is not None and not p.tuning
    return ok and algorithm_of(p) is not None


def fittable(rows: Sequence[Row]) -> list[Row]:
    """The rows a fit may use: not those whose timings contradict each other (device time
    above the wall time of the same calls: ``Point.timings_contradict``)."""
    return [r for r in rows if not r.point.timings_contradict]


def compare(
    pairs: Iterable[tuple[Run, Point]],
    hw: str | Path | HardwareSpec | None = None,
    calibration: dict[str, Calibration] | None = None,
) -> list[Row]:
    """A Row per measured 'ok' point of the implementations the model describes: device
    time against ``time_s``, a synchronous call against ``call_latency_s``."""
    rows = []
    for run, p in pairs:
        if not modelled(p):
            continue
        p = as_run(run, p)
        spec = resolve_hardware(run, hw)
        algorithm = cast(str, algorithm_of(p))  # modelled: naive or flash
        profile = (calibration or {}).get(p.implementation)
        pred = getattr(
            predict(hw=spec, calibration=_as_algorithm(profile, algorithm), **_shape(p)),
            algorithm,
        )
        timing = timing_of(p)
        predicted = pred.time_s if timing == "device" else _queued_s(pred, algorithm, profile)
        floor = _floor(p, spec)
        measured = cast(float, p.median_s)  # modelled: timed
        rows.append(Row(run, p, spec, measured, p.min_s or measured, predicted, floor, timing))
    return rows


def _queued_s(pred: Any, algorithm: str, profile: Calibration | None) -> float:
    """Older files' wall time per call, calls queued back to back: the device time, or
    the host's dispatch of the call's kernels where that is longer (a fitted profile's)."""
    dispatch = profile.dispatch_overhead_s if profile is not None else 0.0
    queued: float = max(pred.time_s, dispatch * (3 if algorithm == "naive" else 1))
    return queued


def _as_algorithm(profile: Calibration | None, algorithm: str) -> Calibration | None:
    return None if profile is None else profile.model_copy(update={"algorithm": algorithm})


# --- calibration ----------------------------------------------------------------
#: Fitted parameters: (lower, upper, start). Memory efficiency is shared by HBM and L2.
BOUNDS = {
    "matmul_efficiency": (0.05, 1.0, 0.7),
    "memory_efficiency": (0.05, 1.0, 0.8),
    "compute_overlap": (0.0, 1.0, 0.5),
    "block_overhead_tiles": (0.0, 8.0, 1.0),
    "launch_overhead_s": (0.0, 1e-4, 5e-6),
    "dispatch_overhead_s": (0.0, 2e-4, 5e-5),
}
PARAMETERS = tuple(BOUNDS)


def _tidy(x: float) -> float:
    """Optimiser dust (1e-12 for a parameter pinned at zero) reads as 0."""
    return 0.0 if abs(x) < 1e-9 else x


def _profile(
    params: dict[str, float], base: Calibration | None = None, **labels: Any
) -> Calibration:
    memory = params.get("memory_efficiency", 1.0)
    values: dict[str, Any] = dict(
        matmul_efficiency=params["matmul_efficiency"],
        hbm_efficiency=memory,
        l2_efficiency=memory,
        vector_efficiency=1.0,
        exp_efficiency=1.0,
        compute_overlap=params.get("compute_overlap", 0.0),
        block_overhead_tiles=params.get("block_overhead_tiles", 0.0),
        launch_overhead_s=params.get("launch_overhead_s", 0.0),
        dispatch_overhead_s=params.get("dispatch_overhead_s", 0.0),
    )
    return Calibration.model_construct(**values, **labels)


@dataclass(frozen=True)
class _Group:
    """Rows with the same kernels (a split launch has a combine kernel), stacked."""

    index: np.ndarray
    kernels: list[KernelRoofs]
    n_kernels: int


def _row_roofs(r: Row) -> list[KernelRoofs]:
    """One row's kernels before derating, launched as its family launches them."""
    p, shape = r.point, _launch(r.point)
    sizes, peak = shape.sizes(), r.hw.peak(shape.dtype)
    if algorithm_of(p) == "naive":
        values = shape_values(r.hw, **sizes, block_q=128, block_k=128)
        naive = NAIVE_OF.get(p.implementation, "minimal")
        return kernel_roofs(
            model_key("naive", naive), causal=shape.causal, hw=r.hw, peak=peak, values=values
        )
    config, mask = launch_of(shape, r.hw), shape.mask()
    sizes["page"] = p.page_size or 1
    if mask is not None:  # the tiles it visits (``costs.masks``), as predict counts them
        sizes["mask"] = mask
    values = flash_values(r.hw, sizes, config, config.pack, config.splits)
    key = model_key(
        "flash",
        split=cast(bool, config.splits > 1),
        paged=bool(p.page_size),
        masked=mask is not None,
    )
    return kernel_roofs(
        key, causal=shape.causal, hw=r.hw, peak=peak, values=values, onchip=onchip_of(config)
    )


def _groups(rows: Sequence[Row]) -> list[_Group]:
    per_row = [_row_roofs(r) for r in rows]
    groups: dict[tuple[str, ...], list[int]] = {}
    for i, kernels in enumerate(per_row):
        groups.setdefault(tuple(k.name for k in kernels), []).append(i)
    out = []
    for names, index in groups.items():
        stacked = []
        for j in range(len(names)):
            ks = [per_row[i][j] for i in index]
            per_kernel = {  # every per-kernel fact an effect reads, row by row
                f.name: np.array([getattr(k, f.name) for k in ks])
                for f in fields(KernelRoofs)
                if f.name not in ("name", "floor", "estimate", "times")
            }
            stacked.append(
                KernelRoofs(
                    ks[0].name,
                    floor={},
                    estimate={r: np.array([k.estimate[r] for k in ks]) for r in ks[0].estimate},
                    times={r: np.array([k.times[r] for k in ks]) for r in ks[0].times},
                    **per_kernel,
                )
            )
        out.append(_Group(np.array(index), stacked, len(names)))
    return out


def _predicted(
    params: dict[str, float], groups: list[_Group], calls: np.ndarray, n: int
) -> np.ndarray:
    """Every row's prediction under ``params``: device time; for queued rows the host's
    dispatch where it is longer."""
    out = np.empty(n)
    profile = _profile(params)
    for g in groups:
        device = estimate_time(g.kernels, profile, params.get("launch_overhead_s", 0.0))
        host = params.get("dispatch_overhead_s", 0.0) * g.n_kernels
        out[g.index] = np.where(calls[g.index], np.maximum(device, host), device)
    return out


def _free_parameters(rows: Sequence[Row], groups: list[_Group]) -> dict[str, Any]:
    tiled = any(np.any(k.blocks_per_tile) for g in groups for k in g.kernels)
    calls = any(r.timing == "queued" for r in rows)
    return {
        k: v
        for k, v in BOUNDS.items()
        if (k != "block_overhead_tiles" or tiled) and (k != "dispatch_overhead_s" or calls)
    }


def fit(rows: Sequence[Row], name: str, *, loo: bool = True) -> tuple[Calibration, list[float]]:
    """Bounded least squares on log time of one family's profile on one device, each
    parameter with its standard error, and (``loo``) every point's leave-one-out error.
    Rows whose timings contradict each other are left out (:func:`fittable`)."""
    given = len(rows)
    rows = fittable(rows)
    groups = _groups(rows)
    free = _free_parameters(rows, groups)
    if len(rows) < len(free) + 1:
        raise PerfmodelError(
            f"calibration {name!r} needs at least {len(free) + 1} points, got {len(rows)}"
        )
    measured = np.array([r.measured_s for r in rows])
    calls = np.array([r.timing == "queued" for r in rows])

    def residuals(params: dict[str, float]) -> np.ndarray:
        errors: np.ndarray = np.log(_predicted(params, groups, calls, len(rows)) / measured)
        return errors

    result = fit_log_time(residuals, free)
    loo_errors: list[float] = []
    loo_values: list[dict[str, float]] = []
    if loo:
        for j in range(len(rows)):
            weights = np.ones(len(rows))
            weights[j] = 0.0
            r_j = fit_log_time(residuals, free, weights=weights, start=result.values)
            loo_errors.append(float(np.expm1(r_j.residuals[j])))
            loo_values.append(r_j.values)
    params = {k: _tidy(v) for k, v in result.values.items()}
    stats: dict[str, int | float | str] = {
        "points": len(rows),
        "rms_log_error": result.rms_log_error,
    }
    if given > len(rows):
        stats["left_out_device_above_wall"] = given - len(rows)
    for k in free:
        stats[f"{k}_stderr"] = result.stderr[k]
        if result.stderr[k] != result.stderr[k]:
            stats[f"{k}_determined"] = "no"
        if result.at_bound[k]:
            stats[f"{k}_at_bound"] = "yes"
        if loo_values:
            values = [_tidy(v[k]) for v in loo_values]
            stats[f"{k}_loo_range"] = f"{min(values):.3g}..{max(values):.3g}"
    p0, run0 = rows[0].point, rows[0].run
    family = family_of(p0)
    profile = _profile(
        params,
        name=name,
        description=f"Fitted on {len(rows)} measured points of {p0.implementation} "
        f"on {run0.device_name} (jax {run0.jax_version}, commit {run0.git_commit[:10]})",
        device=rows[0].hw.name,
        implementation=p0.implementation,
        kernel=family,
        algorithm=algorithm_of(p0),
        fit=stats,
        sources={
            "fit": "perfmodel validate --fit: bounded least squares on log time "
            "(scipy.optimize.least_squares); stderr from the Jacobian; ranges are the "
            "leave-one-out fits"
        },
    )
    return Calibration.model_validate(profile.model_dump()), loo_errors


def default_profile(p: Point, hw: HardwareSpec) -> Calibration | None:
    """The datasheet profile a point's family gets with no fit (None: naive's default)."""
    family = family_of(p)
    return None if family is None else family_default(load_kernel(family), hw)


# --- the report -----------------------------------------------------------------
#: A call of at most this many query rows against a longer KV cache is a decode step.
DECODE_ROWS = 16


def group_of(p: Point) -> str:
    """A summary's label: the implementation, its family where that is not the one the
    implementation implies, a sliding window (``window``), and the mode where it is not
    the forward: the phase (``pallas_flash [pallas-mosaic] window (train)``), or
    ``(decode)``."""
    label: str = p.implementation
    if p.family is not None and p.family != FAMILY_OF.get(p.implementation, p.family):
        label += f" [{p.family}]"
    if p.window is not None:
        label += " window"
    if p.phase not in (None, "forward"):
        label += f" ({p.phase})"
    elif p.n <= DECODE_ROWS < p.kv_len and p.implementation != "paged_decode":
        label += " (decode)"
    return label


def errors_by_group(rows: Sequence[Row]) -> dict[str, list[float]]:
    """Each summary label's signed errors (:func:`group_of`), in the rows' order."""
    out: dict[str, list[float]] = {}
    for r in rows:
        out.setdefault(group_of(r.point), []).append(r.error)
    return out


def error_figures(errors: Iterable[float]) -> tuple[int, float, float, float]:
    """The figures every accuracy claim reports of a group's signed errors (predicted /
    measured - 1): points, signed median, median |error|, max |error|."""
    e = list(errors)
    return len(e), statistics.median(e), statistics.median(abs(x) for x in e), max(map(abs, e))


def summarise(rows: Sequence[Row], worst: int = 3) -> dict[str, ImplementationSummary]:
    out: dict[str, ImplementationSummary] = {}
    for label in sorted({group_of(r.point) for r in rows}):
        mine = [r for r in rows if group_of(r.point) == label]
        count, signed, absolute, top = error_figures(r.error for r in mine)
        out[label] = ImplementationSummary(
            implementation=label,
            count=count,
            median_abs_error=absolute,
            max_abs_error=top,
            violations=[r for r in mine if r.violates_lower_bound],
            worst=sorted(mine, key=lambda r: -abs(r.error))[:worst],
            median_error=signed,
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
            mine = [r for r in rows if group_of(r.point) == impl]
            if len(mine) <= len(PARAMETERS):  # too few points to fit: report unfitted
                continue
            slug = mine[0].hw.aliases[0] if mine[0].hw.aliases else "device"
            s.calibration, s.loo_errors = fit(mine, f"{slug}-{impl}")
            s.loo_median_abs_error = statistics.median(abs(e) for e in s.loo_errors)
            s.loo_max_abs_error = max(abs(e) for e in s.loo_errors)
            if on_fit is not None:
                on_fit(impl, len(mine), s.calibration)
    return rows, summary


def _is_pairs(obj: object) -> bool:
    return isinstance(obj, list) and bool(obj) and isinstance(obj[0], tuple)
