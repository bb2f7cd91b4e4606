"""Mask tile counts (perfmodel.costs.masks) against the element mask, by brute force.

The brute force here builds each mask element by element from its definition (a query
``i`` sees key ``j`` when ...), walks every tile of a kernel and every thread block of
a wave, and counts. It shares no code with the module.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.costs import masks
from perfmodel.errors import PerfmodelError


def allowed(i, j, *, causal=False, left=None, right=None, docs=None, offset=0):
    """Whether query i (at position i + offset: decode's queries are the last of the
    keys' positions) sees key j, straight from the definitions."""
    i = i + offset
    if causal and j > i:
        return False
    if left is not None and j < i - left:
        return False
    if right is not None and j > i + right:
        return False
    if docs is not None:
        starts = np.cumsum([0, *docs])
        doc_i = np.searchsorted(starts, i, side="right")
        doc_j = np.searchsorted(starts, j, side="right")
        if doc_i != doc_j:
            return False
    return True


def brute(element, n, m, bq, bk, pack=1, groups=1, resident=1):
    """Walk the tiles: counts of perfmodel.costs.masks.Visited by hand."""
    t_r, t_c = math.ceil(n / bq), math.ceil(m / bk)
    tiles = scores = kv_rows = 0
    readers = {j: set() for j in range(t_c)}
    for i in range(t_r):
        for j in range(t_c):
            block = element[i * bq : (i + 1) * bq, j * bk : (j + 1) * bk]
            if block.any():
                tiles += 1
                scores += pack * block.size
                kv_rows += block.shape[1]
                readers[j].add(i)
    touched = sum(min(bk, m - j * bk) for j in range(t_c) if readers[j])
    wave_rows = 0
    for j in range(t_c):
        waves = {(g * t_r + i) // resident for g in range(groups) for i in readers[j]}
        wave_rows += len(waves) * min(bk, m - j * bk)
    return dict(tiles=tiles, scores=scores, kv_rows=kv_rows, touched=touched, waves=wave_rows)


def brute_backward(element, n, m, bq, bk, resident=1):
    """The dK/dV kernel's walk by hand: one program per K block (in order, ``resident``
    a wave), the Q blocks of its visited tiles streamed past it."""
    t_r, t_c = math.ceil(n / bq), math.ceil(m / bk)
    q_rows = 0
    readers = {i: set() for i in range(t_r)}  # Q block -> the K-block programs reading it
    for j in range(t_c):
        for i in range(t_r):
            if element[i * bq : (i + 1) * bq, j * bk : (j + 1) * bk].any():
                q_rows += min(bq, n - i * bq)
                readers[i].add(j)
    rows = [min(bq, n - i * bq) for i in range(t_r)]
    touched = sum(rows[i] for i in range(t_r) if readers[i])
    waves = sum(len({j // resident for j in readers[i]}) * rows[i] for i in range(t_r))
    return dict(kv_rows=q_rows, touched=touched, waves=waves)


def counts(v):
    return dict(
        tiles=v.tiles,
        scores=v.scores,
        kv_rows=v.kv_rows,
        touched=v.kv_touched,
        waves=v.kv_wave_rows,
    )


def element_mask(n, m, **kw):
    return np.array([[allowed(i, j, **kw) for j in range(m)] for i in range(n)])


def random_docs(draw, n):
    cuts = sorted(draw(st.sets(st.integers(1, n - 1), max_size=4))) if n > 1 else []
    edges = [0, *cuts, n]
    return [b - a for a, b in zip(edges, edges[1:], strict=False)]


@st.composite
def cases(draw):
    n = draw(st.integers(1, 300))
    causal = draw(st.booleans())
    left = draw(st.one_of(st.none(), st.integers(0, 320)))
    right = 0 if causal else draw(st.one_of(st.none(), st.integers(0, 320)))
    if left == 0 and right == 0:
        left = 1
    docs = random_docs(draw, n) if draw(st.booleans()) else None
    bq = draw(st.sampled_from([16, 32, 64, 48, 128]))
    bk = draw(st.sampled_from([16, 32, 64, 80, 128]))
    return n, causal, left, right, docs, bq, bk


@settings(derandomize=True, deadline=None, max_examples=120)
@given(cases(), st.sampled_from([1, 2, 4]), st.integers(1, 7))
def test_window_and_document_tiles_against_brute_force(case, groups, resident):
    n, causal, left, right, docs, bq, bk = case
    window = None if left is None and right is None else (left, right)
    if causal and window is not None:
        window = (left, 0)
    mask = masks.mask_of(n, n, causal=causal, window=window, segments=docs)
    got = masks.visited(mask, n=n, m=n, block_q=bq, block_k=bk, groups=groups, resident=resident)
    element = element_mask(n, n, causal=causal, left=left, right=right, docs=docs)
    assert counts(got) == brute(element, n, n, bq, bk, groups=groups, resident=resident)
    assert masks.keys_seen(mask, n, n) == element.sum()
    walks = masks.backward_visited(mask, n=n, m=n, block_q=bq, block_k=bk, resident=resident)
    assert counts(walks.dq) == brute(element, n, n, bq, bk, resident=resident)
    dkdv = counts(walks.dkdv)
    assert (dkdv.pop("tiles"), dkdv.pop("scores")) == (got.tiles, got.scores)
    assert dkdv == brute_backward(element, n, n, bq, bk, resident=resident)


@settings(derandomize=True, deadline=None, max_examples=60)
@given(
    st.integers(1, 40),
    st.integers(1, 400),
    st.integers(1, 300),
    st.booleans(),
    st.sampled_from([16, 32, 64]),
    st.sampled_from([16, 64, 80]),
    st.integers(1, 5),
    st.sampled_from(["bottom_right", "top_left"]),
)
def test_decode_window_against_brute_force(n, extra, window, two_sided, bq, bk, resident, align):
    """Fewer queries than keys: with ``bottom_right`` (decode, chunked prefill) the queries
    are the last n positions, with ``top_left`` (jax.nn, our kernels, cross-attention) the
    first n, and then also more queries than keys (the rows past kv_len + window see no
    key); each sees the ``window`` keys before it (and after, two-sided)."""
    m = n + extra - 1
    if align == "top_left" and extra % 3 == 0:  # more queries than keys (extra >= 3)
        n, m = m, n
    mask = masks.mask_of(n, m, window=window if two_sided else (window, 0), window_align=align)
    right = window if two_sided else 0
    offset = m - n if align == "bottom_right" else 0
    element = element_mask(n, m, left=window, right=right, offset=offset)
    got = masks.visited(mask, n=n, m=m, block_q=bq, block_k=bk, resident=resident)
    assert counts(got) == brute(element, n, m, bq, bk, resident=resident)
    assert masks.keys_seen(mask, n, m) == element.sum()
    walks = masks.backward_visited(mask, n=n, m=m, block_q=bq, block_k=bk, resident=resident)
    dkdv = counts(walks.dkdv)
    del dkdv["tiles"], dkdv["scores"]
    assert dkdv == brute_backward(element, n, m, bq, bk, resident=resident)


def test_packed_heads_count_positions_per_tile():
    n, window = 256, 40
    mask = masks.mask_of(n, n, causal=True, window=window)
    got = masks.visited(mask, n=n, m=n, block_q=64, block_k=32, pack=4)
    element = element_mask(n, n, causal=True, left=window)
    assert counts(got) == brute(element, n, n, 16, 32, pack=4)  # 64 rows = 16 positions x 4 heads


@pytest.mark.parametrize(("bq", "bk", "size"), [(64, 64, 64), (128, 64, 32), (32, 128, 64)])
def test_block_mask_array_against_brute_force(bq, bk, size):
    rng = np.random.default_rng(7)
    n, m = 300, 260
    tiles = rng.random((math.ceil(n / size), math.ceil(m / size))) < 0.3
    mask = masks.mask_of(n, m, block_mask=tiles, block_size=size)
    element = np.repeat(np.repeat(tiles, size, 0), size, 1)[:n, :m]
    got = masks.visited(mask, n=n, m=m, block_q=bq, block_k=bk, resident=3)
    assert counts(got) == brute(element, n, m, bq, bk, resident=3)
    walks = masks.backward_visited(mask, n=n, m=m, block_q=bq, block_k=bk, resident=3)
    assert counts(walks.dq) == brute(element, n, m, bq, bk, resident=3)
    dkdv = counts(walks.dkdv)
    del dkdv["tiles"], dkdv["scores"]
    assert dkdv == brute_backward(element, n, m, bq, bk, resident=3)


@settings(derandomize=True, deadline=None, max_examples=60)
@given(
    st.integers(1, 300),
    st.integers(1, 320),
    st.one_of(st.none(), st.integers(1, 200)),
    st.sampled_from([16, 32, 64, 48]),
    st.sampled_from([16, 64, 80]),
    st.integers(1, 4),
    st.integers(1, 3),
)
def test_prefix_lm_counted_by_its_range_is_the_mask_mod_by_brute_force(
    n, prefix, left, bq, bk, resident, groups
):
    """masks.PrefixLM is counted from its key range at every n (what sweep and the
    explorer use); the brute force evaluates the bare mask_mod on every score (with a
    window too), and both walks of the backward."""
    pl = masks.PrefixLM(prefix)
    window = None if left is None else (left, left)
    ranged = masks.mask_of(n, n, block_mask=pl, window=window)
    element = np.array(
        [[(j <= i or j < prefix) and allowed(i, j, left=left, right=left) for j in range(n)]
         for i in range(n)]
    )  # fmt: skip
    got = masks.visited(ranged, n=n, m=n, block_q=bq, block_k=bk, groups=groups, resident=resident)
    want = brute(element, n, n, bq, bk, groups=groups, resident=resident)
    assert counts(got) == want
    assert masks.keys_seen(ranged, n, n) == element.sum()
    walks = masks.backward_visited(ranged, n=n, m=n, block_q=bq, block_k=bk, resident=resident)
    dkdv = counts(walks.dkdv)
    del dkdv["tiles"], dkdv["scores"]
    assert dkdv == brute_backward(element, n, n, bq, bk, resident=resident)
    # the split rule's count: the most K blocks a Q block visits
    walked = masks.kv_blocks_walked(ranged, n=n, m=n, block_q=bq, block_k=bk)
    assert walked == max(
        len({j // bk for j in np.flatnonzero(element[i : i + bq].any(axis=0))})
        for i in range(0, n, bq)
    )


def test_callable_mask_mod_as_attention_gym_writes_it():
    def prefix_lm(b, h, q_idx, kv_idx):  # bidirectional over a 50-token prefix, then causal
        return (kv_idx <= q_idx) | (kv_idx < 50)

    n = 200
    mask = masks.mask_of(n, n, block_mask=prefix_lm)
    element = np.array([[j <= i or j < 50 for j in range(n)] for i in range(n)])
    got = masks.visited(mask, n=n, m=n, block_q=32, block_k=64, resident=2)
    assert counts(got) == brute(element, n, n, 32, 64, resident=2)


def test_dense_and_causal_masks_give_the_dense_counts():
    n, bq, bk = 1024, 128, 64
    full = masks.visited(masks.mask_of(n, n), n=n, m=n, block_q=bq, block_k=bk, resident=3)
    t_r, t_c = n // bq, n // bk
    assert (full.tiles, full.scores, full.kv_rows) == (t_r * t_c, n * n, t_r * n)
    assert full.kv_wave_rows == math.ceil(t_r / 3) * n  # every wave reads every row
    causal = masks.visited(masks.mask_of(n, n, causal=True), n=n, m=n, block_q=bq, block_k=bk)
    # Q block i needs ceil((i+1)·B_r/B_c) K blocks: sum over i
    assert causal.tiles == sum(math.ceil((i + 1) * bq / bk) for i in range(t_r))


def test_window_work_is_linear_in_n():
    window, bq, bk = 4095, 128, 128
    for n in (2**14, 2**15, 2**16):
        v = masks.visited(
            masks.mask_of(n, n, causal=True, window=window), n=n, m=n, block_q=bq, block_k=bk
        )
        # Q block i sees keys from 128·i - 4095 = 128·(i - 32) + 1: K blocks i-32 .. i, 33 of
        # them, except the first 32 Q blocks (i + 1 each): 33·T_r - 32·33/2 tiles in all.
        t_r = n // bq
        assert v.tiles == 33 * t_r - 32 * 33 // 2
        assert v.scores == v.tiles * bq * bk


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(window=0), "window=0"),
        (dict(window=-5), "window=-5"),
        (dict(window=(3, -1)), "window=-1"),
        (dict(window=4, causal=True, segments=[10, 20]), "sum to 30, not n=64"),
        (dict(segments=[0, 64]), "positive"),
        (dict(segments="abc"), "segments='abc'"),
        (dict(block_mask=np.ones((3, 3), bool)), "block_mask of shape (3, 3)"),
        (dict(block_mask=np.ones((1, 1), int)), "dtype int"),
        (dict(window=(0, 0)), "only itself"),
        (dict(window=(4, 2), causal=True), "no right window"),
    ],
)
def test_bad_masks_are_one_clear_error(kwargs, message):
    with pytest.raises(PerfmodelError, match=message.replace("(", r"\(").replace(")", r"\)")):
        masks.mask_of(64, 64, **kwargs)


def test_segments_need_self_attention_and_a_window_n_at_most_kv_len():
    with pytest.raises(PerfmodelError, match="kv_len=32 != n=64"):
        masks.mask_of(64, 32, segments=[64])
    with pytest.raises(PerfmodelError, match="n=64 > kv_len=32"):
        masks.mask_of(64, 32, window=8)
    masks.mask_of(64, 32, window=8, window_align="top_left")  # jax.nn's: the first 64
    with pytest.raises(PerfmodelError, match="window_align='end' must be one of"):
        masks.mask_of(8, 32, window=8, window_align="end")


# --- the flash model under a mask: the dense and causal models are special cases ---------
FIELDS = ("matmul_flops", "vector_flops", "exp_count", "hbm_bytes", "l2_bytes", "tiles")


def _flash_numbers(masked, causal, values, **counts):
    from perfmodel.compile import compiled
    from perfmodel.costs import flash

    kernel = flash.build(causal=causal, launch=True, masked=masked).kernels[0]
    return {f: float(compiled(getattr(kernel, f))(**values, **counts)) for f in FIELDS}


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(("l2", "resident"), [(50 * 2**20, 132), (2**16, 8)])  # fits, spills
@pytest.mark.parametrize("pack", [1, 2])
def test_masked_flash_model_reproduces_the_dense_and_causal_models(causal, l2, resident, pack):
    n, bq, bk, h, h_kv = 1024, 128, 64, 8, 2
    values = dict(
        n=n,
        m=n,
        d=64,
        h=h,
        h_kv=h_kv,
        b=2,
        s=2,
        block_q=bq,
        block_k=bk,
        pack=pack,
        splits=1,
        page=1,
        tile_gcd=math.gcd(bq // pack, bk),
        l2_capacity=l2,
        resident_ctas=resident,
    )
    mask = masks.mask_of(n, n, causal=causal)
    v = masks.visited(
        mask,
        n=n,
        m=n,
        block_q=bq,
        block_k=bk,
        pack=pack,
        groups=h // (h_kv * pack),
        resident=resident,
    )
    counts = dict(
        mask_tiles=v.tiles,
        mask_scores=v.scores,
        mask_kv_rows=v.kv_rows,
        mask_kv_touched=v.kv_touched,
        mask_kv_wave_rows=v.kv_wave_rows,
    )
    masked, model = (
        _flash_numbers(True, causal, values, **counts),
        _flash_numbers(False, causal, values),
    )
    if causal and l2 < 2**20:
        # Past L2 the causal model charges every K/V row once per wave of its head; the mask
        # count charges a row only to the waves holding a Q block that reads it (a wave of
        # early Q blocks reads no late K block): fewer bytes, by the brute force above.
        assert masked.pop("hbm_bytes") <= model.pop("hbm_bytes")
    assert masked == model


# --- the flash backward under a mask: the dense and causal backward are special cases -----
BACKWARD_FIELDS = ("matmul_flops", "vector_flops", "exp_count", "hbm_bytes", "l2_bytes", "tiles")


def _backward_numbers(masked, causal, dq, values, **counts):
    from perfmodel.compile import compiled
    from perfmodel.costs import backward

    model = backward.build_flash(causal=causal, dq=dq, masked=masked)
    return {
        (k.name, f): float(compiled(getattr(k, f))(**values, **counts))
        for k in model.kernels
        for f in BACKWARD_FIELDS
        if getattr(k, f) is not None
    }


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(("l2", "resident"), [(50 * 2**20, 132), (2**16, 8)])  # fits, spills
@pytest.mark.parametrize("dq", ["two_pass", "atomic"])
def test_masked_backward_reproduces_the_dense_and_causal_backward(causal, l2, resident, dq):
    n, bq, bk, h, h_kv = 1024, 64, 128, 8, 2
    values = dict(n=n, m=n, d=64, h=h, h_kv=h_kv, b=2, s=2, block_q=bq, block_k=bk)
    values.update(l2_capacity=l2, resident_ctas=resident, group_split=1, group_reduce=0)
    # the dense dQ kernel at its own tile, here the dK/dV kernel's (a mask counts that one)
    values.update(dq_block_q=bq, dq_block_k=bk, dq_tile_gcd=math.gcd(bq, bk))
    mask = masks.mask_of(n, n, causal=causal)
    counts = masks.symbol_values(mask, backward=True, **values, pack=1)
    masked = _backward_numbers(True, causal, dq, values, **counts)
    model = _backward_numbers(False, causal, dq, values)
    if causal and l2 < 2**20:  # past L2: rows charged only to the waves that read them
        for key in [k for k in model if k[1] == "hbm_bytes"]:
            assert masked.pop(key) <= model.pop(key)
    assert masked == model


@settings(derandomize=True, deadline=None, max_examples=60)
@given(
    st.integers(1, 300),
    st.integers(1, 120),
    st.booleans(),
    st.one_of(st.none(), st.integers(1, 200)),
    st.sampled_from([16, 48, 64]),
    st.sampled_from([16, 64, 80]),
)
def test_documents_of_one_length_against_brute_force(n, length, causal, left, bq, bk):
    """``segments=L``: documents of L tokens, the last one what is left, at any n."""
    docs = [length] * (n // length) + ([n % length] if n % length else [])
    window = None if left is None else ((left, 0) if causal else left)
    mask = masks.mask_of(n, n, causal=causal, window=window, segments=length)
    element = element_mask(
        n, n, causal=causal, left=left, right=None if left is None or causal else left, docs=docs
    )
    got = masks.visited(mask, n=n, m=n, block_q=bq, block_k=bk, resident=3)
    assert counts(got) == brute(element, n, n, bq, bk, resident=3)
    listed = masks.mask_of(n, n, causal=causal, window=window, segments=docs)
    assert got == masks.visited(listed, n=n, m=n, block_q=bq, block_k=bk, resident=3)
    assert mask.recorded()["segments"] == length
