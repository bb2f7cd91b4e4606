"""The Triton flash kernel and the entry point's dispatch, against the float64 reference.

On CPU the kernel runs in the Pallas interpreter; on a GPU (``jax.default_backend()
== "gpu"``) the same tests run the compiled Triton kernel, and a few GPU-only tests
run larger shapes. Every run starts from NaN-poisoned output buffers (the test entry
point ``flash_triton.forward_with_test_hooks``). The Mosaic kernel: tests/test_flash_mosaic.py.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pallas_kernels import flash_attention, flash_attention_forward
from pallas_kernels.flash_attention import choose_backend
from pallas_kernels.flash_triton import forward_with_test_hooks
from pallas_kernels.reference import attention_float64

ON_GPU = jax.default_backend() == "gpu"
INTERPRET = not ON_GPU
needs_gpu = pytest.mark.skipif(
    not ON_GPU, reason="needs a GPU: compiles the Triton kernel (CPU runs interpret mode)"
)

#: ‖out − ref‖ / ‖ref‖ allowed per input dtype (float32 allows the GPU's tf32 dots).
TOLERANCE = {"float32": 2e-3, "float16": 4e-3, "bfloat16": 2e-2}
DTYPES = {"float32": jnp.float32, "float16": jnp.float16, "bfloat16": jnp.bfloat16}


def rel_err(out, ref) -> float:
    out = np.asarray(out, np.float64)
    return float(np.linalg.norm(out - ref) / np.linalg.norm(ref))


def inputs(seed, b, n, kv_len, h, h_kv, d, dtype, scale=1.0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((b, n, h, d)) * scale
    k = rng.standard_normal((b, kv_len, h_kv, d))
    v = rng.standard_normal((b, kv_len, h_kv, d))
    return tuple(jnp.asarray(x, DTYPES[dtype]) for x in (q, k, v))


def run_poisoned(q, k, v, *, causal, block_q, block_k, sm_scale=None, diagonal_offset=0):
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
        ((1, 8, 2, 32), jnp.bfloat16, False, "d=32"),
        ((1, 8, 2, 64), jnp.float32, False, "float32"),
    ],
)
def test_forced_mosaic_names_the_limit(shape, dtype, interpret, match):
    q = jnp.zeros(shape, dtype)
    with pytest.raises(ValueError, match=match):
        flash_attention(q, q, q, backend="mosaic", interpret=interpret)


@pytest.mark.parametrize("causal", [False, True])
def test_large_logits_stay_finite(causal):
    # scores of order 1e4: exp would overflow without the running max m_i
    q, k, v = inputs(5, 1, 40, 40, 2, 2, 32, "float32", scale=1000.0)
    o, lse = run_poisoned(q, k, v, causal=causal, block_q=16, block_k=16)
    assert np.isfinite(np.asarray(o)).all() and np.isfinite(np.asarray(lse)).all()
    ref_o, ref_lse = attention_float64(q, k, v, causal=causal)
    assert np.abs(ref_lse).max() > 1e3
    assert rel_err(o, ref_o) < TOLERANCE["float32"]
    np.testing.assert_allclose(np.asarray(lse), ref_lse, rtol=1e-4)


def test_fully_masked_rows_give_zero_and_no_nan():
    # diagonal shifted down by 5: rows 0..4 see no key at all; rows past n are padding
    q, k, v = inputs(6, 1, 40, 40, 2, 1, 16, "bfloat16")
    o, lse = run_poisoned(q, k, v, causal=True, block_q=16, block_k=16, diagonal_offset=-5)
    o, lse = np.asarray(o, np.float32), np.asarray(lse)
    assert not np.isnan(o).any() and not np.isnan(lse).any()
    assert (o[:, :5] == 0).all() and (lse[:, :, :5] == -np.inf).all()
    # the rest equals attention over keys j <= i - 5
    ref_o, ref_lse = attention_float64(q[:, 5:], k[:, :35], v[:, :35], causal=True)
    assert rel_err(o[:, 5:], ref_o) < TOLERANCE["bfloat16"]
    np.testing.assert_allclose(lse[:, :, 5:], ref_lse, rtol=1e-3, atol=1e-2)


@pytest.mark.parametrize(
    ("kwargs", "shapes", "match"),
    [
        ({}, ((1, 8, 2, 48), (1, 8, 2, 48)), "head_dim"),
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
