"""The Triton flash kernel and the entry point's dispatch, against the float64 reference.

``TestTritonBackend`` runs the contract every backend keeps (tests/backend_base.py); the
rest is Triton's own: a property sweep over tiles and shapes, its launch table, the
entry point's dispatch and its errors. On CPU the kernel runs in the Pallas interpreter;
on a GPU (``jax.default_backend() == "gpu"``) the same tests run the compiled Triton
kernel, and a few GPU-only tests run larger shapes. Every run starts from NaN-poisoned
output buffers (the test entry point ``flash_triton.forward_with_test_hooks``). The
Mosaic kernel: tests/test_flash_mosaic.py.
"""

from __future__ import annotations

import importlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from backend_base import TOLERANCE, BackendContract, rel_err
from backend_base import random_inputs as inputs
from hypothesis import given, settings
from hypothesis import strategies as st

from pallas_kernels import flash_attention, flash_attention_forward, flash_triton
from pallas_kernels.flash_attention import choose_backend
from pallas_kernels.flash_triton import forward_with_test_hooks
from pallas_kernels.reference import attention_float64

ON_GPU = jax.default_backend() == "gpu"
INTERPRET = not ON_GPU
needs_gpu = pytest.mark.skipif(
    not ON_GPU, reason="needs a GPU: compiles the Triton kernel (CPU runs interpret mode)"
)


class TestTritonBackend(BackendContract):
    backend = "triton"
    interpret = INTERPRET
    wide_dtype = "float32"

    def forward(self, q, k, v, *, causal, diagonal_offset=0, window=None):
        return run_poisoned(
            q,
            k,
            v,
            causal=causal,
            block_q=32,
            block_k=32,
            diagonal_offset=diagonal_offset,
            window=window,
        )


def run_poisoned(
    q, k, v, *, causal, block_q, block_k, sm_scale=None, diagonal_offset=0, window=None
):
    """The kernel with NaN-filled output buffers; returns O and lse."""
    return forward_with_test_hooks(
        q,
        k,
        v,
        causal=causal,
        block_q=block_q,
        block_k=block_k,
        sm_scale=sm_scale,
        interpret=INTERPRET,
        diagonal_offset=diagonal_offset,
        window=window,
    )


def check(q, k, v, *, causal, block_q, block_k, sm_scale=None):
    o, lse = run_poisoned(
        q, k, v, causal=causal, block_q=block_q, block_k=block_k, sm_scale=sm_scale
    )
    assert o.shape == q.shape and o.dtype == q.dtype
    assert lse.shape == (q.shape[0], q.shape[2], q.shape[1]) and lse.dtype == jnp.float32
    assert np.isfinite(np.asarray(o, np.float32)).all(), "unwritten (NaN) or non-finite output"
    assert np.isfinite(np.asarray(lse)).all()
    ref_o, ref_lse = attention_float64(q, k, v, causal=causal, sm_scale=sm_scale)
    assert rel_err(o, ref_o) < TOLERANCE[q.dtype.name]
    np.testing.assert_allclose(np.asarray(lse), ref_lse, rtol=1e-3, atol=1e-2)


@settings(derandomize=True, deadline=None, max_examples=14)
@given(
    n=st.sampled_from([1, 7, 16, 33, 64, 100]),
    kv_extra=st.sampled_from([0, 0, 5, -3]),
    d=st.sampled_from([16, 32, 64, 128]),
    heads=st.sampled_from([(1, 1), (2, 1), (4, 2), (2, 2)]),
    causal=st.booleans(),
    dtype=st.sampled_from(["float32", "float16", "bfloat16"]),
    blocks=st.sampled_from([(16, 16), (32, 16), (16, 32), (64, 64)]),
)
def test_matches_float64_reference(n, kv_extra, d, heads, causal, dtype, blocks):
    kv_len = max(1, n + kv_extra)
    h, h_kv = heads
    q, k, v = inputs(n * 1000 + d, 2, n, kv_len, h, h_kv, d, dtype)
    check(q, k, v, causal=causal, block_q=blocks[0], block_k=blocks[1])


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_head_dims_bf16_non_multiple_of_block(d, causal):
    q, k, v = inputs(d, 1, 80, 80, 2, 1, d, "bfloat16")
    check(q, k, v, causal=causal, block_q=32, block_k=32)


def test_public_entry_point_and_custom_scale():
    q, k, v = inputs(3, 1, 48, 48, 2, 2, 32, "float32")
    o = flash_attention(
        q, k, v, causal=True, sm_scale=0.3, block_q=16, block_k=16, interpret=INTERPRET
    )
    ref, _ = attention_float64(q, k, v, causal=True, sm_scale=0.3)
    assert rel_err(o, ref) < TOLERANCE["float32"]
    o2, lse = flash_attention(
        q,
        k,
        v,
        causal=True,
        sm_scale=0.3,
        block_q=16,
        block_k=16,
        interpret=INTERPRET,
        return_lse=True,
    )
    np.testing.assert_array_equal(np.asarray(o), np.asarray(o2))
    assert lse.shape == (1, 2, 48)
    o3, lse3 = flash_attention_forward(
        q, k, v, causal=True, sm_scale=0.3, block_q=16, block_k=16, interpret=INTERPRET
    )
    np.testing.assert_array_equal(np.asarray(o3), np.asarray(o))
    np.testing.assert_array_equal(np.asarray(lse3), np.asarray(lse))


def test_auto_backend_is_triton_off_hopper_and_in_interpret_mode():
    q = jnp.zeros((1, 8, 2, 64), jnp.bfloat16)
    assert choose_backend(q, q, q, causal=False, interpret=True) == "triton"
    assert choose_backend(q, q, q, causal=False, backend="triton") == "triton"
    # a Triton-only knob keeps "auto" on Triton, wherever it runs
    assert choose_backend(q, q, q, causal=False, options=("num_warps",)) == "triton"


@pytest.mark.parametrize(
    ("shape", "dtype", "interpret", "match"),
    [
        ((1, 8, 2, 64), jnp.bfloat16, True, "interpret"),
        ((1, 8, 2, 320), jnp.bfloat16, False, "d=320"),
        ((1, 8, 2, 64), jnp.float32, False, "float32"),
    ],
)
def test_forced_mosaic_names_the_limit(shape, dtype, interpret, match):
    q = jnp.zeros(shape, dtype)
    with pytest.raises(ValueError, match=match):
        flash_attention(q, q, q, backend="mosaic", interpret=interpret)


def test_heuristic_config_is_the_tuned_table():
    assert flash_triton.heuristic_config(128, True) == flash_triton.Config(128, 128, 8, 3)
    assert flash_triton.heuristic_config(96, False) == flash_triton.Config(128, 64, 4, 2)
    assert flash_triton.heuristic_config(40, False) == flash_triton.Config(64, 64, 4, 3)
    assert flash_triton.native_head_dim(96) == 128 and flash_triton.native_head_dim(8) == 16
    with pytest.raises(ValueError, match="num_warps=3"):
        flash_triton.Config(num_warps=3)


@pytest.mark.parametrize(
    ("kwargs", "shapes", "match"),
    [
        ({}, ((1, 8, 2, 264), (1, 8, 2, 264)), "head_dim"),
        ({}, ((1, 8, 3, 16), (1, 8, 2, 16)), "h=3"),
        ({"block_q": 48}, ((1, 8, 2, 16), (1, 8, 2, 16)), "block_q=48"),
        ({"block_k": 8}, ((1, 8, 2, 16), (1, 8, 2, 16)), "block_k=8"),
        ({"backend": "cuda"}, ((1, 8, 2, 16), (1, 8, 2, 16)), "backend='cuda'"),
    ],
)
def test_bad_arguments_raise_value_error(kwargs, shapes, match):
    q = jnp.zeros(shapes[0], jnp.float32)
    k = jnp.zeros(shapes[1], jnp.float32)
    with pytest.raises(ValueError, match=match):
        flash_attention(q, k, k, interpret=True, **kwargs)


def test_integer_dtype_is_rejected():
    x = jnp.zeros((1, 8, 2, 16), jnp.int32)
    with pytest.raises(ValueError, match="int32"):
        flash_attention(x, x, x, interpret=True)


@needs_gpu
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(
    ("d", "blocks"), [(64, (128, 64)), (128, (128, 64)), (128, (64, 128)), (256, (64, 32))]
)
def test_gpu_long_sequence(d, blocks, causal):
    q, k, v = inputs(d, 2, 1000, 1000, 8, 2, d, "bfloat16")
    check(q, k, v, causal=causal, block_q=blocks[0], block_k=blocks[1])


@needs_gpu
def test_gpu_default_config_fp16():
    q, k, v = inputs(9, 1, 2048, 2048, 4, 4, 128, "float16")
    o = flash_attention(q, k, v, causal=True)
    ref, _ = attention_float64(q, k, v, causal=True)
    assert rel_err(o, ref) < TOLERANCE["float16"]


def test_non_positive_scale_is_rejected():
    x = jnp.zeros((1, 8, 2, 16), jnp.float32)
    with pytest.raises(ValueError, match="sm_scale=-1.0"):
        flash_attention(x, x, x, sm_scale=-1.0, interpret=True)


def test_routing_rows_send_their_shapes_to_their_backend(monkeypatch):
    api = importlib.import_module("pallas_kernels.flash_attention")

    row = dict(head_dim_min=64, head_dim_max=64, causal=True, n_below=4096, backend="triton")
    monkeypatch.setattr(api, "routing_table", lambda: {"default": "mosaic", "route": [row]})
    assert api.routed_backend((1, 1024, 8, 64), (1, 1024, 8, 64), True) == "triton"
    assert api.routed_backend((1, 4096, 8, 64), (1, 4096, 8, 64), True) == "mosaic"
    assert api.routed_backend((1, 1024, 8, 64), (1, 1024, 8, 64), False) == "mosaic"
    assert api.routed_backend((1, 1024, 8, 48), (1, 1024, 8, 48), True) == "triton"  # d -> 64


def test_the_committed_routing_table_reads():
    api = importlib.import_module("pallas_kernels.flash_attention")

    table = api.routing_table()
    assert table["default"] in ("mosaic", "triton") and table["sources"]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_auto_runs_every_head_dim_cudnn_accepts(dtype):
    """cuDNN takes head dims that are multiples of 8 up to 256: auto has a backend for
    each (Triton pads to a power of two; Mosaic, on Hopper, to a multiple of 16)."""
    for d in range(8, 257, 8):
        q = jax.ShapeDtypeStruct((1, 8, 2, d), getattr(jnp, dtype))
        backend = choose_backend(q, q, q, causal=True)
        module = (
            flash_triton
            if backend == "triton"
            else importlib.import_module("pallas_kernels.flash_mosaic")
        )
        assert module.supported(q, q, q, causal=True) is None, (d, backend)
