"""predict()'s printed code for a new shape of a known case (``perfmodel.trace``) gives
the engine's prediction bit for bit, and bad input the engine's error.

The printed code is the engine's own code traced on one point (every operation on the
shape's numbers recorded, each branch a guard): these tests hold it equal to the engine
(``predict.__wrapped__``: no memory, no traced code) on random shapes, devices, kernel
families, dtypes and modes, including the points whose launch splits K/V (the floor's
searched split count), causal masks (the schedule's imbalance) and GQA packing.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import perfmodel
from perfmodel import prediction, trace
from perfmodel.errors import PerfmodelError

ENGINE = perfmodel.predict.__wrapped__  # type: ignore[attr-defined]


@pytest.fixture(autouse=True)
def _trace_every_branch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every new branch traced at once (not only as the time it saves allows)."""
    monkeypatch.setattr(prediction._CREDIT, "left", math.inf)


def _dump(value: Any) -> Any:
    """A prediction as nested plain data: each number by its type and repr (bit for bit)."""
    if hasattr(value, "model_dump"):
        return _dump(dict(vars(value)))
    if hasattr(value, "__dataclass_fields__"):
        return _dump(dict(vars(value)))
    if isinstance(value, dict):
        return {str(k): (type(k).__name__, _dump(v)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_dump(v) for v in value]
    if isinstance(value, float):
        return ("float", repr(value))
    plain = isinstance(value, int | str | bool | None)
    return (type(value).__name__, value if plain else id(value))


def _traced_answer(**call: Any) -> perfmodel.Prediction | None:
    """predict's answer by the printed code of the call's case (None: it has none)."""
    n, hw = call.pop("n"), call.pop("hw")
    key = (prediction._key(n), prediction._key(hw, True))
    key += tuple((k, prediction._key(v)) for k, v in sorted(call.items()))
    build = prediction._traced(key, n, hw, call)
    return None if build is None else build()


shapes = st.fixed_dictionaries(
    {
        "n": st.one_of(st.integers(1, 40000), st.sampled_from([1, 16, 127, 128, 576, 577])),
        "h": st.sampled_from([1, 2, 4, 8, 16, 32, 64]),
        "group": st.sampled_from([1, 2, 4, 8]),
        "batch": st.integers(1, 16),
        "causal": st.booleans(),
        "kv": st.one_of(st.none(), st.integers(1, 100000)),
    }
)
cases = st.fixed_dictionaries(
    {
        "hw": st.sampled_from(["h200", "h100", "a100", "b200", "l4"]),
        "kernel": st.sampled_from(["fa2", "fa3", "cudnn", "flash-decoding", "pallas-triton"]),
        "d": st.sampled_from([64, 128, 96, 256]),
        "dtype": st.sampled_from(["fp16", "bf16", "fp32"]),
        "mode": st.sampled_from(["forward", "forward", "train"]),
    }
)


def _call(case: dict[str, Any], shape: dict[str, Any]) -> dict[str, Any]:
    h = shape["h"]
    h_kv = max(1, h // shape["group"])
    call = dict(case, n=shape["n"], h=h, h_kv=h_kv, batch=shape["batch"], causal=shape["causal"])
    if shape["kv"] is not None and not shape["causal"]:
        call["kv_len"] = shape["kv"]
    return call


def _same_answer(call: dict[str, Any]) -> bool:
    """Whether the printed code answers the call, and if so as the engine does (either
    may raise: then both, with the same message)."""
    try:
        expected: Any = _dump(ENGINE(**call))
    except PerfmodelError as e:
        expected = ("error", str(e))
    try:
        got = _traced_answer(**call)
    except PerfmodelError as e:  # the printed code never raises the engine's errors ...
        raise AssertionError(f"printed code raised {e}") from None
    if got is None:  # ... it leaves them (and what it has no code for) to the engine
        return False
    assert _dump(got) == expected, call
    return True


@settings(max_examples=150)
@given(case=cases, first=shapes, more=st.lists(shapes, min_size=4, max_size=8))
def test_printed_code_is_the_engine_bit_for_bit(
    case: dict[str, Any], first: dict[str, Any], more: list[dict[str, Any]]
) -> None:
    for shape in (first, *more):
        _same_answer(_call(case, shape))


def test_most_new_shapes_of_a_case_are_answered_by_printed_code() -> None:
    rng = np.random.default_rng(7)
    answered = 0
    for _ in range(300):
        call = dict(
            hw="h200",
            n=int(rng.integers(1, 32769)),
            d=int(rng.choice([64, 128])),
            h=int(rng.choice([1, 8, 16, 32])),
            batch=int(rng.integers(1, 9)),
            causal=bool(rng.integers(0, 2)),
        )
        answered += _same_answer(call)
    assert answered >= 270  # the rest: a branch that stopped (none here so far)


@pytest.mark.parametrize(
    "bad",
    [
        dict(n=0),
        dict(n=-3),
        dict(n=2.5),
        dict(n=True),
        dict(n=2**40),
        dict(h=0),
        dict(h="16"),
        dict(batch=0),
        dict(h=12, h_kv=5),
        dict(kv_len=100),  # with causal=True below: needs kv_len == n
        dict(h_kv=3.5),
    ],
)
def test_bad_input_raises_the_engines_error(bad: dict[str, Any]) -> None:
    base = dict(n=4096, hw="h200", h=16, d=128, causal="kv_len" in bad)
    perfmodel.predict(**base)  # the case is known: its printed code is tried first
    call = {**base, **bad}
    with pytest.raises(PerfmodelError) as engine:
        ENGINE(**call)
    with pytest.raises(PerfmodelError) as fast:
        perfmodel.predict(**call)
    assert str(fast.value) == str(engine.value)
    assert _traced_answer(**call) is None


def test_a_traced_number_refuses_to_leave_its_trace() -> None:
    paths = trace.Paths(("x",))

    def leaks(x: Any) -> Any:
        return [float(x)]

    for fn in (leaks, lambda x: np.asarray(x), lambda x: {x: 1}, lambda x: int(x)):
        result, recorder = paths.trace(fn, (2.0,))
        assert result is None and recorder.stopped is not None


def test_printed_code_is_the_same_operations() -> None:
    paths = trace.Paths(("a", "b"))

    def rule(a: Any, b: Any) -> Any:
        c = math.ceil(a / b) * b  # math.ceil: an int, as in the rule
        return {"c": c, "m": trace.maximum(c, 3.0), "s": a - b if a > b else b - a}

    for a, b in ((7.0, 2.0), (1.0, 2.0)):
        result, recorder = paths.trace(rule, (a, b))
        paths.add_result(recorder, result)
    for a, b in ((9.5, 3.0), (0.1, 4.0), (5.0, 5.0)):
        found = paths.fn(a, b)
        assert found is not None and found[0] >= 0
        assert paths.leaves[found[0]](found[1]) == rule(a, b)
        assert type(paths.leaves[found[0]](found[1])["c"]) is type(rule(a, b)["c"])


def test_a_zero_is_added_only_where_it_changes_nothing() -> None:
    """``x + 0.0`` is printed as ``x`` only where ``x`` cannot be -0.0 (-0.0 + 0.0 is
    +0.0), and ``max(x, 0.0)`` as ``x`` only where ``x`` cannot be below zero."""

    def rule(x: Any, y: Any) -> Any:
        return [x * y + 0.0, trace.maximum(x * y, 0.0), -(x - y) + 0.0]

    def traced(positive: bool) -> trace.Paths:
        paths = trace.Paths(("x", "y"), positive=positive)
        result, recorder = paths.trace(rule, (2.0, 3.0))
        paths.add_result(recorder, result)
        return paths

    anywhere, positive = traced(False), traced(True)
    assert anywhere.code.count("+ 0.0") == 2 and "0.0 >" in anywhere.code
    assert positive.code.count("+ 0.0") == 1 and "0.0 >" not in positive.code  # -(x - y)
    for paths, points in (
        (anywhere, ((-0.0, 3.0), (0.0, -1.0), (-2.0, 5.0), (2.0, 2.0))),
        (positive, ((0.5, 3.0), (2.0, 2.0), (7.0, 1.0))),
    ):
        for x, y in points:
            found = paths.fn(x, y)
            got = paths.leaves[found[0]](found[1])
            assert [(v, math.copysign(1.0, v)) for v in got] == [
                (v, math.copysign(1.0, v)) for v in rule(x, y)
            ]


def test_a_difference_is_zero_only_where_its_terms_are_finite() -> None:
    """``x - x`` and ``0.0 * x`` are the constant 0.0 only where ``x`` is bounded (inf -
    inf and 0.0 * inf are NaN), and ``0.0 * x`` only where ``x`` is not below zero."""

    def rule(x: Any, y: Any) -> Any:
        return [x * y - x * y, 0.0 * (x * y), 0.0 * (x - y)]

    def traced(limits: Any) -> trace.Paths:
        paths = trace.Paths(("x", "y"), positive=True, limits=limits)
        result, recorder = paths.trace(rule, (2.0, 3.0))
        paths.add_result(recorder, result)
        return paths

    unbounded, bounded = traced(None), traced((1e10, 1e10))
    assert unbounded.code.count(" - ") == 2 and unbounded.code.count("0.0 *") == 2
    assert bounded.code.count(" - ") == 1 and bounded.code.count("0.0 *") == 1  # x - y
    assert bounded.fn(5.0, 7.0)[1] == (-0.0,) and unbounded.fn(1e308, 1e308)[1][0] != 0.0


def test_traces_kept_on_disk_are_the_engine_in_a_later_process(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PERFMODEL_CACHE", str(tmp_path))
    monkeypatch.setattr(prediction, "_CASES", {})
    prediction._traces_folder.cache_clear()
    try:
        rng = np.random.default_rng(11)
        calls = [
            dict(hw=hw, n=int(rng.integers(1, 20000)), h=int(h), batch=int(rng.integers(1, 5)),
                 causal=bool(c), d=128)
            for hw, h, c in zip(["h200", "a100"] * 20, rng.choice([1, 8, 32], 40),
                                rng.integers(0, 2, 40), strict=False)
        ]  # fmt: skip
        for call in calls[:20]:
            _same_answer(call)
        kept = list(tmp_path.glob("traces-*/*.json"))
        assert kept  # each case's traces, in the cache folder
        prediction._CASES.clear()  # a later process: the cases read back from their files
        restored = 0
        for call in calls[20:]:
            n, hw = call["n"], call["hw"]
            options = {k: v for k, v in call.items() if k not in ("n", "hw")}
            key = (prediction._key(n), prediction._key(hw, True))
            key += tuple((k, prediction._key(v)) for k, v in sorted(options.items()))
            case = (key[1], *(i for i in key[2:] if i[0] not in prediction._SHAPE_ARGS))
            known = prediction._CASES.get(case)
            if known is None or known is prediction._ONCE:
                known = prediction._Case.of(case, n, hw, options)
            restored += bool(known and known.paths.leaves)
            _same_answer(call)
        assert restored >= 10
    finally:
        prediction._traces_folder.cache_clear()
