"""Bad values into every public entry point: a result that is physical, or PerfmodelError.

Each property replaces one argument of a valid call with a value drawn from the classes
a user gets wrong (zero, negatives, huge integers, NaN and infinities, fractions, text,
None, booleans, lists) and requires one of two outcomes: ``PerfmodelError`` (a
``ValueError``) whose one-line message names the argument, or a result whose numbers
are all finite. Any other exception, or a silent answer to a value the argument does
not accept (``True`` as a length, ``"False"`` as a flag), fails. Every call runs
under the time and memory guard of ``contract_guard``; the table of known bad calls
requires exactly ``PerfmodelError`` with a one-line message naming the argument.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pytest
from contract_guard import guarded
from hypothesis import example, given, settings
from hypothesis import strategies as st

import perfmodel
from perfmodel import PerfmodelError
from perfmodel.analysis.advise import advise
from perfmodel.analysis.asymptotics import asymptotic_speedup, crossover_n, naive_oom_n
from perfmodel.analysis.diagnose import diagnose, diagnose_time
from perfmodel.analysis.estimate import estimate, estimate_sweep
from perfmodel.analysis.kvcache import (
    allocations,
    decode_step,
    kv_bytes_per_token,
    kv_cache_bytes,
)
from perfmodel.catalog.hardware import registry
from perfmodel.prediction import SweepResult

# --- the values ---------------------------------------------------------------------------
EDGE = [
    0,
    -1,
    -(2**63),
    2**31,
    2**63,
    2**64,
    10**300,
    True,
    False,
    None,
    "",
    "1024",
    "fp16",
    "yes",
    "False",
    [],
    [0],
    [1024, -1],
    0.5,
    1e300,
    math.nan,
    math.inf,
    -math.inf,
    b"\xff",
    object(),
]
BAD = st.one_of(
    st.sampled_from(EDGE),
    st.integers(),
    st.floats(),
    st.text(max_size=6),
    st.none(),
    st.booleans(),
    st.lists(st.integers(min_value=-(2**70), max_value=2**70), max_size=3),
)


def _finite(value: Any) -> bool:
    """Every number in a (nested) result is finite."""
    if isinstance(value, bool | str | None):
        return True
    if isinstance(value, int | float | np.number):
        return math.isfinite(float(value))
    if isinstance(value, np.ndarray):
        return value.dtype.kind not in "fc" or bool(np.all(np.isfinite(value)))
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list | tuple):
        return all(_finite(v) for v in value)
    if hasattr(value, "model_dump"):
        return _finite(value.model_dump())
    if hasattr(value, "__dataclass_fields__"):
        return all(_finite(getattr(value, f)) for f in value.__dataclass_fields__)
    return True


def _positive_int(value: Any) -> bool:
    """What a positive-integer argument may accept: an int above zero (not a bool; a
    float that is a whole number counts as its int)."""
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        return False
    return isinstance(value, int | float | np.integer) and not isinstance(value, bool) and value > 0


#: How a message may name an argument: a device is "hardware" in the registry's words.
SAID = {"hw": ("hw", "hardware")}


def outcome(fn: Any, arg: str, value: Any, accepts: Any, **kwargs: Any) -> None:
    """``fn(**kwargs)`` with ``arg=value``: PerfmodelError naming ``arg``, or a finite result."""
    try:
        result = guarded(lambda: fn(**{**kwargs, arg: value}))
    except PerfmodelError as e:
        message = str(e)
        assert "\n" not in message, message
        assert any(word in message for word in SAID.get(arg, (arg,))), message
        return
    assert accepts(value), f"{arg}={value!r} was accepted: {result!r:.200}"
    assert _finite(result), f"{arg}={value!r} gave a non-finite result"


# --- predict ------------------------------------------------------------------------------
PREDICT = dict(
    n=1024,
    hw="h100",
    d=128,
    h=2,
    h_kv=None,
    batch=1,
    dtype="bf16",
    causal=False,
    block_q=64,
    block_k=64,
    kv_len=None,
    calibration=None,
    naive="minimal",
)
INT_ARGS = ("n", "d", "h", "batch")
#: Optional: None is the kernel family's tile (any positive int the hardware allows).
TILE_ARGS = ("block_q", "block_k")


@given(arg=st.sampled_from(INT_ARGS), value=BAD)
def test_predict_positive_ints(arg: str, value: Any) -> None:
    outcome(perfmodel.predict, arg, value, _positive_int, **PREDICT)


@given(arg=st.sampled_from(("h_kv", "kv_len", *TILE_ARGS)), value=BAD)
def test_predict_optional_ints(arg: str, value: Any) -> None:
    outcome(perfmodel.predict, arg, value, lambda v: v is None or _positive_int(v), **PREDICT)


@given(value=BAD)
def test_predict_causal_is_a_boolean(value: Any) -> None:
    outcome(perfmodel.predict, "causal", value, lambda v: isinstance(v, bool), **PREDICT)


@given(arg=st.sampled_from(("hw", "dtype", "calibration", "naive")), value=BAD)
def test_predict_names(arg: str, value: Any) -> None:
    if arg == "hw":  # any shipped name or alias, in any case (``load_hardware``)
        names = set(registry())
        outcome(perfmodel.predict, arg, value, lambda v: str(v).lower() in names, **PREDICT)
        return
    known = {
        "dtype": ("fp16", "bf16"),
        "naive": ("minimal", "xla"),
        "calibration": (None, "default", []),
    }[arg]
    outcome(perfmodel.predict, arg, value, lambda v: any(v == k for k in known), **PREDICT)


# --- sweep --------------------------------------------------------------------------------
SWEEP = dict(
    hw="h200",
    n=[1024, 4096],
    d=128,
    h=4,
    h_kv=None,
    batch=1,
    dtype="bf16",
    causal=False,
    block_q=64,
    block_k=64,
    kv_len=None,
)
LIST = st.lists(BAD, min_size=1, max_size=3)


def _positive_ints(value: Any) -> bool:
    values = value if isinstance(value, list) else [value]
    return len(values) > 0 and all(_positive_int(v) for v in values)


@given(arg=st.sampled_from(INT_ARGS), value=st.one_of(BAD, LIST))
def test_sweep_positive_ints(arg: str, value: Any) -> None:
    outcome(perfmodel.sweep, arg, value, _positive_ints, **SWEEP)


@given(arg=st.sampled_from(TILE_ARGS), value=st.one_of(BAD, LIST))
def test_sweep_tiles(arg: str, value: Any) -> None:
    outcome(perfmodel.sweep, arg, value, lambda v: v is None or _positive_ints(v), **SWEEP)


@given(value=st.one_of(BAD, LIST))
def test_sweep_causal_is_boolean(value: Any) -> None:
    def booleans(v: Any) -> bool:
        return all(isinstance(x, bool) for x in (v if isinstance(v, list) else [v])) and v != []

    outcome(perfmodel.sweep, "causal", value, booleans, **SWEEP)


@given(value=st.one_of(BAD, LIST))
def test_sweep_dtype_is_known(value: Any) -> None:
    def known(v: Any) -> bool:
        values = v if isinstance(v, list) else [v]
        return v != [] and all(x in ("fp16", "bf16") for x in values)

    outcome(perfmodel.sweep, "dtype", value, known, **SWEEP)


# --- loaders --------------------------------------------------------------------------------
@given(value=BAD)
def test_load_hardware(value: Any) -> None:
    outcome(lambda hw: perfmodel.load_hardware(hw), "hw", value, lambda v: False)


@given(value=BAD)
def test_load_calibration(value: Any) -> None:
    outcome(
        lambda calibration: perfmodel.load_calibration(calibration),
        "calibration",
        value,
        lambda v: v is None,
    )


@given(value=BAD)
def test_symbolic(value: Any) -> None:
    outcome(lambda algorithm: perfmodel.symbolic(algorithm), "algorithm", value, lambda v: False)


# --- diagnose ------------------------------------------------------------------------------
def _fraction(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 1


@given(arg=st.sampled_from(("hbm_util", "sm_util")), value=BAD)
def test_diagnose_fractions(arg: str, value: Any) -> None:
    outcome(diagnose, arg, value, _fraction, hbm_util=0.5, sm_util=0.2)


DIAGNOSE_TIME = dict(time_s=1e-3, n=4096, hw="h200", algorithm="naive")


@given(arg=st.sampled_from(("time_s", "n", "hw", "algorithm")), value=BAD)
def test_diagnose_time(arg: str, value: Any) -> None:
    def accepts(v: Any) -> bool:
        if arg == "time_s":
            return isinstance(v, int | float) and not isinstance(v, bool) and 1e-3 <= v <= 1e6
        return _positive_int(v) if arg == "n" else False

    outcome(diagnose_time, arg, value, accepts, **DIAGNOSE_TIME)


# --- KV cache and decode ------------------------------------------------------------------
DECODE = dict(
    hw="h200",
    batch=4,
    kv_len=4096,
    h=32,
    h_kv=8,
    d=128,
    dtype="bf16",
    q_len=1,
    page_tokens=None,
    splits=1,
)


@given(arg=st.sampled_from(("batch", "kv_len", "h", "h_kv", "d", "q_len", "splits")), value=BAD)
def test_decode_step_ints(arg: str, value: Any) -> None:
    # splits=None: the kernel family's split rule
    accepts = (lambda v: v is None or _positive_int(v)) if arg == "splits" else _positive_int
    outcome(decode_step, arg, value, accepts, **DECODE)


@given(arg=st.sampled_from(("page_tokens", "dtype")), value=BAD)
def test_decode_step_others(arg: str, value: Any) -> None:
    accepts = {
        "page_tokens": lambda v: v is None or _positive_int(v),
        "dtype": lambda v: v in ("fp16", "bf16"),
    }[arg]
    outcome(decode_step, arg, value, accepts, **DECODE)


@given(arg=st.sampled_from(("model", "dtype")), value=BAD)
@example(arg="dtype", value="fp16")
def test_kv_bytes_per_token(arg: str, value: Any) -> None:
    # "fp16" is among the drawn values and is a valid dtype: it must be accepted.
    accepts = (lambda v: v in ("fp16", "bf16")) if arg == "dtype" else (lambda v: False)
    outcome(kv_bytes_per_token, arg, value, accepts, model="llama-3.1-8b", dtype="bf16")


def _token_counts(value: Any) -> bool:
    """Token counts (samples of a distribution): positive finite numbers, not booleans."""
    values = value if isinstance(value, list) else [value]
    return len(values) > 0 and all(
        isinstance(v, int | float) and not isinstance(v, bool) and 0 < v <= 2**32 for v in values
    )


@given(arg=st.sampled_from(("tokens", "batch")), value=BAD)
def test_kv_cache_bytes(arg: str, value: Any) -> None:
    accepts = _token_counts if arg == "tokens" else _positive_int
    outcome(
        kv_cache_bytes,
        arg,
        value,
        accepts,
        model="llama-3.1-8b",
        dtype="bf16",
        tokens=4096,
        batch=2,
    )


@given(arg=st.sampled_from(("max_len", "page_tokens", "memory_fraction")), value=BAD)
def test_allocations(arg: str, value: Any) -> None:
    accepts = _fraction if arg == "memory_fraction" else _positive_int
    outcome(
        allocations,
        arg,
        value,
        accepts,
        model="llama-3.1-8b",
        hw="h200",
        dtype="bf16",
        tokens=[100, 2000],
        max_len=4096,
        page_tokens=16,
        memory_fraction=0.9,
    )


# --- analysis: scans over n, limits, advice ----------------------------------------------------
@given(arg=st.sampled_from(("threshold", "n_min", "n_max")), value=BAD)
def test_crossover_n(arg: str, value: Any) -> None:
    def accepts(v: Any) -> bool:
        number = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
        return number and 0 < v <= (1e6 if arg == "threshold" else 2**20)

    kwargs = dict(threshold=1.5, n_min=1, n_max=4096)
    outcome(lambda **kw: crossover_n("h200", **kw), arg, value, accepts, **kwargs)


@given(value=BAD)
def test_naive_oom_n(value: Any) -> None:
    outcome(
        lambda n_max: naive_oom_n("a100", n_max=n_max),
        "n_max",
        value,
        lambda v: _positive_int(v) and v <= 2**20,
    )


@settings(max_examples=20)  # each accepted call takes a symbolic limit
@given(arg=st.sampled_from(("metric", "causal")), value=BAD)
def test_asymptotic_speedup(arg: str, value: Any) -> None:
    accepts = {
        "metric": lambda v: v in ("time_s", "t_lower_s"),
        "causal": lambda v: isinstance(v, bool),
    }[arg]
    outcome(lambda **kw: asymptotic_speedup("h200", **kw), arg, value, accepts)


@given(arg=st.sampled_from(("workload", "model", "dtype")), value=BAD)
def test_advise(arg: str, value: Any) -> None:
    kwargs = dict(workload="contract-review", model=None, dtype=None)
    outcome(lambda **kw: advise(hw="h200", **kw), arg, value, lambda v: v is None, **kwargs)


# --- known bad calls: each must be refused, naming the argument --------------------------------
EST = dict(model="llama-3.1-8b", hw="h200", prompt=512)
SWEEP_EST = dict(model="llama-3.1-8b", hw="h200", prompt=[512, 1024], batch=1)
REFUSED: list[tuple[str, Any, dict[str, Any], str]] = [
    ("predict-n-inf", perfmodel.predict, dict(n=math.inf, hw="h200"), "n"),
    ("predict-n-nan", perfmodel.predict, dict(n=math.nan, hw="h200"), "n"),
    ("predict-n-10^300", perfmodel.predict, dict(n=10**300, hw="h200"), "n"),
    ("predict-n-true", perfmodel.predict, dict(n=True, hw="h200"), "n"),
    ("predict-n-str", perfmodel.predict, dict(n="4096", hw="h200"), "n"),
    (
        "predict-block-q-inf",
        perfmodel.predict,
        dict(n=4096, hw="h200", block_q=math.inf),
        "block_q",
    ),
    ("predict-warps-0", perfmodel.predict, dict(n=4096, hw="h200", warps=0), "warps"),
    ("predict-warps-float", perfmodel.predict, dict(n=4096, hw="h200", warps=2.5), "warps"),
    ("predict-causal-str", perfmodel.predict, dict(n=4096, hw="h200", causal="yes"), "causal"),
    (
        "predict-causal-False-str",
        perfmodel.predict,
        dict(n=4096, hw="h200", causal="False"),
        "causal",
    ),
    ("predict-causal-1", perfmodel.predict, dict(n=4096, hw="h200", causal=1), "causal"),
    ("predict-dtype-none", perfmodel.predict, dict(n=4096, hw="h200", dtype=None), "dtype"),
    ("predict-hw-none", perfmodel.predict, dict(n=4096, hw=None), "hw"),
    ("predict-hw-int", perfmodel.predict, dict(n=4096, hw=3), "hw"),
    ("sweep-n-empty", perfmodel.sweep, dict(hw="h200", n=[]), "n"),
    ("sweep-n-inf", perfmodel.sweep, dict(hw="h200", n=[4096, math.inf]), "n"),
    ("sweep-n-nan", perfmodel.sweep, dict(hw="h200", n=np.array([4096.0, np.nan])), "n"),
    ("sweep-n-str", perfmodel.sweep, dict(hw="h200", n=["4096"]), "n"),
    ("sweep-n-bool", perfmodel.sweep, dict(hw="h200", n=[True]), "n"),
    ("sweep-n-huge", perfmodel.sweep, dict(hw="h200", n=[10**300]), "n"),
    ("sweep-n-2d-ragged", perfmodel.sweep, dict(hw="h200", n=[[1024], [1, 2]]), "n"),
    (
        "sweep-causal-False-str",
        perfmodel.sweep,
        dict(hw="h200", n=[4096], causal=["False"]),
        "causal",
    ),
    ("sweep-causal-str", perfmodel.sweep, dict(hw="h200", n=[4096], causal="yes"), "causal"),
    ("sweep-causal-int", perfmodel.sweep, dict(hw="h200", n=[4096], causal=[0, 1]), "causal"),
    ("sweep-dtype-none", perfmodel.sweep, dict(hw="h200", n=[4096], dtype=[None]), "dtype"),
    ("sweep-dtype-unknown", perfmodel.sweep, dict(hw="h200", n=[4096], dtype=["fp64"]), "dtype"),
    (
        "sweep-grid-too-large",
        perfmodel.sweep,
        dict(hw="h200", n=list(range(1, 10**4 + 1)), d=list(range(1, 10**4 + 1))),
        "points",
    ),
    (
        "sweep-broadcast",
        perfmodel.sweep,
        dict(hw="h200", n=[1, 2], d=[64, 128, 256], grid=False),
        "n",
    ),
    ("sweep-grid-not-bool", perfmodel.sweep, dict(hw="h200", n=[4096], grid="no"), "grid"),
    ("diagnose-hbm-1.5", diagnose, dict(hbm_util=1.5, sm_util=0.3), "hbm_util"),
    ("diagnose-sm-nan", diagnose, dict(hbm_util=0.5, sm_util=math.nan), "sm_util"),
    ("diagnose-time-below-floor", diagnose_time, dict(time_s=1e-9, n=4096, hw="h200"), "time_s"),
    ("diagnose-time-inf", diagnose_time, dict(time_s=math.inf, n=4096, hw="h200"), "time_s"),
    ("decode-batch-true", decode_step, dict(**{**DECODE, "batch": True}), "batch"),
    ("decode-dtype-none", decode_step, dict(**{**DECODE, "dtype": None}), "dtype"),
    (
        "kv-cache-tokens-empty",
        kv_cache_bytes,
        dict(model="llama-3.1-8b", dtype="bf16", tokens=[]),
        "tokens",
    ),
    (
        "kv-cache-batch-nan",
        kv_cache_bytes,
        dict(model="llama-3.1-8b", dtype="bf16", tokens=8, batch=math.nan),
        "batch",
    ),
    (
        "allocations-fraction-nan",
        allocations,
        dict(
            model="llama-3.1-8b",
            hw="h200",
            dtype="bf16",
            tokens=[100],
            max_len=4096,
            memory_fraction=math.nan,
        ),
        "memory_fraction",
    ),
    # issue 23: whole-model estimates
    ("estimate-attention-list", estimate, dict(**EST, attention=[]), "attention"),
    ("estimate-attention-unknown", estimate, dict(**EST, attention="sparse"), "attention"),
    ("estimate-kernel-unknown", estimate, dict(**EST, kernel="bogus"), "kernel"),
    ("estimate-kernel-list", estimate, dict(**EST, kernel=["pallas"]), "kernel"),
    ("estimate-check-memory-str", estimate, dict(**EST, check_memory="False"), "check_memory"),
    ("estimate-check-memory-int", estimate, dict(**EST, check_memory=0), "check_memory"),
    ("estimate-kv-unknown", estimate, dict(**EST, kv="ring"), "kv"),
    ("estimate-prompt-true", estimate, dict(**{**EST, "prompt": True}), "prompt"),
    ("estimate-output-nan", estimate, dict(**EST, output=math.nan), "output"),
    ("estimate-context-zero", estimate, dict(**EST, context=0), "context"),
    ("estimate-page-tokens-float", estimate, dict(**EST, page_tokens=2.5), "page_tokens"),
    ("estimate-tp-str", estimate, dict(**EST, tp="2"), "tp"),
    ("estimate-tp-3-70b", estimate, dict(**{**EST, "model": "llama-3.1-70b"}, tp=3), "tp"),
    ("estimate-dtype-none", estimate, dict(**EST, dtype=None), "dtype"),
    ("estimate-sweep-kernel-unknown", estimate_sweep, dict(**SWEEP_EST, kernel="bogus"), "kernel"),
    ("estimate-sweep-prompt-empty", estimate_sweep, dict(**{**SWEEP_EST, "prompt": []}), "prompt"),
    (
        "mosaic-on-tpu",
        perfmodel.predict,
        dict(n=1024, hw="tpu-v5e", kernel="pallas-mosaic", dtype="bf16"),
        "kernel",
    ),
    (
        "mosaic-on-ampere",
        perfmodel.predict,
        dict(n=1024, hw="a100", kernel="pallas-mosaic"),
        "kernel",
    ),
    ("tpu-default-kernel", perfmodel.predict, dict(n=1024, hw="tpu-v5e", dtype="bf16"), "kernel"),
    (
        "backward-splits",
        perfmodel.predict,
        dict(n=1024, hw="h200", mode="backward", splits=2),
        "splits",
    ),
    (
        "sweep-max-bytes-negative",
        perfmodel.sweep,
        dict(hw="h200", n=[1024], max_bytes=-1),
        "max_bytes",
    ),
    ("estimate-sweep-prompt-zero", estimate_sweep, dict(**{**SWEEP_EST, "prompt": [0]}), "prompt"),
]


@pytest.mark.parametrize(
    ("fn", "kwargs", "arg"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED]
)
def test_known_bad_call_is_refused(fn: Any, kwargs: dict[str, Any], arg: str) -> None:
    with pytest.raises(PerfmodelError) as info:
        guarded(lambda: fn(**kwargs))
    assert type(info.value) is PerfmodelError
    message = str(info.value)
    assert "\n" not in message, message
    assert any(word in message for word in SAID.get(arg, (arg,))), message


# --- physical results --------------------------------------------------------------------------
def test_naive_that_does_not_fit_is_flagged() -> None:
    p = perfmodel.predict(n=262144, hw="a100")  # S + P: 275 GB on an 80 GB card
    assert p.naive.fits_memory is False and p.flash.fits_memory is True
    assert "does not fit" in str(p)


def test_sweep_flags_memory_per_point() -> None:
    r = perfmodel.sweep("a100", n=[4096, 262144])
    assert r["naive.fits_memory"].tolist() == [True, False]
    assert r["flash.fits_memory"].tolist() == [True, True]


@given(
    n=st.integers(min_value=1, max_value=2**31),
    d=st.sampled_from([32, 64, 128, 256]),
    h=st.integers(min_value=1, max_value=256),
    batch=st.integers(min_value=1, max_value=2**20),
)
def test_valid_predictions_are_finite(n: int, d: int, h: int, batch: int) -> None:
    p = perfmodel.predict(n=n, hw="h200", d=d, h=h, batch=batch, block_q=64, block_k=64)
    assert _finite(p.model_dump()) and p.speedup > 0


def test_pallas_kernels_without_jax_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib
    import sys

    for name in [m for m in sys.modules if m.split(".")[0] in ("jax", "pallas_kernels")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "jax", None)  # import jax fails
    with pytest.raises(ModuleNotFoundError) as info:
        importlib.import_module("pallas_kernels")
    message = str(info.value)
    assert "\n" not in message and "perfmodel[kernels]" in message, message


# --- issue 23: estimate, hypothesis --------------------------------------------------------
@settings(max_examples=40)
@given(
    arg=st.sampled_from(("prompt", "output", "batch", "page_tokens", "context", "tp")),
    value=BAD,
)
def test_estimate_positive_ints(arg: str, value: Any) -> None:
    def accepts(v: Any) -> bool:
        return (v is None and arg == "context") or (_positive_int(v) and v <= 4096)

    outcome(estimate, arg, value, accepts, **EST)


@settings(max_examples=40)
@given(arg=st.sampled_from(("attention", "kernel", "kv", "dtype", "check_memory")), value=BAD)
def test_estimate_names_and_flags(arg: str, value: Any) -> None:
    accepts = {
        "attention": lambda v: v in ("naive", "flash", "fa2", "flash2"),
        "kernel": lambda v: v is None,
        "kv": lambda v: v in ("paged", "contiguous"),
        "dtype": lambda v: v in ("fp16", "bf16", "fp32", "tf32", "fp8"),
        "check_memory": lambda v: isinstance(v, bool),
    }[arg]
    outcome(estimate, arg, value, accepts, **EST)


def test_out_of_memory_suggests_an_accepted_split() -> None:
    with pytest.raises(PerfmodelError) as info:
        estimate("llama-3.1-70b", "h200", prompt=2048, output=256)
    tp = int(info.value.args[0].split("try tp=")[1].split(",")[0])
    assert estimate("llama-3.1-70b", "h200", prompt=2048, output=256, tp=tp).memory.fits


def test_missing_peak_says_which_dtype_to_give() -> None:
    with pytest.raises(PerfmodelError, match=r"give dtype='bf16'"):
        perfmodel.predict(n=1024, hw="tpu-v6e", kernel="fa2")


# --- issue 23: the combinations once held as strict xfails, each its exact contract -------
def refused(fn: Any, message: str) -> str:
    """``fn()`` under the guard raises exactly PerfmodelError with the one-line ``message``
    (a regular expression matched against the whole message)."""
    with pytest.raises(PerfmodelError) as info:
        guarded(fn)
    text = str(info.value)
    assert type(info.value) is PerfmodelError and "\n" not in text, text
    assert re.fullmatch(message, text), text
    return text


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(columns=0), r"columns=0 must be a list of result names"),
        (dict(columns=[1]), r"columns=\[1\] must be a list of result names"),
        (dict(columns="flash.time_s"), r"columns='flash.time_s' must be a list of result names"),
        (dict(max_bytes=None), r"max_bytes=None must be a positive integer \(bytes .*\)"),
        (dict(max_bytes=math.nan), r"max_bytes=nan must be a positive integer \(bytes .*\)"),
        (dict(max_bytes=0), r"max_bytes=0 must be a positive integer \(bytes .*\)"),
        (dict(max_bytes=True), r"max_bytes=True must be a positive integer \(bytes .*\)"),
    ],
    ids=["columns-0", "columns-int", "columns-str", "max-none", "max-nan", "max-0", "max-true"],
)
def test_sweep_options_refused(kwargs: dict[str, Any], message: str) -> None:
    refused(lambda: perfmodel.sweep("h200", n=[1024], **kwargs), message)


def test_sweep_columns_and_size_limit_accepted() -> None:
    """A generator of names is a list of names; a whole float is a byte count."""
    r = perfmodel.sweep("h200", n=[1024], columns=(c for c in ["flash.time_s"]), max_bytes=1e9)
    assert "flash.time_s" in r and "naive.hbm_bytes" not in r


def test_sweep_overflow_matches_predict() -> None:
    kwargs = dict(n=[2**32], batch=[2**32], h=[64])
    swept = guarded(lambda: perfmodel.sweep("h200", **kwargs))
    one = perfmodel.predict(n=2**32, batch=2**32, h=64, hw="h200")
    assert swept["flash.time_s"][0] == pytest.approx(one.flash.time_s)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(n=7, h=8, tp=2, causal=True),  # tp alone: no sequence split, no zig-zag
        dict(n=7, h=8, tp=2, causal=False),
        # the engine checks cp/tp once (perfmodel.arguments) before the split: these pass
        dict(n=1024, h=8, cp=np.int64(2)),
        dict(n=1024, h=8, tp=2.0),
    ],
    ids=["odd-n-tp-causal", "odd-n-tp", "cp-numpy", "tp-float"],
)
def test_valid_splits_accepted(kwargs: dict[str, Any]) -> None:
    p = guarded(lambda: perfmodel.predict(hw="h200", **kwargs))
    assert p.parallel is not None and _finite(p.parallel)
    zigzag = p.parallel.causal and p.parallel.devices > 1
    assert p.parallel.balance == ("zigzag" if zigzag else "contiguous")


def test_odd_n_under_context_parallelism_still_refused() -> None:
    refused(
        lambda: perfmodel.predict(n=7, hw="h200", h=8, cp=2, causal=True),
        r"n=7 is not divisible by 4 \(zigzag split, cp=2\)",
    )


BACKWARD = (
    r"{0} is the forward kernel's, not modelled for mode='backward' \(.*\): drop it, or use "
    r"mode='train' \(its forward half takes it\)"
)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(mode="backward", splits=4), BACKWARD.format("splits=4")),
        (dict(mode="backward", page_tokens=16), BACKWARD.format("page_tokens=16")),
        (dict(mode="backward", block_q=64, block_k=64), BACKWARD.format("block_q=64")),
        (dict(mode="backward", block_k=32), BACKWARD.format("block_k=32")),
        (dict(mode="backward", warps=4), BACKWARD.format("warps=4")),
        (
            dict(mode="backward", dtype="fp8", kernel="fa3", fp8_as_run=True),
            BACKWARD.format("fp8_as_run=True"),
        ),
        (
            dict(hw="tpu-v5e", kernel="pallas-mosaic", dtype="bf16"),
            r"kernel='pallas-mosaic' runs on sm90 only, not on TPU v5e \(arch=None\); name "
            r"another family \(perfmodel kernels list\)",
        ),
        (
            dict(hw="a100", kernel="pallas-mosaic"),
            r"kernel='pallas-mosaic' runs on sm90 only, not on A100 SXM 80GB \(arch='sm80'\);"
            r" name another family \(perfmodel kernels list\)",
        ),
        (
            dict(hw="tpu-v5p", dtype="bf16"),
            r"kernel=None on TPU v5p: no kernel family models a TPU kernel \(.*\); name one,"
            r" e\.g\. kernel='fa2', to cost its launch on this device's roofs",
        ),
    ],
    ids=[
        "backward-splits",
        "backward-page-tokens",
        "backward-tile",
        "backward-block-k",
        "backward-warps",
        "backward-fp8-as-run",
        "mosaic-on-tpu",
        "mosaic-on-ampere",
        "tpu-default-kernel",
    ],
)
def test_combinations_that_do_not_apply_refused(kwargs: dict[str, Any], message: str) -> None:
    refused(lambda: perfmodel.predict(**{"n": 1024, "hw": "h200", **kwargs}), message)
    sweep_kwargs = {k: v for k, v in kwargs.items() if k != "hw"}
    hw = kwargs.get("hw", "h200")
    refused(lambda: perfmodel.sweep(hw, n=[1024, 2048], **sweep_kwargs), message)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(mode="train", splits=4),  # the forward half splits K/V: the time moves
        dict(mode="train", block_q=64, block_k=64),  # the forward half's tile: it moves
        dict(hw="h100", kernel="pallas-mosaic"),
        dict(hw="tpu-v5p", dtype="bf16", kernel="fa2"),
    ],
    ids=["train-splits", "train-tile", "mosaic-on-hopper", "tpu-named-kernel"],
)
def test_combinations_that_apply_accepted(kwargs: dict[str, Any]) -> None:
    p = guarded(lambda: perfmodel.predict(**{"n": 1024, "hw": "h200", **kwargs}))
    assert _finite(p) and p.config.kernel == kwargs.get("kernel", "fa2")
    if "splits" in kwargs or "block_q" in kwargs:
        assert p.flash.time_s != perfmodel.predict(n=1024, hw="h200", mode="train").flash.time_s


def test_sweep_on_a_tpu_has_no_l2_column() -> None:
    """No L2 on the device: predict's l2_bytes is None and sweep has no such column (as it
    has no t_l2_s), never a NaN; asking for it names the column."""
    r = perfmodel.sweep("tpu-v5p", n=[1024], dtype="bf16", kernel="fa2")
    assert (
        perfmodel.predict(n=1024, hw="tpu-v5p", dtype="bf16", kernel="fa2").flash.l2_bytes is None
    )
    assert not any(k.endswith(("l2_bytes", "t_l2_s")) for k in r)
    assert _finite(dict(r))
    refused(
        lambda: perfmodel.sweep(
            "tpu-v5p", n=[1024], dtype="bf16", kernel="fa2", columns=["flash.l2_bytes"]
        ),
        r"columns=\['flash\.l2_bytes'\] are not results; known: .*",
    )


def test_printed_sweep_is_a_table() -> None:
    r = perfmodel.sweep("h200", n=[1024, 2048], causal=[False, True])
    lines = str(r).splitlines()
    assert repr(r) == str(r) and "array(" not in str(r)
    assert lines[0] == "sweep"
    assert lines[1].split() == ["n", "causal", "kv_len", *SweepResult.SHOWN]
    assert len(lines) == 2 + len(r) + 1  # title, header, one line a point, the note
    assert lines[-1].startswith(f"{len(r)} points, {len(r.keys())} columns; fixed: d=128")
    first = lines[2].split()
    assert first[:3] == ["1024", "False", "1024"]
    assert float(first[4]) == pytest.approx(r["flash.time_s"][0], rel=1e-3)
