"""The naive three-step baseline and the plain-JAX reference against float64 numpy."""

from __future__ import annotations

import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pallas_kernels.naive import (
    attention_float64,
    naive_attention,
    pv_step,
    reference_attention,
    scores_step,
    softmax_step,
)

TOLERANCE = {"float32": 2e-3, "float16": 4e-3, "bfloat16": 2e-2}
DTYPES = {"float32": jnp.float32, "float16": jnp.float16, "bfloat16": jnp.bfloat16}


def inputs(seed, b, n, kv_len, h, h_kv, d, dtype):
    rng = np.random.default_rng(seed)
    shapes = [(b, n, h, d), (b, kv_len, h_kv, d), (b, kv_len, h_kv, d)]
    return tuple(jnp.asarray(rng.standard_normal(s), DTYPES[dtype]) for s in shapes)


def rel_err(out, ref) -> float:
    out = np.asarray(out, np.float64)
    return float(np.linalg.norm(out - ref) / np.linalg.norm(ref))


@settings(derandomize=True, deadline=None, max_examples=12)
@given(
    n=st.sampled_from([1, 5, 32, 70]),
    kv_extra=st.sampled_from([0, 3]),
    d=st.sampled_from([16, 64, 128]),
    heads=st.sampled_from([(1, 1), (4, 2), (4, 1)]),
    causal=st.booleans(),
    dtype=st.sampled_from(["float32", "float16", "bfloat16"]),
)
def test_naive_and_reference_match_float64(n, kv_extra, d, heads, causal, dtype):
    q, k, v = inputs(n + d, 2, n, n + kv_extra, *heads, d, dtype)
    ref, _ = attention_float64(q, k, v, causal=causal)
    for fn in (naive_attention, reference_attention):
        out = fn(q, k, v, causal=causal)
        assert out.shape == q.shape and out.dtype == q.dtype
        assert rel_err(out, ref) < TOLERANCE[dtype], fn.__name__


def test_float64_reference_is_softmax_attention():
    q, k, v = (np.random.default_rng(1).standard_normal((1, 3, 1, 2)) for _ in range(3))
    out, lse = attention_float64(q, k, v)
    s = q[0, :, 0] @ k[0, :, 0].T / math.sqrt(2)
    p = np.exp(s) / np.exp(s).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(out[0, :, 0], p @ v[0, :, 0], rtol=1e-12)
    np.testing.assert_allclose(lse[0, 0], np.log(np.exp(s).sum(axis=1)), rtol=1e-12)


def _entry_layout(compiled_text: str) -> str:
    match = re.search(r"entry_computation_layout=\{(.*)\}", compiled_text)
    assert match, "no entry_computation_layout in the compiled HLO"
    return match.group(1)


def _shape(dtype: str, *dims: int) -> str:
    return f"{dtype}[{','.join(map(str, dims))}]"


@pytest.mark.parametrize("causal", [False, True])
def test_each_step_materialises_s_and_p(causal):
    b, n, h, h_kv, d = 2, 64, 4, 2, 32
    q, k, v = inputs(0, b, n, n, h, h_kv, d, "bfloat16")
    s_shape = _shape("bf16", b, h, n, n)
    step1 = scores_step.lower(q, k, causal=causal, sm_scale=0.1).compile().as_text()
    s = scores_step(q, k, causal=causal, sm_scale=0.1)
    step2 = softmax_step.lower(s).compile().as_text()
    step3 = pv_step.lower(softmax_step(s), v).compile().as_text()
    # each compiled executable's signature: S is step 1's output and step 2's input,
    # P is step 2's output and step 3's input, both bf16 [b, h, n, n] in device memory
    params1, result1 = _entry_layout(step1).split("->")
    params2, result2 = _entry_layout(step2).split("->")
    params3, result3 = _entry_layout(step3).split("->")
    assert s_shape in result1 and s_shape not in params1
    assert s_shape in params2 and s_shape in result2
    assert s_shape in params3 and _shape("bf16", b, n, h, d) in result3
    assert s.shape == (b, h, n, n) and s.dtype == jnp.bfloat16


def test_naive_scores_are_masked_with_minus_inf():
    q, k, _ = inputs(2, 1, 6, 6, 1, 1, 16, "float32")
    s = np.asarray(scores_step(q, k, causal=True, sm_scale=1.0))
    assert (s[0, 0][np.triu_indices(6, 1)] == -np.inf).all()
    assert np.isfinite(s[0, 0][np.tril_indices(6)]).all()


def test_naive_rejects_bad_head_ratio():
    q = jnp.zeros((1, 4, 3, 16))
    k = jnp.zeros((1, 4, 2, 16))
    with pytest.raises(ValueError, match="h=3"):
        naive_attention(q, k, k)


def test_reference_is_jittable_for_gqa():
    q, k, v = inputs(4, 1, 16, 16, 4, 1, 16, "float32")
    out = jax.jit(reference_attention, static_argnames="causal")(q, k, v, causal=True)
    ref, _ = attention_float64(q, k, v, causal=True)
    assert rel_err(out, ref) < 1e-5
