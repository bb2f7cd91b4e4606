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

import functools
import hashlib
import inspect
import json
import os
import shutil
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import astuple, dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import numpy as np

from perfmodel.arguments import PARAMETERS, check, check_columns, fail
from perfmodel.atomic import write_text
from perfmodel.catalog.calibration import (
    Calibration,
    family_default,
    load_calibration,
    naive_default,
)
from perfmodel.catalog.ceilings import interpolate
from perfmodel.catalog.data import data_dir
from perfmodel.catalog.frameworks import call_latency_of
from perfmodel.catalog.hardware import HardwareSpec, load_hardware
from perfmodel.catalog.hardware import registry as hardware_registry
from perfmodel.catalog.kernels import KernelFamily, backward_of, load_kernel
from perfmodel.catalog.kernels import registry as kernel_registry
from perfmodel.compile import KEEP_FILES, cache_folder, fingerprint
from perfmodel.costs import masks, precision
from perfmodel.errors import PerfmodelError, named, spell
from perfmodel.evaluate import (
    EFFECT_COLUMNS,
    EFFECT_NAMES,
    FLOOR_FIELDS,
    OnChip,
    evaluate,
    evaluate_flash,
    forward_then_backward,
    lower_floor,
    model_key,
    narrow_dq_ratio,
    roof_rates,
    shape_values,
)
from perfmodel.launch import (
    BackwardLaunch,
    ByIdentity,
    backward_imbalance,
    backward_launch,
    resolve,
    resolve_point,
)
from perfmodel.parallel import ParallelPrediction, predict_parallel
from perfmodel.results import (
    SIDE_FIELDS,
    AlgorithmPrediction,
    Prediction,
    adopt,
    construct,
    html_table,
    markdown_table,
    text_table,
)
from perfmodel.roofline import NUMBERS, is_repeated
from perfmodel.roofline import rows as roofline_rows
from perfmodel.shape import Shape
from perfmodel.trace import Miss, Paths, as_int, built_as, flat
from perfmodel.vocabulary import (
    ALGORITHMS,
    ROOFS,
    SHAPE_DEFAULTS,
    NaiveCompile,
    WindowAlign,
    bytes_per_element,
    symbol_values,
)

CalibrationArg = str | Path | Calibration | Sequence[str | Path | Calibration] | None


# --- input checks (each argument alone: perfmodel.arguments) ------------------------
def _check_shape(h: Any, h_kv: Any, n: Any, m: Any, causal: Any) -> None:
    """What no argument shows alone: heads that group, causal masks on square scores
    (scalars, or the columns of a sweep)."""
    if isinstance(h, int) and isinstance(n, int):  # one point, without numpy
        bad_heads, bad_causal = h % h_kv != 0, causal and n != m
        i = 0
    elif h_kv is h and m is n:  # the defaults of a sweep (h_kv = h, kv_len = n): both hold
        return
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
    ceilings: str = "measured",
) -> dict[str, Calibration]:
    """Which profile applies to each algorithm: a named profile for the algorithm it
    names (or both); else the datasheet default, with the flash side set by ``family``'s
    structure (``perfmodel.catalog.calibration.family_default``)."""
    given: Sequence[Any]
    if isinstance(calibration, list | tuple):
        given = calibration
    else:
        given = [] if calibration is None else [calibration]
    chosen: dict[str, Calibration] = {str(a): load_calibration(None) for a in ALGORITHMS}
    if spec is not None:
        chosen["naive"] = naive_default(spec, ceilings)
    if family is not None and spec is not None:
        chosen["flash"] = family_default(family, spec, ceilings)
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
                f"not {family.name!r}; pass {spell('kernel', profile.kernel)}"
            )
        for a in ALGORITHMS if profile.algorithm is None else (profile.algorithm,):
            chosen[str(a)] = profile
            if a == "flash":  # a named flash profile is used for its backward too; else
                chosen["backward"] = profile  # each backward's own (``_Engine.backward``)
    return chosen


def flash_family(
    kernel: Any, calibration: CalibrationArg, spec: HardwareSpec | None = None
) -> KernelFamily:
    """The family named, else the one a named flash profile refines, else FlashAttention-2
    (a profile of the naive side names how naive runs, not the fused kernel). On ``spec``:
    a family outside its ``archs`` is refused, and so is the default on a TPU (every
    family is a GPU kernel: its tiles and warps are CUDA's, so the caller names one)."""
    if kernel is None:
        given = calibration if isinstance(calibration, list | tuple) else [calibration]
        profiles = [load_calibration(c) for c in given if c is not None]  # type: ignore[arg-type]
        refined = [p.kernel for p in profiles if p.algorithm != "naive"]
        kernel = next((k for k in refined if k), None)
        if kernel is None and spec is not None and spec.kind == "tpu":
            raise PerfmodelError(
                f"{spell('kernel', None)} on {spec.name}: no kernel family models a TPU kernel "
                "(each in perfmodel kernels list is a GPU kernel); name one, e.g. "
                f"{spell('kernel', 'fa2')}, to cost its launch on this device's roofs"
            )
        kernel = kernel or "fa2"
    family = load_kernel(kernel)
    if family.algorithm != "flash":
        raise PerfmodelError(
            f"{spell('kernel', family.name)} is a {family.algorithm} family; {named('kernel')} "
            f"names the fused side ({named('naive')} names how the naive side is compiled)"
        )
    if spec is not None and family.archs and spec.arch not in family.archs:
        raise PerfmodelError(
            f"{spell('kernel', family.name)} runs on {', '.join(family.archs)} only, not on "
            f"{spec.name} (arch={spec.arch!r}); name another family (perfmodel kernels list)"
        )
    return family


# --- results remembered: an equal call gets an equal prediction, sharing nothing mutable ---
#: Predictions kept (the most recent; each a few kB).
REMEMBERED = 1024
_Fn = TypeVar("_Fn", bound=Callable[..., Any])


def unshared(p: Prediction) -> Prediction:
    """An equal prediction that shares no mutable part with ``p``: its sides' dicts of
    roof and effect times (and the split's chunk times) are copies. The frozen models,
    the shape (a frozen dataclass of numbers and tuples) and the catalog's device are
    shared."""

    def side(a: AlgorithmPrediction) -> AlgorithmPrediction:
        return _copied(a, roof_times_s=dict(a.roof_times_s), effects_s=dict(a.effects_s))

    split = p.parallel
    if split is not None:
        split = replace(split, chunk_times_s=dict(split.chunk_times_s))
    return _copied(p, naive=side(p.naive), flash=side(p.flash), parallel=split)


_Model = TypeVar("_Model", AlgorithmPrediction, Prediction)


def _copied(model: _Model, **changed: Any) -> _Model:
    """``model`` with some fields replaced, built as :func:`perfmodel.results.construct`
    builds it (its fields are ours, already checked), from its own ``__dict__``."""
    fields = model.__dict__.copy()
    fields.update(changed)
    return construct(type(model), fields)


def _remembered(fn: _Fn) -> _Fn:
    """``fn(n, hw, **options)`` answered from the last :data:`REMEMBERED` calls with the
    same arguments (``predict.forget()`` empties it), each answer :func:`unshared` (a
    caller that changes a dict of its result changes no other result). Arguments that
    are not plain values (an array mask, a callable) are not remembered, and a file
    named by path is remembered with its size and modification time."""
    done: OrderedDict[tuple[Any, ...], Any] = OrderedDict()  # the oldest out in O(1)

    @functools.wraps(fn)
    def remembering(n: Any, hw: Any, **options: Any) -> Any:
        try:
            key = (
                _key(n),
                _key(hw, True, _FILES["hw"]),
                *[(k, _key(v, k in _FILES, _FILES.get(k))) for k, v in sorted(options.items())],
            )
        except _NotPlain:
            return fn(n, hw, **options)
        if key in done:
            return done[key]()
        build = _traced(key, n, hw, options)
        if build is None:
            result = fn(n, hw, **options)
            build = functools.partial(unshared, unshared(result))
        else:
            result = build()
        if len(done) >= REMEMBERED:
            done.popitem(last=False)
        done[key] = build
        return result

    remembering.forget = done.clear  # type: ignore[attr-defined]
    return remembering  # type: ignore[return-value]


# --- a new shape of a known case: the engine's code for it, traced ---------------------
#: ``predict``'s arguments a traced case takes per call (the others are its key).
_SHAPE_ARGS = ("n", "h", "h_kv", "batch", "kv_len")
_SHAPE_NAMES = frozenset(_SHAPE_ARGS)
#: Cases kept (each the code printed for its traces).
CASES = 256
_CASES: dict[tuple[Any, ...], _Case | None] = {}


def _traced(
    key: tuple[Any, ...], n: Any, hw: Any, options: dict[str, Any]
) -> Callable[[], Prediction] | None:
    """A builder of ``predict(n, hw, **options)`` by the code traced for its case (its
    arguments but the shape's: :data:`_SHAPE_ARGS`), None where it has none for this
    point (the caller runs ``predict``, which also raises the errors of bad input)."""
    case = (key[1], *[item for item in key[2:] if item[0] not in _SHAPE_NAMES])
    known = _CASES.get(case, _ABSENT)
    if known is _ABSENT or known is _ONCE:
        if known is _ABSENT:  # a case called once (a script's one call) is not traced
            if len(_CASES) >= CASES:
                del _CASES[next(iter(_CASES))]
            _CASES[case] = _ONCE
            return None
        known = _Case.of(case, n, hw, options)
        if known is _ABSENT:  # an error: predict raises it
            return None
        _CASES[case] = known
    return None if known is None else known.predict(n, options)


#: A case called once so far.
_ONCE: Any = object()


class _Case:
    """One case of ``predict`` (device, kernel family, profiles, mode, dtype, head dim,
    causal flag, launch options: every argument but the shape's), its points evaluated by
    the engine's own code traced on them (``perfmodel.trace``): each new branch of it
    traced once, its prediction at that point checked against the engine's, then every
    point of that branch one call of the printed code, and its result built by another."""

    def __init__(self, prepared: _Prepared, case: tuple[Any, ...] = ()):
        self.prepared = prepared
        self.causal = prepared.args["causal"]
        self.paths = _paths(prepared)
        #: The file its traces are kept in (:func:`_traces_file`), read back here.
        self.stored = stored = _traces_file(case) if case else None
        if stored is not None and stored.is_file():
            try:
                self.paths.restore(json.loads(stored.read_text()))
            except (OSError, ValueError, KeyError, TypeError, AttributeError, ImportError):
                self.paths = _paths(prepared)

    @classmethod
    def of(cls, case: tuple[Any, ...], n: Any, hw: Any, options: dict[str, Any]) -> Any:
        """The case of this call; None where its points are not traced (several devices,
        a mask: the engine reads more of the point than its numbers); ``_ABSENT`` where
        the call is an error."""
        try:
            prepared = _prepare(n, hw, **{**_DEFAULTS, **options})
        except PerfmodelError:
            return _ABSENT
        args = prepared.args
        if (args["cp"], args["tp"], args["cp_scheme"]) != (1, 1, "ring"):
            return None
        if prepared.engine.mask_args:
            return None
        return cls(prepared, case)

    def run(self, n: Any, m: Any, h: Any, h_kv: Any, b: Any) -> Prediction:
        """``predict`` of this case at one shape (numbers, or traced numbers)."""
        p = self.prepared
        args = {**p.args, "n": n, "kv_len": m, "h": h, "h_kv": h_kv, "batch": b}
        point = {**p.point, "n": n, "m": m, "h": h, "h_kv": h_kv, "b": b}
        out = p.engine.evaluate(point, args["causal"], p.named, paged=args["paged"])
        return _answer(p._replace(args=args, point=point), out)

    def predict(self, n: Any, options: dict[str, Any]) -> Callable[[], Prediction] | None:
        """A builder of ``predict``'s answer (each call a new prediction), None where the
        printed code has none for this point (or its shape is an error)."""
        try:
            n = _CHECK_N("n", n)
            h, h_kv, batch, kv_len = [
                check(name, options.get(name, default)) for name, check, default in _SHAPE_CHECKS
            ]
            m = n if kv_len is None else kv_len
            h_kv = h if h_kv is None else h_kv
            _check_shape(h, h_kv, n, m, self.causal)
        except PerfmodelError:
            return None
        paths = self.paths
        try:
            found = paths.fn(n, m, h, h_kv, batch)
            if found is None and not paths.full():
                if _CREDIT.left >= 0 or not paths.leaves:
                    self._trace((n, m, h, h_kv, batch), charged=bool(paths.leaves))
                    found = paths.fn(n, m, h, h_kv, batch)
        except (Miss, ArithmeticError):  # a branch no trace took; an arm that raises
            return None
        if found is None or found[0] < 0:
            return None
        _CREDIT.left += _CREDIT.engine_s * _CREDIT.share  # a share of the time saved
        return functools.partial(paths.leaves[found[0]], found[1])

    def _trace(self, shape: tuple[int, ...], charged: bool = True) -> None:
        """Trace the engine at this point; keep the trace where its prediction at the
        point is the engine's, bit for bit (else, or where it stopped: the point's
        branch is evaluated by the engine from now on)."""
        if not _TRACING.acquire(blocking=False):  # another thread is tracing: not now
            return
        try:
            self._trace_one(shape, charged)
        finally:
            _TRACING.release()

    def _trace_one(self, shape: tuple[int, ...], charged: bool) -> None:
        start = time.perf_counter()
        result, recorder = self.paths.trace(self.run, shape)
        if result is None:
            self.paths.add(recorder, None)
            _CREDIT.left -= (time.perf_counter() - start) * charged
            return
        engine = time.perf_counter()
        reference = flat(self.run(*shape))
        _CREDIT.engine_s = time.perf_counter() - engine
        traced = flat(result)
        try:
            if len(traced) == len(reference) and all(
                a[0] == b[0] and _identical(a[1], b[1])
                for a, b in zip(traced, reference, strict=True)
            ):
                self.paths.add_result(recorder, result)
            else:
                self.paths.add(recorder, None)
        except AssertionError:  # traces that disagree: no more of this case's
            self.paths.most = 0
        else:
            self._store()
        _CREDIT.left -= (time.perf_counter() - start) * charged

    def _store(self) -> None:
        """Keep the case's traces in its file, for later processes (where they read no
        constant of this process only)."""
        state = None if self.stored is None else self.paths.state()
        if state is None or self.stored is None:
            return
        try:
            write_text(self.stored, json.dumps(state))
        except OSError:  # a read-only cache folder: this process traces for itself
            self.stored = None


def _paths(prepared: _Prepared) -> Paths:
    """A case's traces: of the shape's numbers (checked positive and within their limits
    by :meth:`_Case.predict` before the printed code runs), the device a constant it names."""
    limits = [float(PARAMETERS[name].limit) for name in _TRACED_ARGS]  # type: ignore[attr-defined]
    return Paths(_TRACED_INPUTS, constants={"_hw": prepared.spec}, positive=True, limits=limits)


def _traces_file(case: tuple[Any, ...]) -> Path | None:
    """The file the traces of ``case`` are kept in: under the cache folder, in a folder
    named by the package's sources and the shipped data a case reads (devices, kernel
    families, profiles, frameworks), so that a changed rule or number is traced again;
    None for a case named by a catalog object (not by name or file)."""
    folder = _traces_folder()
    text = repr(case)
    if folder is None or "ByIdentity" in text or " at 0x" in text:
        return None
    return folder / f"{hashlib.sha256(text.encode()).hexdigest()[:32]}.json"


@functools.cache
def _traces_folder() -> Path | None:
    root = cache_folder()
    if root is None:
        return None
    digest = hashlib.sha256(fingerprint().encode())
    package = Path(__file__).resolve().parent
    files = sorted(package.rglob("*.py"))
    for kind in ("devices", "kernels", "calibration", "frameworks"):
        files += sorted(p for p in data_dir(kind).rglob("*") if p.is_file())
    for path in files:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    folder = root / f"traces-{digest.hexdigest()[:20]}"
    try:
        if not folder.is_dir():  # a new version: the oldest folders go (compile.KEEP_FILES)
            folder.mkdir(parents=True)
            older = sorted(root.glob("traces-*"), key=lambda p: p.stat().st_mtime_ns)
            for old in older[: -KEEP_FILES]:
                shutil.rmtree(old, ignore_errors=True)
    except OSError:
        return None
    return folder


class _Credit:
    """Tracing pays for itself: each point the printed code answers saves what the
    engine takes (``engine_s``, the last one measured), and a new branch is traced (a
    few tens of milliseconds) only while a ``share`` of the time saved so far covers the
    time traced (``left`` >= 0; a case's first branch is traced regardless). Until then
    a point of a branch not traced is evaluated by the engine, as without tracing."""

    left = 0.0
    engine_s = 0.0
    share = 0.1


_CREDIT = _Credit()


#: One trace at a time (a trace records into one recorder, ``perfmodel.trace``).
_TRACING = threading.Lock()
#: The point's numbers a traced case takes (symbol names: ``_Engine.evaluate``'s point).
_TRACED_INPUTS = ("n", "m", "h", "h_kv", "b")
#: The arguments of ``predict`` they come from, in the same order.
_TRACED_ARGS = ("n", "kv_len", "h", "h_kv", "batch")


def _shape_of(fields: dict[str, Any]) -> Shape:
    """A :class:`Shape` of its fields (every one given), as the printed builders make it."""
    shape = object.__new__(Shape)
    object.__setattr__(shape, "__dict__", fields)  # a new dict of the builder's: its own
    return shape


built_as(Shape, _shape_of)
built_as(Prediction, functools.partial(adopt, Prediction))
built_as(AlgorithmPrediction, functools.partial(adopt, AlgorithmPrediction))


def _identical(a: Any, b: Any) -> bool:
    """The same type and value (NaN as NaN)."""
    return type(a) is type(b) and (a == b or (a != a and b != b))


class _NotPlain(Exception):
    """An argument a remembered result cannot be keyed on."""


_PLAIN = (int, float, bool, str, type(None))
_NUMBERS = frozenset((int, float, bool, type(None)))  # never a file
#: The arguments that may name a file (a device, a kernel family, a profile), each with
#: the catalog whose names it looks up before a file of the same name (None: files first).
_FILES: dict[str, Callable[[], Mapping[str, Any]] | None] = {
    "hw": hardware_registry,
    "kernel": kernel_registry,
    "calibration": None,
}


def _key(
    value: Any, file: bool = False, catalog: Callable[[], Mapping[str, Any]] | None = None
) -> Any:
    """A hashable stand-in for one argument: the value and its type (``1``, ``1.0`` and
    ``True`` are checked differently), a file's path with its size and time (not a name
    of the ``catalog`` the argument is looked up in first: ``catalog.registry.lookup``),
    a catalog object by identity (frozen), a list or tuple item by item."""
    kind = type(value)
    if kind in _NUMBERS:
        return kind, value
    if (
        file
        and kind is str
        and (catalog is None or value.lower() not in catalog())
        and os.path.exists(value)
    ):
        value = Path(value)
    if isinstance(value, Path):
        try:
            stat = value.stat()
        except OSError:
            raise _NotPlain from None
        return ("file", str(value.resolve()), stat.st_size, stat.st_mtime_ns)
    if kind in _PLAIN:
        return kind, value
    if kind in (list, tuple):
        return kind, tuple(_key(v, file, catalog) for v in value)
    if isinstance(value, HardwareSpec | KernelFamily | Calibration):
        return ByIdentity(value)
    raise _NotPlain


# --- the API --------------------------------------------------------------------
@_remembered
def predict(
    n: int,
    hw: str | Path | HardwareSpec,
    *,
    d: int = SHAPE_DEFAULTS["d"],
    h: int = SHAPE_DEFAULTS["h"],
    h_kv: int | None = None,
    batch: int = SHAPE_DEFAULTS["batch"],
    dtype: str = SHAPE_DEFAULTS["dtype"],
    causal: bool = False,
    block_q: int | None = None,
    block_k: int | None = None,
    kv_len: int | None = None,
    calibration: CalibrationArg = None,
    ceilings: str = "measured",
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
    window_align: str = WindowAlign.BOTTOM_RIGHT,
    segments: Sequence[int] | int | None = None,
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
    from ``perfmodel.parallel.predict_parallel`` (forward, self-attention), whose
    ``one_device_s`` is this prediction's ``flash.time_s``.
    Masks (``perfmodel.costs.masks``; every mode, one device, contiguous K/V):
    ``window`` (W, or (left, right) keys as ``jax.nn.dot_product_attention``'s
    ``local_window_size``; with kv_len > n, ``window_align`` places the queries:
    "bottom_right", the last n positions, as a KV cache holds decode's new tokens, or
    "top_left", the first n, as ``jax.nn`` and our kernels do; ``masks.query_offset``),
    ``segments`` (packed document lengths, summing to n, or one length L:
    documents of L tokens, the last one what is left; self-attention),
    ``block_mask`` (a boolean array over tiles of ``block_size``, or a callable
    ``mask_mod(b, h, q_idx, kv_idx)``): the flash side, forward and backward, visits only
    the tiles with a score the mask keeps; the naive side computes every score and then
    masks them, as for the causal mask. With ``dtype="fp8"`` and ``fp8_as_run``, a family
    with an FP8 kernel (``specs/kernels`` ``[fp8]``) is costed as that kernel runs it
    (``perfmodel.costs.precision``: P's format, O's, the extra vector ops); without, every
    tensor and both matmuls are FP8.

    This signature is the one declaration of the engine's arguments: ``sweep`` accepts
    the same names (:data:`OPTIONS`). ``predict`` is one point of the engine ``sweep``
    runs (:func:`_evaluate`).

    >>> p = predict(n=4096, hw="h200", h=16, mode="train")
    >>> p.flash.matmul_flops / predict(n=4096, hw="h200", h=16).flash.matmul_flops
    3.5
    """
    options = dict(locals())
    prepared = _prepare(**options)
    out = prepared.engine.evaluate(
        prepared.point, prepared.args["causal"], prepared.named, paged=prepared.args["paged"]
    )
    return _answer(prepared, out)


class _Prepared(NamedTuple):
    """One ``predict`` call up to its evaluation: the device, the checked arguments, the
    engine, the point's symbol values and the launch options named."""

    spec: HardwareSpec
    args: dict[str, Any]
    engine: _Engine
    point: dict[str, Any]
    named: dict[str, Any]
    splits: int | None


def _prepare(n: Any, hw: Any, **o: Any) -> _Prepared:
    """``predict``'s arguments checked, its engine and its point (:func:`_answer` builds
    the prediction from the engine's columns)."""
    spec = load_hardware(hw)
    args = check(
        n=n,
        d=o["d"],
        h=o["h"],
        h_kv=o["h_kv"],
        batch=o["batch"],
        dtype=o["dtype"],
        causal=o["causal"],
        block_q=o["block_q"],
        block_k=o["block_k"],
        kv_len=o["kv_len"],
        naive=o["naive"],
        mode=o["mode"],
        cp=o["cp"],
        cp_scheme=o["cp_scheme"],
        tp=o["tp"],
        page_tokens=o["page_tokens"],
        warps=o["warps"],
        ceilings=o["ceilings"],
        **({} if o["splits"] is None else {"splits": o["splits"]}),
    )
    args["kv_len"] = m = args["n"] if args["kv_len"] is None else args["kv_len"]
    args["h_kv"] = h_kv = args["h"] if args["h_kv"] is None else args["h_kv"]
    _check_shape(args["h"], h_kv, args["n"], m, args["causal"])
    engine = _Engine.of(
        spec, o["kernel"], o["calibration"], args["naive"], args["mode"], args["ceilings"]
    )
    engine.variants(
        dict(
            window=o["window"],
            window_align=o["window_align"],
            segments=o["segments"],
            block_mask=o["block_mask"],
            block_size=o["block_size"],
        ),
        o["fp8_as_run"],
        cp=args["cp"] != 1 or args["tp"] != 1,
        paged=o["page_tokens"] is not None,
    )
    engine.forward_only(**{k: o[k] for k in ("splits", "page_tokens", *_TILE)})
    point = {
        **symbol_values(
            n=args["n"], kv_len=m, d=args["d"], h=args["h"], h_kv=h_kv, batch=args["batch"]
        ),
        "s": bytes_per_element(args["dtype"]),
        "peak": spec.peak(args["dtype"]),
        "fp16": float(args["dtype"] == "fp16"),
        "page": o["page_tokens"] or 1,
    }
    named = {k: args[k] for k in _TILE} | {"splits": o["splits"]}
    args["paged"] = o["page_tokens"] is not None
    return _Prepared(spec, args, engine, point, named, o["splits"])


def _answer(prepared: _Prepared, out: dict[str, Any]) -> Prediction:
    """The prediction of a prepared call from its engine's columns (``_Engine.evaluate``)."""
    spec, args, engine, point, _, splits = prepared
    m, h_kv = args["kv_len"], args["h_kv"]
    config = Shape(
        n=args["n"],
        kv_len=m,
        d=args["d"],
        h=args["h"],
        h_kv=h_kv,
        batch=args["batch"],
        dtype=args["dtype"],
        causal=args["causal"],
        block_q=as_int(out["block_q"]),
        block_k=as_int(out["block_k"]),
        mode=args["mode"],
        kernel=engine.family.name,
        warps=as_int(out["warps"]),
        splits=as_int(out["flash.splits"]),
        pack=as_int(out["flash.pack"]),
        **engine.mask_recorded(point, args["causal"]),
    )
    flash = side_prediction(out, "flash", engine.profiles["flash"].name)
    parallel = None
    if (args["cp"], args["tp"], args["cp_scheme"]) != (1, 1, "ring"):
        parallel = _parallel(engine, config, args["cp"], args["cp_scheme"], args["tp"], splits)
    # Our own computed numbers, every field given: constructed without re-validation.
    return construct(
        Prediction,
        dict(
            config=config,
            hardware=spec,
            ridge_point=spec.ridge_point(args["dtype"]),
            naive=side_prediction(out, "naive", engine.profiles["naive"].name),
            flash=flash,
            parallel=parallel,
        ),
    )


#: ``predict``'s options (its keyword arguments but ``n`` and ``hw``), the names ``sweep``
#: takes too: read from the one signature that declares them.
OPTIONS: tuple[str, ...] = tuple(
    p for p in inspect.signature(predict).parameters if p not in ("n", "hw")
)


def _parallel(
    engine: _Engine, config: Shape, cp: int, cp_scheme: str, tp: int, splits: int | None
) -> ParallelPrediction:
    """Flash over cp x tp devices, its one-device time the prediction's own launch."""
    if config.mode != "forward" or config.kv_len != config.n:
        raise PerfmodelError(
            f"cp={cp}, tp={tp} model forward self-attention only: mode={config.mode!r}, "
            f"kv_len={config.kv_len}"
        )
    assert config.n is not None  # a resolved shape
    return predict_parallel(
        config.n,
        engine.spec,
        cp=cp,
        scheme=cp_scheme,
        tp=tp,
        d=config.d,
        h=config.h,
        h_kv=config.h_kv,
        batch=config.batch,
        dtype=config.dtype,
        causal=config.causal,
        calibration=engine.profiles["flash"],
        kernel=engine.family,
        splits=splits,
    )


def side_prediction(columns: Mapping[str, Any], side: str, calibration: str) -> AlgorithmPrediction:
    """One side's :class:`AlgorithmPrediction` from one point's engine columns
    (``"flash.time_s"``...): its declared fields, each roof's time, each effect's."""
    get = columns.get
    python = _PYTHON
    item: dict[str, Any] = {
        f: value if type(value := get(key)) in python else _plain(value)
        for f, key in _SIDE_KEYS[side]
    }
    latency = item["call_latency_s"]
    item["call_latency_s"] = None if latency is None or latency != latency else latency
    if item["l2_bytes"] != item["l2_bytes"]:  # NaN: no L2 level on this device
        item["l2_bytes"] = item["l2_reduce_bytes"] = None
    item["floor_pack"] = as_int(item["floor_pack"])
    item["floor_splits"] = as_int(item["floor_splits"])
    absent = _ABSENT
    item["roof_times_s"] = {
        r: _plain(value) for r, key in _ROOF_KEYS[side] if (value := get(key, absent)) is not absent
    }
    item["effects_s"] = {
        name: _plain(value)
        for name, key in _EFFECT_KEYS[side]
        if (value := get(key, absent)) is not absent
    }
    item["calibration"] = calibration
    return construct(AlgorithmPrediction, item)


def _plain(value: Any) -> Any:
    """A numpy number as the Python number it is."""
    if type(value) in _PYTHON:
        return value
    return value.item() if isinstance(value, np.generic | np.ndarray) else value


_PYTHON = frozenset((float, int, bool, str, type(None)))
#: A column not in the engine's output (a roof the device has not, an effect not asked for).
_ABSENT: Any = object()
_SIDES = ("naive", "flash")
#: Each side's engine column of each declared field, each roof and each effect.
_SIDE_KEYS = {side: tuple((f, f"{side}.{f}") for f in SIDE_FIELDS) for side in _SIDES}
_ROOF_KEYS = {side: tuple((r, f"{side}.t_{r}_s") for r in ROOFS) for side in _SIDES}
_EFFECT_KEYS = {
    side: tuple(
        (name, f"{side}.{key}") for name, key in zip(EFFECT_NAMES, EFFECT_COLUMNS, strict=True)
    )
    for side in _SIDES
}


def _catalog_name(kernel: Any) -> bool:
    """None or a catalog family's name (not a file, which may change)."""
    return kernel is None or (
        isinstance(kernel, str) and "/" not in kernel and not kernel.endswith(".toml")
    )


@functools.lru_cache(maxsize=256)
def _family_and_profiles(
    spec: ByIdentity, kernel: str | None, ceilings: str
) -> tuple[KernelFamily, dict[str, Calibration]]:
    """:func:`flash_family` and :func:`calibration_profiles` without a named profile, on
    a (frozen) device: the same catalog objects every call (the profiles shared, read only)."""
    family = flash_family(kernel, None, spec.obj)
    return family, calibration_profiles(None, spec.obj, family, ceilings)


def _drain_per_step(view: KernelFamily, profile: Calibration, d: Any) -> Any:
    """Seconds one CTA of a backward's dK/dV loop waits each step for products to drain
    (``evaluate.drains``): the family's dependent waits (``Backward.dependent_waits``) at
    the measured drain of a product at head dim ``d`` (``Calibration.wgmma_drain_s_by_d``),
    shared by its computing warpgroups (the tiles' warps over 4; the families that state
    waits run one warp count at every head dim, ``tests/test_drains.py``); 0 where either
    is missing."""
    table = profile.wgmma_drain_s_by_d
    if not view.dependent_waits or not table:
        return 0.0
    warpgroups = max(1, min(t.warps for t in view.tiles) // 4)
    return view.dependent_waits * interpolate(table, d) / warpgroups


class _Engine:
    """One device, kernel family, calibration, naive compile and mode: what stays fixed
    over the points of one ``predict`` or ``sweep`` call. :meth:`evaluate` is the one
    evaluation path, for one point (numbers) or a column of them."""

    def __init__(
        self,
        spec: HardwareSpec,
        family: KernelFamily,
        profiles: dict[str, Calibration],
        naive: str,
        mode: str,
        ceilings: str = "measured",
    ):
        self.spec, self.family, self.profiles = spec, family, profiles
        self.naive, self.mode = naive, mode
        self.keys = {"naive": model_key("naive", naive, mode)}
        self.ceilings = ceilings
        self.framework_s = call_latency_of(family.framework)
        self.mask_args: dict[str, Any] = {}
        self.fp8_as_run = False

    def variants(self, mask: dict[str, Any], fp8_as_run: Any, *, cp: bool, paged: Any) -> None:
        """Attention beyond the dense and causal forms: a mask (``costs.masks``; forward,
        backward and train on one device, contiguous K/V), and FP8 as the family runs it."""
        if not isinstance(fp8_as_run, bool):
            raise PerfmodelError(f"fp8_as_run={fp8_as_run!r} must be True or False")
        self.forward_only(fp8_as_run=fp8_as_run or None)
        self.fp8_as_run = fp8_as_run
        masks.checked_align(mask["window_align"])
        given = {
            k: v
            for k, v in mask.items()
            if v is not None and k not in ("block_size", "window_align")
        }
        if given:
            masks.refuse_unmodelled(", ".join(given), cp=cp, paged=bool(paged))
            self.mask_args = mask

    def forward_only(self, **given: Any) -> None:
        """Options only the forward kernel has (a K/V split, a paged cache, FP8 as run, the
        forward's tiles and warps: the backward launches the family's own),
        refused with ``mode="backward"`` rather than ignored (None: not given; a column:
        its first value shown)."""
        for name, value in given.items():
            if self.mode == "backward" and value is not None:
                shown = value if np.ndim(value) == 0 else np.asarray(value).flat[0]
                raise fail(
                    name,
                    shown,
                    "is the forward kernel's, not modelled for mode='backward' (its own tiles "
                    "and warps, one program per query head, contiguous K/V, no FP8 form): "
                    "drop it, or use "
                    "mode='train' (its forward half takes it)",
                )

    def mask(self, point: dict[str, Any], causal: bool) -> Any:
        """The checked mask at these points (one n for documents and block masks)."""
        if not self.mask_args:
            return None
        a = self.mask_args
        if isinstance(point["n"], NUMBERS):
            n, m = int(point["n"]), int(point["m"])
        elif not isinstance(a["segments"], int | np.integer | None) or not (
            a["block_mask"] is None or callable(a["block_mask"])
        ):
            raise PerfmodelError(
                "a list of segments and a block_mask array fit one n: use predict, not sweep "
                "(sweep takes segments=L, documents of L tokens, and a callable block_mask "
                "at every n)"
            )
        else:  # a window, documents of L, a mask_mod: one mask at every n; mask_of checks the worst
            ns, ms = (np.ravel(c) for c in np.broadcast_arrays(point["n"], point["m"]))
            gap = ms - ns if a["segments"] is None else -np.abs(ms - ns)
            worst = int(np.argmin(gap))
            n, m = int(ns[worst]), int(ms[worst])
        return masks.mask_of(n, m, causal=causal, **a)

    def mask_recorded(self, point: dict[str, Any], causal: bool) -> dict[str, Any]:
        """The mask's fields of ``Prediction.config`` (none without a mask)."""
        mask = self.mask(point, causal)
        return {} if mask is None else mask.recorded()

    def fp8(self, point: dict[str, Any]) -> tuple[Any, dict[str, Any] | None]:
        """The matrix rate and the FP8 form's values (None: the plain model)."""
        facts, s = self.family.fp8, point["s"]
        if not self.fp8_as_run or facts is None or not np.all(np.asarray(s) == 1):
            return point["peak"], None
        fp8 = self.spec.peak("fp8")
        wide = self.spec.peak(facts.p) if facts.p in ("bf16", "fp16") else fp8
        values = dict(
            s_out=precision.output_bytes(facts.output),
            fp8_score_ops=precision.vector_per_score(p=facts.p, amax=facts.amax),
            fp8_output_ops=precision.vector_per_output(amax=facts.amax),
        )
        return precision.matmul_rate(fp8, wide, p=facts.p), values

    @classmethod
    def of(
        cls,
        spec: HardwareSpec,
        kernel: str | Path | KernelFamily | None,
        calibration: CalibrationArg,
        naive: str,
        mode: str,
        ceilings: str = "measured",
    ) -> _Engine:
        if calibration is None and _catalog_name(kernel):  # the usual call: looked up once
            family, profiles = _family_and_profiles(ByIdentity(spec), kernel, ceilings)
        else:
            family = flash_family(kernel, calibration, spec)
            profiles = calibration_profiles(calibration, spec, family, ceilings)
        return cls(spec, family, profiles, naive, mode, ceilings)

    def evaluate(
        self,
        point: dict[str, Any],
        causal: bool,
        named: dict[str, Any],
        *,
        paged: bool = False,
        wanted: Wanted | None = None,
    ) -> dict[str, Any]:
        """Every column of the points in ``point`` (symbol values: n, m, d, h, h_kv, b,
        s, peak, page; numbers or columns) with one causal flag: the launch
        (``perfmodel.launch``), then each side's counts, floor and estimate."""
        want = wanted or Wanted()
        spec, sizes = self.spec, {k: point[k] for k in _SIZES}
        fp16 = point.get("fp16", 0.0)  # fp16 points: the tensor cores' measured fp16 rate
        mask = self.mask(point, causal)  # its K/V blocks are what the split rule divides
        if isinstance(point["n"], NUMBERS):
            launch = resolve_point(self.family, spec, **sizes, causal=causal, **named, mask=mask)
        else:
            launch = resolve(
                self.family, spec, **sizes, causal=causal, **named, limits=want.floor, mask=mask
            )
        # the fused kernel runs at its padded head dim (``KernelFamily.head_dim_padding``)
        run = {**sizes, "d": launch.head_dim}
        # the columns asked for (a training step's sum needs every one of its phases', the
        # naive floor over its compiles every floor column)
        fields = dict(naive=want.naive, flash=want.flash) if self.mode == "forward" else {}
        if self.keys["naive"].naive != NaiveCompile.MINIMAL:
            fields.pop("naive", None)
        common = dict(causal=causal, hw=spec, peak=point["peak"])
        # the naive kernels have no tiles: nothing of the launch but the K/V stages
        # (which only the fused model reads) is a value of theirs
        naive_values = shape_values(spec, **sizes, kv_stages=launch.kv_stages, fp16=fp16)
        # every score, then the mask: the causal naive model (``costs.naive``)
        naive_common = {**common, "causal": causal or mask is not None}
        naive = evaluate(
            self.keys["naive"],
            values=naive_values,
            calibration=self.profiles["naive"],
            effects=want.effects,
            fields=fields.get("naive"),
            **naive_common,
        )
        if self.keys["naive"].naive != NaiveCompile.MINIMAL:
            # the floor is the least over what the naive side could compile to: the
            # passes XLA adds are an estimate, the minimal trips a bound
            minimal = model_key("naive", NaiveCompile.MINIMAL, self.mode)
            least = evaluate(
                minimal,
                values=naive_values,
                calibration=self.profiles["naive"],
                effects=False,
                **naive_common,
            )
            naive = lower_floor(naive, least)
        peak, fp8 = self.fp8(point)
        flash: dict[str, Any] | None = None
        if self.mode != "backward":
            flash = evaluate_flash(
                launch,
                self.family,
                shape={**run, "page": point["page"], "fp16": fp16},
                calibration=self.profiles["flash"],
                framework_latency_s=self.framework_s,
                paged=paged,
                floor=want.floor,
                effects=want.effects,
                mask=mask,
                fp8=fp8,
                fields=fields.get("flash"),
                **{**common, "peak": peak},
            )
        if self.mode != "forward":
            backward = self.backward(sizes, causal, fp16, point["peak"], want.effects, mask)
            flash = backward if flash is None else forward_then_backward(flash, backward)
        assert flash is not None
        out: dict[str, Any] = {f"naive.{k}": v for k, v in naive.items()}
        out.update((f"flash.{k}", v) for k, v in flash.items())
        out.update(block_q=launch.block_q, block_k=launch.block_k, warps=launch.warps)
        out.setdefault("flash.pack", launch.pack)
        out.setdefault("flash.splits", launch.splits)
        return out

    def backward(
        self,
        sizes: dict[str, Any],
        causal: bool,
        fp16: Any,
        peak: Any,
        effects: bool,
        mask: Any = None,
    ) -> dict[str, Any]:
        """The backward's columns, each point costed as the backward that runs after this
        family's forward at its head dim (``KernelFamily.backward_view``: ours, the Mosaic
        kernels on Hopper to d = 128 and the Triton ones above); the points of one
        backward are evaluated together."""
        arch = self.spec.arch
        if isinstance(sizes["d"], NUMBERS):
            view = backward_of(self.family, int(sizes["d"]), causal=causal, arch=arch)
            return self._backward_of(view, sizes, causal, fp16, peak, effects, mask)
        size = max(np.size(v) for v in sizes.values())
        cols = {k: np.broadcast_to(np.asarray(v, dtype=float), (size,)) for k, v in sizes.items()}
        half = np.broadcast_to(np.asarray(fp16, dtype=float), (size,))
        top = np.broadcast_to(np.asarray(peak, dtype=float), (size,))
        views = {
            float(u): backward_of(self.family, int(u), causal=causal, arch=arch)
            for u in np.unique(cols["d"])
        }
        by_view: dict[str, list[float]] = {}
        for dim, (runs, _) in views.items():
            by_view.setdefault(runs.name, []).append(dim)
        if len(by_view) == 1:
            only = next(iter(views.values()))
            return self._backward_of(only, cols, causal, half, top, effects, mask)
        out: dict[str, Any] = {}
        for dims in by_view.values():
            rows = np.flatnonzero(np.isin(cols["d"], dims))
            sub = {k: v[rows] for k, v in cols.items()}
            part = self._backward_of(
                views[dims[0]], sub, causal, half[rows], top[rows], effects, mask
            )
            for key, value in part.items():
                value = np.asarray(value)
                if key not in out:
                    out[key] = np.empty(size, dtype=value.dtype)
                out[key][rows] = np.broadcast_to(value, (len(rows),))
        return out

    def _backward_of(
        self,
        view_dq: tuple[KernelFamily, str],
        sizes: dict[str, Any],
        causal: bool,
        fp16: Any,
        peak: Any,
        effects: bool,
        mask: Any = None,
    ) -> dict[str, Any]:
        """One backward's columns at these points: its launch, model and profile; under a
        ``mask``, the tiles it visits at the backward's tiles (``masks.backward_visited``)."""
        view, dq = view_dq
        spec = self.spec
        bwd = backward_launch(view, spec, **sizes, causal=causal)
        if isinstance(sizes["n"], NUMBERS):  # one point: its one row as numbers
            bwd = BackwardLaunch(*(float(v[0]) for v in astuple(bwd)))
        values = shape_values(
            spec,
            **{**sizes, "d": bwd.head_dim},
            block_q=bwd.block_q,
            block_k=bwd.block_k,
            group_split=bwd.group_split,
            group_reduce=bwd.group_reduce,
            dq_block_q=bwd.dq_block_q,
            dq_block_k=bwd.dq_block_k,
            kv_stages=view.kv_stages,  # read by the forward model only (no sympy import)
            fp16=fp16,
        )
        if mask is not None:  # the forward's tiles, both loop orders, a program a head
            values.update(masks.symbol_values(mask, backward=True, **values))
        profile = self.profiles.get("backward") or family_default(view, spec, self.ceilings)
        return evaluate(
            model_key("flash", self.naive, "backward", dq, masked=mask is not None),
            values=values,
            calibration=profile,
            onchip=OnChip(
                blocks_per_sm=bwd.blocks_per_sm,
                q_tile_bytes=bwd.edge_bytes,
                edge_bytes=bwd.edge_bytes,
                loads_ahead=bwd.loads_ahead,
                pad_bytes=bwd.pad_bytes,
                pad_copies=bwd.pad_copies,
                kernel_matmul_ratio=(("bwd_dq", narrow_dq_ratio(profile, bwd.dq_block_k)),)
                if dq == "two_pass"
                else (),
                drain_per_step_s=_drain_per_step(view, profile, bwd.head_dim),
                kernel_imbalance=backward_imbalance(
                    causal and mask is None,
                    **{k: sizes[k] for k in ("n", "m", "h", "h_kv", "b")},
                    launch=bwd,
                    slots=float(spec.sm_count),
                ),
            ),
            effects=effects,
            causal=causal,
            hw=spec,
            peak=peak,
        )


_SIZES = ("n", "m", "d", "h", "h_kv", "b", "s")
#: The launch options a call may name: the fused kernel's tile and warps.
_TILE = ("block_q", "block_k", "warps")


@dataclass(frozen=True)
class Wanted:
    """Which optional parts of the engine a call needs: the floor over alternative
    launches, each effect's column, and each side's columns (None: every one)."""

    floor: bool = True
    effects: bool = True
    naive: frozenset[str] | None = None
    flash: frozenset[str] | None = None


class SweepResult(dict[str, Any]):
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

    def __str__(self) -> str:
        return text_table(*self._table())

    __repr__ = __str__

    def _repr_html_(self) -> str:
        return html_table(*self._table())

    def _repr_markdown_(self) -> str:
        return markdown_table(*self._table())


def _cell(value: Any) -> str:
    value = np.asarray(value).item()
    return f"{value:.4g}" if isinstance(value, float) else str(value)


_SWEPT = ("n", "d", "h", "h_kv", "batch", "dtype", "causal", "block_q", "block_k", "kv_len")
#: sweep's options that may be a column (one value per point); the others take one value.
_COLUMN_OPTIONS = (*_SWEPT[1:], "warps", "splits", "page_tokens")
#: Options only the forward kernel takes: refused with mode="backward" (its tiles and warps
#: are the family's [backward] launch), applied to the forward half of mode="train".
_FORWARD_ONLY = ("splits", "page_tokens", "block_q", "block_k", "warps")
#: The result columns that are integers: the launch's tiles and warps.
_INTEGERS = ("block_q", "block_k", "warps")
#: Points evaluated at once: one chunk's temporaries stay small (and in cache).
CHUNK_POINTS = 1 << 15
#: Largest result ``sweep`` builds unless given a larger ``max_bytes`` (2 GiB).
MAX_RESULT_BYTES = 2 * 2**30


def sweep(
    hw: str | Path | HardwareSpec,
    *,
    n: Any,
    grid: bool = True,
    columns: Sequence[str] | None = None,
    max_bytes: int = MAX_RESULT_BYTES,
    **options: Any,
) -> SweepResult:
    """``predict`` over many shapes at once, vectorised: the same engine, every option
    ``predict`` takes (:data:`OPTIONS`, same defaults).

    The shape and launch options (``n``, ``d``, ``h``, ``h_kv``, ``batch``, ``dtype``,
    ``causal``, ``block_q``, ``block_k``, ``kv_len``, ``warps``, ``splits``,
    ``page_tokens``) may each be a list or array; the others (``kernel``,
    ``calibration``, ``naive``, ``mode``, ``cp``, ``cp_scheme``, ``tp``, the masks and
    ``fp8_as_run``) take one value (a list of ``segments`` and ``block_mask``: one n;
    ``segments=L``, documents of L tokens, any n).
    With ``grid=True`` (the default) the result holds every combination; with
    ``grid=False`` the arguments broadcast together. ``columns`` keeps only the named
    results (less memory and less work: the inputs are always kept). The result's size
    is estimated first: above ``max_bytes`` the sweep is refused before anything is
    computed. Points are evaluated in chunks of ``CHUNK_POINTS``, each causal case on
    its own points. Tiles default to the kernel family's per head dim; a named tile that
    does not fit the device is an error, as in ``predict``.

    >>> r = sweep("h100", n=[1024, 2048, 4096], d=[64, 128])
    >>> len(r), r["flash.time_s"].shape
    (6, (6,))
    >>> sweep("h100", n=range(1, 10**6), d=range(1, 10**4))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    perfmodel.errors.PerfmodelError: sweep of 9,998,990,001 points needs about ... GB ...
    """
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise PerfmodelError(
            f"sweep() got unknown arguments {unknown}; it takes predict()'s: {', '.join(OPTIONS)}"
        )
    given = {**_DEFAULTS, **options}
    flags = check(grid=grid, naive=given["naive"], mode=given["mode"], ceilings=given["ceilings"])
    max_bytes = check(max_bytes=max_bytes)["max_bytes"]
    split = check(cp=given["cp"], cp_scheme=given["cp_scheme"], tp=given["tp"])
    spec = load_hardware(hw)
    # an option left to its default None (the family's choice) is a column of None
    unset = [k for k in _COLUMN_OPTIONS if given[k] is None and _DEFAULTS[k] is None]
    args = check_columns(n=n, **{k: given[k] for k in _COLUMN_OPTIONS if k not in unset})
    args.update((k, np.asarray([None], dtype=object)) for k in unset)
    args = {k: args[k] for k in ("n", *_COLUMN_OPTIONS)}
    size = _size(args, flags["grid"])
    known = sweep_columns(spec)
    wanted = _wanted(known, columns)
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
    engine = _Engine.of(
        spec,
        given["kernel"],
        given["calibration"],
        flags["naive"],
        flags["mode"],
        flags["ceilings"],
    )
    engine.variants(
        {k: given[k] for k in ("window", "window_align", "segments", "block_mask", "block_size")},
        given["fp8_as_run"],
        cp=(split["cp"], split["tp"]) != (1, 1),
        paged=_named(np.asarray(cols["page_tokens"])) is not None,
    )
    engine.forward_only(**{k: _named(np.asarray(cols[k])) for k in _FORWARD_ONLY})
    results = _evaluate_chunks(engine, cols, wanted, size)
    out = SweepResult({k: cols[k] for k in _SWEPT})
    for k in _INTEGERS:  # the launch's tiles and warps, as integers (filled as int64)
        column = results.pop(k)
        out[k] = column if column.flags.writeable else column.astype(np.int64)
    out.update((k, v) for k, v in results.items() if k in wanted)
    if (split["cp"], split["tp"], split["cp_scheme"]) != (1, 1, "ring"):
        out.update(_parallel_columns(engine, out, split, given["splits"], wanted))
    return out


#: predict()'s defaults, from its signature.
_DEFAULTS: dict[str, Any] = {
    k: p.default for k, p in inspect.signature(predict).parameters.items() if k in OPTIONS
}
#: The check of each of ``predict``'s shape arguments but n, with its default
#: (``_Case.predict``: the checks ``arguments.check`` runs, looked up once).
_SHAPE_CHECKS = tuple((name, PARAMETERS[name].scalar, _DEFAULTS[name]) for name in _SHAPE_ARGS[1:])
_CHECK_N = PARAMETERS["n"].scalar
#: The parallel split's result columns (``perfmodel.parallel.ParallelPrediction``).
_PARALLEL = ("time_s", "one_device_s", "compute_s", "comm_s", "sent_bytes", "memory_bytes")


def _parallel_columns(
    engine: _Engine, out: SweepResult, split: dict[str, Any], splits: Any, wanted: set[str]
) -> dict[str, np.ndarray]:
    """``parallel.*`` of each point (one split per distinct shape)."""
    keys = ("n", "kv_len", "d", "h", "h_kv", "batch", "dtype", "causal")
    rows = list(zip(*(np.asarray(out[k]).tolist() for k in keys), strict=True))
    done: dict[tuple[Any, ...], ParallelPrediction] = {}
    for row in dict.fromkeys(rows):
        shape = Shape(**dict(zip(keys, row, strict=True)), kernel=engine.family.name)
        done[row] = _parallel(engine, shape, split["cp"], split["cp_scheme"], split["tp"], splits)
    return {
        f"parallel.{f}": np.array([getattr(done[r], f) for r in rows], dtype=np.float64)
        for f in _PARALLEL
        if f"parallel.{f}" in wanted or not wanted
    }


def sweep_columns(spec: HardwareSpec) -> tuple[str, ...]:
    """The result columns of a sweep on ``spec``: each side's declared fields
    (``perfmodel.results.SIDE_FIELDS``), each roof the device has, each effect; the
    fused side's launch; the parallel split's; the speedup."""
    roofs = [f"t_{r}_s" for r, rate in roof_rates(spec, 1.0).items() if rate is not None]
    # call_latency_s: a point's host latency, None where unmeasured: predict's alone;
    # l2_bytes: only on a device with an L2 (predict's None elsewhere), as its roof
    no_l2 = () if spec.l2_bytes is not None else ("l2_bytes", "l2_reduce_bytes")
    absent = {"call_latency_s", *no_l2}
    side = (*(f for f in SIDE_FIELDS if f not in absent), *roofs, *EFFECT_COLUMNS)
    launch = ("pack", "splits", "blocks_per_sm", "spilled_registers_per_thread", "fits_sram")
    return (
        *(f"naive.{f}" for f in side),
        *(f"flash.{f}" for f in (*side, *launch)),
        "warps",
        *(f"parallel.{f}" for f in _PARALLEL),
        "speedup",
    )


def _wanted(known: tuple[str, ...], columns: Any) -> set[str]:
    if columns is None:
        return set(known)
    if isinstance(columns, str) or not isinstance(columns, Iterable):
        raise fail("columns", columns, "must be a list of result names")
    columns = list(columns)
    if not all(isinstance(c, str) for c in columns):
        raise fail("columns", columns, "must be a list of result names")
    unknown = [c for c in columns if c not in known and c not in _SWEPT]
    if unknown:
        raise PerfmodelError(f"columns={unknown!r} are not results; known: {', '.join(known)}")
    return set(columns)


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


def _per_point_dtype(spec: HardwareSpec, dtypes: np.ndarray) -> tuple[Any, Any]:
    """Bytes per element and matrix peak: scalars for one dtype, else columns."""
    if is_repeated(dtypes):
        return float(bytes_per_element(str(dtypes[0]))), spec.peak(str(dtypes[0]))
    names, which = np.unique(dtypes, return_inverse=True)
    s = np.array([bytes_per_element(t) for t in names], dtype=float)[which]
    return s, np.array([spec.peak(t) for t in names])[which]


class _Column:
    """One result column filled chunk by chunk; one broadcast value while it is one."""

    def __init__(self, size: int, dtype: Any = None):
        self.size = size
        self.value: Any = None
        self.array: np.ndarray | None = None
        self.dtype = dtype  #: the array's (None: the first value's)

    def put(self, where: Any, value: Any) -> None:
        constant = self.array is None and np.ndim(value) == 0
        if constant and (self.value is None or self.value == value):
            self.value = value
            return
        if self.array is None:
            sample = np.asarray(value)
            dtype = object if sample.dtype.kind in "OU" else sample.dtype
            self.array = np.empty(self.size, dtype=self.dtype or dtype)
            if self.value is not None:
                self.array[...] = self.value
        self.array[where] = value

    def column(self) -> np.ndarray:
        if self.array is not None:
            return self.array
        return np.broadcast_to(np.asarray(self.value), (self.size,))


def _evaluate_chunks(
    engine: _Engine, cols: dict[str, np.ndarray], wanted: set[str], size: int
) -> dict[str, np.ndarray]:
    """The result columns, CHUNK_POINTS points at a time, each causal case on its points."""
    s, peak = _per_point_dtype(engine.spec, cols["dtype"])
    api = ("n", "kv_len", "d", "h", "h_kv", "batch")
    shape = {**symbol_values(**{k: cols[k] for k in api}), "s": s, "peak": peak}
    dtypes = cols["dtype"]
    shape["fp16"] = (
        float(str(dtypes[0]) == "fp16") if is_repeated(dtypes) else (dtypes == "fp16").astype(float)
    )
    shape["page"] = _named(cols["page_tokens"])
    paged = shape["page"] is not None
    if not paged:
        shape["page"] = 1.0
    # the launch columns as given: None where the family picks
    named_cols = {k: _named(cols[k]) for k in ("block_q", "block_k", "warps", "splits")}
    kept = wanted | set(_INTEGERS)
    want = _parts_wanted(kept | {"naive.time_s", "flash.time_s"})  # speedup's two sides
    out: dict[str, _Column] = {}
    for c, rows in _case_chunks(cols["causal"], size):
        sub = {k: _floats(_rows(v, rows)) if np.ndim(v) else v for k, v in shape.items()}
        named = {k: None if v is None else v[rows] for k, v in named_cols.items()}
        if np.ndim(sub["page"]) == 0:
            sub["page"] = float(sub["page"])
        res = engine.evaluate(sub, c, named, paged=paged, wanted=want)
        if "speedup" in wanted:
            res["speedup"] = res["naive.time_s"] / res["flash.time_s"]
        for key, value in res.items():
            if key in kept:
                if key not in out:  # the launch's tiles and warps: integers
                    out[key] = _Column(size, np.int64 if key in _INTEGERS else None)
                out[key].put(rows, value)
    result = {k: col.column() for k, col in out.items()}
    result["flash.fits_sram"] = np.broadcast_to(True, (size,))  # a tile that does not fit: error
    return result


def _parts_wanted(need: set[str]) -> Wanted:
    """The parts of the engine the columns in ``need`` take."""
    return Wanted(
        # the floor's columns (``evaluate.FLOOR_FIELDS``): without them, no floor search
        floor=any(f"flash.{c}" in need for c in (*FLOOR_FIELDS, EFFECT_COLUMNS[0])),
        effects=any(c.endswith(EFFECT_COLUMNS) for c in need),
        naive=frozenset(c[6:] for c in need if c.startswith("naive.")),
        flash=frozenset(c[6:] for c in need if c.startswith("flash.")),
    )


def _case_chunks(causal: np.ndarray, size: int) -> Iterator[tuple[bool, slice | np.ndarray]]:
    """Each causal case (a flag of the cost models' expressions) with its points, at most
    CHUNK_POINTS at a time: slices where one case holds every point, else each case's
    point indices (full chunks of each case: half the calls of chunks split in two)."""
    if is_repeated(causal):
        for start in range(0, size, CHUNK_POINTS):
            yield bool(causal[0]), slice(start, min(size, start + CHUNK_POINTS))
        return
    for c in (False, True):
        where = np.flatnonzero(causal == c)
        for start in range(0, len(where), CHUNK_POINTS):
            yield c, where[start : start + CHUNK_POINTS]


def _rows(col: np.ndarray, rows: slice | np.ndarray) -> np.ndarray:
    """Some rows of a column: a slice, or indices (one value broadcast stays a view)."""
    if isinstance(rows, slice):
        return col[rows]
    return np.asarray(roofline_rows(col, rows))


def _floats(col: np.ndarray) -> np.ndarray:
    """A chunk of an integer column as float64, once (every launch rule and cost model
    computes in float64 and would convert it on each call); one value broadcast stays
    one value."""
    if col.dtype.kind not in "iu":
        return col
    if is_repeated(col):
        return np.broadcast_to(np.float64(col[0]), col.shape)
    return col.astype(np.float64)


def _named(col: Any) -> Any:
    """A launch column as given (None where the family picks; all None: the family's)."""
    if np.ndim(col) == 0:
        return None if col is None else col
    if col.dtype != object:
        return col
    # one value: test it once (an object column compared with None, elementwise)
    none = np.equal(col[:1] if is_repeated(col) else col, None)  # type: ignore[call-overload]
    if none.all():
        return None
    if none.any():
        raise PerfmodelError("block_q/block_k: give a tile for every point, or for none")
    return col.astype(np.int64)
