"""The causal schedule imbalance (``launch.schedule_imbalance``) at many points at once:
its closed form and its all-blocks sum against the one-point definition
(``launch._imbalance``), bit for bit, and one case by hand."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel import launch


def test_a_case_by_hand():
    # n = m = 256 in Q and K blocks of 64: steps 1, 2, 3, 4; one program per Q block and
    # 2 SMs: longest first, SM 0 takes 4 and 2 (6 steps) against ceil(4/2) * 10/4 = 5.
    assert launch._imbalance(None, True, 256, 256, 1, 1, 1, 64, 64, 1, 2) == 1.2
    point = np.asarray([[256, 256, 1, 1, 1, 64, 64, 1]], dtype=np.int64).T
    assert launch._causal(point, 2)[0] == 1.2
    assert launch._causal_blocks(point, 2)[0] == 1.2
    value, closed = launch._causal_triangle(point, 2)
    assert closed[0] and value[0] == 1.2


def test_floor_sum_by_brute_force():
    rng = np.random.default_rng(0)
    count, div, a, c = (
        rng.integers(lo, hi, 500) for lo, hi in ((0, 300), (1, 200), (0, 400), (0, 300))
    )
    want = [sum((a[k] * i + c[k]) // div[k] for i in range(count[k])) for k in range(500)]
    assert launch._floor_sum(count, div, a, c).tolist() == want


def test_floor_sum_of_shared_divisors_by_brute_force():
    """Rows that share ``div`` and ``c`` (the causal schedule's): the terms added up."""
    rng = np.random.default_rng(1)
    count, a = rng.integers(0, 300, 500), rng.choice([0, 1, 7, 64, 300], 500)
    div, c = np.full(500, 132), np.full(500, 131)
    assert launch._floor_sum_table(count, div, a, c) is not None
    want = [sum((a[k] * i + 131) // 132 for i in range(count[k])) for k in range(500)]
    assert launch._floor_sum(count, div, a, c).tolist() == want


points = st.tuples(
    st.integers(1, 5000),  # n
    st.one_of(st.none(), st.integers(1, 5000)),  # m (None: self-attention)
    st.sampled_from([1, 2, 3, 4]),  # pack
    st.integers(1, 8),  # heads per pack
    st.integers(1, 8),  # batch
    st.sampled_from([16, 64, 128, 256]),  # block_q
    st.sampled_from([16, 32, 64, 128]),  # block_k
    st.sampled_from([1, 1, 2, 3, 5]),  # splits
)


@settings(deadline=None, max_examples=60, derandomize=True)
@given(st.lists(points, min_size=1, max_size=40), st.sampled_from([7, 132, 264]))
def test_columns_are_the_one_point_definition(rows, slots):
    cols = [
        (n, n if m is None else m, pack * per, b, pack, bq, bk, sp)
        for n, m, pack, per, b, bq, bk, sp in rows
    ]
    want = [launch._imbalance(None, True, *c, slots) for c in cols]
    point = np.asarray(cols, dtype=np.int64).T
    assert launch._causal(point, slots).tolist() == want
    assert launch._causal_blocks(point, slots).tolist() == want
    value, closed = launch._causal_triangle(point, slots)
    assert value[closed].tolist() == [w for w, c in zip(want, closed, strict=True) if c]
    # predict's one point and sweep's columns go through schedule_imbalance alike
    names = ("n", "m", "h", "b", "pack", "block_q", "block_k", "splits")
    one = [
        launch.schedule_imbalance(
            None, 1.0, **{k: float(v) for k, v in zip(names, c, strict=True)}, slots=float(slots)
        )
        for c in cols
    ]
    many = launch.schedule_imbalance(
        None,
        np.ones(len(cols)),
        **{k: point[i].astype(float) for i, k in enumerate(names)},
        slots=float(slots),
    )
    assert one == want and many.tolist() == want


# ---------------------------------------------------------------- the backward's grids


def test_a_dispatched_grid_waits_for_its_longest_program():
    """``launch.dispatched_stretch``: few programs, the longest sets the time; many, the
    wave terms stand (never below 1)."""
    from perfmodel.launch import dispatched_stretch

    one = np.ones(1)
    # 24 key blocks of 8..1 steps (mean 4.5) on 132 SMs: the 8-step one sets the time
    assert dispatched_stretch(one * 8, one * 8, one * 4.5, one * 3, 132.0)[0] == 8 / 4.5
    # 10 000 programs: the mean share, within the wave terms
    assert dispatched_stretch(one * 100, one * 8, one * 4.5, one * 100, 132.0)[0] == 1.0


def test_a_causal_backward_with_few_programs_pays_the_longest():
    """A causal MQA backward at batch 1: the dK/dV grid's first key blocks walk every
    query tile, the last ones one; the estimate carries the stretch, a full mask none."""
    from perfmodel import predict

    shape = dict(n=4096, hw="h200", h=8, h_kv=1, d=128, dtype="bf16", kernel="pallas-mosaic")
    causal = predict(causal=True, mode="backward", **shape).flash.effects_s
    full = predict(causal=False, mode="backward", **shape).flash.effects_s
    assert causal["imbalance"] > 0 and full["imbalance"] == 0


def test_runs_before_the_group_split_are_compared_as_they_ran():
    """``compare.as_run``: held-out draw 8 (before pallas-mosaic's group_split_since)
    summed each GQA group in one program; the group-split run after it did not."""
    from perfmodel.catalog.data import data_dir
    from perfmodel.validation.compare import as_run
    from perfmodel.validation.measured import load_measurements

    folder = data_dir("measurements")
    for name, ran in (("h200-heldout8-2026-12-03", "none"), ("h200-group-split-2026-12-03", None)):
        pairs = load_measurements([f"{folder}/{name}.json"])
        ours = [
            as_run(run, p) for run, p in pairs if p.family == "pallas-mosaic" and p.phase == "train"
        ]
        assert ours and {p.group_split for p in ours} == {ran}, name
