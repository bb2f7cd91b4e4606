"""Every launch rule and every effect of the estimate, against numbers worked out by hand.

The launch (``perfmodel.launch``): a family's tile, the on-chip footprint, blocks per SM,
spills, bytes in flight, GQA packing, the split rule and the floor's split search. The
estimate (``perfmodel.evaluate.EFFECTS``): each effect's step. And the terms
``predict()`` runs that no other test pinned: the split-combine kernel's FLOPs, the
backward's dS FLOPs, the per-SM share of the L2 bandwidth. ``tools/mutate_terms.py``
checks that a change to any one of them fails a test here.
"""

import math
from dataclasses import replace

import numpy as np
import pytest

from perfmodel.catalog.calibration import Calibration
from perfmodel.catalog.hardware import load_hardware
from perfmodel.catalog.kernels import load_kernel
from perfmodel.compile import compiled
from perfmodel.costs import flash as flash_costs
from perfmodel.costs import symbolic
from perfmodel.evaluate import (
    EFFECTS,
    Context,
    KernelRoofs,
    KernelTime,
    OnChip,
    estimate_steps,
    model_key,
)
from perfmodel.evaluate import _memory_reach as memory_reach
from perfmodel.launch import (
    capacity,
    gqa_pack,
    programs,
    resolve,
    split_limit,
    split_rule,
)

H200 = load_hardware("h200")
B, H, N, D, S = 2, 4, 384, 64, 2


def col(*values):
    return np.array(values, dtype=np.float64)


def at(expr, **kw):
    values = dict(b=B, h=H, h_kv=2, n=N, m=N, d=D, s=S, block_q=128, block_k=64, pack=1,
                  splits=3, page=1, kv_stages=2, tile_gcd=64, l2_capacity=50 * 2**20,
                  resident_ctas=132)  # fmt: skip
    values.update(kw)
    return float(compiled(expr)(**values))


# --- terms predict() runs ------------------------------------------------------------
def test_split_combine_kernel_by_hand():
    # flash-decoding's second kernel: rescale and sum the float32 partials (acc, max,
    # sum: d + 2 a row and split) at 3 FLOPs a value, one exp a row and split
    combine = flash_costs.build(split=True, launch=True).kernels[1]
    rows = B * H * N
    assert at(combine.vector_flops) == 3 * rows * 3 * (D + 2)
    assert at(combine.exp_count) == rows * 3
    partials = rows * 3 * (D + 2) * 4
    assert at(combine.hbm_bytes) == partials + B * H * N * D * S + B * H * N * 4


def test_backward_ds_flops_by_hand():
    scores = B * H * N * N
    naive = {k.name: k for k in symbolic("naive", mode="backward").kernels}
    # dS = scale·P∘(dP − D): subtract, multiply, scale
    assert at(naive["bwd_ds"].vector_flops) == 3 * scores
    flash = symbolic("flash", mode="backward").kernels
    recompute = [k for k in flash if k.name == "bwd_dkdvdq"][0]
    # recompute P (scale, subtract: 2) and dS (3) for every score
    assert at(recompute.vector_flops) == (2 + 3) * scores


def test_sram_and_accumulators_by_hand():
    assert at(flash_costs.SRAM_BYTES, block_q=128, block_k=64, kv_stages=3) == (
        (128 + 3 * 2 * 64) * D * S
    )
    assert at(flash_costs.ACCUMULATORS) == 128 * 64 + 128 * D + 2 * 128


def test_memory_reach_by_hand():
    # 10 busy SMs of 132, each pulling at most its share of the L2 bandwidth: the memory
    # roofs stretch by total bandwidth over what 10 ports carry
    share = H200.l2_bandwidth_bytes_per_s / H200.sm_count
    reach = memory_reach(10 / 132, 10.0, H200, OnChip())
    assert reach["l2"] == pytest.approx(H200.l2_bandwidth_bytes_per_s / (10 * share), rel=1e-12)
    assert reach["hbm"] == pytest.approx(
        max(1.0, H200.hbm_bandwidth_bytes_per_s / (10 * share)), rel=1e-12
    )
    # Little's law: 2 blocks of 64 KiB in flight per SM over the memory latency, which
    # grows from the idle latency with the share of the HBM bandwidth the grid asks for:
    # 10 SMs with one resident block of 64 KiB per 0.441 us ask for 1.49 TB/s, 0.31 of
    # 4.8 TB/s, so 0.441 + 0.31 · (1.27 - 0.441) = 0.698 us
    little = memory_reach(10 / 132, 10.0, H200, OnChip(2, 0.0, 65536.0))
    idle, loaded = H200.idle_memory_latency_s, H200.memory_latency_s
    asked = 10 * 65536.0 / idle / H200.hbm_bandwidth_bytes_per_s
    latency = idle + asked * (loaded - idle)
    assert latency == pytest.approx(0.698e-6, abs=0.001e-6)
    per_sm = min(share, 1 * 65536.0 / latency)  # 10 blocks: 1 resident
    assert little["hbm"] == pytest.approx(
        max(1.0, H200.hbm_bandwidth_bytes_per_s / (10 * per_sm)), rel=1e-12
    )
    # 16 KiB in flight: 10 SMs ask for 0.077 of the HBM bandwidth, the latency is
    # 0.441 + 0.077 · (1.27 - 0.441) = 0.505 us, an SM pulls 16 KiB per 0.505 us = 32.4
    # GB/s (below its 84.8 GB/s share of the L2 port), and 10 of them 324 GB/s: the HBM
    # roof stretches 4.8 TB/s / 324 GB/s = 14.8 times
    few = memory_reach(10 / 132, 10.0, H200, OnChip(2, 0.0, 16384.0))
    latency = idle + 10 * 16384.0 / idle / H200.hbm_bandwidth_bytes_per_s * (loaded - idle)
    assert latency == pytest.approx(0.505e-6, abs=0.001e-6) and 16384.0 / latency < share
    assert few["hbm"] == pytest.approx(H200.hbm_bandwidth_bytes_per_s * latency / (10 * 16384.0))
    assert few["hbm"] == pytest.approx(14.8, abs=0.05)


# --- the launch ------------------------------------------------------------------------
def test_launch_of_fa3_by_hand():
    # FA-3 at d=128 on the H200: 128x176 tiles, 12 warps (two consumer warpgroups plus
    # the producer's 4 warps), 2 K/V stages: (128 + 2·2·176)·128·2 B of SRAM
    c = resolve(load_kernel("fa3"), H200, n=8192, m=8192, d=128, h=16, h_kv=16, b=1, s=2,
                causal=False)  # fmt: skip
    assert (c.block_q[0], c.block_k[0], c.kv_stages[0]) == (128, 176, 2)
    assert c.smem_bytes[0] == (128 + 2 * 2 * 176) * 128 * 2
    acc = 128 * 176 + 128 * 128 + 2 * 128
    assert c.accumulator_bytes[0] == acc * 4
    assert c.registers_per_thread[0] == acc / (32 * c.warps[0])
    assert c.producer_threads[0] == 32 * 4
    # the producer issues kv_stages loads ahead: 2 stages of K and V tiles in flight
    assert c.bytes_in_flight[0] == 2 * 176 * 128 * 2 * 2
    blocks = min(
        H200.sram_per_sm_bytes // c.smem_bytes[0],
        H200.registers_per_sm // (min(c.registers_per_thread[0], 255) * c.threads[0] + 32 * 128),
        H200.max_threads_per_sm // (c.threads[0] + 128),
        H200.max_blocks_per_sm,
    )
    assert c.blocks_per_sm[0] == max(blocks, 1)


def test_fa2_launch_without_producer_by_hand():
    c = resolve(load_kernel("fa2"), H200, n=4096, m=4096, d=128, h=16, h_kv=16, b=1, s=2,
                causal=False)  # fmt: skip
    # no producer warps: one step's K and V tiles in flight
    assert c.bytes_in_flight[0] == 2 * 64 * 128 * 2
    assert c.producer_threads[0] == 0


def test_spills_by_hand():
    # 256x64 at d=64 with 4 warps: 256·(64+64) + 2·256 f32 over 128 threads = 260
    # registers, 5 past the 255 limit, written and read each step by 128 threads
    c = resolve(load_kernel("fa2"), H200, n=4096, m=4096, d=64, h=1, h_kv=1, b=1, s=2,
                causal=False, block_q=256, block_k=64, warps=4)  # fmt: skip
    assert c.registers_per_thread[0] == (256 * 64 + 256 * 64 + 2 * 256) / 128
    assert c.spilled_registers_per_thread[0] == c.registers_per_thread[0] - 255
    assert c.spill_bytes_per_tile[0] == 2 * 4 * c.spilled_registers_per_thread[0] * 128


def test_capacity_counts_producer_registers():
    # 100 registers over 256 threads and 128 producer threads at 32: 64 K / 29,696 = 2
    blocks, _ = capacity(H200, col(1024), col(100.0), col(256), col(128))
    assert blocks[0] == H200.registers_per_sm // (100 * 256 + 32 * 128)


def test_when_short_packing_threshold():
    # n=100, group 4, B_r=128: alone 100/128 = 0.78 of the tile; packed 400/512 = 0.78:
    # not 1/0.9 better, so no packing; n=64: 0.5 alone against 256/256 packed: packing
    assert gqa_pack("when_short", col(100), col(4), col(128))[0] == 1
    assert gqa_pack("when_short", col(64), col(4), col(128))[0] == 4
    # n=90, group 2, B_r=100: 0.9 alone, 180/200 = 0.9 packed: no better, no packing
    assert gqa_pack("when_short", col(90), col(2), col(100))[0] == 1
    # exactly at the edge: 0.9 alone against 900/900 = 1 packed (0.9 = 0.9 x 1): the
    # rule wants strictly better than 1/0.9, so no packing; at n=80 (0.8 against 1) it packs
    assert gqa_pack("when_short", col(90), col(10), col(100))[0] == 1
    assert gqa_pack("when_short", col(80), col(10), col(100))[0] == 10
    # one point's numbers (predict's path) give what the column gives
    assert gqa_pack("when_short", 90.0, 10.0, 100.0) == 1.0
    assert gqa_pack("when_short", 80.0, 10.0, 100.0) == 10.0


def test_decode_packing_is_one_token_only():
    # FlashAttention's decode rule packs the group for single-token decode alone
    n, group, bq = col(1, 2, 3), col(4, 4, 4), col(128, 128, 128)
    assert list(gqa_pack("decode", n, group, bq)) == [4, 1, 1]
    assert [gqa_pack("decode", float(x), 4.0, 128.0) for x in (1, 2)] == [4.0, 1.0]
    assert gqa_pack("decode", 1.0, 1.0, 128.0) == 1.0  # no group to pack


def test_programs_by_hand():
    # batch 3, 16 heads packed 4 to a tile, 1000 rows x 4 heads over 128-row tiles
    assert programs(col(1000), col(16), col(3), col(4), col(128))[0] == 3 * 4 * math.ceil(
        4000 / 128
    )


def test_split_rule_thresholds():
    fa2 = load_kernel("fa2")
    slots = H200.sm_count * fa2.split_sm_factor
    # a grid at 0.8 of the slots does not split, just below it does
    assert split_rule(fa2, H200, col(math.ceil(0.8 * slots)), col(1000))[0] == 1
    assert split_rule(fa2, H200, col(math.floor(0.8 * slots) - 1), col(1000))[0] >= 1
    # wave efficiency by hand: 40 programs on 264 slots; s=6: 240/264 = 0.909, the best
    # s <= 7 within 85% of 0.909 first reached at s = 6 (s = 5: 200/264 = 0.76)
    assert split_rule(fa2, H200, col(40), col(7))[0] == 6
    # at most the K/V blocks
    assert split_rule(fa2, H200, col(40), col(3))[0] <= 3
    # FA-3 skips grids of at most 4 K/V blocks
    fa3 = load_kernel("fa3")
    assert split_rule(fa3, H200, col(8), col(4))[0] == 1
    assert split_rule(fa3, H200, col(8), col(5))[0] > 1


def test_split_limit_by_hand():
    fa2 = load_kernel("fa2")
    # 8 programs: 17 chunks fill 132 SMs; 100 K/V blocks; max 128: limit 17
    lim = split_limit(fa2, H200, n=col(1), m=col(6400), h=col(8), b=col(1), pack=col(1),
                      block_q=col(128), block_k=col(64))  # fmt: skip
    assert lim[0] == math.ceil(132 / 8) == 17
    # 3 K/V blocks cap it
    lim = split_limit(fa2, H200, n=col(1), m=col(192), h=col(8), b=col(1), pack=col(1),
                      block_q=col(128), block_k=col(64))  # fmt: skip
    assert lim[0] == 3


# --- the effects -------------------------------------------------------------------------
def _kernel():
    return KernelRoofs(
        "k",
        floor={"matmul": 4.0, "exp": 2.0, "hbm": 1.0},
        estimate={"matmul": 5.0, "exp": 2.5, "hbm": 1.5},
        blocks_per_tile=0.25,
        times={"matmul": 2.0, "exp": 1.0, "hbm": 1.0},
        blocks_per_sm=2,
        spill_s=0.5,
    )


def test_each_effect_by_hand():
    cal = Calibration(name="t", matmul_efficiency=0.5, exp_efficiency=0.5, hbm_efficiency=0.5,
                      compute_overlap=0.0, block_overhead_tiles=2.0)  # fmt: skip
    steps = estimate_steps([_kernel()], cal, launch=0.125)
    # floor: the largest floor roof
    assert steps[0] == 4.0
    # waves: the estimate's roofs (matmul 5)
    assert steps[1] == 5.0
    # imbalance: none on a kernel of equal programs
    assert steps[2] == 5.0
    # efficiency: each roof over its fraction (matmul 10, exp 5, hbm 3)
    assert steps[3] == 10.0
    # overlap 0: nothing hides under the matmul, the other compute roofs add: 10 + 5
    # (the second resident block does not change it)
    assert steps[4] == 15.0
    # exposed latency: none on a kernel that states no pipeline
    assert steps[5] == 15.0
    # spills in series: + 0.5
    assert steps[6] == 15.5
    # drains: none on a kernel that states none; in series where it does
    assert steps[7] == 15.5
    drained = estimate_steps([replace(_kernel(), drain_s=0.75)], cal, launch=0.125)
    assert drained[7] - drained[6] == 0.75
    # block overhead: 1 + 2 tiles x 0.25 blocks per tile = x1.5
    assert steps[8] == 23.25
    # the per-kernel device charge
    assert steps[9] == 23.375
    # the prologue: one latency and one Q tile per wave, in series
    kernel = replace(_kernel(), prologue_latency_s=0.25, prologue_bytes_s=0.25)
    with_prologue = estimate_steps([kernel], cal, launch=0.125)
    assert with_prologue[10] - with_prologue[9] == 0.25 + 0.25 / 0.5  # bytes at the HBM fraction
    assert steps[10] == steps[9]  # no prologue on a kernel without one
    # XLA's kernels around it: 3, each the per-kernel charge and its first load
    glued = estimate_steps([replace(_kernel(), xla_kernels=3.0, first_load_s=0.5)], cal, 0.125)
    assert glued[12] - glued[11] == 3 * (0.125 + 0.5)
    assert steps[12] == steps[11]
    # imbalance: the busiest SM's programs at 1.5 times the mean stretch the compute roofs
    # (matmul 5 -> 7.5, exp 2.5 -> 3.75; the memory roofs stay)
    skewed = estimate_steps([replace(_kernel(), imbalance=1.5)], cal, launch=0.125)
    assert skewed[2] == 7.5
    assert skewed[4] == 1.5 * steps[4]
    assert len(steps) == len(EFFECTS) + 1


def test_exposed_latency_by_hand():
    cal = Calibration(name="t", matmul_efficiency=0.5, exp_efficiency=0.5, hbm_efficiency=0.5,
                      compute_overlap=0.0)  # fmt: skip
    # 15 s of compute over 10 steps per SM: 1.5 s a step; no load ahead, 2 blocks resident,
    # 6 s latency and the step's HBM bytes (3 s of HBM at its fraction over 10 steps: 0.3 s)
    # in series: (1.5 + 6 + 0.3) / (2 x 1.5) = x2.6 on the compute
    kernel = replace(_kernel(), steps_per_sm=10.0, resident=2.0, loads_ahead=0.0, latency_s=6.0)
    steps = estimate_steps([kernel], cal, launch=0.0)
    assert steps[5] == 15.0 * ((1.5 + 6.0 + 0.3) / 3.0)
    # a load in flight ahead of use hides the latency (the waves effect's reach bounds it)
    ahead = estimate_steps([replace(kernel, loads_ahead=1.0)], cal, launch=0.0)
    assert ahead[5] == ahead[4] == 15.0
    # enough resident blocks hide it too: (1.5 + 6 + 0.3) / (6 x 1.5) < 1
    many = estimate_steps([replace(kernel, resident=6.0)], cal, launch=0.0)
    assert many[5] == 15.0


def test_prologue_by_hand():
    # 1000 blocks on 132 SMs x 2 resident: 4 waves, each one latency and one Q tile
    # (128 x 128 x 2 B) at an SM's share of the HBM bandwidth; blocks that state no bytes
    # in flight ask for no bandwidth, so the latency is the idle one
    from perfmodel.catalog.hardware import load_hardware
    from perfmodel.evaluate import _prologue

    hw = load_hardware("h200")
    onchip = OnChip(blocks_per_sm=2.0, q_tile_bytes=128 * 128 * 2.0)
    latency, load = _prologue(1000.0, hw, onchip, {"hbm": 4.8e12})
    assert latency == 4 * hw.idle_memory_latency_s
    assert load == 4 * 128 * 128 * 2.0 * hw.sm_count / 4.8e12
    # 528 blocks fill 264 slots exactly twice: 2 waves, not 3
    latency, _ = _prologue(528.0, hw, onchip, {"hbm": 4.8e12})
    assert latency == 2 * hw.idle_memory_latency_s


def test_pad_copies_effect_by_hand():
    # the copies around the kernel: 0.25 s of bytes at the datasheet bandwidth over the
    # HBM fraction 0.5, and for each of the 3 copy kernels a launch gap (0.125 s) and the
    # memory latency of its first operands (0.0625 s):
    # 0.25 / 0.5 + 3 x (0.125 + 0.0625) = 1.0625 s in series with the kernel
    cal = Calibration(name="t", matmul_efficiency=0.5, exp_efficiency=0.5, hbm_efficiency=0.5,
                      compute_overlap=0.0, block_overhead_tiles=2.0)  # fmt: skip
    kernel = replace(_kernel(), pad_s=0.25, pad_copies=3.0, first_load_s=0.0625)
    steps = estimate_steps([kernel], cal, launch=0.125)
    i = [e.__name__ for e in EFFECTS].index("pad_copies")
    assert steps[i + 1] - steps[i] == 0.25 / 0.5 + 3 * (0.125 + 0.0625) == 1.0625


def test_an_effect_is_one_local_function():
    # a kernel's time after every effect, from its state alone
    cal = Calibration(name="t")
    context = Context(cal, {r: 1.0 for r in ("matmul", "vector", "exp", "hbm", "l2")}, 0.0)
    state = KernelTime(_kernel().floor)
    for effect in EFFECTS:
        state = effect(state, _kernel(), context)
    assert state.seconds() == estimate_steps([_kernel()], cal, 0.0)[-1]


def test_model_key_of_the_split_launch():
    assert str(model_key("flash", split=True, paged=True)) == "flash-split-paged"


def test_paged_block_table_bytes_by_hand():
    # each program reads one int32 page id per page of its sequence: b·h·ceil(n/B_r)
    # programs (pack 1) over ceil(m/page) pages, whatever the split
    paged = flash_costs.build(split=True, paged=True, launch=True)
    plain = flash_costs.build(split=True, launch=True)
    extra = at(paged.kernels[0].hbm_bytes, page=16) - at(plain.kernels[0].hbm_bytes, page=16)
    assert extra == B * H * math.ceil(N / 128) * math.ceil(N / 16) * 4


def test_pad_copies_by_hand():
    # our Triton wrapper pads Q to whole 128-row blocks and K, V to 64-key blocks
    # (flash_triton._pallas_forward): n = 1000 -> 1024 copies Q in and O out; m = 1024 is
    # whole: K and V are not copied
    import numpy as np

    from perfmodel.catalog.kernels import load_kernel
    from perfmodel.launch import pad_copies

    one = np.ones(1)
    kw = dict(h=one * 4, h_kv=one * 2, b=one * 2, s=one * 2, block_q=one * 128, block_k=one * 64)
    fam = load_kernel("pallas-triton")
    copied, copies = pad_copies(fam, n=one * 1000, m=one * 1024, d=one * 128, d_run=one * 128, **kw)
    assert copies[0] == 2
    assert copied[0] == 2 * 2 * 4 * (1000 + 1024) * 128 * 2
    # a padded head dim copies every tensor, at its own and at the padded width
    copied, copies = pad_copies(fam, n=one * 1024, m=one * 1024, d=one * 96, d_run=one * 128, **kw)
    assert copies[0] == 4
    q = 2 * 4 * 1024 * (96 + 128) * 2
    kv = 2 * 2 * 1024 * (96 + 128) * 2
    assert copied[0] == 2 * q + 2 * kv
    # cuDNN takes the call as it is
    none = pad_copies(
        load_kernel("cudnn"), n=one * 1000, m=one * 999, d=one * 96, d_run=one * 96, **kw
    )
    assert none[0][0] == none[1][0] == 0


def test_an_untiled_kernel_waits_one_idle_latency():
    # an untiled kernel (the naive side's QK^T, softmax and PV) has nothing in flight when
    # it starts: it waits one memory latency for its first operands, the idle one (a
    # pointer chase: 0.441 us on the H200), and so does each copy and glue kernel around
    # the fused one (``first_load_s``); no Q tile is loaded ahead of it
    from perfmodel.evaluate import kernel_roofs, shape_values

    hw = load_hardware("h200")
    values = shape_values(hw, n=4096, m=4096, d=128, h=16, h_kv=16, b=1, s=2)
    roofs = kernel_roofs("naive", causal=False, hw=hw, peak=hw.peak("bf16"), values=values)
    assert hw.idle_memory_latency_s == 4.41e-07 and len(roofs) == 3
    for k in roofs:
        assert (k.prologue_latency_s, k.prologue_bytes_s) == (4.41e-07, 0.0)
        assert k.first_load_s == 4.41e-07
