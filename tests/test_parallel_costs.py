"""The context- and tensor-parallel attention model: formulas, numbers and bad input."""

from __future__ import annotations

import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.catalog.hardware import HardwareSpec, load_hardware
from perfmodel.costs import parallel as cpm
from perfmodel.costs import terms
from perfmodel.errors import PerfmodelError
from perfmodel.parallel import LinkRates, crossover_n, predict_parallel
from perfmodel.symbols import b, d, h, h_kv, m, n, s

PROFILE = "h200-pallas_flash"


def test_ring_and_allgather_send_the_same_bytes():
    assert sp.simplify(cpm.sent_bytes("ring") - cpm.sent_bytes("allgather")) == 0
    # P - 1 shards of K and V, each 1/P of the whole
    whole_kv = terms.kv_bytes.subs(m, n)
    assert sp.simplify(cpm.sent_bytes("ring") - (cpm.P - 1) * whole_kv / cpm.P) == 0


def test_ulysses_sends_its_shard_less_the_part_it_keeps():
    expected = (cpm.P - 1) / cpm.P**2 * 2 * b * n * d * s * (h + h_kv)  # Q, O and K, V
    got = cpm.sent_bytes("ulysses").subs(cpm.h_kv_cp, h_kv)
    assert sp.simplify(got - expected) == 0


def test_causal_imbalance_is_one_then_approaches_two():
    assert cpm.causal_imbalance().subs(cpm.P, 1) == 1
    assert sp.limit(cpm.causal_imbalance(), cpm.P, sp.oo) == 2


def test_ring_with_free_links_is_p_chunks_and_p_merges():
    free = {cpm.link_bandwidth: sp.oo, cpm.link_latency: 0}
    t = cpm.ring_time(causal=False, balance="contiguous").subs(free)
    assert sp.simplify(t - cpm.P * (cpm.t_chunk + cpm.t_merge)) == 0


def test_ring_without_overlap_is_never_faster():
    values = dict(n=65536, h=16, causal=False, calibration=PROFILE)
    on = predict_parallel(cp=4, scheme="ring", overlap=True, hw="h200", **values)
    off = predict_parallel(cp=4, scheme="ring", overlap=False, hw="h200", **values)
    assert off.time_s >= on.time_s
    assert off.time_s - on.time_s == pytest.approx(off.comm_s - on.comm_s)


@pytest.mark.parametrize("scheme", ["ring", "allgather", "ulysses"])
def test_two_gpus_at_128k_nearly_halve_the_time(scheme):
    r = predict_parallel(131072, "h200", cp=2, scheme=scheme, h=16, calibration=PROFILE)
    assert 1.8 < r.speedup <= 2.0
    assert r.comm_s >= 0 and r.sent_bytes > 0


def test_zigzag_beats_contiguous_causal_by_the_imbalance():
    kw = dict(hw="h200", cp=4, scheme="ring", h=16, causal=True, calibration=PROFILE)
    zig = predict_parallel(131072, balance="zigzag", **kw)
    cont = predict_parallel(131072, balance="contiguous", **kw)
    imbalance = float(cpm.causal_imbalance().subs(cpm.P, 4))
    assert cont.time_s / zig.time_s == pytest.approx(imbalance, rel=0.1)


def test_ulysses_replicates_kv_heads_up_to_lcm():
    kw = dict(hw="h200", cp=4, scheme="ulysses", h=16, calibration=PROFILE)
    gqa = predict_parallel(65536, h_kv=2, **kw)  # 2 K/V heads on 4 devices: lcm 4
    four = predict_parallel(65536, h_kv=4, **kw)
    assert gqa.sent_bytes == pytest.approx(four.sent_bytes)


def test_past_one_node_the_ring_runs_at_network_speed():
    links = LinkRates.of(load_hardware("h200"), None)
    assert links.bandwidth(8, "ring") == 450e9
    assert links.bandwidth(16, "ring") == 50e9
    # an all-to-all over 16 sends 8 of its 15 peers' shares off the node
    assert 50e9 < links.bandwidth(16, "ulysses") < 450e9


def test_tensor_parallel_divides_or_replicates_kv_heads():
    kw = dict(hw="h200", h=16, calibration=PROFILE)
    divided = predict_parallel(32768, tp=2, h_kv=8, **kw)
    replicated = predict_parallel(32768, tp=8, h_kv=2, **kw)
    assert divided.memory_bytes > replicated.memory_bytes
    with pytest.raises(PerfmodelError, match="tp=3"):
        predict_parallel(32768, tp=3, h_kv=2, h=12, hw="h200")


def test_crossover_is_where_the_split_starts_to_win():
    n = crossover_n("h200", cp=2, scheme="ring", h=16, calibration=PROFILE)
    assert n is not None
    at = predict_parallel(n, "h200", cp=2, scheme="ring", h=16, calibration=PROFILE)
    assert at.time_s < at.one_device_s


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        (dict(n=1000, cp=3), "n=1000"),
        (dict(cp=4, scheme="ulysses", h=6, h_kv=6), "cp=4"),
        (dict(cp=2, scheme="tree"), "'tree'"),
        (dict(cp=0), "cp=0"),
        (dict(cp=2, balance="striped"), "'striped'"),
        (dict(cp=32), "network"),
    ],
)
def test_bad_split_names_the_value(kwargs, named):
    kw = dict(n=65536, h=16, h_kv=16)
    kw.update(kwargs)
    n_ = kw.pop("n")
    hw = load_hardware("h200")
    if named == "network":  # a spec with no network figure cannot go past one node
        links = hw.links.model_copy(update={"network_bytes_per_s": None})
        hw = hw.model_copy(update={"links": links})
    with pytest.raises(PerfmodelError, match=named):
        predict_parallel(n_, hw, **kw)


def test_a_link_figure_needs_a_source():
    data = load_hardware("h200").model_dump()
    data["sources"] = {k: v for k, v in data["sources"].items() if k != "links.nvlink_bytes_per_s"}
    with pytest.raises(ValueError, match="links.nvlink_bytes_per_s"):
        HardwareSpec.model_validate(data)


def test_scaling_to_1024_devices_runs_on_paper():
    for cp in (4, 8, 64, 1024):
        r = predict_parallel(1 << 20, "h200", cp=cp, scheme="ring", h=64, causal=True)
        assert r.time_s > 0 and r.efficiency <= 1.05


def test_predict_carries_the_split():
    import perfmodel

    p = perfmodel.predict(65536, "h200", h=16, dtype="bf16", cp=4, cp_scheme="ulysses")
    assert p.parallel is not None and p.parallel.devices == 4
    assert "split cp=4 ulysses" in str(p)
    assert perfmodel.predict(65536, "h200", h=16).parallel is None
    with pytest.raises(PerfmodelError, match="'tree'"):
        perfmodel.predict(65536, "h200", h=16, cp=2, cp_scheme="tree")


def test_cli_names_a_split_that_cannot_run(capsys):
    from perfmodel.cli import main

    assert (
        main(
            [
                "predict",
                "--n",
                "4096",
                "--hw",
                "h200",
                "--h",
                "6",
                "--cp",
                "4",
                "--cp-scheme",
                "ulysses",
            ]
        )
        == 2
    )
    assert "divisible by --cp 4" in capsys.readouterr().err


@settings(derandomize=True, deadline=None, max_examples=25)
@given(
    k=st.integers(1, 64),
    cp=st.sampled_from([2, 4, 8]),
    scheme=st.sampled_from(["ring", "allgather", "ulysses"]),
    causal=st.booleans(),
)
def test_no_split_beats_perfect_scaling(k, cp, scheme, causal):
    n = k * 2 * cp * 128
    kw = dict(h=16, h_kv=16, causal=causal, calibration=PROFILE)
    r = predict_parallel(n, "h200", cp=cp, scheme=scheme, **kw)
    assert r.speedup <= cp * 1.05  # zig-zag's half chunks may tile slightly better
    assert r.comm_s >= -1e-12 and r.time_s >= r.compute_s - 1e-12


def test_ring_memory_halves_when_devices_double():
    """Every term of the ring's footprint is a 1/P share (the all-gather's is not)."""
    ring = cpm.memory_bytes("ring")
    assert sp.simplify(ring.subs(cpm.P, 2 * cpm.P) - ring / 2) == 0
    gather = cpm.memory_bytes("allgather")
    assert sp.simplify(gather.subs(cpm.P, 2 * cpm.P) - gather / 2) != 0
