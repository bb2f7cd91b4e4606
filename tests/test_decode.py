"""Decode attention (the engine's flash model at a decode launch, ``costs.decode.launch_model``):
scaling laws, the O(1) intensity limit, GQA, split-KV."""

from __future__ import annotations

import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.analysis.kvcache import decode_step
from perfmodel.compile import compiled
from perfmodel.costs import decode
from perfmodel.costs import terms as t
from perfmodel.errors import PerfmodelError
from perfmodel.symbols import b, block_k, d, h, h_kv, m, n, page, q_len, s, splits

DET = settings(derandomize=True, deadline=None, max_examples=40)
MODELS = [(p, sp_) for p in (False, True) for sp_ in (False, True)]

shapes = st.fixed_dictionaries(
    {
        "b": st.integers(1, 64),
        "h_kv": st.sampled_from([1, 2, 4, 8]),
        "group": st.sampled_from([1, 2, 4, 8]),
        "d": st.sampled_from([64, 128, 256]),
        "q_len": st.integers(1, 8),
        "s": st.sampled_from([1, 2, 4]),
        "page": st.sampled_from([1, 16, 64, 256]),
        "splits": st.integers(1, 16),
    }
)


def values(shape: dict, kv_len: int) -> dict:
    v = {k: x for k, x in shape.items() if k != "group"}
    return {**v, "h": shape["h_kv"] * shape["group"], "m": kv_len}


def test_contiguous_bytes_exactly_affine_in_m():
    bytes_ = decode.launch_model().hbm_bytes
    assert sp.simplify(sp.diff(bytes_, m, 2)) == 0
    assert sp.simplify(sp.diff(bytes_, m) - 2 * b * h_kv * d * s) == 0


@DET
@given(shape=shapes, pages=st.integers(1, 500), paged=st.booleans(), split=st.booleans())
def test_bytes_linear_in_m(shape, pages, paged, split):
    """At whole pages, bytes(k·page) is affine in k: equal steps for equal growth."""
    fn = compiled(decode.launch_model(paged=paged, split=split).hbm_bytes)
    step = shape["page"]
    b1, b2, b3 = (float(fn(**values(shape, k * step))) for k in (pages, 2 * pages, 3 * pages))
    assert b3 - b2 == pytest.approx(b2 - b1, rel=1e-12)
    assert b2 > b1


def test_intensity_limit_is_finite_and_exact():
    lim = decode.intensity_limit(decode.launch_model())
    # 4d + 4 FLOPs a score (two matmuls, the online softmax) and d a row rescaled at
    # each of the m / block_k K/V tiles, over the K/V bytes 2·h_kv·m·d·s
    per_score = 4 * d + 4 + d / block_k
    assert sp.simplify(lim - h * q_len * per_score / (2 * h_kv * d * s)) == 0
    for paged, split in MODELS:
        limit = decode.intensity_limit(decode.launch_model(paged=paged, split=split))
        assert limit.is_finite is not False
        assert m not in limit.free_symbols


@DET
@given(
    shape=shapes,
    kv_len=st.integers(1, 10**6),
    paged=st.booleans(),
    split=st.booleans(),
    kv_tile=st.sampled_from([16, 64, 128]),
)
def test_intensity_bounded_by_its_limit(shape, kv_len, paged, split, kv_tile):
    """O(1) in m: decode intensity never exceeds 2·(h/h_kv)·q_len·(d+1)/(d·s)."""
    model = decode.launch_model(paged=paged, split=split)
    v = {**values(shape, kv_len), "block_k": kv_tile}
    intensity = float(compiled(model.flops)(**v) / compiled(model.hbm_bytes)(**v))
    bound = float(compiled(decode.intensity_limit(decode.launch_model()))(**v))
    assert 0 < intensity <= bound * (1 + 1e-12)


def test_gqa_divides_kv_bytes_by_group():
    q, o, lse = (x.subs(n, q_len) for x in (t.q_bytes, t.o_bytes, t.lse_bytes))
    kv = decode.launch_model().hbm_bytes - q - o - lse
    assert sp.simplify(kv.subs(h_kv, h) / kv - h / h_kv) == 0
    assert sp.simplify(kv - t.kv_bytes) == 0


@DET
@given(shape=shapes, kv_len=st.integers(1, 10**5))
def test_mha_over_gqa_kv_ratio_numeric(shape, kv_len):
    v = values(shape, kv_len)
    kv = compiled(t.kv_bytes)
    assert float(kv(**{**v, "h_kv": v["h"]})) == pytest.approx(
        float(kv(**v)) * v["h"] / v["h_kv"], rel=1e-12
    )


def test_paged_adds_only_block_table():
    extra = sp.simplify(decode.launch_model(paged=True).hbm_bytes - decode.launch_model().hbm_bytes)
    assert sp.simplify(extra - b * h_kv * sp.ceiling(m / page) * 4) == 0


@DET
@given(shape=shapes, kv_len=st.integers(1, 10**5), sms=st.integers(1, 200))
def test_occupancy_and_split_rule(shape, kv_len, sms):
    """One program per (sequence, K/V head, chunk); the split rule keeps them in one wave."""
    v = {**values(shape, kv_len), "resident_ctas": sms}
    programs = decode.launch_model(split=True).kernels[0].work_items
    assert sp.simplify(programs - b * h_kv * splits) == 0
    auto = int(compiled(decode.auto_splits())(**v))
    assert auto >= 1
    if shape["b"] * shape["h_kv"] <= sms:  # the rule keeps one wave
        assert float(compiled(programs)(**{**v, "splits": auto})) <= sms


def test_lambdified_equals_subs():
    model = decode.launch_model(paged=True, split=True)
    point = {b: 3, h: 32, h_kv: 8, d: 128, m: 1000, q_len: 2, s: 2, page: 16, splits: 4}
    exact = model.hbm_bytes.subs(point)
    assert float(compiled(model.hbm_bytes)(**{str(k): v for k, v in point.items()})) == float(exact)


def test_bench_formula_matches_the_model():
    """kernel_bench.bench_decode (no pydantic on the GPU) computes the same bytes."""
    bench = pytest.importorskip("kernel_bench.bench_decode")
    for split in (1, 8):
        v = dict(b=4, q_len=1, h=32, h_kv=8, d=128, m=8192, s=2, page=64, splits=split)
        model = decode.launch_model(paged=True, split=split > 1)
        want = float(compiled(model.hbm_bytes)(**v))
        got = bench.model_bytes(
            batch=4, q_len=1, h=32, h_kv=8, d=128, m=8192, s=2, page_size=64, splits=split
        )
        assert got == want
    assert bench.auto_splits(1, 8, 128, sm_count=132, programs_per_sm=1, min_pages=1) == int(
        compiled(decode.auto_splits())(b=1, h_kv=8, m=8192, page=64, resident_ctas=132)
    )


def test_decode_step_small_batch_leaves_sms_idle():
    one = decode_step("h200", batch=1, kv_len=8192, h=32, h_kv=8, page_tokens=64, splits=1)
    split = decode_step("h200", batch=1, kv_len=8192, h=32, h_kv=8, page_tokens=64, splits=16)
    assert one.work_items == 8 and one.waves == 1
    assert split.work_items == 128 and split.time_s < one.time_s
    assert one.t_lower_s <= one.time_s


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kv_len": 0}, "kv_len=0"),
        ({"h": 6, "h_kv": 4}, "h=6"),
        ({"dtype": "int3"}, "int3"),
        ({"splits": -1}, "splits=-1"),
    ],
)
def test_decode_step_bad_input(kwargs, message):
    args = dict(batch=1, kv_len=128, h=8, h_kv=8) | kwargs
    with pytest.raises(PerfmodelError, match=message):
        decode_step("h200", **args)


def test_decode_bytes_snapshot():
    """A snapshot, not a validation: the decode run recorded the model's own byte count at
    run time (``model_hbm_bytes``); today's model gives the same bytes, except the
    float32 log-sum-exp the combine kernel now also writes (4 B per query row)."""
    import json
    from pathlib import Path

    from perfmodel.validation.measured import read_measurement_file

    root = Path(__file__).resolve().parents[1] / "specs" / "measurements"
    runs = read_measurement_file(root / "h200-decode-2026-11-29.json").runs
    impls = {p.implementation for r in runs for p in r.points}
    assert impls == {"paged_decode", "contiguous_decode"}
    details = json.loads((root / "details" / "h200-decode-2026-11-29.json").read_text())
    paged = [p for p in details["points"] if p["status"] == "ok" and p["splits"]]
    assert len(paged) >= 10
    for p in paged:
        step = decode_step(
            "h200",
            batch=p["batch"],
            kv_len=p["kv_len"],
            h=p["h"],
            h_kv=p["h_kv"],
            d=p["d"],
            page_tokens=p["page_size"],
            splits=p["splits"],
        )
        lse = 4 * p["batch"] * p["h"]
        assert p["model_hbm_bytes"] + lse == step.hbm_bytes
        assert p["runs"] >= 20
