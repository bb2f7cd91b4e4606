"""Our kernel family files say what our kernels launch.

Each ``specs/kernels`` file of ours (pallas-triton, pallas-mosaic, pallas-paged) is held
to the kernel's own default launch, read from the kernel module (its
``heuristic_config``, tile table and signature defaults), for every head dim 16..256 in
steps of 16 and both masks: block_q, block_k, warps and K/V stages.
"""

from __future__ import annotations

import inspect

import pytest

from perfmodel.catalog.kernels import load_kernel

flash_mosaic = pytest.importorskip("pallas_kernels.flash_mosaic")
from pallas_kernels import flash_triton, paged_decode  # noqa: E402

HEAD_DIMS = range(16, 257, 16)


def _launch(family: str, d: int, causal: bool) -> tuple[int, int, int, int]:
    fam = load_kernel(family)
    tile = fam.tile_for(d, causal=causal, arch="sm90")
    return tile.block_q, tile.block_k, tile.warps, tile.kv_stages or fam.kv_stages


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", HEAD_DIMS)
def test_triton_family_is_the_heuristic_config(d, causal):
    cfg = flash_triton.heuristic_config(d, causal)
    # Triton's pipeliner keeps num_stages - 1 loads in flight (the family's kv_stages);
    # one stage: one buffer, no pipelining
    assert _launch("pallas-triton", d, causal) == (
        cfg.block_q,
        cfg.block_k,
        cfg.num_warps,
        max(1, cfg.num_stages - 1),
    )


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", HEAD_DIMS)
def test_mosaic_family_is_the_heuristic_config(d, causal):
    cfg = flash_mosaic.heuristic_config(d, causal)
    rows = flash_mosaic.ROWS_PER_CONSUMER * flash_mosaic.CONSUMERS
    warps = 4 * flash_mosaic.CONSUMERS  # one warpgroup (4 warps) per consumer
    assert _launch("pallas-mosaic", d, causal) == (rows, cfg.block_k, warps, cfg.num_stages)
    assert load_kernel("pallas-mosaic").producer_warps == 4  # the producer warpgroup


def test_paged_family_is_the_kernel_default():
    fam = load_kernel("pallas-paged")
    defaults = inspect.signature(paged_decode.paged_decode_attention).parameters
    tile = fam.tile_for(128, causal=False, arch="sm90")
    assert tile.block_q == paged_decode.MIN_TILE
    assert tile.warps == defaults["num_warps"].default
    assert fam.kv_stages == defaults["num_stages"].default - 1
    assert fam.split_sm_factor == paged_decode.PROGRAMS_PER_SM


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", HEAD_DIMS)
def test_triton_family_states_the_loads_in_flight(d, causal):
    # Triton's pipeliner keeps num_stages - 1 loads in flight: 0 at one stage (no
    # prefetch), which the exposed_latency effect reads
    fam = load_kernel("pallas-triton")
    tile = fam.tile_for(d, causal=causal, arch="sm90")
    assert fam.loads_ahead(tile) == flash_triton.heuristic_config(d, causal).num_stages - 1


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", HEAD_DIMS)
def test_triton_backward_is_flash_backward_heuristic(d, causal):
    """pallas-triton's [backward] is flash_backward with its heuristic_config: the dQ rule,
    both kernels' tiles, warps and stages, and the head dim it pads to."""
    from pallas_kernels import flash_backward
    from perfmodel.catalog.kernels import padded_head_dim

    fam = load_kernel("pallas-triton")
    assert fam.backward is not None
    cfg = flash_backward.heuristic_config(d)
    tile = fam.backward.tile_for(d, causal=causal)
    assert fam.backward.dq == cfg.dq
    assert (tile.block_q, tile.block_k, tile.warps, tile.stages) == (
        cfg.block_q,
        cfg.block_k,
        cfg.num_warps,
        cfg.num_stages,
    )
    assert (tile.dq_block_q, tile.dq_block_k, tile.dq_warps, tile.dq_stages) == (
        cfg.dq_block_q,
        cfg.dq_block_k,
        cfg.dq_num_warps or cfg.num_warps,
        cfg.dq_num_stages or cfg.num_stages,
    )
    # the model costs the dQ pass at the dK/dV kernel's tile: they are one tile here
    assert (tile.dq_block_q, tile.dq_block_k) == (tile.block_q, tile.block_k)
    assert padded_head_dim(fam.head_dim_padding, d) == flash_triton.native_head_dim(d)


flash_mosaic_backward = pytest.importorskip("pallas_kernels.flash_mosaic_backward")


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", [d for d in HEAD_DIMS if d <= 128])
def test_mosaic_backward_is_its_heuristic_config(d, causal):
    """pallas-mosaic's [backward] is flash_mosaic_backward with its heuristic_config: a
    CTA of two consumers owns 128 keys (dK/dV) or 128 query rows (dQ) and streams tiles of
    block_q rows (dq_block_k keys) through num_stages stages; a producer warpgroup."""
    m = flash_mosaic_backward
    fam = load_kernel("pallas-mosaic")
    assert fam.backward is not None
    cfg = m.heuristic_config(d, causal)
    tile = fam.backward.tile_for(d, causal=causal, arch="sm90")
    cta, warps = m.CTA_ROWS, 4 * m.CONSUMERS
    assert (tile.block_q, tile.block_k, tile.warps, tile.stages) == (
        cfg.block_q,
        cta,
        warps,
        cfg.num_stages,
    )
    assert (tile.dq_block_q, tile.dq_block_k, tile.dq_warps, tile.dq_stages) == (
        cta,
        cfg.dq_block_k,
        warps,
        cfg.dq_num_stages,
    )
    assert fam.backward.dq == "two_pass" and fam.backward.producer_warps == 4
    assert max(t.d_max for t in fam.backward.tiles) == m.MAX_HEAD_DIM


def test_mosaic_backward_splits_gqa_groups_as_the_kernel():
    """pallas-mosaic's [backward] group_split: the kernel and the model run one rule
    (``kernel_rules.group_split``), up to the head dim where its paired kernel runs; by
    hand, 24 CTAs (b = 3, 8 K/V blocks, 1 K/V head) of a 6:1 group on 132 SMs split 3
    ways (72 CTAs fill 0.545 of a wave, as 144 do of two; the smaller wins)."""
    from perfmodel import launch

    m = flash_mosaic_backward
    bwd = load_kernel("pallas-mosaic").backward
    assert bwd is not None and bwd.group_split == "fill_waves"
    assert bwd.group_split_d_max == m.PAIRED_MAX_HEAD_DIM
    assert m.heuristic_config(bwd.group_split_d_max).splits_group
    assert not m.heuristic_config(bwd.group_split_d_max + 16).splits_group
    assert launch.group_split is m.group_split
    assert m.group_split_for(3, 8, 1, 6, 132) == 3
    assert launch.group_split([24, 264], [6, 4], 132).tolist() == [3.0, 1.0]


@pytest.mark.parametrize("d", HEAD_DIMS)
@pytest.mark.parametrize("forward", ["pallas-triton", "pallas-mosaic"])
def test_the_backward_jax_grad_runs(forward, d):
    """flash_attention.choose_backward: the Mosaic backward on Hopper where it supports the
    call (d <= its MAX_HEAD_DIM), the Triton kernels elsewhere, whichever forward ran."""
    fam = load_kernel(forward)
    hopper = "pallas-mosaic" if d <= flash_mosaic_backward.MAX_HEAD_DIM else "pallas-triton"
    assert fam.backward_as_run(d, arch="sm90").name == hopper
    assert fam.backward_as_run(d, arch="sm80").name == "pallas-triton"


@pytest.mark.parametrize("d", [16, 48, 80, 96, 112, 160, 200, 256])
def test_mosaic_family_pads_the_head_dim_as_the_kernel(d):
    from perfmodel.catalog.kernels import padded_head_dim

    fam = load_kernel("pallas-mosaic")
    cfg = flash_mosaic.heuristic_config(d)
    assert padded_head_dim(fam.head_dim_padding, d) == flash_mosaic.run_head_dim(d, cfg)


def test_mosaic_family_pads_the_sequences_as_the_kernel():
    # flash_mosaic.Config.pad_seq (default False since the blocked layout): no sequence
    # is copied (the TMA copies zero-fill past the end and skip stores past it), as the
    # family says; points measured before record the padding they ran
    # (Point.sequence_padding)
    assert flash_mosaic.Config().pad_seq is False
    assert load_kernel("pallas-mosaic").sequence_padding == "none"
    assert flash_mosaic.ROWS_PER_CONSUMER == 64  # launch.MOSAIC_CONSUMER_ROWS
    from perfmodel.launch import MOSAIC_CONSUMER_ROWS

    assert MOSAIC_CONSUMER_ROWS == flash_mosaic.ROWS_PER_CONSUMER
    assert 2 * MOSAIC_CONSUMER_ROWS == flash_mosaic_backward.CTA_ROWS


def test_mosaic_family_states_the_blocked_layout_as_the_kernel_runs_it():
    """pallas-mosaic's blocked_multiple and blocked_cols are flash_mosaic's rule: the
    blocked layout where a length is not a multiple of 8, d in column blocks of one
    swizzle row (the cost model's blocked O += P V term reads them)."""
    fam = load_kernel("pallas-mosaic")
    cfg = flash_mosaic.Config()
    for n, blocked in ((4096, False), (4097, True), (4100, True), (4104, False)):
        assert flash_mosaic._blocked(cfg, n, 4096) is blocked
        assert (n % fam.blocked_multiple != 0) is blocked
    for d in range(16, 257, 16):
        cols = flash_mosaic.swizzle_bytes(d, 2) // 2
        assert fam.blocked_cols.get(d, d) == cols, d
