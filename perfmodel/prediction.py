"""``predict`` and ``sweep``: a shape and a device in, the roofline placement out.

Orchestration only: shapes are checked here, costs come from ``perfmodel.costs``
through ``perfmodel.evaluate``.

>>> p = predict(n=4096, hw="a100")
>>> int(p.naive.extra_memory_bytes)   # S + P: 2 x 4096² x 2 B = 67 MB
67108864
>>> p.flash.hbm_bytes < p.naive.hbm_bytes
True
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from perfmodel.arguments import check, check_columns
from perfmodel.catalog.calibration import Calibration, family_default, load_calibration
from perfmodel.catalog.frameworks import call_latency_of
from perfmodel.catalog.hardware import HardwareSpec, load_hardware
from perfmodel.catalog.kernels import KernelFamily, load_kernel
from perfmodel.costs import masks, precision
from perfmodel.errors import PerfmodelError
from perfmodel.evaluate import (
    ALGORITHMS,
    ModelKey,
    evaluate,
    evaluate_flash,
    forward_then_backward,
    model_key,
    shape_values,
)
from perfmodel.kernel_config import resolve
from perfmodel.parallel import predict_parallel
from perfmodel.results import (
    AlgorithmPrediction,
    Prediction,
    construct,
    html_table,
    markdown_table,
)
from perfmodel.roofline import is_repeated
from perfmodel.shape import Shape
from perfmodel.vocabulary import ROOFS, bytes_per_element, symbol_values

CalibrationArg = str | Path | Calibration | Sequence[str | Path | Calibration] | None


# --- input checks (each argument alone: perfmodel.arguments) ------------------------
def _check_shape(h: Any, h_kv: Any, n: Any, m: Any, causal: Any) -> None:
    """What no argument shows alone: heads that group, causal masks on square scores
    (scalars, or the columns of a sweep)."""
    if isinstance(h, int) and isinstance(n, int):  # one point, without numpy
        bad_heads, bad_causal = h % h_kv != 0, causal and n != m
        i = 0
    else:
        h, h_kv, n, m, causal = np.broadcast_arrays(h, h_kv, n, m, causal)
        heads, masks = np.flatnonzero(h % h_kv), np.flatnonzero(causal & (n != m))
        bad_heads, bad_causal = heads.size > 0, masks.size > 0
        i = heads[0] if bad_heads else (masks[0] if bad_causal else 0)
        h, h_kv, n, m = (x[i].item() for x in (h, h_kv, n, m))
    if bad_heads:
        raise PerfmodelError(f"h={h!r} is not divisible by h_kv={h_kv!r}")
    if bad_causal:
        raise PerfmodelError(f"causal attention needs kv_len == n; got n={n!r}, kv_len={m!r}")


def calibration_profiles(
    calibration: CalibrationArg,
    spec: HardwareSpec | None = None,
    family: KernelFamily | None = None,
) -> dict[str, Calibration]:
    """Which profile applies to each algorithm: a named profile for the algorithm it
    names (or both); else the datasheet default, with the flash side set by ``family``'s
    structure (``perfmodel.catalog.calibration.family_default``)."""
    given: Sequence[Any]
    if isinstance(calibration, list | tuple):
        given = calibration
    else:
        given = [] if calibration is None else [calibration]
    chosen = {a: load_calibration(None) for a in ALGORITHMS}
    if family is not None and spec is not None:
        chosen["flash"] = family_default(family, spec)
    for item in given:
        profile = load_calibration(item)
        if spec is not None and profile.device is not None and profile.device != spec.name:
            raise PerfmodelError(
                f"calibration {profile.name!r} was fitted on {profile.device}, not {spec.name}"
            )
        refines = profile.kernel not in (None, getattr(family, "name", None))
        if family is not None and refines and profile.algorithm != "naive":
            raise PerfmodelError(
                f"calibration {profile.name!r} refines kernel family {profile.kernel!r}, "
                f"not {family.name!r}; pass kernel={profile.kernel!r}"
            )
        for a in ALGORITHMS if profile.algorithm is None else (profile.algorithm,):
            chosen[a] = profile
    return chosen


def flash_family(kernel: Any, calibration: CalibrationArg) -> KernelFamily:
    """The family named, else the one a named flash profile refines, else FlashAttention-2
    (a profile of the naive side names how naive runs, not the fused kernel)."""
    if kernel is None:
        given = calibration if isinstance(calibration, list | tuple) else [calibration]
        profiles = [load_calibration(c) for c in given if c is not None]
        named = [p.kernel for p in profiles if p.algorithm != "naive"]
        kernel = next((k for k in named if k), "fa2")
    family = load_kernel(kernel)
    if family.algorithm != "flash":
        raise PerfmodelError(
            f"kernel={family.name!r} is a {family.algorithm} family; kernel= names the fused "
            f"side (naive= names how the naive side is compiled)"
        )
    return family


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
    block_q: int | None = None,
    block_k: int | None = None,
    kv_len: int | None = None,
    calibration: CalibrationArg = None,
    naive: str = "minimal",
    mode: str = "forward",
    cp: int = 1,
    cp_scheme: str = "ring",
    tp: int = 1,
    kernel: str | Path | KernelFamily | None = None,
    warps: int | None = None,
    splits: int | None = None,
    page_tokens: int | None = None,
    window: int | tuple[int | None, int | None] | None = None,
    segments: Sequence[int] | None = None,
    block_mask: Any = None,
    block_size: int | tuple[int, int] = masks.DEFAULT_BLOCK,
    fp8_as_run: bool = False,
) -> Prediction:
    """Roofline placement of naive and flash attention for one shape on one device.

    ``kernel`` is the fused side's implementation family (``perfmodel kernels list``;
    default: the family a named calibration refines, else "fa2"): its tiles, warps, GQA
    packing and K/V splits are the family's unless named here. Decode is ``n`` new tokens
    against ``kv_len`` cached ones; ``page_tokens`` reads them from a paged cache.
    ``naive`` is how the naive side is compiled: "minimal" (four trips of S and P,
    the textbook count) or "xla" (the extra passes XLA adds; ``perfmodel.costs.naive``).
    ``mode`` is what is costed: "forward", "backward" (``perfmodel.costs.backward``) or
    "train" (one training step of the attention call: forward then backward; the
    backward at the family's tile, one program per query head, no split).
    ``cp`` and ``tp`` split flash over devices (sequence over ``cp`` with ``cp_scheme``
    "ring", "allgather" or "ulysses"; heads over ``tp``): ``Prediction.parallel``,
    from ``perfmodel.parallel.predict_parallel`` (forward, self-attention).
    Masks (``perfmodel.costs.masks``; forward, self-attention): ``window`` (W, or (left,
    right) keys as ``jax.nn.dot_product_attention``'s ``local_window_size``),
    ``segments`` (packed document lengths, summing to n), ``block_mask`` (a boolean array
    over tiles of ``block_size``, or a callable ``mask_mod(b, h, q_idx, kv_idx)``): the
    flash side visits only the tiles with a score the mask keeps; the naive side computes
    every score and then masks them, as the causal mask does. With ``dtype="fp8"`` and
    ``fp8_as_run``, a family with an FP8 kernel (``specs/kernels`` ``[fp8]``) is costed as
    that kernel runs it (``perfmodel.costs.precision``: P's format, O's, the extra vector
    ops); without, every tensor and both matmuls are FP8 (the default until the explorer
    page has the same).

    >>> p = predict(n=4096, hw="h200", h=16, mode="train")
    >>> p.flash.matmul_flops / predict(n=4096, hw="h200", h=16).flash.matmul_flops
    3.5
    """
    args = check(
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
        naive=naive,
        mode=mode,
        cp=cp,
        cp_scheme=cp_scheme,
        tp=tp,
        page_tokens=page_tokens,
        warps=warps,
        **({} if splits is None else {"splits": splits}),
    )
    n, d, h, batch, causal = args["n"], args["d"], args["h"], args["batch"], args["causal"]
    block_q, block_k, dtype = args["block_q"], args["block_k"], args["dtype"]
    spec = load_hardware(hw)
    m = n if args["kv_len"] is None else args["kv_len"]
    h_kv = h if args["h_kv"] is None else args["h_kv"]
    _check_shape(h, h_kv, n, m, causal)
    mask = mask_of_args(n, m, causal, window, segments, block_mask, block_size)
    if mask is not None and (mode != "forward" or cp != 1 or tp != 1 or page_tokens):
        raise PerfmodelError(
            f"a mask ({mask.describe()}) is modelled for the forward pass on one device, "
            f"contiguous K/V: got mode={mode!r}, cp={cp}, tp={tp}, page_tokens={page_tokens}"
        )
    shape = symbol_values(n=n, kv_len=m, d=d, h=h, h_kv=h_kv, batch=batch)
    family = flash_family(kernel, calibration)
    s = bytes_per_element(dtype)
    if not isinstance(fp8_as_run, bool):
        raise PerfmodelError(f"fp8_as_run={fp8_as_run!r} must be True or False")
    peak, fp8 = fp8_costs(family, spec, dtype) if fp8_as_run else (spec.peak(dtype), None)
    config = resolve(
        family,
        spec,
        **shape,
        s=s,
        causal=causal,
        block_q=block_q,
        block_k=block_k,
        warps=args["warps"],
        splits=splits,
    )
    profiles = calibration_profiles(calibration, spec, family)
    naive_values = shape_values(spec, s=s, **shape, block_q=config.block_q, block_k=config.block_k)
    naive_out = evaluate(
        model_key("naive", naive, mode),
        causal=causal or mask is not None,  # every score, then the mask (costs.naive)
        hw=spec,
        peak=spec.peak(dtype),
        values=naive_values,
        calibration=profiles["naive"],
    )
    flash_out = _flash_side(
        mode,
        config,
        causal=causal,
        hw=spec,
        peak=peak,
        shape={**shape, "s": s, "page": page_tokens or 1},
        calibration=profiles["flash"],
        naive=naive,
        family=family,
        paged=page_tokens is not None,
        mask=mask,
        fp8=fp8,
    )
    results = {
        "naive": _scalar(naive_out, profiles["naive"].name),
        "flash": _scalar(flash_out, profiles["flash"].name),
    }
    # Inputs were checked above and results are our own floats: construct without
    # re-validation (results.construct), which is most of predict()'s cost otherwise.
    config = Shape(
        n=n,
        kv_len=m,
        d=d,
        h=h,
        h_kv=h_kv,
        batch=batch,
        dtype=dtype,
        causal=causal,
        block_q=int(config.block_q),
        block_k=int(config.block_k),
        mode=mode,
        kernel=family.name,
        warps=int(config.warps),
        splits=int(config.splits),
        pack=int(config.pack),
    )
    return construct(
        Prediction,
        dict(
            config=config,
            hardware=spec,
            ridge_point=spec.ridge_point(dtype),
            naive=results["naive"],
            flash=results["flash"],
            parallel=_split(
                n, m, spec, cp, cp_scheme, tp, mode, profiles["flash"], shape, dtype, causal
            ),
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


_ROOF_KEYS = tuple((r, f"t_{r}_s") for r in ROOFS)


def mask_of_args(n, m, causal, window, segments, block_mask, block_size) -> Any:
    """The checked mask of ``predict``'s mask arguments, or None when they ask for none
    beyond ``causal`` (``costs.masks.mask_of``)."""
    if window is None and segments is None and block_mask is None:
        return None
    kwargs = dict(window=window, segments=segments, block_mask=block_mask)
    return masks.mask_of(n, m, causal=bool(causal), block_size=block_size, **kwargs)


def fp8_costs(family: KernelFamily, spec: HardwareSpec, dtype: str) -> tuple[float, Any]:
    """The matrix rate and the FP8 form's values for ``dtype`` (None unless ``fp8`` and
    the family has an FP8 kernel; a family without one is costed all in FP8, no
    conversion: a hypothetical FP8 build of it)."""
    peak = spec.peak(dtype)
    facts = family.fp8
    if dtype != "fp8" or facts is None:
        return peak, None
    wide = spec.peak(facts.p) if facts.p in ("bf16", "fp16") else peak
    values = dict(
        s_out=precision.output_bytes(facts.output),
        fp8_score_ops=precision.vector_per_score(p=facts.p, amax=facts.amax),
        fp8_output_ops=precision.vector_per_output(amax=facts.amax),
    )
    return precision.matmul_rate(peak, wide, p=facts.p), values


def _flash_side(
    mode: str,
    config: Any,
    *,
    shape: dict,
    naive: str,
    family: KernelFamily,
    paged: bool = False,
    mask: Any = None,
    fp8: dict | None = None,
    **common: Any,
) -> dict[str, Any]:
    """The fused side: the family's forward launch; the backward (one program per query
    head, at the family's tile) after it for "train", alone for "backward"."""
    framework_s = call_latency_of(family.framework)
    forms = dict(paged=paged, mask=mask, fp8=fp8)
    forward = (
        evaluate_flash(config, shape=shape, framework_latency_s=framework_s, **forms, **common)
        if mode != "backward"
        else None
    )
    if mode == "forward":
        return forward
    sizes = {k: v for k, v in shape.items() if k != "page"}
    values = shape_values(common["hw"], **sizes, block_q=config.block_q, block_k=config.block_k)
    backward = evaluate(model_key("flash", naive, "backward"), values=values, **common)
    return backward if forward is None else forward_then_backward(forward, backward)


#: numpy scalars and 0-d arrays: one point's values as numpy gives them.
_NUMPY = (np.generic, np.ndarray)


#: The columns of ``evaluate`` that an AlgorithmPrediction holds: its fields as they
#: are, and each roof's time (``roof_times_s``).
_COLUMNS = (
    *(f for f in AlgorithmPrediction.model_fields if f not in ("roof_times_s", "calibration")),
    *(key for _, key in _ROOF_KEYS),
)


def _scalar(columns: dict[str, Any], calibration: str) -> AlgorithmPrediction:
    item = {k: v.item() if isinstance(v := columns.get(k), _NUMPY) else v for k in _COLUMNS}
    latency = item["call_latency_s"]
    item["call_latency_s"] = None if latency is None or latency != latency else latency
    item["roof_times_s"] = {r: item[key] for r, key in _ROOF_KEYS if item[key] is not None}
    item["calibration"] = calibration
    if item["l2_bytes"] != item["l2_bytes"]:  # NaN: no L2 level on this device
        item["l2_bytes"] = None
    # Built from our own computed floats: skip re-validation for speed.
    return construct(AlgorithmPrediction, item)


class SweepResult(dict):
    """Columnar sweep output: ``result["flash.time_s"]`` is a numpy array, one row a point."""

    def __len__(self) -> int:
        return len(next(iter(self.values()))) if dict.__len__(self) else 0

    def rows(self) -> list[dict[str, Any]]:
        """The same data as one dict per point."""
        return [{k: np.asarray(v[i]).item() for k, v in self.items()} for i in range(len(self))]

    #: Columns a notebook shows (every column stays in the dict), and rows at each end.
    SHOWN = ("naive.time_s", "flash.time_s", "speedup", "naive.bound", "flash.bound")
    EDGE = 8

    def _table(self) -> tuple[str, tuple[str, ...], list[list[str]], list[str]]:
        inputs = [k for k in _SWEPT if k in self and len(np.unique(self[k].astype(str))) > 1]
        cols = (*(inputs or ["n"]), *(c for c in self.SHOWN if c in self))
        idx = list(range(len(self)))
        if len(idx) > 2 * self.EDGE:
            idx = idx[: self.EDGE] + [-1] + idx[-self.EDGE :]
        rows = [["…"] * len(cols) if i < 0 else [_cell(self[c][i]) for c in cols] for i in idx]
        fixed = ", ".join(f"{k}={_cell(self[k][0])}" for k in _SWEPT if k in self and k not in cols)
        notes = [f"{len(self)} points, {len(self.keys())} columns; fixed: {fixed}"]
        return "sweep", cols, rows, notes

    def _repr_html_(self) -> str:
        return html_table(*self._table())

    def _repr_markdown_(self) -> str:
        return markdown_table(*self._table())


def _cell(value: Any) -> str:
    value = np.asarray(value).item()
    return f"{value:.4g}" if isinstance(value, float) else str(value)


_SWEPT = ("n", "d", "h", "h_kv", "batch", "dtype", "causal", "block_q", "block_k", "kv_len")
#: Points evaluated at once: one chunk's temporaries stay small (and in cache).
CHUNK_POINTS = 1 << 15
#: Largest result ``sweep`` builds unless given a larger ``max_bytes`` (2 GiB).
MAX_RESULT_BYTES = 2 * 2**30


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
    block_q: Any = None,
    block_k: Any = None,
    kv_len: Any = None,
    calibration: CalibrationArg = None,
    naive: str = "minimal",
    mode: str = "forward",
    kernel: str | Path | KernelFamily | None = None,
    grid: bool = True,
    columns: Sequence[str] | None = None,
    max_bytes: int = MAX_RESULT_BYTES,
    window: int | tuple[int | None, int | None] | None = None,
) -> SweepResult:
    """``predict`` over many shapes at once, vectorised.

    Any argument may be a list or array. With ``grid=True`` (the default) the result
    holds every combination; with ``grid=False`` the arguments broadcast together.
    ``columns`` keeps only the named results (less memory: the inputs are always kept).
    The result's size is estimated first: above ``max_bytes`` the sweep is refused
    before anything is computed. Points are evaluated in chunks of ``CHUNK_POINTS``,
    each causal case on its own points. Tiles default to the kernel family's per head
    dim; a named tile that does not fit the device is an error, as in ``predict``.
    ``window``: one sliding window for every point (as ``predict``'s; self-attention).

    >>> r = sweep("h100", n=[1024, 2048, 4096], d=[64, 128])
    >>> len(r), r["flash.time_s"].shape
    (6, (6,))
    >>> sweep("h100", n=range(1, 10**6), d=range(1, 10**4))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    perfmodel.errors.PerfmodelError: sweep of 9,998,990,001 points needs about ... GB ...
    """
    flags = check(grid=grid, naive=naive, mode=mode)
    spec = load_hardware(hw)
    args = check_columns(
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
    size = _size(args, flags["grid"])
    keys = {a: model_key(a, flags["naive"], flags["mode"]) for a in ALGORITHMS}
    wanted = _wanted(spec, keys, columns)
    varying = sum(len(a) > 1 for a in args.values())
    estimate = size * 8 * (len(wanted) + varying + 2)
    if estimate > max_bytes:
        raise PerfmodelError(
            f"sweep of {size:,} points needs about {estimate / 1e9:.2g} GB ({len(wanted)} "
            f"columns), above max_bytes={max_bytes:,}: fewer points, columns=[...], or a "
            "larger max_bytes"
        )
    cols = _broadcast(args, flags["grid"], size)
    cols["kv_len"] = _default(cols["kv_len"], cols["n"])
    cols["h_kv"] = _default(cols["h_kv"], cols["h"])
    _check_shape(cols["h"], cols["h_kv"], cols["n"], cols["kv_len"], cols["causal"])
    family = flash_family(kernel, calibration)
    profiles = calibration_profiles(calibration, spec, family)
    launch = dict(family=family, naive=flags["naive"], mode=flags["mode"], window=window)
    if window is not None:  # checked once per mask side (causal or not) and shape
        for c in {bool(x) for x in np.atleast_1d(cols["causal"])}:
            if np.any(cols["kv_len"] != cols["n"]) or flags["mode"] != "forward":
                raise PerfmodelError(
                    f"window={window!r} is modelled for forward self-attention: kv_len must "
                    f"equal n, mode={flags['mode']!r}"
                )
            mask_of_args(1, 1, c, window, None, None, masks.DEFAULT_BLOCK)
    results = _evaluate_chunks(spec, cols, profiles, keys, wanted, size, launch)
    out = SweepResult({k: cols[k] for k in _SWEPT})
    out["block_q"], out["block_k"] = results.pop("block_q"), results.pop("block_k")
    out.update((k, v) for k, v in results.items() if k in wanted)
    return out


def _size(args: dict[str, np.ndarray], grid: bool) -> int:
    """Points of the sweep: the product of the lengths, or the one common length."""
    lengths = [len(a) for a in args.values()]
    if grid:
        return int(np.prod(lengths, dtype=object))
    longest = max(lengths)
    for k, a in args.items():
        if len(a) not in (1, longest):
            raise PerfmodelError(
                f"{k} has {len(a)} values and another argument {longest}: with grid=False "
                "every list has one length (or one value)"
            )
    return longest


def _broadcast(args: dict[str, np.ndarray], grid: bool, size: int) -> dict[str, np.ndarray]:
    """Every argument as a column of ``size`` (a stride-0 view where it is one value)."""
    varying = [k for k, a in args.items() if len(a) > 1]
    if not grid or len(varying) <= 1:
        return {k: np.broadcast_to(a, (size,)) for k, a in args.items()}
    index = np.unravel_index(np.arange(size), [len(a) for a in args.values()])
    return {
        k: (a[i] if len(a) > 1 else np.broadcast_to(a, (size,)))
        for (k, a), i in zip(args.items(), index, strict=True)
    }


def _default(col: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    """``col`` where given, ``fallback`` where None (kv_len -> n, h_kv -> h)."""
    if col.dtype != object:
        return col
    if is_repeated(col):
        return fallback if col[0] is None else np.broadcast_to(np.int64(col[0]), col.shape)
    none = np.asarray([v is None for v in col], dtype=bool)
    return np.where(none, fallback, np.where(none, 0, col).astype(np.int64))


def _output_names(spec: HardwareSpec, keys: dict[str, ModelKey]) -> tuple[str, ...]:
    """The result columns on this device (one point evaluated to list them)."""
    one = shape_values(spec, n=128, m=128, d=64, h=1, h_kv=1, b=1, block_q=64, block_k=64, s=2)
    names = []
    for a in ALGORITHMS:
        res = evaluate(
            keys[a],
            causal=False,
            hw=spec,
            peak=1e12,
            values=one,
            calibration=load_calibration(None),
        )
        names += [f"{a}.{k}" for k in res]
    launch = ("pack", "splits", "blocks_per_sm", "spilled_registers_per_thread")
    return (*names, *(f"flash.{k}" for k in launch), "flash.fits_sram", "speedup")


def _wanted(spec: HardwareSpec, keys: dict[str, ModelKey], columns: Any) -> set[str]:
    known = _output_names(spec, keys)
    if columns is None:
        return set(known)
    if isinstance(columns, str) or not all(isinstance(c, str) for c in columns):
        raise PerfmodelError(f"columns={columns!r} must be a list of result names")
    unknown = [c for c in columns if c not in known and c not in _SWEPT]
    if unknown:
        raise PerfmodelError(f"columns={unknown!r} are not results; known: {', '.join(known)}")
    return set(columns)


def _per_point_dtype(spec: HardwareSpec, dtypes: np.ndarray) -> tuple[Any, Any]:
    """Bytes per element and matrix peak: scalars for one dtype, else columns."""
    if is_repeated(dtypes):
        return float(bytes_per_element(str(dtypes[0]))), spec.peak(str(dtypes[0]))
    names, which = np.unique(dtypes, return_inverse=True)
    s = np.array([bytes_per_element(t) for t in names], dtype=float)[which]
    return s, np.array([spec.peak(t) for t in names])[which]


class _Column:
    """One result column filled chunk by chunk; one broadcast value while it is one."""

    def __init__(self, size: int):
        self.size, self.value, self.array = size, None, None

    def put(self, where: Any, value: Any) -> None:
        constant = self.array is None and np.ndim(value) == 0
        if constant and (self.value is None or self.value == value):
            self.value = value
            return
        if self.array is None:
            sample = np.asarray(value)
            dtype = object if sample.dtype.kind in "OU" else sample.dtype
            self.array = np.empty(self.size, dtype=dtype)
            if self.value is not None:
                self.array[...] = self.value
        self.array[where] = value

    def column(self) -> np.ndarray:
        if self.array is not None:
            return self.array
        return np.broadcast_to(np.asarray(self.value), (self.size,))


def _evaluate_chunks(
    spec: HardwareSpec,
    cols: dict,
    profiles: dict,
    keys: dict,
    wanted: set[str],
    size: int,
    launch: dict,
) -> dict[str, np.ndarray]:
    """The result columns, CHUNK_POINTS points at a time, each causal case on its points;
    the fused side as ``launch["family"]`` launches each point (its tiles unless named)."""
    s, peak = _per_point_dtype(spec, cols["dtype"])
    api = ("n", "kv_len", "d", "h", "h_kv", "batch", "block_q", "block_k")
    shape = {**symbol_values(**{k: cols[k] for k in api}), "s": s, "peak": peak}
    need = wanted | {"naive.time_s", "flash.time_s", "flash.sram_bytes", "block_q", "block_k"}
    out: dict[str, _Column] = {}
    causal = cols["causal"]
    for start in range(0, size, CHUNK_POINTS):
        stop = min(size, start + CHUNK_POINTS)
        part = {k: (v[start:stop] if np.ndim(v) else v) for k, v in shape.items()}
        if is_repeated(causal):
            cases = [(bool(causal[0]), slice(start, stop), part)]
        else:
            flags = causal[start:stop]
            cases = []
            for c in (False, True):
                sel = np.flatnonzero(flags == c)
                if sel.size:
                    sub = {k: (v[sel] if np.ndim(v) else v) for k, v in part.items()}
                    cases.append((c, start + sel, sub))
        for c, where, sub in cases:
            peak_part = sub.pop("peak")
            named = {k: _named(sub.pop(k)) for k in ("block_q", "block_k")}
            config = resolve(launch["family"], spec, **sub, causal=c, **named)
            tiles = dict(block_q=config.block_q, block_k=config.block_k)
            for k, v in tiles.items():
                out.setdefault(k, _Column(size)).put(where, v)
            mask = mask_of_args(1, 1, c, launch["window"], None, None, masks.DEFAULT_BLOCK)
            common = dict(hw=spec, peak=peak_part)
            naive = evaluate(
                keys["naive"],
                values=shape_values(spec, **sub, **tiles),
                calibration=profiles["naive"],
                causal=c or mask is not None,
                **common,
            )
            flash = _flash_side(
                launch["mode"],
                config,
                shape=sub,
                calibration=profiles["flash"],
                naive=launch["naive"],
                family=launch["family"],
                mask=mask,
                causal=c,
                **common,
            )
            for a, res in (("naive", naive), ("flash", flash)):
                for key, value in res.items():
                    if f"{a}.{key}" in need:
                        out.setdefault(f"{a}.{key}", _Column(size)).put(where, value)
    result = {k: col.column() for k, col in out.items()}
    result["flash.fits_sram"] = np.broadcast_to(True, (size,))  # a tile that does not fit: error
    result["speedup"] = result["naive.time_s"] / result["flash.time_s"]
    return result


def _named(col: Any) -> Any:
    """A tile column as given (None where the family picks; all None: the family's)."""
    if np.ndim(col) == 0:
        return None if col is None else col
    if col.dtype != object:
        return col
    none = np.equal(col[:1] if is_repeated(col) else col, None)  # one value: test it once
    if none.all():
        return None
    if none.any():
        raise PerfmodelError("block_q/block_k: give a tile for every point, or for none")
    return col.astype(np.int64)
