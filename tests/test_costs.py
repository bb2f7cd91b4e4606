"""Scaling laws of the symbolic cost models, exactly (sympy) and by property (hypothesis)."""

import math

import sympy as sp
from hypothesis import given
from hypothesis import strategies as st

from perfmodel.compile import compiled
from perfmodel.costs import symbolic, terms
from perfmodel.symbols import b, block_k, block_q, d, h, h_kv, l2_capacity, m, n, resident_ctas, s

naive = symbolic("naive")
flash = symbolic("flash")
flash_causal = symbolic("flash", causal=True)
flash_no_l2 = symbolic("flash", l2=False)

powers = st.sampled_from([16, 32, 64, 128, 256])
sizes = st.integers(1, 1 << 16)


def value(expr, **kw):
    base = dict(
        n=1024,
        m=1024,
        d=128,
        h=1,
        h_kv=1,
        b=1,
        block_q=128,
        block_k=128,
        s=2,
        l2_capacity=50 * 2**20,
        resident_ctas=132,
    )
    base.update(kw)
    if "m" not in kw:
        base["m"] = base["n"]
    return float(compiled(expr)(**base))


def brute_causal_tiles(n_, bq, bk):
    tr, tc = math.ceil(n_ / bq), math.ceil(n_ / bk)
    return sum(1 for i in range(tr) for j in range(tc) if j * bk < min((i + 1) * bq, n_))


def test_flops_are_the_two_matmuls_exactly():
    assert sp.simplify(naive.matmul_flops - 4 * b * h * n * m * d) == 0
    assert sp.simplify(flash.matmul_flops - naive.matmul_flops) == 0


def test_naive_extra_memory_is_s_plus_p():
    assert sp.simplify(naive.extra_memory_bytes - 2 * b * h * n * m * s) == 0


@given(n_=sizes, d_=st.sampled_from([64, 128]), h_=st.integers(1, 32))
def test_flops_quadruple_when_n_doubles(n_, d_, h_):
    for model in (naive, flash):
        one = value(model.matmul_flops, n=n_, d=d_, h=h_)
        two = value(model.matmul_flops, n=2 * n_, d=d_, h=h_)
        assert two == 4 * one


@given(n_=st.integers(1, 5000), bq=powers, bk=powers)
def test_causal_tile_count_is_exact(n_, bq, bk):
    got = value(terms.causal_tiles(), n=n_, block_q=bq, block_k=bk)
    assert got == brute_causal_tiles(n_, bq, bk)


@given(k=st.integers(4, 10), bq=powers, bk=powers)
def test_causal_does_about_half_the_work(k, bq, bk):
    n_ = 2**k * max(bq, bk)
    full = value(flash.matmul_flops, n=n_, block_q=bq, block_k=bk)
    half = value(flash_causal.matmul_flops, n=n_, block_q=bq, block_k=bk)
    tiles = n_ // bq * (n_ // bk)
    # Exactly the tiles on and below the diagonal; half plus the diagonal band.
    assert half / full == brute_causal_tiles(n_, bq, bk) / tiles
    assert 0.5 < half / full <= 0.5 + max(bq, bk) / n_


def test_naive_intensity_has_a_finite_limit():
    limit = sp.limit(naive.intensity.subs({m: n}), n, sp.oo)
    assert limit.is_finite
    # 4d + 5 FLOPs per score over four score-sized trips (write S, read S, write P, read P)
    assert sp.simplify(limit - (4 * d + 5) / (4 * s)) == 0


def test_flash_intensity_limit_is_set_by_the_tile():
    expr = flash_no_l2.intensity.subs({m: n}).replace(sp.ceiling, lambda x: x)
    limit = sp.limit(expr, n, sp.oo)
    # dominated by the K/V re-reads: 2·d·s bytes per key per Q block of B_r rows
    expected = (4 * d + 4 + d / block_k) * block_q / (2 * d * s)
    assert sp.simplify(limit - expected) == 0


@given(n_=st.integers(256, 1 << 15))
def test_flash_intensity_grows_with_n_toward_the_limit(n_):
    limit = (4 * 128 + 4 + 1) * 128 / (2 * 128 * 2)
    i1 = value(flash_no_l2.intensity, n=n_)
    i2 = value(flash_no_l2.intensity, n=2 * n_)
    assert i1 <= i2 * (1 + 1e-12) and i2 < limit


@given(n_=st.integers(1, 1 << 15), d_=st.sampled_from([32, 64, 128, 256]), bq=powers)
def test_flash_bytes_below_naive_exactly_when_the_condition_holds(n_, d_, bq):
    # Derived per (b, h) with m = n, no cache: flash - naive
    #   = 2nds(T_r - 1) + 4n - 4n²s  <= 0  <=>  d·(T_r - 1) <= 2n - 2/s
    flash_b = value(flash_no_l2.hbm_bytes, n=n_, d=d_, block_q=bq)
    naive_b = value(naive.hbm_bytes, n=n_, d=d_)
    condition = d_ * (math.ceil(n_ / bq) - 1) <= 2 * n_ - 2 / 2
    assert (flash_b <= naive_b) == condition


def test_tiny_tiles_and_large_d_make_flash_move_more_bytes():
    kw = dict(n=4096, d=256, block_q=16)
    assert value(flash_no_l2.hbm_bytes, **kw) > value(naive.hbm_bytes, **kw)


@given(group=st.sampled_from([1, 2, 4, 8]), h_=st.sampled_from([8, 16, 32]))
def test_gqa_divides_kv_bytes(group, h_):
    kv = value(terms.kv_bytes, h=h_, h_kv=h_)
    assert value(terms.kv_bytes, h=h_, h_kv=h_ // group) * group == kv
    # flash with L2: K/V cross DRAM once per kv head
    base = value(flash.hbm_bytes, h=h_, h_kv=h_)
    grouped = value(flash.hbm_bytes, h=h_, h_kv=h_ // group)
    assert base - grouped == kv - kv / group


@given(
    n_=st.integers(1, 1 << 14),
    d_=st.sampled_from([64, 128]),
    bq=powers,
    bk=powers,
    h_=st.integers(1, 8),
    b_=st.integers(1, 4),
    causal=st.booleans(),
)
def test_lambdified_equals_subs(n_, d_, bq, bk, h_, b_, causal):
    model = symbolic("flash", causal=causal)
    subs = {
        n: n_,
        m: n_,
        d: d_,
        block_q: bq,
        block_k: bk,
        h: h_,
        h_kv: h_,
        b: b_,
        s: 2,
        l2_capacity: 50 * 2**20,
        resident_ctas: 132,
    }
    for expr in (model.flops, model.hbm_bytes, model.exp_count, naive.hbm_bytes):
        exact = float(expr.subs(subs))
        fast = value(expr, n=n_, d=d_, block_q=bq, block_k=bk, h=h_, h_kv=h_, b=b_)
        assert math.isclose(fast, exact, rel_tol=1e-12)


def test_l2_fit_uses_one_dram_pass_and_spill_uses_waves():
    fits = value(flash.hbm_bytes, n=16384, h=16)
    compulsory = value(
        terms.q_bytes + terms.o_bytes + terms.lse_bytes + terms.kv_bytes, n=16384, h=16
    )
    assert fits == compulsory
    spill = value(flash.hbm_bytes, n=16384, h=16, l2_capacity=1)
    assert spill > fits


def test_flash_sram_working_set_counts_q_and_staged_kv_tiles():
    assert value(flash.sram_bytes) == (128 + 2 * 2 * 128) * 128 * 2
