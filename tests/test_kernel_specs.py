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
