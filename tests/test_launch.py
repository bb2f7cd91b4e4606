"""The launch, written once (``perfmodel.launch``), and the one engine that reads it.

Every figure a prediction reports is the figure of a launch the engine evaluated: the
on-chip footprint of the family's launch, the one-device time of a split, the floor
and the rate of the best launch the family could make. ``sweep`` and ``predict`` are
one evaluation path: a sweep's row is the prediction of that point.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel import PerfmodelError, predict, sweep
from perfmodel.catalog.calibration import family_default
from perfmodel.catalog.hardware import load_hardware
from perfmodel.catalog.kernels import load_kernel
from perfmodel.evaluate import EFFECT_NAMES, evaluate_flash
from perfmodel.launch import (
    capacity,
    footprint,
    gqa_pack,
    launch_of,
    resolve,
    resolve_point,
    split_rule,
)
from perfmodel.vocabulary import symbol_values

H200 = load_hardware("h200")


def col(*values):
    return np.array(values, dtype=np.float64)


def test_footprint_by_hand():
    # FlashAttention-2 at d=128, 128x128 tiles, 4 warps, two K/V stages:
    # (128 + 2·2·128)·128·2 B of SRAM; (128·128 + 128·128 + 2·128) f32 over 128 threads.
    smem, acc_bytes, regs, threads = footprint(
        block_q=col(128), block_k=col(128), d=col(128), s=col(2), kv_stages=col(2), warps=col(4)
    )
    assert smem[0] == (128 + 2 * 2 * 128) * 128 * 2 == 163840
    assert acc_bytes[0] == (128 * 128 + 128 * 128 + 2 * 128) * 4
    assert regs[0] == (128 * 128 + 128 * 128 + 2 * 128) / 128 == 258.0
    assert threads[0] == 128


def test_capacity_by_hand():
    # 96 KB of SRAM, 128 registers/thread over 128 threads: the H200's 228 KB SM holds 2
    # by shared memory; 64 K registers hold 4; so 2. 300 registers spill 45 past 255.
    blocks, spilled = capacity(H200, col(98304), col(128.0), col(128), col(0))
    assert (blocks[0], spilled[0]) == (H200.sram_per_sm_bytes // 98304, 0.0)
    blocks, spilled = capacity(H200, col(16384), col(300.0), col(128), col(0))
    assert spilled[0] == 300.0 - H200.max_registers_per_thread
    assert blocks[0] == H200.registers_per_sm // (H200.max_registers_per_thread * 128)
    # 512 compute and 128 producer threads a block: 2048 threads an SM hold 3 blocks
    # (not the 4 of the compute threads alone); 1 KB of SRAM and 16 registers a thread
    # (8 K + 4 K a block: 5 blocks) leave the threads to decide
    blocks, _ = capacity(H200, col(1024), col(16.0), col(512), col(128))
    assert H200.max_threads_per_sm == 2048 and H200.registers_per_sm // (16 * 512 + 32 * 128) == 5
    assert blocks[0] == 2048 // (512 + 128) == 3
    # registers decide: 128 compute threads of 104 registers and 128 producer threads of
    # 32 (PRODUCER_REGISTERS) are 13,312 + 4,096 = 17,408 a block; 65,536 // 17,408 = 3
    # (at 24 a producer thread: 16,384, 4 blocks); 2048 // 256 = 8 threads-wise, 1 KB of
    # SRAM 228 blocks
    blocks, _ = capacity(H200, col(1024), col(104.0), col(128), col(128))
    assert H200.registers_per_sm == 65536 and 2048 // (128 + 128) == 8
    assert blocks[0] == 65536 // (104 * 128 + 32 * 128) == 3


def test_gqa_packing_rules():
    n, group, bq = col(1, 1000), col(8, 8), col(128, 128)
    assert list(gqa_pack("decode", n, group, bq)) == [8, 1]
    assert list(gqa_pack("always", n, group, bq)) == [8, 8]
    assert list(gqa_pack("none", n, group, bq)) == [1, 1]
    # FlashAttention-3: pack when the packed rows fill the tiles 1/0.9 better
    assert list(gqa_pack("when_short", col(16, 4096), col(8, 8), bq)) == [8, 1]


def test_split_rule_never_splits_a_full_grid():
    fa2 = load_kernel("fa2")
    slots = H200.sm_count * fa2.split_sm_factor
    assert split_rule(fa2, H200, col(slots), col(1000))[0] == 1
    assert split_rule(fa2, H200, col(8), col(1000))[0] > 1


def test_reported_sram_is_the_launch_evaluated():
    # fa2 keeps one K and one V tile (kv_stages = 1): 128x64 at d=128 is 64 KiB
    p = predict(n=4096, hw="h200", h=16)
    launch = launch_of(p.config, H200)
    assert p.flash.sram_bytes == launch.smem_bytes == (128 + 2 * 64) * 128 * 2 == 65536
    fa3 = predict(n=4096, hw="h200", h=16, kernel="fa3")
    assert fa3.flash.sram_bytes == launch_of(fa3.config, H200).smem_bytes


def test_a_point_is_a_one_row_column():
    family = load_kernel("fa3")
    sizes = dict(n=577, m=577, d=96, h=8, h_kv=2, b=3, s=2)
    point = resolve_point(family, H200, **sizes, causal=True)
    columns = resolve(family, H200, **{k: [v, v] for k, v in sizes.items()}, causal=True)
    for field, value in vars(point).items():
        assert list(getattr(columns, field)) == [value, value], field


def test_a_tile_that_does_not_fit_names_the_limit():
    with pytest.raises(PerfmodelError, match="shared memory"):
        predict(n=4096, hw="h200", d=256, block_q=256, block_k=256)
    with pytest.raises(PerfmodelError, match="block_k=12"):
        predict(n=4096, hw="h200", block_k=12)


def test_parallel_one_device_time_is_the_prediction():
    # the split's one-device time is the flash time the table prints, same launch
    p = predict(n=131072, hw="h200", h=16, dtype="bf16", cp=2)
    assert p.parallel.one_device_s == p.flash.time_s
    q = predict(n=65536, hw="h200", h=16, h_kv=4, dtype="bf16", tp=2, kernel="fa3")
    assert q.parallel.one_device_s == q.flash.time_s


def _floor_alone(p, splits, pack=None):
    """The floor of one launch of p's shape with ``splits`` (and ``pack``), no search."""
    family = load_kernel(p.config.kernel)
    sizes = symbol_values(
        n=p.config.n, kv_len=p.config.kv_len, d=p.config.d, h=p.config.h,
        h_kv=p.config.h_kv, batch=p.config.batch, dtype=p.config.dtype,
    )  # fmt: skip
    launch = resolve_point(family, H200, **sizes, causal=p.config.causal, splits=splits)
    if pack is not None:
        launch = type(launch)(**{**vars(launch), "pack": float(pack)})
    out = evaluate_flash(
        launch, family, causal=p.config.causal, hw=H200, peak=H200.peak(p.config.dtype),
        shape={**sizes, "page": 1}, calibration=family_default(family, H200), floor=False,
    )  # fmt: skip
    return out["t_lower_s"]


@pytest.mark.parametrize(
    "shape",
    [
        dict(n=576, d=96, causal=True, kernel="fa3"),
        dict(n=1, kv_len=8192, h=32, h_kv=8, kernel="fa2"),
        dict(n=64, kv_len=32768, h=8, h_kv=1, kernel="flash-decoding"),
        dict(n=4096, h=32, h_kv=8, causal=True),
    ],
)
def test_floor_is_the_least_over_every_launch(shape):
    p = predict(hw="h200", **shape)
    family = load_kernel(p.config.kernel)
    group = p.config.h // p.config.h_kv
    # every split count up to one K/V block per chunk (past that a chunk has no keys)
    kv_blocks = math.ceil(p.config.kv_len / p.config.block_k)
    floors = [
        _floor_alone(p, k, pack)
        for pack in {1, group}
        for k in range(1, min(family.max_splits, kv_blocks) + 1)
    ]
    assert p.flash.t_lower_s == pytest.approx(min(floors), rel=1e-12)
    assert p.flash.t_lower_s <= min(floors) * (1 + 1e-12)


def test_floor_does_not_jump_with_one_token():
    # the 577 launch splits K/V five ways; the 576 floor now tries splits too
    a = predict(n=576, hw="h200", kernel="fa3", causal=True, d=96)
    b = predict(n=577, hw="h200", kernel="fa3", causal=True, d=96)
    assert abs(b.flash.t_lower_s / a.flash.t_lower_s - 1) < 0.05


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 20000),
    d=st.sampled_from([64, 96, 128]),
    heads=st.sampled_from([(1, 1), (16, 16), (32, 8), (64, 8)]),
    batch=st.integers(1, 8),
    causal=st.booleans(),
    kernel=st.sampled_from(["fa2", "fa3", "flash-decoding", "cudnn"]),
)
def test_floor_is_at_least_each_roof_of_its_launch(n, d, heads, batch, causal, kernel):
    h, h_kv = heads
    p = predict(n=n, hw="h200", d=d, h=h, h_kv=h_kv, batch=batch, causal=causal, kernel=kernel)
    for side in (p.naive, p.flash):
        assert side.t_lower_s >= max(side.t_compute_s, side.t_memory_s)
        assert side.t_lower_s >= max(side.roof_times_s.values()) * (1 - 1e-12)
        assert side.attainable_flops_per_s <= H200.peak("fp16") * (1 + 1e-12)
        assert side.time_s >= side.t_lower_s
        total = side.t_lower_s + sum(side.effects_s.values())
        assert math.isclose(total, side.time_s, rel_tol=1e-9)
        assert list(side.effects_s) == list(EFFECT_NAMES)


@pytest.mark.parametrize(
    "options",
    [
        dict(),
        dict(kernel="fa3", causal=[False, True]),
        dict(mode="train"),
        dict(mode="backward", kernel="fa3"),
        # 4 of 6 rows split K/V: the split model on every row, the others on theirs
        dict(kv_len=[8192], h=[32], h_kv=[8], n=[1, 16, 3000], kernel="flash-decoding"),
        # 8 of 20 rows split: the one-kernel model on every row (``evaluate._per_split``)
        dict(kv_len=[16384], h=[8], n=[1, 16, 3000, 5000, 8000], batch=[1, 2]),
        dict(warps=[8], block_q=[64], block_k=[64]),
        dict(splits=[3], n=[1, 64], kv_len=[16384]),
        dict(page_tokens=[16], n=[1], kv_len=[4096, 65536], kernel="pallas-paged"),
        dict(naive="xla", dtype=["bf16", "fp32"]),
        dict(cp=2, n=[65536, 131072], h=[16], dtype="bf16"),
        dict(tp=2, n=[8192], h=[16], h_kv=[4]),
    ],
)
def test_a_sweep_row_is_the_prediction_of_its_point(options):
    options = {"n": [100, 4096], "d": [64, 128], **options}
    r = sweep("h200", **options)
    keys = ("n", "kv_len", "d", "h", "h_kv", "batch", "dtype", "causal")
    scalar = {k: v for k, v in options.items() if k not in keys and not isinstance(v, list)}
    launch = {
        k: options[k][0]
        for k in ("warps", "splits", "page_tokens", "block_q", "block_k")
        if k in options
    }
    for i in range(len(r)):
        point = {k: np.asarray(r[k][i]).item() for k in keys}
        p = predict(hw="h200", **point, **scalar, **launch)
        for side in ("naive", "flash"):
            a = getattr(p, side)
            for field in ("time_s", "t_lower_s", "t_compute_s", "hbm_bytes", "sram_bytes"):
                assert r[f"{side}.{field}"][i] == getattr(a, field), (side, field, point)
            for name, value in a.effects_s.items():
                assert r[f"{side}.effect_{name}_s"][i] == value
        assert r["block_q"][i] == p.config.block_q and r["flash.splits"][i] == p.config.splits
        if p.parallel is not None:
            assert r["parallel.time_s"][i] == p.parallel.time_s


def test_sweep_takes_every_option_predict_takes():
    from perfmodel.prediction import OPTIONS

    assert {"cp", "cp_scheme", "tp", "mode", "warps", "splits", "page_tokens", "kernel"} <= set(
        OPTIONS
    )
    with pytest.raises(PerfmodelError, match="unknown arguments"):
        sweep("h200", n=[1024], heads=8)


def test_columns_asked_for_are_the_columns_computed():
    r = sweep("h200", n=[1024, 4096], columns=["flash.time_s", "speedup"])
    full = sweep("h200", n=[1024, 4096])
    assert set(r) == {"n", "d", "h", "h_kv", "batch", "dtype", "causal", "block_q", "block_k",
                      "kv_len", "warps", "flash.time_s", "speedup"}  # fmt: skip
    assert list(r["flash.time_s"]) == list(full["flash.time_s"])
