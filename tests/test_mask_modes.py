"""Masks in every mode predict() costs: backward and train visit the forward's tiles,
decode under a window reads the window's keys, the config records the mask, and what is
not modelled (a paged cache, a split over devices) is refused by name."""

import numpy as np
import pytest

from perfmodel import predict, sweep
from perfmodel.errors import PerfmodelError

SHAPE = dict(hw="h200", h=16, h_kv=4, d=128, dtype="bf16", causal=True)


@pytest.mark.parametrize("mode", ["backward", "train"])
def test_backward_and_train_do_the_windows_share_of_the_work(mode):
    """Matmul FLOPs scale with the visited tiles: the backward's share under a window
    is the forward's (the same tiles, walked in the other loop order)."""
    n, window = 16384, 2047
    ratio = {}
    for m in ("forward", mode):
        dense = predict(n=n, mode=m, **SHAPE).flash
        local = predict(n=n, mode=m, window=window, **SHAPE).flash
        ratio[m] = local.matmul_flops / dense.matmul_flops
        assert local.l2_bytes < dense.l2_bytes and local.hbm_bytes <= dense.hbm_bytes
        assert local.time_s < dense.time_s
    assert ratio[mode] == pytest.approx(ratio["forward"], rel=0.02)
    assert ratio["forward"] < 0.3  # n·W of the causal n²/2 scores: about 2·2048/16384


@pytest.mark.parametrize("mode", ["forward", "backward", "train"])
def test_a_window_wider_than_n_is_the_causal_model(mode):
    n = 4096
    causal = predict(n=n, mode=mode, **SHAPE).flash
    wide = predict(n=n, mode=mode, window=n, **SHAPE).flash
    for field in ("matmul_flops", "vector_flops", "exp_count", "l2_bytes"):
        assert getattr(wide, field) == getattr(causal, field)


def test_decode_under_a_window_reads_the_windows_keys():
    """One new token against a 64K cache with a window of 4096 keys (its own and the
    4095 before it) does the work of a 4096-token cache: the same tiles."""
    shape = dict(hw="h200", h=32, h_kv=8, d=128, dtype="bf16", batch=8)
    local = predict(n=1, kv_len=65536, window=4095, **shape).flash
    short = predict(n=1, kv_len=4096, **shape).flash
    full = predict(n=1, kv_len=65536, **shape).flash
    assert local.matmul_flops == short.matmul_flops
    assert local.matmul_flops == pytest.approx(full.matmul_flops * 4096 / 65536)
    assert local.hbm_bytes < full.hbm_bytes / 8
    wide = predict(n=1, kv_len=65536, window=10**6, **shape).flash
    assert wide.matmul_flops == full.matmul_flops


@pytest.mark.parametrize("kernel", ["fa2", "fa3"])
@pytest.mark.parametrize(("batch", "h", "window"), [(1, 8, 255), (1, 8, 1023), (2, 32, 4095)])
def test_split_kv_divides_the_windows_keys_not_the_caches(kernel, batch, h, window):
    """Flash-decoding under a window splits the K/V blocks a program visits: the split
    count (and the floor's split limit) is the family's rule over the K blocks counted by
    brute force from the element mask, and a 64K cache under a window of W keys splits
    as a cache of W + 1 tokens does (the window ends on a split tile's boundary, so its
    blocks are that cache's), fewer times than the whole cache; every chunk holds keys of
    the window."""
    from perfmodel.catalog.hardware import load_hardware
    from perfmodel.catalog.kernels import load_kernel
    from perfmodel.costs import masks
    from perfmodel.launch import programs, split_rule

    m, kv = 65536, dict(hw="h200", h=h, h_kv=h // 4, d=128, dtype="bf16", batch=batch)
    p = predict(n=1, kv_len=m, window=(window, 0), kernel=kernel, **kv)
    short = predict(n=1, kv_len=window + 1, kernel=kernel, **kv)
    family, hw, c = load_kernel(kernel), load_hardware("h200"), p.config
    bk = family.split_block_k_for(128) if family.split_block_k else c.block_q
    bq = c.block_q if family.split_block_q is None else family.split_block_q
    seen = masks.element_mask(masks.mask_of(1, m, window=(window, 0)), 1, m)[0]
    blocks = len(set(np.flatnonzero(seen) // bk))  # the K blocks one program walks
    grid = programs(np.array([1.0]), np.array([h]), np.array([batch]), np.array([c.pack]), bq)
    assert c.splits == split_rule(family, hw, grid, np.array([float(blocks)]))[0]
    assert (
        c.splits == short.config.splits < predict(n=1, kv_len=m, kernel=kernel, **kv).config.splits
    )
    assert c.splits <= blocks


def test_sweep_takes_a_window_over_decode_shapes():
    r = sweep("h200", n=[1, 4], kv_len=[1024, 65536], h=8, window=511)
    flops = r["flash.matmul_flops"].reshape(2, 2)
    assert flops[0, 1] == flops[0, 0]  # past the window the cache's length does not matter
    with pytest.raises(PerfmodelError, match="n=4096 > kv_len=1024"):
        sweep("h200", n=[1, 4096], kv_len=1024, window=511)


def test_the_config_records_the_mask():
    p = predict(n=4096, window=1023, **SHAPE)
    assert (p.config.window, p.config.segments, p.config.block_mask) == ((1023, 0), None, None)
    assert predict(**p.config.kwargs(), hw="h200").flash.time_s == p.flash.time_s
    docs = predict(n=300, hw="h200", segments=[100, 200]).config
    assert docs.segments == (100, 200) and docs.window is None
    block = predict(n=256, hw="h200", block_mask=np.eye(2, dtype=bool)).config
    assert block.block_mask == "block mask (2, 2) of (128, 128)"
    with pytest.raises(PerfmodelError, match="pass the array or callable"):
        block.kwargs()
    assert predict(n=256, hw="h200").config.window is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(n=64, kv_len=128, page_tokens=16, window=8), "paged K/V cache"),
        (dict(n=4096, window=512, cp=2), "cp or tp > 1"),
        (dict(n=4096, window=512, tp=2, h=2), "cp or tp > 1"),
        (dict(n=64, kv_len=32, window=8), "n=64 > kv_len=32"),
        (dict(n=64, kv_len=128, segments=[64]), "segments need self-attention"),
    ],
)
def test_what_is_not_modelled_is_refused_by_name(kwargs, message):
    with pytest.raises(PerfmodelError, match=message):
        predict(hw="h200", **kwargs)


def test_sweep_takes_documents_of_one_length_at_every_n():
    ns = [1000, 4096, 5000]
    r = sweep("h200", n=ns, causal=True, segments=2048, window=511)
    for i, n in enumerate(ns):
        p = predict(n=n, hw="h200", causal=True, segments=2048, window=511)
        assert r["flash.time_s"][i] == p.flash.time_s
        docs = [2048] * (n // 2048) + ([n % 2048] if n % 2048 else [])
        listed = predict(n=n, hw="h200", causal=True, segments=docs, window=511)
        assert listed.flash.time_s == p.flash.time_s and p.config.segments == 2048
    with pytest.raises(PerfmodelError, match="use predict, not sweep"):
        sweep("h200", n=[4, 8], segments=[2, 2])
