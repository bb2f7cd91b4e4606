"""Where fewer queries than keys sit under a sliding window: the model's two alignments
(``perfmodel.costs.masks.query_offset``) against what runs.

``top_left`` is what ``jax.nn.dot_product_attention(local_window_size=...)`` and our
kernels' ``window=`` compute (query i at key position i): checked numerically against
jax.nn (XLA on CPU), against the kernels' specification (``reference.visible_mask``) and
against the K/V tiles the kernels loop over (``_common.tile_range``). ``bottom_right`` (the
default: query i at i + kv_len - n) is what a KV cache computes at decode: the new token
against the cache's last keys; checked against our kernel run on that slice of the cache,
unmasked, as a rolling cache (and ``perfmodel estimate``'s decode) runs it.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pallas_kernels import flash_attention
from pallas_kernels._common import tile_range
from pallas_kernels.reference import visible_mask
from perfmodel.costs import masks

SIDE = st.integers(0, 90)


@st.composite
def shapes(draw):
    n, m = draw(st.integers(1, 200)), draw(st.integers(1, 200))
    left, right = draw(st.one_of(st.none(), SIDE)), draw(st.one_of(st.none(), SIDE))
    if left == right == 0 or (left is None and right is None):
        left = 1
    return n, m, left, right


@settings(derandomize=True, deadline=None, max_examples=150)
@given(shapes(), st.sampled_from([16, 32, 64, 128]), st.sampled_from([16, 64, 128]))
def test_top_left_is_the_kernels_mask_and_tiles(shape, bq, bk):
    """Every n, kv_len (more queries than keys too): the model's top_left element mask is
    the kernels' specification, and its visited tiles are the ranges ``tile_range`` gives
    each Q block's rows (the rows inside n)."""
    n, m, left, right = shape
    mask = masks.mask_of(n, m, window=(left, right), window_align="top_left")
    assert (masks.element_mask(mask, n, m) == visible_mask(n, m, window=(left, right))).all()
    tiles = masks.tile_mask(mask, n=n, m=m, block_q=bq, block_k=bk)
    for i in range(math.ceil(n / bq)):
        rows = min(bq, n - i * bq)
        lo, _, _, hi = (
            int(x) for x in tile_range(i * bq, rows=rows, tile=bk, length=m, left=left, right=right)
        )
        assert np.flatnonzero(tiles[i]).tolist() == list(range(lo, hi))


@pytest.mark.parametrize(
    ("n", "m", "window"), [(1, 40, (6, 0)), (5, 37, (4, 3)), (30, 12, (2, 5)), (9, 50, (None, 7))]
)
def test_top_left_is_what_jax_nn_local_window_size_runs(n, m, window):
    """jax.nn's weights under ``local_window_size``, read off with equal scores and V the
    identity (O[i, j] = 1/keys seen where key j is seen, else 0), are the model's
    top_left mask, and not its bottom_right one."""
    left, right = window
    big = m + n  # jax.nn takes no None side: a side past every key
    q = jnp.zeros((1, n, 1, m), jnp.float32)
    v = jnp.eye(m, dtype=jnp.float32)[None, :, None, :]
    o = jax.nn.dot_product_attention(
        q,
        q[:, :1].repeat(m, axis=1),
        v,
        local_window_size=(big if left is None else left, big if right is None else right),
    )
    seen = np.asarray(o[0, :, 0, :]) > 0
    top_left = masks.element_mask(masks.mask_of(n, m, window=window, window_align="top_left"), n, m)
    rows = top_left.any(axis=1)  # a row that sees no key: jax.nn spreads it over all keys
    assert (seen[rows] == top_left[rows]).all()
    if n < m:
        bottom = masks.element_mask(masks.mask_of(n, m, window=window), n, m)
        assert not (seen == bottom).all()


@pytest.mark.parametrize(("m", "left"), [(300, 40), (257, 100), (64, 200)])
def test_bottom_right_is_what_a_kv_cache_computes_at_decode(m, left):
    """One new token against m cached keys, window (left, 0): the model's bottom_right
    mask equals attention over the cache's last left + 1 keys, unmasked, as our kernel
    runs it (Triton, interpret mode); the top_left mask would see the first keys."""
    rng = np.random.default_rng(m)
    q = rng.standard_normal((1, 1, 2, 32)).astype(np.float32)
    k, v = (rng.standard_normal((1, m, 1, 32)).astype(np.float32) for _ in range(2))
    mask = masks.mask_of(1, m, window=(left, 0))
    seen = masks.element_mask(mask, 1, m)[0]
    kept = slice(max(0, m - 1 - left), m)
    assert np.flatnonzero(seen).tolist() == list(range(m))[kept]
    ours = flash_attention(
        jnp.asarray(q), jnp.asarray(k[:, kept]), jnp.asarray(v[:, kept]), interpret=True
    )
    scores = np.einsum("bqhd,bkd->bhqk", q.astype(np.float64), k[:, :, 0]) / math.sqrt(32)
    p = np.exp(np.where(seen, scores, -np.inf) - scores.max(axis=-1, keepdims=True))
    ref = np.einsum("bhqk,bkd->bqhd", p / p.sum(axis=-1, keepdims=True), v[:, :, 0])
    assert np.allclose(np.asarray(ours), ref, atol=2e-3)
