"""The n→∞ speedup limit, the crossover solver and the OOM point, against sweep/predict."""

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.analysis.asymptotics import (
    along_n,
    asymptotic_speedup,
    crossover_n,
    large_n,
    leading_coefficients,
    naive_oom_n,
    speedup_at,
)
from perfmodel.errors import PerfmodelError
from perfmodel.prediction import predict, sweep
from perfmodel.shape import Shape
from perfmodel.symbols import b, block_q, d, h, n, resident_ctas, s

BIG_N = 1 << 22


def test_large_n_replaces_ceilings_by_their_growth():
    assert large_n(sp.ceiling(n / block_q)) == n / block_q
    # a ceiling whose argument shrinks to 0 is 1 for large n, not its argument
    assert large_n(sp.ceiling(resident_ctas / sp.ceiling(n / block_q))) == 1


def test_leading_coefficients_are_exact():
    naive = leading_coefficients("naive")
    assert sp.simplify(naive["softmax"]["hbm"] - 2 * b * h * s) == 0  # read S, write P
    assert sp.simplify(naive["qk"]["matmul"] + naive["pv"]["matmul"] - 4 * b * d * h) == 0
    flash = leading_coefficients("flash")["flash"]
    assert sp.simplify(flash["matmul"] - 4 * b * d * h) == 0
    # K/V re-reads once per wave of resident thread blocks: n² d s / (B_r · resident)
    assert sp.simplify(flash["hbm"] - 2 * b * d * h * s / (block_q * resident_ctas)) == 0


@pytest.mark.parametrize(
    ("hw", "shape", "metric"),
    [
        ("h200", Shape(), "time_s"),
        ("h200", Shape(), "t_lower_s"),
        ("h200", Shape(h=16, dtype="bf16", causal=True), "time_s"),
        ("a100", Shape(d=64), "time_s"),
        ("tpu-v5e", Shape(dtype="bf16"), "time_s"),
    ],
)
def test_limit_matches_the_sweep_at_large_n(hw, shape, metric):
    lim = asymptotic_speedup(hw, metric=metric, shape=shape).value
    at_big = speedup_at(hw, [BIG_N], metric=metric, shape=shape)[0]
    assert at_big == pytest.approx(lim, rel=0.01)


def test_limit_expression_evaluates_to_the_value():
    lim = asymptotic_speedup("h200")
    assert lim.naive_roofs == ("hbm", "hbm", "hbm") and lim.flash_roofs == ("matmul",)
    assert {str(x) for x in lim.expr.free_symbols} >= {"R_hbm", "R_matmul"}


def test_along_n_matches_sweep_and_predict():
    ns = [100, 1024, 5000]
    cols = along_n("h200", ns, Shape(h=8))
    ref = sweep("h200", n=ns, h=8)
    for key in ("naive.time_s", "flash.time_s", "flash.hbm_bytes", "speedup"):
        np.testing.assert_allclose(cols[key], ref[key], rtol=1e-12)
    p = predict(n=5000, hw="h200", h=8)
    assert cols["naive.footprint_bytes"][2] == pytest.approx(
        p.naive.extra_memory_bytes + 4 * 8 * 5000 * 128 * 2
    )


def test_crossover_is_the_first_n_reaching_the_threshold():
    shape = Shape(h=16, dtype="bf16", tokens=16384)
    x = crossover_n("h200", 2.0, shape=shape)
    kw = dict(h=16, dtype="bf16")
    at = predict(n=x, hw="h200", batch=16384 // x, **kw).speedup
    before = predict(n=x - 1, hw="h200", batch=16384 // (x - 1), **kw).speedup
    assert at >= 2.0 > before
    below = speedup_at("h200", np.arange(1, x), shape=shape)
    assert np.all(below < 2.0)


def test_sustained_crossover_stays_above_to_n_max():
    shape = Shape()  # one head: idle SMs can make flash lose at mid n (first <= sustained)
    first = crossover_n("h200", 1.5, shape=shape)
    x = crossover_n("h200", 1.5, shape=shape, sustained=True, n_max=32768)
    assert first <= x
    ratio = speedup_at("h200", np.arange(x - 1, 32769), shape=shape)
    assert ratio[0] < 1.5 and np.all(ratio[1:] >= 1.5)


def test_crossover_none_when_never_reached():
    assert crossover_n("h200", 50.0, n_max=4096) is None


@settings(max_examples=8)
@given(threshold=st.floats(1.05, 3.0))
def test_crossover_property(threshold):
    x = crossover_n("h200", threshold, metric="t_lower_s", n_max=1 << 14, h=32)
    if x is None:
        assert np.all(
            speedup_at("h200", np.arange(1, 1 << 14), metric="t_lower_s", h=32) < threshold
        )
    else:
        ratio = speedup_at("h200", np.arange(1, x + 1), metric="t_lower_s", h=32)
        assert ratio[-1] >= threshold and np.all(ratio[:-1] < threshold)


def test_naive_oom_point():
    x = naive_oom_n("h200", h=16)
    cap = predict(n=x, hw="h200").hardware.hbm_capacity_bytes
    cols = along_n("h200", [x - 1, x], h=16)
    assert cols["naive.footprint_bytes"][0] <= cap < cols["naive.footprint_bytes"][1]
    assert cols["flash.footprint_bytes"][1] < cap


@pytest.mark.parametrize(
    "call",
    [
        lambda: crossover_n("h200", 0.0),
        lambda: crossover_n("h200", 1.5, n_min=10, n_max=5),
        lambda: along_n("h200", [0, 4]),
        lambda: along_n("h200", [1024], dtype="fp7"),
        lambda: asymptotic_speedup("h200", metric="wall"),
        lambda: Shape() and along_n("h200", [1024], Shape(), heads=3),
    ],
)
def test_bad_input_raises_perfmodel_error(call):
    with pytest.raises(PerfmodelError):
        call()


def test_under_a_window_the_gain_grows_linearly_and_the_crossover_moves():
    from perfmodel.analysis.asymptotics import window_gain

    shape = Shape(causal=True, h=32, h_kv=8, dtype="bf16")
    g = window_gain("h200", 4095, shape=shape, threshold=5, n_values=(4096, 16384, 65536))
    assert g.speedup[0] == pytest.approx(g.dense_speedup[0])  # n <= W + 1: no change
    # no saturation: past the window the speedup grows about linearly in n
    assert g.speedup[2] / g.speedup[1] > 3 and g.speedup[2] > 5 * g.dense_limit
    assert g.speedup[2] == pytest.approx(g.per_token * 65536, rel=0.1)
    # 5x is never reached without the window; with it, between the window and 65536
    assert g.dense_crossover is None and 4096 < g.crossover < 65536
