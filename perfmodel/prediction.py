"""``predict`` and ``sweep``: a shape and a device in, the roofline placement out.

Orchestration only: shapes are checked here, costs come from ``perfmodel.costs``
through ``perfmodel.evaluate``.

>>> p = predict(n=4096, hw="a100")
>>> int(p.naive.extra_memory_bytes)   # S + P, the chapter's 67 MB
67108864
>>> p.flash.hbm_bytes < p.naive.hbm_bytes
True
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from perfmodel.catalog.calibration import Calibration, load_calibration
from perfmodel.catalog.hardware import HardwareSpec, load_hardware
from perfmodel.errors import PerfmodelError
from perfmodel.evaluate import ALGORITHMS, evaluate, model_key, shape_values
from perfmodel.parallel import predict_parallel
from perfmodel.results import AlgorithmPrediction, Config, Prediction
from perfmodel.vocabulary import bytes_per_element

CalibrationArg = str | Path | Calibration | Sequence[str | Path | Calibration] | None


# --- input checks ---------------------------------------------------------------
def _check_positive_int(name: str, value: Any) -> Any:
    if type(value) is int:  # the common scalar case, without numpy
        if value <= 0:
            raise PerfmodelError(f"{name}={value!r} must be a positive integer")
        return value
    arr = np.asarray(value)
    if arr.dtype == bool or arr.dtype.kind not in "iuf" or arr.size == 0:
        raise PerfmodelError(f"{name}={value!r} must be a positive integer")
    bad = (arr <= 0) | (arr != np.floor(arr))
    if np.any(bad):
        raise PerfmodelError(f"{name}={arr[bad].flat[0].item()!r} must be a positive integer")
    return arr


def _check_shape(shape: dict[str, Any]) -> None:
    if all(type(v) is int for v in shape.values()):  # one point, no numpy
        for k, v in shape.items():
            _check_positive_int(k, v)
        for k in ("block_q", "block_k"):
            if shape[k] & (shape[k] - 1):
                raise PerfmodelError(f"{k}={shape[k]!r} must be a power of two")
        if shape["h"] % shape["h_kv"]:
            raise PerfmodelError(f"h={shape['h']!r} is not divisible by h_kv={shape['h_kv']!r}")
        return
    arrays = {k: _check_positive_int(k, shape[k]) for k in ("n", "m", "d", "h", "h_kv", "b")}
    for k in ("block_q", "block_k"):
        blk = np.asarray(_check_positive_int(k, shape[k])).astype(np.int64)
        if np.any(blk & (blk - 1)):
            raise PerfmodelError(f"{k}={shape[k]!r} must be a power of two")
    if np.any(np.asarray(arrays["h"]) % np.asarray(arrays["h_kv"])):
        raise PerfmodelError(f"h={shape['h']!r} is not divisible by h_kv={shape['h_kv']!r}")


def _check_causal(n: Any, m: Any, causal: Any) -> None:
    if isinstance(causal, bool):
        bad = causal and np.any(np.asarray(n) != np.asarray(m))
    else:
        bad = np.any(np.asarray(causal) & (np.asarray(n) != np.asarray(m)))
    if bad:
        raise PerfmodelError(f"causal attention needs kv_len == n; got n={n!r}, kv_len={m!r}")


def calibration_profiles(
    calibration: CalibrationArg, spec: HardwareSpec | None = None
) -> dict[str, Calibration]:
    """Which profile applies to each algorithm (a profile names its algorithm, or both)."""
    given: Sequence[Any]
    if isinstance(calibration, list | tuple):
        given = calibration
    else:
        given = [] if calibration is None else [calibration]
    chosen = {a: load_calibration(None) for a in ALGORITHMS}
    for item in given:
        profile = load_calibration(item)
        if spec is not None and profile.device is not None and profile.device != spec.name:
            raise PerfmodelError(
                f"calibration {profile.name!r} was fitted on {profile.device}, not {spec.name}"
            )
        for a in ALGORITHMS if profile.algorithm is None else (profile.algorithm,):
            chosen[a] = profile
    return chosen


# --- the API --------------------------------------------------------------------
def predict(
    n: int,
    hw: str | Path | HardwareSpec,
    *,
    d: int = 128,
    h: int = 1,
    h_kv: int | None = None,
    batch: int = 1,
    dtype: str = "fp16",
    causal: bool = False,
    block_q: int = 128,
    block_k: int = 128,
    kv_len: int | None = None,
    calibration: CalibrationArg = None,
    naive: str = "minimal",
    mode: str = "forward",
    cp: int = 1,
    cp_scheme: str = "ring",
    tp: int = 1,
) -> Prediction:
    """Roofline placement of naive and flash attention for one shape on one device.

    ``naive`` is how the naive side is compiled: "minimal" (four trips of S and P,
    the chapter's model) or "xla" (the extra passes XLA adds; ``perfmodel.costs.naive``).
    ``mode`` is what is costed: "forward", "backward" (``perfmodel.costs.backward``) or
    "train" (one training step of the attention call: forward then backward).
    ``cp`` and ``tp`` split flash over devices (sequence over ``cp`` with ``cp_scheme``
    "ring", "allgather" or "ulysses"; heads over ``tp``): ``Prediction.parallel``,
    from ``perfmodel.parallel.predict_parallel`` (forward, self-attention).

    >>> p = predict(n=4096, hw="h200", h=16, mode="train")
    >>> p.flash.matmul_flops / predict(n=4096, hw="h200", h=16).flash.matmul_flops
    3.5
    """
    spec = load_hardware(hw)
    m = n if kv_len is None else kv_len
    h_kv = h if h_kv is None else h_kv
    shape = dict(n=n, m=m, d=d, h=h, h_kv=h_kv, b=batch, block_q=block_q, block_k=block_k)
    _check_shape(shape)
    _check_causal(n, m, causal)
    s = bytes_per_element(dtype)
    peak = spec.peak(dtype)
    values = shape_values(spec, s=s, **shape)
    profiles = calibration_profiles(calibration, spec)
    results = {
        a: _scalar(
            evaluate(
                model_key(a, naive, mode),
                causal=causal,
                hw=spec,
                peak=peak,
                values=values,
                calibration=profiles[a],
            ),
            profiles[a].name,
        )
        for a in ALGORITHMS
    }
    if results["flash"].sram_bytes > spec.sram_per_sm_bytes:
        raise PerfmodelError(
            f"tile block_q={block_q}, block_k={block_k} at d={d} needs "
            f"{results['flash'].sram_bytes:.0f} B of SRAM; {spec.name} has "
            f"{spec.sram_per_sm_bytes} B per SM"
        )
    # Inputs were checked above and results are our own floats: construct without
    # re-validation (model_construct), which is most of predict()'s cost otherwise.
    config = Config.model_construct(
        n=n,
        kv_len=m,
        d=d,
        h=h,
        h_kv=h_kv,
        batch=batch,
        dtype=dtype,
        causal=bool(causal),
        block_q=block_q,
        block_k=block_k,
        mode=mode,
    )
    return Prediction.model_construct(
        config=config,
        hardware=spec,
        ridge_point=spec.ridge_point(dtype),
        naive=results["naive"],
        flash=results["flash"],
        parallel=_split(
            n, m, spec, cp, cp_scheme, tp, mode, profiles["flash"], shape, dtype, causal
        ),
    )


def _split(n, m, spec, cp, cp_scheme, tp, mode, profile, shape, dtype, causal):
    """Flash over cp x tp devices, or None when both are 1."""
    if (cp, tp, cp_scheme) == (1, 1, "ring"):
        return None
    if mode != "forward" or m != n:
        raise PerfmodelError(
            f"cp={cp}, tp={tp} model forward self-attention only: {mode=}, kv_len={m}"
        )
    return predict_parallel(
        n,
        spec,
        cp=cp,
        scheme=cp_scheme,
        tp=tp,
        d=shape["d"],
        h=shape["h"],
        h_kv=shape["h_kv"],
        batch=shape["b"],
        dtype=dtype,
        causal=bool(causal),
        calibration=profile,
    )


_ROOF_KEYS = tuple((r, f"t_{r}_s") for r in ("matmul", "vector", "exp", "hbm", "l2"))


def _scalar(columns: dict[str, np.ndarray], calibration: str) -> AlgorithmPrediction:
    item: dict[str, Any] = {k: v.item() if hasattr(v, "item") else v for k, v in columns.items()}
    roofs = {roof: item.pop(key) for roof, key in _ROOF_KEYS if key in item}
    if item["l2_bytes"] != item["l2_bytes"]:  # NaN: no L2 level on this device
        item["l2_bytes"] = None
    # Built from our own computed floats: skip re-validation (model_construct) for speed.
    return AlgorithmPrediction.model_construct(roof_times_s=roofs, calibration=calibration, **item)


class SweepResult(dict):
    """Columnar sweep output: ``result["flash.time_s"]`` is a numpy array, one row a point."""

    def __len__(self) -> int:
        return len(next(iter(self.values()))) if dict.__len__(self) else 0

    def rows(self) -> list[dict[str, Any]]:
        """The same data as one dict per point."""
        return [{k: np.asarray(v[i]).item() for k, v in self.items()} for i in range(len(self))]


_SWEPT = ("n", "d", "h", "h_kv", "batch", "dtype", "causal", "block_q", "block_k", "kv_len")


def sweep(
    hw: str | Path | HardwareSpec,
    *,
    n: Any,
    d: Any = 128,
    h: Any = 1,
    h_kv: Any = None,
    batch: Any = 1,
    dtype: Any = "fp16",
    causal: Any = False,
    block_q: Any = 128,
    block_k: Any = 128,
    kv_len: Any = None,
    calibration: CalibrationArg = None,
    naive: str = "minimal",
    mode: str = "forward",
    grid: bool = True,
) -> SweepResult:
    """``predict`` over many shapes at once, vectorised.

    Any argument may be a list or array. With ``grid=True`` (the default) the result
    holds every combination; with ``grid=False`` the arguments broadcast together.

    >>> r = sweep("h100", n=[1024, 2048, 4096], d=[64, 128])
    >>> len(r), r["flash.time_s"].shape
    (6, (6,))
    """
    spec = load_hardware(hw)
    args = dict(
        n=n,
        d=d,
        h=h,
        h_kv=h_kv,
        batch=batch,
        dtype=dtype,
        causal=causal,
        block_q=block_q,
        block_k=block_k,
        kv_len=kv_len,
    )
    cols = _broadcast(args, grid)
    cols["kv_len"] = np.where(_is_none(cols["kv_len"]), cols["n"], cols["kv_len"]).astype(float)
    cols["h_kv"] = np.where(_is_none(cols["h_kv"]), cols["h"], cols["h_kv"]).astype(float)
    shape = dict(
        n=cols["n"],
        m=cols["kv_len"],
        d=cols["d"],
        h=cols["h"],
        h_kv=cols["h_kv"],
        b=cols["batch"],
        block_q=cols["block_q"],
        block_k=cols["block_k"],
    )
    _check_shape(shape)
    causal_arr = cols["causal"].astype(bool)
    _check_causal(shape["n"], shape["m"], causal_arr)
    s: Any
    peak: Any
    if _constant(cols["dtype"]):
        dtype = str(cols["dtype"].flat[0])
        s, peak = float(bytes_per_element(dtype)), spec.peak(dtype)
    else:
        dtypes, which = np.unique(cols["dtype"].astype(str), return_inverse=True)
        s = np.array([bytes_per_element(t) for t in dtypes], dtype=float)[which]
        peak = np.array([spec.peak(t) for t in dtypes])[which]
    values = shape_values(spec, s=s, **shape)
    profiles = calibration_profiles(calibration, spec)
    out = SweepResult({k: cols[k] for k in _SWEPT})
    for a in ALGORITHMS:
        cases = {
            c: evaluate(
                model_key(a, naive, mode),
                causal=c,
                hw=spec,
                peak=peak,
                values=values,
                calibration=profiles[a],
            )
            for c in (False, True)
            if np.any(causal_arr == c)
        }
        for key in next(iter(cases.values())):
            if len(cases) == 1:
                out[f"{a}.{key}"] = np.broadcast_to(
                    next(iter(cases.values()))[key], causal_arr.shape
                )
            else:
                out[f"{a}.{key}"] = np.where(causal_arr, cases[True][key], cases[False][key])
    out["flash.fits_sram"] = out["flash.sram_bytes"] <= spec.sram_per_sm_bytes
    out["speedup"] = out["naive.time_s"] / out["flash.time_s"]
    return out


def _constant(col: np.ndarray) -> bool:
    """A column that is one value broadcast (stride 0): test it once, not per row."""
    return col.size > 0 and all(stride == 0 for stride in col.strides)


def _is_none(col: np.ndarray) -> np.ndarray:
    if col.dtype != object:
        return np.zeros(col.shape, dtype=bool)
    if _constant(col):
        return np.broadcast_to(col.flat[0] is None, col.shape)
    return np.asarray([v is None for v in col.ravel()], dtype=bool).reshape(col.shape)


def _broadcast(args: dict[str, Any], grid: bool) -> dict[str, np.ndarray]:
    as_lists = {k: _as_list(v) for k, v in args.items()}
    if grid:
        lengths = [len(v) for v in as_lists.values()]
        if np.prod(lengths) > 50_000_000:
            raise PerfmodelError(f"sweep grid of {int(np.prod(lengths))} points is too large")
        if sum(length > 1 for length in lengths) <= 1:
            size = max(lengths)
            return {k: _repeat(v, size) for k, v in as_lists.items()}
        combos = list(itertools.product(*as_lists.values()))
        return {k: _column([c[i] for c in combos]) for i, k in enumerate(as_lists)}
    arrays = {k: _column(v) for k, v in as_lists.items()}
    try:
        shapes = np.broadcast_shapes(*(a.shape for a in arrays.values()))
    except ValueError as e:
        raise PerfmodelError(f"sweep arguments do not broadcast: {e}") from e
    return {k: np.broadcast_to(a, shapes) for k, a in arrays.items()}


def _as_list(value: Any) -> Any:
    if isinstance(value, str) or value is None or np.ndim(value) == 0:
        return [value]
    return value


def _column(values: Iterable[Any]) -> np.ndarray:
    if isinstance(values, np.ndarray) and values.dtype != object:
        return values
    values = list(values)
    if any(v is None for v in values) or any(isinstance(v, str) for v in values):
        return np.asarray(values, dtype=object)
    return np.asarray(values)


def _repeat(values: Any, size: int) -> np.ndarray:
    col = _column(values)
    return col if len(col) == size else np.broadcast_to(col, (size,))
