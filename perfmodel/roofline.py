"""The roofline, as pure functions over numbers or numpy arrays.

A kernel's time is bounded below by each of its roofs — work over the rate of the
unit that does it, bytes over the bandwidth of the level that moves them — and by
their maximum. A sequence of kernels adds up kernel by kernel: a sum of per-kernel
maxima, never one maximum over the totals (that would let QKᵀ's compute hide behind
the softmax's memory traffic, which separate launches cannot do).

>>> float(lower_bound({"matmul": 2.0, "hbm": 3.0}))
3.0
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, TypeAlias, cast

import numpy as np
import numpy.typing as npt

from perfmodel import trace
from perfmodel.vocabulary import COMPUTE_ROOFS, MEMORY_ROOFS

__all__ = ["COMPUTE_ROOFS", "MEMORY_ROOFS"]  # the roof names, from perfmodel.vocabulary
#: Every roof name, for membership tests.
ROOF_SET = frozenset(COMPUTE_ROOFS + MEMORY_ROOFS)

#: A float for one point, or a numpy array for a sweep: every function takes either.
Num: TypeAlias = float | npt.NDArray[Any]
#: A numpy array of any element type (named once: a subscript in a call is built at
#: every call, at a cost a hot path notices).
Array: TypeAlias = npt.NDArray[Any]
#: Plain Python numbers (bool among them): one point, no numpy.
NUMBERS = (int, float)


def is_repeated(col: Any) -> bool:
    """A 1-D array that is one value broadcast (stride 0), as a sweep passes a fixed
    argument: test or compute it on one element, not per row."""
    return isinstance(col, np.ndarray) and col.ndim == 1 and col.size > 0 and col.strides == (0,)


class ArrayNamespace(Protocol):
    """The elementwise functions that rules written over columns call (numpy's names):
    numpy itself for columns, :data:`FLOATS` for one point's numbers (:func:`xp_of`)."""

    def where(self, mask: Any, yes: Any, no: Any, /) -> Num: ...
    def minimum(self, a: Any, b: Any, /) -> Num: ...
    def maximum(self, a: Any, b: Any, /) -> Num: ...
    def ceil(self, x: Any, /) -> Num: ...
    def floor(self, x: Any, /) -> Num: ...
    def floor_divide(self, a: Any, b: Any, /) -> Num: ...
    def full_like(self, like: Any, value: float, dtype: Any = None) -> Num: ...
    def any(self, x: Any, /) -> bool: ...


class _FloatMath:
    """:class:`ArrayNamespace` for plain Python floats: one point runs the same rule
    on numbers, without numpy's per-call cost. Each gives what numpy gives on a
    one-element float64 array (IEEE arithmetic either way). On a point being traced
    (``perfmodel.trace``) a selection, ``min`` and ``max`` are recorded as operations,
    not as branches."""

    where = staticmethod(trace.select)
    minimum = staticmethod(trace.minimum)
    maximum = staticmethod(trace.maximum)

    @staticmethod
    def ceil(x: Any, /) -> Any:
        return trace.as_float(math.ceil(x))

    @staticmethod
    def floor(x: Any, /) -> Any:
        return trace.as_float(math.floor(x))

    @staticmethod
    def floor_divide(a: Any, b: Any, /) -> Any:
        return a // b

    @staticmethod
    def full_like(like: Any, value: float, dtype: Any = None) -> float:
        return float(value)

    @staticmethod
    def any(x: Any, /) -> bool:
        return bool(x)


#: The float namespace.
FLOATS: ArrayNamespace = _FloatMath()



#: Below this, every whole number is a float64 and so is every product that stays below.
_WHOLE = 2.0**53


def _whole_over_positive(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` are whole numbers below 2**53 in size, ``b`` positive."""
    return bool(
        np.all(b > 0)
        and np.all(b < _WHOLE)
        and np.all(np.abs(a) < _WHOLE)
        and np.all(np.floor(a) == a)
        and np.all(np.floor(b) == b)
    )


def floor_divide(a: Any, b: Any) -> Any:
    """``np.floor_divide`` (a tile count, heads per group), by one division where both
    are whole numbers below 2**53 and ``b`` is positive: the quotient of two such rounds
    to no whole number it does not reach, so ``floor(a / b)`` is the exact answer, at a
    fifth of the cost of numpy's float floor division."""
    if _whole_over_positive(a, b):
        return np.floor(np.divide(a, b))
    return np.floor_divide(a, b)


def mod(a: Any, b: Any) -> Any:
    """``np.mod`` (the remainder the printed cost models test against 0), as
    ``a - b * floor(a / b)`` where both are whole numbers below 2**53 and ``b`` positive:
    each step is exact there (the remainder and the product are whole numbers below
    2**53), so the answer is numpy's, at a third of the cost of its ``fmod``."""
    if _whole_over_positive(a, b):
        return np.subtract(a, np.multiply(b, np.floor(np.divide(a, b))))
    return np.mod(a, b)


def select(condlist: Sequence[Any], choicelist: Sequence[Any], default: Any = 0) -> Any:
    """``np.select`` (a ``Piecewise`` of the printed cost models) as one ``np.where`` per
    condition, from the last: the first condition that holds picks, as in numpy's, and
    a condition that is plainly True (a Piecewise's ``otherwise``) takes its choice
    as it is; numpy's copies every choice into one result first, at twice the cost."""
    out = default
    for cond, choice in zip(reversed(condlist), reversed(choicelist), strict=True):
        out = choice if cond is True else np.where(cond, choice, out)
    dtype = np.result_type(*(np.asarray(c) for c in (*choicelist, default)))  # numpy's
    return np.asarray(out, dtype=dtype)


class _NumpyMath:
    """:class:`ArrayNamespace` for columns: numpy's functions, and its floor division by
    :func:`floor_divide`."""

    floor_divide = staticmethod(floor_divide)

    def __getattr__(self, name: str) -> Any:
        return getattr(np, name)


_NUMPY = cast(ArrayNamespace, _NumpyMath())


def xp_of(*values: Any) -> ArrayNamespace:
    """The namespace a rule over columns runs in: :data:`FLOATS` where every value is a
    plain number (one point), else numpy."""
    for v in values:
        if not isinstance(v, NUMBERS):
            return _NUMPY
    return FLOATS


# --- elementwise primitives: one point (plain floats) or columns (numpy arrays) --------
# The model's rules are written once over these; each takes plain numbers without numpy
# (whose per-call cost dominates one point) and arrays elementwise.
def any_nonzero(value: Num) -> bool:
    """Whether any element is nonzero (True)."""
    return bool(value) if isinstance(value, NUMBERS) else bool(np.any(value))


def all_nonzero(value: Num) -> bool:
    """Whether every element is nonzero (True)."""
    return bool(value) if isinstance(value, NUMBERS) else bool(np.all(value))


def maximum(a: Num, b: Num) -> Num:
    return max(a, b) if isinstance(a, NUMBERS) and isinstance(b, NUMBERS) else np.maximum(a, b)


def minimum(a: Num, b: Num) -> Num:
    return min(a, b) if isinstance(a, NUMBERS) and isinstance(b, NUMBERS) else np.minimum(a, b)


def gt(a: Num, b: Num) -> Num:
    """a > b, elementwise."""
    return a > b if isinstance(a, NUMBERS) else np.asarray(a) > b


def less(a: Num, b: Num) -> Num:
    """a < b, elementwise."""
    return a < b if isinstance(a, NUMBERS) and isinstance(b, NUMBERS) else np.less(a, b)


def choose(mask: Num, yes: Num, no: Num) -> Num:
    """``yes`` where ``mask`` holds, else ``no``, elementwise."""
    if isinstance(mask, bool | np.bool_):
        return yes if mask else no
    if trace.is_traced(mask):  # one point being traced (``perfmodel.trace``)
        picked: Num = trace.select(mask, yes, no)
        return picked
    return np.where(mask, yes, no)


def ratio_or_zero(a: Num, b: Num) -> Num:
    """a / b where b > 0, else 0."""
    if isinstance(b, NUMBERS):
        return a / b if b else 0.0
    return np.divide(a, b, out=np.zeros_like(b), where=b > 0)


def rows(value: Num, index: Any) -> Num:
    """Some rows of a column (all for None); a number is the same at every row, and so
    is a column of one value broadcast (the rows stay a broadcast view: nothing copied)."""
    if index is None or np.ndim(value) == 0:
        return value
    column = cast(Array, value)
    if is_repeated(column):
        count = int(np.count_nonzero(index)) if np.asarray(index).dtype == bool else len(index)
        return np.broadcast_to(column[:1], (count,))
    picked: Num = column[index]
    return picked


def arithmetic_intensity(flops: Num, bytes_moved: Num) -> Num:
    if not (isinstance(flops, float) and isinstance(bytes_moved, float) and bytes_moved):
        flops, bytes_moved = np.asarray(flops), np.asarray(bytes_moved)  # no bytes: inf/nan
    return flops / bytes_moved


def attainable_flops_per_s(intensity: Num, peak: float, bandwidth: float) -> Num:
    """The classic roofline: min(peak, intensity × bandwidth). (The ridge point, where the
    two meet, is ``HardwareSpec.ridge_point``.)"""
    return np.minimum(peak, np.asarray(intensity) * bandwidth)


def roof_times(work: Mapping[str, Num], rates: Mapping[str, Num | None]) -> dict[str, Num]:
    """Seconds on each roof: work (FLOPs, exps or bytes) over its rate; no rate, no roof."""
    out: dict[str, Num] = {}
    for roof, w in work.items():
        rate = rates.get(roof)
        if rate is not None:
            out[roof] = w / rate
    return out


def lower_bound(times: Mapping[str, Num]) -> Num:
    """One kernel's floor: the largest of its roof times."""
    return largest(list(times.values()))


def largest(values: list[Num]) -> Num:
    """The largest of some roof times (floats, or arrays elementwise)."""
    if _plain(values):  # one point: all are floats
        return max(values)
    return _max([np.asarray(t, dtype=np.float64) for t in values])


def matmul_rate_at_floor(matmul_flops: Num, t_lower: Num) -> Num:
    """The matmul FLOP/s a kernel would sustain running at its floor ``t_lower`` (the
    ``attainable_flops_per_s`` the model reports; the classic roofline's bound at an
    intensity is :func:`attainable_flops_per_s`)."""
    return matmul_flops / t_lower


def derated(times: Mapping[str, Num], efficiency: Mapping[str, Num]) -> dict[str, Num]:
    """Roof times at the achievable fraction of each roof."""
    return {roof: t / efficiency[roof] for roof, t in times.items()}


def _max(values: Sequence[Num]) -> Num:
    """Elementwise maximum, pairwise (``np.maximum.reduce`` would stack the arrays first)."""
    if _plain(values):
        return max(values)
    return functools.reduce(np.maximum, values)


def _plain(values: Sequence[Any]) -> bool:
    """Whether every value is a plain float (one point's numbers): a sweep's list may hold
    floats (a model's constant terms) among its columns. A loop, not ``all()`` of a
    generator, which costs more than the tests on every call."""
    for v in values:  # noqa: SIM110
        if not isinstance(v, float):
            return False
    return True


def kernel_estimate(
    times: Mapping[str, Num],
    efficiency: Mapping[str, Num],
    *,
    compute_overlap: Num = 1.0,
    fill_stretch: Num = 1.0,
    serial: Num = 0.0,
) -> Num:
    """A kernel's estimated time from its roof times, each at its achievable fraction;
    ``serial`` is time on the compute path that nothing overlaps (register spills)."""
    time: Num = combine(derated(times, efficiency), compute_overlap, fill_stretch, serial=serial)
    return time


def combine(
    times: Mapping[str, Any],
    compute_overlap: Any = 1.0,
    fill_stretch: Any = 1.0,
    *,
    top: Any = _max,
    total: Any = None,
    serial: Any = 0.0,
) -> Any:
    """How one kernel's roof times make its time.

    The busiest compute roof runs; the other compute roofs hide under it up to
    ``compute_overlap`` times its time and add the rest (1: up to all of it, the
    roofline's max; 0: nothing hides, they add up, as matmul and exp do inside one
    FlashAttention-2 warp). Measured attention kernels show the hidden share is about a
    fixed fraction of the matmul time, not of the softmax time: cuDNN's softmax hides
    under about 0.3 of its matmuls at d=64 and at d=128 alike (docs/model.md). The result
    is stretched by per-block fixed costs; memory roofs overlap with everything.
    ``compute_overlap=None`` is the floor: the busiest compute roof alone. ``top``/``total``
    default to numbers and arrays; pass ``sympy.Max``/``sympy.Add`` for symbolic roof
    times.
    """
    compute = [times[r] for r in _COMPUTE_ORDER if r in times]
    memory = [times[r] for r in _MEMORY_ORDER if r in times]
    if top is _max and total is None and _all_floats(compute, memory):
        add, pick = _sum_floats, _max_floats  # one point: plain floats (what _max_of does)
    else:
        add = total or _sum
        pick = top if top is not _max else _max_of
    if compute:
        busiest = pick(*compute)
        if compute_overlap is None:  # the floor: the busiest roof alone
            overlapped = busiest
        else:
            rest = add(*compute) - busiest
            overlapped = busiest + pick(0 * busiest, rest - compute_overlap * busiest)
        memory.append((overlapped + serial) * fill_stretch)
    return pick(*memory)


_COMPUTE_ORDER = tuple(COMPUTE_ROOFS)
_MEMORY_ORDER = tuple(MEMORY_ROOFS)


def _all_floats(compute: list[Any], memory: list[Any]) -> bool:
    """Whether there are roof times of both kinds, every one a plain float (one point);
    loops, not ``all()`` of a generator, which costs more than the tests on every call."""
    if not compute or not memory:
        return False
    for t in compute:
        if type(t) is not float:
            return False
    for t in memory:  # noqa: SIM110
        if type(t) is not float:
            return False
    return True


def _sum_floats(*values: float) -> float:
    return sum(values)


def _max_floats(*values: float) -> float:
    return max(values)


def _sum(*values: Any) -> Any:
    return sum(values)


def _max_of(*values: Any) -> Any:
    return _max(values)


def busy_fraction(work_items: Num, units: int) -> Num:
    """Share of the units a grid can keep busy at all: with fewer blocks than SMs,
    the rest idle. A true bound, whatever the occupancy."""
    share = work_items / units
    return min(1.0, share) if isinstance(share, float) else np.minimum(1.0, share)


def wave_efficiency(work_items: Num, units: int) -> Num:
    """Share of unit-time doing work when equal blocks run in waves of ``units``
    (wave quantisation: 133 blocks on 132 SMs take two full waves)."""
    scalar = isinstance(work_items, float)  # one point: plain floats, no numpy overhead
    items, ceil = (work_items, math.ceil) if scalar else (np.asarray(work_items, float), np.ceil)
    return items / (ceil(items / units) * units)


def binding_roof(times: Mapping[str, Num]) -> Any:
    """Name of the largest roof, elementwise (a label: a str, or an object array of them,
    carried among the number columns)."""
    names = list(times)
    if _plain(list(times.values())):
        return max(names, key=times.__getitem__)
    shape = np.broadcast_shapes(*(np.shape(times[name]) for name in names))
    best = np.array(np.broadcast_to(times[names[0]], shape), dtype=np.float64)  # own copy
    which = np.zeros(shape, dtype=np.intp)
    for i, name in enumerate(names[1:], 1):  # first largest wins, as argmax's would
        larger = np.greater(times[name], best)
        np.copyto(which, i, where=larger)
        np.copyto(best, times[name], where=larger)
    return np.asarray(names, dtype=object)[which]
