"""Every roofline factor, against numbers worked out by hand (or by simulating waves).

The factors: roof time (work over rate), a kernel's floor (the largest roof), derating,
compute overlap, the per-block fill stretch, idle SMs (busy fraction), wave
quantisation, launch and host-dispatch overheads, the rates a device gives each roof,
its ridge point, and arithmetic intensity. ``tools/mutate_terms.py`` checks that a change
to any one of them fails a test here.
"""

import math

import numpy as np
import pytest

from perfmodel import roofline
from perfmodel.catalog.calibration import Calibration
from perfmodel.catalog.hardware import load_hardware
from perfmodel.evaluate import KernelRoofs, call_latency, estimate_time, roof_rates, shape_values
from perfmodel.prediction import predict

H200 = load_hardware("h200")


def test_roof_time_is_work_over_rate():
    assert roofline.roof_times({"matmul": 10.0, "hbm": 6.0}, {"matmul": 5.0, "hbm": 2.0}) == {
        "matmul": 2.0,
        "hbm": 3.0,
    }


def test_floor_is_the_largest_roof():
    assert roofline.lower_bound({"matmul": 2.0, "hbm": 3.0, "exp": 1.0}) == 3.0


def test_derating_divides_by_the_achieved_fraction():
    assert roofline.kernel_estimate({"hbm": 1.0}, {"hbm": 0.5}) == 2.0


def test_compute_overlap_and_fill_stretch_by_hand():
    times = {"matmul": 3.0, "exp": 1.0, "vector": 0.5, "hbm": 1.0}
    # busiest compute roof 3, the others 1.5 more; they hide under a quarter of the
    # busiest roof's time (0.75) and add the rest: 3 + (1.5 - 0.75).
    assert roofline.combine(times, compute_overlap=0.25) == 3.75
    # each block's fixed cost stretches the compute time: ×2 here.
    assert roofline.combine(times, compute_overlap=0.25, fill_stretch=2.0) == 7.5
    assert roofline.combine(times) == 3.0  # overlap 1: the roofline's max
    assert roofline.combine(times, compute_overlap=0.0) == 4.5  # nothing hides: the sum


def test_the_hidden_share_is_of_the_busiest_roof_not_of_the_rest():
    # the softmax (exp + vector, 2.5) above the matmul (2.0), as at d=64 fp16
    times = {"matmul": 2.0, "exp": 1.5, "vector": 1.0}
    assert roofline.combine(times) == 2.5  # overlap 1: the larger of the two sums
    # a quarter of the matmul time (0.5) hides softmax work, the other 2.0 adds
    assert roofline.combine(times, compute_overlap=0.25) == 4.0


def simulate_waves(blocks, sms):
    """Busy SM-slots over all SM-slots when equal blocks run in rounds of ``sms``."""
    slots = 0
    left = blocks
    while left > 0:
        slots += sms
        left -= min(sms, left)
    return blocks / slots


@pytest.mark.parametrize("blocks", [1, 66, 131, 132, 133, 264, 300])
def test_busy_fraction_and_wave_efficiency_against_a_simulation(blocks):
    assert roofline.busy_fraction(blocks, 132) == pytest.approx(min(1.0, blocks / 132))
    assert roofline.wave_efficiency(blocks, 132) == pytest.approx(simulate_waves(blocks, 132))


def test_intensity_is_flops_over_bytes():
    assert roofline.arithmetic_intensity(10.0, 4.0) == 2.5


def _calibration(**kw):
    return Calibration(name="test", **kw)


def test_fill_stretch_launch_and_dispatch_in_the_estimate_by_hand():
    kernel = KernelRoofs(
        "k", floor={}, estimate={"matmul": 1e-3, "hbm": 1e-4}, blocks_per_tile=0.5, times={}
    )
    # 2 tiles of fixed cost per block, 0.5 blocks per tile: compute × (1 + 2·0.5) = 2 ms.
    cal = _calibration(block_overhead_tiles=2.0)
    assert estimate_time([kernel], cal, launch=1e-5) == pytest.approx(2e-3 + 1e-5, rel=1e-12)
    assert estimate_time([kernel], _calibration(), launch=1e-5) == pytest.approx(1.01e-3)
    # Host dispatch is not device time: it enters one synchronous call's latency only.
    tiny = KernelRoofs("t", floor={}, estimate={"hbm": 1e-6}, blocks_per_tile=0.0, times={})
    cal = _calibration(dispatch_overhead_s=1e-3)
    assert estimate_time([tiny] * 3, cal, launch=0.0) == pytest.approx(3e-6)
    assert call_latency(3e-6, 3, cal, framework_s=5e-5) == pytest.approx(3e-3 + 3e-6)
    assert call_latency(3e-6, 3, _calibration(), framework_s=5e-5) == pytest.approx(5.3e-5)
    # Two blocks per SM do not hide a block's softmax under the other's matmuls (our
    # Triton kernel at 2-5 blocks per SM runs as the sum, docs/model.md): the sum.
    two = KernelRoofs(
        "k",
        floor={},
        estimate={"matmul": 1e-3, "exp": 1e-3},
        blocks_per_tile=0.0,
        times={},
        blocks_per_sm=2,
    )
    cal = _calibration(compute_overlap=0.0)
    assert estimate_time([two], cal, launch=0.0) == pytest.approx(2e-3)
    # Spilled registers add their local-memory time in series with the compute.
    spill = KernelRoofs(
        "k", floor={}, estimate={"matmul": 1e-3}, blocks_per_tile=0.0, times={}, spill_s=2e-4
    )
    assert estimate_time([spill], _calibration(), launch=0.0) == pytest.approx(1.2e-3)


def test_device_rates_and_symbols_come_from_the_spec():
    rates = roof_rates(H200, 123.0)
    assert rates == {
        "matmul": 123.0,
        "vector": H200.vector_fp32_flops_per_s,
        "exp": H200.exp_per_s,
        "hbm": H200.hbm_bandwidth_bytes_per_s,
        "l2": H200.l2_bandwidth_bytes_per_s,
        "l2_reduce": H200.l2_bandwidth_bytes_per_s,  # no datasheet rate: the L2's
    }
    assert shape_values(H200, n=1) == {
        "n": 1,
        "pack": 1,  # one program per query head
        "splits": 1,  # no split-KV
        "page": 1,
        "group_split": 1,  # a backward's GQA group summed by one program
        "group_reduce": 0,  # ... and by no kernel of its own after
        "kv_stages": 2,  # the paper model's double buffering (costs.flash.KV_STAGES)
        "l2_capacity": H200.l2_bytes,
        "resident_ctas": H200.sm_count,
    }
    # two blocks per SM double the resident blocks of the L2 model; tile_gcd(128, 176) = 16
    values = shape_values(H200, n=1, block_q=128, block_k=176, blocks_per_sm=2)
    assert values["resident_ctas"] == 2 * H200.sm_count and values["tile_gcd"] == 16


def test_ridge_point_by_hand():
    # H200 SXM: 989.4 TFLOP/s dense fp16 over 4.8 TB/s.
    assert H200.ridge_point("fp16") == pytest.approx(
        H200.peak_flops_per_s.fp16 / H200.hbm_bandwidth_bytes_per_s, rel=1e-15
    )
    assert H200.ridge_point("fp16") == pytest.approx(206.1, abs=0.1)


def test_one_block_leaves_the_other_sms_idle_in_predict():
    # n = 128, one head: flash runs one thread block, so the matmul roof is stretched by
    # the 131 idle SMs of 132 (the floor), and the estimate by the same single wave. A
    # family that never splits K/V (our Mosaic kernel) has no other launch to take the
    # floor over.
    p = predict(n=128, hw="h200", calibration="default", kernel="pallas-mosaic")
    assert (p.flash.floor_pack, p.flash.floor_splits) == (1, 1)
    matmul_s = p.flash.matmul_flops / H200.peak("fp16")
    assert p.flash.roof_times_s["matmul"] == pytest.approx(matmul_s)
    assert p.flash.t_compute_s >= matmul_s * 132 * (1 - 1e-12)
    assert math.isclose(
        p.flash.t_compute_s,
        max(matmul_s, p.flash.roof_times_s["vector"], p.flash.roof_times_s["exp"]) * 132,
        rel_tol=1e-12,
    )


def test_reported_matmul_rate_is_the_matmul_work_over_the_floor():
    # 6 TFLOP of matmul in a 3 ms floor: 2 PFLOP/s (not the classic roofline's min()).
    assert roofline.matmul_rate_at_floor(6e12, 3e-3) == pytest.approx(2e15, rel=1e-15)
    # the floor's launch is the one whose rate is reported: never above the peak
    p = predict(n=4096, hw="h100", h=32, h_kv=8, causal=True)
    assert p.flash.attainable_flops_per_s <= p.hardware.peak("fp16") * (1 + 1e-12)
    for side in ("naive", "flash"):
        a = getattr(predict(n=4096, hw="h200", h=16, dtype="bf16"), side)
        assert a.attainable_flops_per_s * a.t_lower_s == pytest.approx(a.matmul_flops, rel=1e-12)


def test_whole_number_floor_divide_and_mod_are_numpys():
    # roofline.floor_divide and roofline.mod take a division in place of numpy's float
    # floor division and fmod where both sides are whole numbers below 2**53 (the divisor
    # positive); anywhere else they are numpy's: the same numbers, sign of zero included
    from perfmodel.roofline import floor_divide, mod

    rng = np.random.default_rng(0)
    whole = rng.integers(0, 2**40, 10_000).astype(np.float64)
    small = rng.integers(1, 300, 10_000).astype(np.float64)
    cases = [
        (whole, small),
        (small, whole + 1),
        (np.array([0.0, 128.0, 64.0, 2.0**52]), np.array([64.0, 64.0, 128.0, 3.0])),
        (np.array([128.0 / 3, -7.0, 7.0, 5.0]), np.array([64.0, 2.0, -2.0, 0.5])),  # numpy's
    ]
    for a, b in cases:
        for ours, theirs in ((floor_divide, np.floor_divide), (mod, np.mod)):
            got, want = ours(a, b), theirs(a, b)
            assert np.array_equal(got, want) and np.array_equal(np.signbit(got), np.signbit(want))
