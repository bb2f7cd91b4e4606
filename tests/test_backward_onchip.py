"""The backward's tiled kernel is the one its on-chip facts describe (issue 21).

A backward's first kernel is its ``bwd_delta`` preprocess; the dK/dV kernel after it is
the tiled one, and the launch's blocks per SM and program edges are its facts
(``evaluate._roofs_from_raw``, ``launch.backward_launch``).
"""

import numpy as np
import pytest

import perfmodel.evaluate as ev
from perfmodel import predict
from perfmodel.catalog.hardware import load_hardware
from perfmodel.catalog.kernels import load_kernel, padded_head_dim
from perfmodel.launch import backward_launch


def _roofs_of(**shape):
    seen = []
    original = ev._roofs_from_raw

    def keep(raw, kernels, rates, hw, onchip):
        out = original(raw, kernels, rates, hw, onchip)
        seen.append(out)
        return out

    ev._roofs_from_raw = keep
    try:
        predict(hw="h200", mode="backward", **shape)
    finally:
        ev._roofs_from_raw = original
    return [k for roofs in seen for k in roofs]


def test_the_dkdv_kernel_not_the_preprocess_gets_the_blocks_per_sm():
    # cuDNN's one-warpgroup 64 x 64 tile at d = 128: two blocks an SM (shared memory)
    roofs = {k.name: k for k in _roofs_of(n=4096, d=128, h=16, batch=4, kernel="cudnn")}
    assert roofs["bwd_dkdvdq"].blocks_per_sm == 2
    assert roofs["bwd_delta"].blocks_per_sm == 1
    assert roofs["bwd_dkdvdq"].prologue_bytes_s > 0  # its program edges, once a wave


@pytest.mark.parametrize(("h_kv", "out_bytes"), [(16, 2), (4, 4)])
def test_edge_bytes_are_k_v_in_and_dk_dv_out(h_kv, out_bytes):
    fam, _ = load_kernel("cudnn").backward_view(128)
    launch = backward_launch(
        fam, load_hardware("h200"), n=4096, m=4096, d=128, h=16, h_kv=h_kv, b=1, s=2,
        causal=False,
    )  # fmt: skip
    # 64 keys x 128 columns of K and V in (2 B), of dK and dV out: float32 where
    # kernels of their own sum the GQA group after (group_reduce)
    assert float(launch.edge_bytes[0]) == 2 * 64 * 128 * (2 + out_bytes)


def test_cudnn_backward_runs_at_64_128_or_256():
    rule = load_kernel("cudnn").backward.head_dim_padding
    assert rule == "power_of_two_on_chip"
    assert list(padded_head_dim(rule, np.array([48.0, 64, 96, 128, 160, 192, 256]))) == [
        64, 64, 128, 128, 256, 256, 256,
    ]  # fmt: skip
