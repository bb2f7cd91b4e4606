"""cuDNN's decode engine (``KernelFamily.decode_tiles``, ``launch.decode_launch``) and the
exposed-latency effect's streamed bytes (``evaluate._streamed_share``), by hand: no timing."""

from __future__ import annotations

import numpy as np
import pytest

import perfmodel
from perfmodel import launch
from perfmodel.catalog.hardware import load_hardware
from perfmodel.catalog.kernels import load_kernel
from perfmodel.evaluate import OnChip, _streamed_share

H200 = load_hardware("h200")
CUDNN = load_kernel("cudnn")


def _launch(n, d, family=CUDNN, m=16384):
    return launch.resolve_point(
        family, H200, n=n, m=m, d=d, h=8.0, h_kv=8.0, b=2.0, s=2.0, causal=False
    )


def test_the_cudnn_file_states_its_sm80_decode_engine():
    at_128, at_256 = CUDNN.decode_tile_for(128), CUDNN.decode_tile_for(256)
    assert at_128 is not None and at_256 is not None
    assert (at_128.block_q, at_128.block_k, at_128.warps, at_128.kv_stages) == (16, 128, 4, 2)
    assert (at_256.block_k, at_256.kv_stages, at_256.loads_ahead) == (128, 1, 0)
    assert "decode_tiles" in CUDNN.assumed and "decode_tiles" in CUDNN.sources


@pytest.mark.parametrize("d", [64, 128, 256])
def test_decode_runs_the_engines_tile_and_longer_queries_the_familys(d):
    decode, prefill = _launch(1.0, d), _launch(4096.0, d)
    tile = CUDNN.decode_tile_for(d)
    assert float(decode.block_k) == tile.block_k
    stages = tile.kv_stages or CUDNN.kv_stages
    ahead = stages if tile.loads_ahead is None else tile.loads_ahead
    assert float(decode.loads_ahead) == ahead
    # compute warps load its stages' K and V tiles: 2 x block_k x d x 2 bytes a stage
    assert float(decode.bytes_in_flight) == 2 * tile.block_k * d * 2 * stages
    own = CUDNN.tile_for(d, causal=False, arch="sm90")
    assert float(prefill.block_k) == own.block_k
    assert float(prefill.loads_ahead) == CUDNN.loads_ahead(own)
    # the bound is the family's split_max_queries: 64 queries still decode, 65 not
    assert float(_launch(64.0, d).block_k) == tile.block_k
    assert float(_launch(65.0, d).loads_ahead) == CUDNN.loads_ahead(own)


def test_a_column_resolves_as_its_points():
    n = np.array([1.0, 1.0, 4096.0, 64.0, 65.0])
    d = np.array([256.0, 128.0, 256.0, 64.0, 256.0])
    cols = launch.resolve(
        CUDNN, H200, n=n, m=16384.0, d=d, h=8.0, h_kv=8.0, b=2.0, s=2.0, causal=False
    )
    for i in range(len(n)):
        one = _launch(n[i], d[i])
        for field in ("block_k", "loads_ahead", "bytes_in_flight", "edge_bytes"):
            assert float(np.asarray(getattr(cols, field))[i]) == float(getattr(one, field))


def test_a_family_without_a_decode_engine_is_unchanged():
    fa2 = load_kernel("fa2")
    assert not fa2.decode_tiles and fa2.decode_tile_for(128) is None
    one = _launch(1.0, 128, family=fa2)
    assert float(one.block_k) == fa2.tile_for(128, causal=False, arch="sm90").block_k


def test_edge_bytes_are_the_rows_a_block_holds():
    # decode: one packed row of 8 heads (no GQA here: pack 1), not the 128-row Q tile
    assert float(_launch(1.0, 128).edge_bytes) == 2 * 1 * 128 * 2
    long = _launch(4096.0, 128)
    assert float(long.edge_bytes) == 2 * float(long.block_q) * 128 * 2


def test_streamed_share_by_hand():
    onchip = OnChip(edge_bytes=1000.0)
    # 10 blocks move 10 000 bytes once; of 40 000 HBM bytes 30 000 are streamed
    assert _streamed_share(40_000.0, 10.0, onchip) == 0.75
    assert _streamed_share(5_000.0, 10.0, onchip) == 0.0  # nothing left to stream
    assert _streamed_share(0.0, 10.0, onchip) == 0.0


def test_a_one_stage_decode_step_waits_for_its_bytes():
    """cuDNN decode at d = 256 (one stage, no load ahead) is slower than at the same
    bytes with a load ahead: the exposed-latency effect puts each step's latency and
    bytes in series; at d = 128 (two stages) it adds nothing."""
    shape = dict(n=1, kv_len=32768, h=16, h_kv=2, batch=8, dtype="bf16", kernel="cudnn")
    at_256 = perfmodel.predict(hw="h200", d=256, **shape).flash.effects_s
    at_128 = perfmodel.predict(hw="h200", d=128, **shape).flash.effects_s
    assert at_256["exposed_latency"] > 0.0
    assert at_128["exposed_latency"] == 0.0
