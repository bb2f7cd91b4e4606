"""Sliding windows in the kernels: the tile ranges every kernel loops over, and the
``window`` argument's checks.

``_common.tile_range`` is what the Triton forward, both Triton backward passes and the
Mosaic forward take their K/V (or Q) loop bounds from; here it is checked against the
element mask built by brute force: the visited tiles are exactly those holding a visible
key, the unmasked ones exactly those every row sees whole. The kernels' outputs under a
window are checked against the float64 reference in tests/backend_base.py.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pallas_kernels import flash_attention
from pallas_kernels._common import tile_range, visible_bounds, window_bounds

SIDE = st.one_of(st.none(), st.integers(0, 300))


@settings(derandomize=True, deadline=None, max_examples=300)
@given(
    first_row=st.integers(0, 600),
    rows=st.sampled_from([16, 32, 64, 128]),
    tile=st.sampled_from([16, 32, 64, 128]),
    kv_len=st.integers(1, 700),
    left=SIDE,
    right=st.one_of(SIDE, st.integers(-80, -1)),  # negative: the tests' shifted diagonal
    queries=st.one_of(st.none(), st.integers(1, 800)),
)
def test_tile_range_is_exactly_the_tiles_with_a_visible_key(
    first_row, rows, tile, kv_len, left, right, queries
):
    """... counting only the rows below ``queries`` (a last partial block of queries)."""
    assume(left is None or right is None or left + right >= 0)  # every row sees a range
    assume(queries is None or first_row < queries)
    n_tiles = -(-kv_len // tile)
    lo, lo_full, hi_full, hi = (
        int(x)
        for x in tile_range(
            first_row, rows=rows, tile=tile, length=kv_len, left=left, right=right, queries=queries
        )
    )
    assert lo <= lo_full <= hi_full <= hi <= n_tiles
    i = np.arange(first_row, min(first_row + rows, queries or first_row + rows))[:, None]
    j = np.arange(n_tiles * tile)[None, :]
    seen = (j < kv_len) & (i >= 0)  # [rows, keys]
    if left is not None:
        seen &= j >= i - left
    if right is not None:
        seen &= j <= i + right
    per_tile = seen.reshape(len(i), n_tiles, tile)  # [rows, tile index, key in tile]
    any_seen = np.flatnonzero(per_tile.any(axis=(0, 2)))
    all_seen = np.flatnonzero(per_tile.all(axis=(0, 2)))
    if any_seen.size:  # the visited range is the visible tiles, no more (one range)
        assert (lo, hi) == (any_seen[0], any_seen[-1] + 1)
        assert any_seen.size == hi - lo
    else:
        assert lo == hi
    if all_seen.size:
        assert (lo_full, hi_full) == (all_seen[0], all_seen[-1] + 1)
    else:
        assert lo_full == hi_full


@pytest.mark.parametrize(
    ("window", "causal", "bounds"),
    [
        (None, False, (None, None)),
        (None, True, (None, 0)),
        (128, True, (128, 0)),
        (128, False, (128, 128)),
        ((10, 3), False, (10, 3)),
        ((10, None), True, (10, 0)),
        ((None, 5), False, (None, 5)),
        ((None, None), False, (None, None)),
        ((0, 4), False, (0, 4)),
    ],
)
def test_window_semantics_are_local_window_size(window, causal, bounds):
    """An int W is (W, 0) causal and (W, W) otherwise, as jax.nn's local_window_size and
    perfmodel's masks read it; the checked form passes through unchanged."""
    assert visible_bounds(causal, window) == bounds
    checked = window_bounds(window, causal)
    assert visible_bounds(causal, checked) == bounds


@pytest.mark.parametrize(
    ("window", "causal", "match"),
    [
        (0, False, "window=0"),
        (-3, True, "window=-3"),
        (2.5, False, "window=2.5"),
        (True, False, "window=True"),
        ((4, 2), True, r"window=\(4, 2\): a causal mask has no right window"),
        ((-1, 4), False, r"window=\(-1, 4\)"),
        ((1, 2, 3), False, r"window=\(1, 2, 3\)"),
        ((0, 0), False, r"window=\(0, 0\)"),
    ],
)
def test_bad_window_is_a_value_error_naming_it(window, causal, match):
    q = jnp.ones((1, 16, 1, 16), jnp.float32)
    with pytest.raises(ValueError, match=match):
        flash_attention(q, q, q, causal=causal, window=window, interpret=True)
