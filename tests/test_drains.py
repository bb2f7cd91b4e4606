"""The drains effect (docs/model.md): a backward step's dependent waits at the measured
drain of a dependent wgmma. Committed data, no timing."""

from __future__ import annotations

import pytest

import perfmodel
from perfmodel.catalog.calibration import family_default
from perfmodel.catalog.ceilings import load_ceilings, wgmma_drains
from perfmodel.catalog.hardware import load_hardware
from perfmodel.catalog.kernels import load_kernel, registry
from perfmodel.prediction import _drain_per_step


def test_the_drain_is_the_serial_rows_time_over_the_pipelined_rows():
    c = load_ceilings(load_hardware("h100"))
    assert c is not None
    rate = {(r.form, r.k): r.flops_per_s for r in c.tensor_core if (r.m, r.n) == (64, 64)}
    table = dict(wgmma_drains(c))
    assert sorted(table) == [64, 128, 256]
    for k, drain in table.items():  # one product of 64 x 64 x K on each of the SMs
        flops = 2 * 64 * 64 * k * c.sm_count
        by_hand = flops / rate["bwd_serial", k] - flops / rate["bwd_lone", k]
        assert drain == pytest.approx(by_hand)
        assert 10e-9 < drain < 40e-9  # tens of nanoseconds, as the log shows


def test_families_that_state_waits_run_one_warp_count():
    families = {f.name: f for f in registry().values()}.values()
    stating = [f for f in families if f.backward and f.backward.dependent_waits]
    assert {f.name for f in stating} == {"cudnn", "fa3"}
    for family in stating:  # _drain_per_step reads one warpgroup count for every d
        assert len({t.warps for t in family.backward.tiles}) == 1


def test_a_step_waits_twice_the_drain_in_cudnns_one_warpgroup():
    view, _ = load_kernel("cudnn").backward_view(64)
    profile = family_default(view, load_hardware("h100"), "measured")
    drain = dict(profile.wgmma_drain_s_by_d)[64]
    assert _drain_per_step(view, profile, 64.0) == pytest.approx(2 * drain)
    fa3, _ = load_kernel("fa3").backward_view(64)  # two consumer warpgroups share it
    assert _drain_per_step(fa3, profile, 64.0) == pytest.approx(drain)


def test_only_a_family_with_waits_pays_drains():
    shape = dict(hw="h100", mode="backward", n=8192, h=8, d=256, dtype="bf16")
    cudnn = perfmodel.predict(kernel="cudnn", **shape).flash.effects_s["drains"]
    ours = perfmodel.predict(kernel="pallas-mosaic", **shape).flash.effects_s["drains"]
    assert cudnn > 0 and ours == 0
    forward = perfmodel.predict(kernel="cudnn", **{**shape, "mode": "forward"})
    assert forward.flash.effects_s["drains"] == 0
