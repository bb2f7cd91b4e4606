"""Paged decode attention equals the contiguous reference: layout changes, maths does not.

On CPU the kernel runs in the Pallas interpreter; on a GPU (``jax.default_backend() ==
"gpu"``) the same tests compile the Triton kernel (page sizes and head dims >= 16 there).
The page pool is shuffled and padded with garbage, so a wrong page id or a missing mask
changes the answer.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pallas_kernels.paged_decode import (
    contiguous_decode_reference,
    paged_decode_attention,
    pages_from_contiguous,
)

ON_GPU = jax.default_backend() == "gpu"
INTERPRET = not ON_GPU
PAGE_SIZES = (16, 32, 64) if ON_GPU else (1, 2, 4, 8, 16, 32)
#: ‖out − ref‖ / ‖ref‖ allowed per dtype (float32 allows the GPU's tf32 dots).
TOLERANCE = {"float32": 2e-3, "float16": 4e-3, "bfloat16": 2e-2}
DTYPES = {"float32": jnp.float32, "float16": jnp.float16, "bfloat16": jnp.bfloat16}


def rel_err(out, ref) -> float:
    out, ref = (np.asarray(x, np.float64) for x in (out, ref))
    return float(np.linalg.norm(out - ref) / np.linalg.norm(ref))


def case(seed, *, b, q_len, h_kv, group, d, page_size, m, dtype="float32"):
    """Random q, contiguous k/v, lengths in [q_len, m], and their shuffled page pools."""
    rng = np.random.default_rng(seed)
    dt = DTYPES[dtype]
    q = rng.standard_normal((b, q_len, h_kv * group, d))
    k = rng.standard_normal((b, m, h_kv, d))
    v = rng.standard_normal((b, m, h_kv, d))
    q, k, v = (np.asarray(jnp.asarray(x, dt)) for x in (q, k, v))
    lengths = rng.integers(q_len, m + 1, size=b).astype(np.int32)
    lengths[0] = m  # one full-length sequence
    k_pages, table = pages_from_contiguous(k, page_size, rng=rng)
    v_pages, _ = pages_from_contiguous(v, page_size, table=table)
    return q, k, v, k_pages, v_pages, table, lengths


@settings(derandomize=True, deadline=None, max_examples=14)
@given(
    seed=st.integers(0, 2**16),
    b=st.integers(1, 3),
    q_len=st.integers(1, 3),
    h_kv=st.sampled_from([1, 2]),
    group=st.sampled_from([1, 2, 4]),
    page_size=st.sampled_from(PAGE_SIZES),
    m=st.integers(3, 150),
    splits=st.integers(1, 3),
)
def test_paged_equals_contiguous(seed, b, q_len, h_kv, group, page_size, m, splits):
    q, k, v, k_pages, v_pages, table, lengths = case(
        seed, b=b, q_len=q_len, h_kv=h_kv, group=group, d=16, page_size=page_size, m=m
    )
    out = paged_decode_attention(
        q, k_pages, v_pages, table, lengths, splits=splits, interpret=INTERPRET
    )
    ref = contiguous_decode_reference(q, k, v, lengths)
    assert out.shape == q.shape and out.dtype == q.dtype
    assert rel_err(out, ref) < TOLERANCE["float32"]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision(dtype):
    q, k, v, k_pages, v_pages, table, lengths = case(
        7, b=2, q_len=1, h_kv=2, group=4, d=64, page_size=16, m=200, dtype=dtype
    )
    out = paged_decode_attention(q, k_pages, v_pages, table, lengths, splits=2, interpret=INTERPRET)
    ref = contiguous_decode_reference(q, k, v, lengths)
    assert out.dtype == q.dtype
    assert rel_err(out, ref) < TOLERANCE[dtype]


def test_reference_matches_float64_softmax():
    """The contiguous reference is itself checked against a float64 numpy softmax."""
    q, k, v, *_, lengths = case(3, b=2, q_len=2, h_kv=1, group=2, d=16, page_size=4, m=9)
    ref = np.asarray(contiguous_decode_reference(q, k, v, lengths), np.float64)
    for i, length in enumerate(lengths):
        for t in range(2):
            visible = int(length) - 2 + t + 1
            for head in range(2):
                s = k[i, :visible, 0].astype(np.float64) @ q[i, t, head] / 4.0
                p = np.exp(s - s.max())
                want = (p / p.sum()) @ v[i, :visible, 0].astype(np.float64)
                np.testing.assert_allclose(ref[i, t, head], want, rtol=1e-4, atol=1e-5)


def test_identity_table_equals_shuffled_table():
    """The same pages at other ids give the same output, bit for bit."""
    q, k, v, k_pages, v_pages, table, lengths = case(
        11, b=2, q_len=1, h_kv=1, group=1, d=16, page_size=16, m=64
    )
    ident = np.arange(table.size, dtype=np.int32).reshape(table.shape)
    k2, _ = pages_from_contiguous(k, 16, table=ident)
    v2, _ = pages_from_contiguous(v, 16, table=ident)
    a = paged_decode_attention(q, k_pages, v_pages, table, lengths, interpret=INTERPRET)
    c = paged_decode_attention(q, k2, v2, ident, lengths, interpret=INTERPRET)
    np.testing.assert_array_equal(np.asarray(a), np.asarray(c))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"page_size": 12}, "page_size=12"),
        ({"lengths": [99, 1]}, "lengths=99"),
        ({"lengths": [0, 1]}, "lengths=0"),
        ({"h": 3}, "h=3"),
        ({"table_entry": 57}, "entry 57"),
        ({"splits": 0}, "splits=0"),
    ],
)
def test_bad_input_names_the_value(change, message):
    page_size = change.get("page_size", 16)
    h = change.get("h", 2)
    q = np.zeros((2, 1, h, 16), np.float32)
    pages = np.zeros((4, page_size, 2, 16), np.float32)
    table = np.array([[0, 1], [2, 3]], np.int32)
    if "table_entry" in change:
        table[1, 0] = change["table_entry"]
    lengths = np.array(change.get("lengths", [20, 5]), np.int32)
    with pytest.raises(ValueError, match=message):
        paged_decode_attention(
            q, pages, pages, table, lengths, splits=change.get("splits", 1), interpret=INTERPRET
        )


@pytest.mark.skipif(not ON_GPU, reason="needs a GPU: compiles the Triton kernel")
def test_gpu_long_sequences_bf16():
    """Shapes of the benchmark: long KV, GQA 8:1, d=128, several splits."""
    q, k, v, k_pages, v_pages, table, lengths = case(
        5, b=4, q_len=1, h_kv=8, group=4, d=128, page_size=64, m=8192, dtype="bfloat16"
    )
    for splits in (1, 4):
        out = paged_decode_attention(q, k_pages, v_pages, table, lengths, splits=splits)
        ref = contiguous_decode_reference(q, k, v, lengths)
        assert rel_err(out, ref) < TOLERANCE["bfloat16"]
