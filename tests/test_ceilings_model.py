"""The estimate's roof fractions from a device's measured ceilings (issue 21).

``ceilings="measured"`` (the default) takes each roof's fraction from the device's
ceilings file where it has one; ``"datasheet"`` keeps the documented deratings. The
floor ``t_lower_s`` never uses them: it stays the datasheet's bound.
"""

from __future__ import annotations

import pytest

from perfmodel import predict
from perfmodel.catalog.calibration import family_default, naive_default
from perfmodel.catalog.ceilings import interpolate, load_ceilings, tensor_rows
from perfmodel.catalog.hardware import load_hardware
from perfmodel.catalog.kernels import load_kernel
from perfmodel.errors import PerfmodelError

H200 = load_hardware("h200")
SHAPE = dict(n=4096, h=16, batch=2, d=128, dtype="bf16", kernel="cudnn")


def test_each_fraction_is_the_measured_rate_over_the_datasheet():
    c = load_ceilings("h200")
    hbm = H200.hbm_bandwidth_bytes_per_s
    profile = family_default(load_kernel("cudnn"), H200)
    assert profile.exp_efficiency == c.value("exp_per_s") / H200.exp_per_s
    assert (
        profile.hbm_efficiency == c.value("hbm_read_bytes_per_s") / H200.hbm_bandwidth_bytes_per_s
    )
    fastest_k128 = max(r.flops_per_s for r in tensor_rows(c, load_kernel("cudnn")) if r.k == 128)
    assert profile.matmul_efficiency == fastest_k128 / H200.peak("bf16")
    # the naive side: cuBLAS's GEMM and a copy's read + write
    naive = naive_default(H200)
    assert naive.matmul_efficiency == c.value("gemm_bf16_flops_per_s") / H200.peak("bf16")
    assert naive.hbm_efficiency == c.value("hbm_copy_bytes_per_s") / hbm


def test_the_family_instruction_picks_its_tensor_core_rows():
    c = load_ceilings("h200")
    assert {r.instruction for r in tensor_rows(c, load_kernel("pallas-mosaic"))} == {"wgmma"}
    assert {r.instruction for r in tensor_rows(c, load_kernel("fa2"))} == {"mma.sync"}
    triton = tensor_rows(c, load_kernel("pallas-triton"))  # compute warps load their tiles
    assert {(r.instruction, r.operands) for r in triton} == {("triton_default", "streamed")}


def test_matmul_fraction_by_head_dim_interpolates_in_log2():
    table = ((64, 0.5), (256, 0.9))
    assert interpolate(table, 128) == pytest.approx(0.7)
    assert interpolate(table, 32) == 0.5 and interpolate(table, 512) == 0.9


def test_datasheet_forces_the_deratings_and_the_floor_never_moves():
    measured = predict(hw="h200", **SHAPE)
    datasheet = predict(hw="h200", ceilings="datasheet", **SHAPE)
    assert measured.flash.time_s != datasheet.flash.time_s
    assert measured.flash.t_lower_s == datasheet.flash.t_lower_s
    assert measured.naive.t_lower_s == datasheet.naive.t_lower_s
    assert datasheet.flash.calibration == "default:cudnn"


def test_a_device_without_ceilings_is_its_datasheet():
    assert load_ceilings("a100") is None
    a = predict(hw="a100", **{**SHAPE, "kernel": "fa2"})
    b = predict(hw="a100", ceilings="datasheet", **{**SHAPE, "kernel": "fa2"})
    assert a.flash.time_s == b.flash.time_s and a.naive.time_s == b.naive.time_s


def test_sweep_takes_the_same_choice():
    from perfmodel import sweep

    r = sweep("h200", n=[4096], h=16, batch=2, dtype="bf16", kernel="cudnn", ceilings="datasheet")
    assert r["flash.time_s"][0] == predict(hw="h200", ceilings="datasheet", **SHAPE).flash.time_s


@pytest.mark.parametrize("bad", ["Measured", "", 1, None])
def test_an_unknown_choice_is_refused_naming_it(bad):
    with pytest.raises(PerfmodelError, match="ceilings"):
        predict(hw="h200", ceilings=bad, **SHAPE)


def test_atomic_backwards_take_the_reduce_rate_of_their_form():
    """The L2-reduce roof's fraction: the measured rate of the family's form of dQ adds
    over the L2 bandwidth (bulk: TMA reduce-add; element: Triton's atomics, 16 programs
    sharing tiles); where a device's ceilings are set aside, its sibling's (the H200's) fraction;
    a two-pass backward has no such fraction (its profile falls back to the L2's)."""
    c = load_ceilings("h200")
    l2 = H200.l2_bandwidth_bytes_per_s
    for family, name in (("cudnn", "tma_reduce"), ("fa3", "tma_reduce"), ("fa2", "triton_red")):
        view, dq = load_kernel(family).backward_view(128)
        assert dq == "atomic"
        want = c.value(f"l2_{name}_shared_bytes_per_s") / l2
        assert family_default(view, H200).l2_reduce_efficiency == pytest.approx(want)
        h100 = load_hardware("h100-sxm")  # its own ceilings file
        rate = load_ceilings("h100-sxm").value(f"l2_{name}_shared_bytes_per_s")
        own = rate / h100.l2_bandwidth_bytes_per_s
        assert family_default(view, h100).l2_reduce_efficiency == pytest.approx(own)
        # its ceilings set aside: the H200's fraction (the sibling of its architecture)
        assert family_default(view, h100, "datasheet").l2_reduce_efficiency == pytest.approx(want)
    two_pass, _ = load_kernel("pallas-mosaic").backward_view(128)
    profile = family_default(two_pass, H200)
    assert profile.l2_reduce_efficiency is None
    assert profile.efficiency("l2_reduce") == profile.l2_efficiency
    # no L2 bandwidth in a spec: the roof's full rate is the HBM's
    a100 = load_hardware("a100")
    assert a100.l2_reduce_base_bytes_per_s == (
        a100.l2_bandwidth_bytes_per_s or a100.hbm_bandwidth_bytes_per_s
    )


def test_the_dq_kernel_at_a_narrow_key_tile_runs_at_that_tiles_rate():
    """Two of the dQ kernel's three products at N = its key tile: the matmul rate over the
    profile's is 1 / (1/3 + 2/(3 r)), r the measured rate at that N over N = 64."""
    from perfmodel.catalog.ceilings import narrow_n_ratios
    from perfmodel.evaluate import narrow_dq_ratio

    c = load_ceilings("h200")
    view, _ = load_kernel("pallas-mosaic").backward_view(256)
    table = dict(narrow_n_ratios(c, view))
    at = {n: max(r.flops_per_s for r in c.tensor_core
                 if r.instruction == "wgmma" and r.dtype == "bf16" and r.m == 128 and r.n == n
                 and r.valid and r.operands == "smem")
          for n in (32, 64)}  # fmt: skip
    assert table[32] == pytest.approx(at[32] / at[64])
    profile = family_default(view, H200)
    r = table[32]
    assert narrow_dq_ratio(profile, 32.0) == pytest.approx(1 / (1 / 3 + 2 / (3 * r)))
    assert narrow_dq_ratio(profile, 64.0) == 1.0 and narrow_dq_ratio(profile, 128.0) == 1.0
    assert narrow_n_ratios(c, load_kernel("fa2")) == ()  # mma.sync: not measured narrow


def test_the_cli_takes_ceilings(capsys):
    """``perfmodel predict --ceilings``: the same two choices as ``predict(ceilings=)``."""
    import json

    from perfmodel.cli import main

    args = ["predict", "--n", "4096", "--hw", "h100", "--h", "16", "--dtype", "bf16", "--json"]
    for choice in ("measured", "datasheet"):
        assert main([*args, "--ceilings", choice]) == 0
        printed = json.loads(capsys.readouterr().out)["flash"]["time_s"]
        want = predict(n=4096, hw="h100", h=16, dtype="bf16", ceilings=choice).flash.time_s
        assert printed == want
    assert main([*args[:-1], "--ceilings", "bogus"]) == 2
    assert "--ceilings bogus" in capsys.readouterr().err


def test_the_naive_calls_rates_reach_the_xla_compile_only_on_the_device_that_measured_them():
    """The H100's [[xla_naive]] ratios, read at a measured point, are each naive kernel's
    HBM rate over the copy rate; a masked score kernel is another call (no ratio); the
    H200, whose file has no such rows, does not borrow them (``NOT_PRIORS``)."""
    from perfmodel.catalog.ceilings import xla_naive_ratios
    from perfmodel.evaluate import kernel_memory

    h100 = naive_default(load_hardware("h100"))
    tables = {k: dict(t) for k, _, t in xla_naive_ratios(load_ceilings("h100"))}
    onchip = kernel_memory(h100, {"d": 128.0, "m": 2048.0}, masked=False)
    assert onchip is not None
    got = dict(onchip.kernel_memory_ratio)
    assert got["qk"] == pytest.approx(tables["qk"][128])
    assert got["pv"] == pytest.approx(tables["pv"][128])
    assert got["softmax"] == pytest.approx(tables["softmax"][2048])
    masked = kernel_memory(h100, {"d": 128.0, "m": 2048.0}, masked=True)
    assert masked is not None and "qk" not in dict(masked.kernel_memory_ratio)
    assert naive_default(load_hardware("h200")).hbm_ratio_by_kernel == ()
