"""The Mosaic GPU backward (pallas_kernels.flash_mosaic_backward).

On a Hopper GPU: dQ, dK, dV from the float64 forward's O and log-sum-exp equal the
float64 gradients (GQA groups 1-8 and MQA, odd n, cross attention, causal, sliding
windows, fp16 and bf16, the lse cotangent, rows that see no key), and ``jax.grad``
through ``flash_attention`` picks this backward. On CPU these skip with that reason
(the committed GPU log: ``specs/measurements/details/h200-mosaic-backward-*.pytest.log``);
the kernels are traced and lowered to Mosaic GPU's MLIR there (no GPU needed), which
catches errors in the Python that builds them and in what the lowering accepts.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from backend_base import GRAD_TOLERANCE, random_inputs, rel_err

from pallas_kernels import flash_attention, flash_backward, flash_mosaic_backward
from pallas_kernels._common import is_hopper, window_bounds
from pallas_kernels.flash_attention import choose_backward
from pallas_kernels.reference import attention_float64, attention_grads_float64

ON_HOPPER = is_hopper()
needs_hopper = pytest.mark.skipif(
    not ON_HOPPER, reason="needs a Hopper (sm_90) GPU: Mosaic GPU kernels do not run on CPU"
)
_IMPORT_ERROR = flash_mosaic_backward.flash_mosaic.import_error()
needs_mosaic_import = pytest.mark.skipif(
    _IMPORT_ERROR is not None, reason=f"Mosaic GPU unavailable: {_IMPORT_ERROR}"
)

#: (batch, n, kv_len, heads, kv_heads, head_dim, causal, window, dtype)
CASES = [
    (1, 100, 100, 4, 1, 64, True, None, "bfloat16"),  # GQA 4:1, n not a tile multiple
    (2, 77, 130, 3, 1, 64, False, None, "float16"),  # MQA, cross attention, both odd
    (1, 300, 300, 4, 2, 128, True, None, "bfloat16"),  # two CTAs of keys, causal
    (1, 257, 257, 2, 2, 128, False, None, "float16"),
    (1, 200, 200, 4, 2, 80, True, None, "bfloat16"),  # d=80 runs as it is
    (1, 150, 150, 8, 1, 128, False, None, "bfloat16"),  # a group of 8
    (1, 1, 1, 2, 2, 64, True, None, "float16"),  # one row
    (1, 500, 500, 6, 2, 96, True, None, "float16"),  # a group of 3
    (1, 1000, 1000, 2, 1, 128, True, None, "bfloat16"),  # many stages round the ring
    (1, 700, 700, 2, 2, 72, False, None, "float16"),  # d=72 padded to 80
    (1, 300, 300, 3, 1, 64, True, 100, "float16"),  # causal sliding window
    (1, 333, 333, 4, 1, 128, False, (5, 150), "float16"),  # asymmetric window
    (2, 230, 90, 2, 1, 64, False, (20, 20), "bfloat16"),  # cross: late rows see nothing
]

#: Head dims above 128: the split kernels (``Config.split``, ``SPLIT_CONFIG``)
SPLIT_CASES = [
    (1, 300, 300, 4, 2, 256, True, None, "bfloat16"),  # GQA 2:1, five 64-key blocks
    (1, 257, 257, 2, 2, 256, False, None, "float16"),  # odd n
    (1, 200, 200, 4, 1, 192, True, None, "bfloat16"),  # MQA, causal
    (1, 333, 333, 3, 1, 192, False, None, "float16"),  # a group of 3, odd n
    (1, 150, 150, 2, 2, 160, True, None, "bfloat16"),
    (2, 77, 130, 4, 2, 160, False, None, "float16"),  # cross attention, both odd
    (1, 700, 700, 2, 1, 200, True, None, "bfloat16"),  # d=200 padded to 208, many stages
    (1, 300, 300, 2, 2, 256, True, 100, "float16"),  # causal sliding window
]


def _grads(q, k, v, *, causal, window=None, diagonal_offset=0, seed=0, config=None):
    """(ours, float64 reference) gradients of sum(O∘dO) + sum(lse∘w), from the float64
    forward's O (rounded to the input dtype) and log-sum-exp."""
    rng = np.random.default_rng(seed)
    b, n, h, d = q.shape
    do = rng.standard_normal((b, n, h, d))
    w = rng.standard_normal((b, h, n))
    kw = dict(causal=causal, window=window)
    if diagonal_offset:
        kw = dict(causal=True, window=None, offset=diagonal_offset)
    ref = attention_grads_float64(q, k, v, do, dlse=w, **kw)
    o, lse = _forward64(q, k, v, causal=causal, window=window, offset=diagonal_offset)
    ours = flash_mosaic_backward.mosaic_attention_backward(
        q,
        k,
        v,
        jnp.asarray(o, q.dtype),
        jnp.asarray(lse, jnp.float32),
        jnp.asarray(do, q.dtype),
        jnp.asarray(w, jnp.float32),
        causal=causal,
        window=window_bounds(window, causal),
        sm_scale=1.0 / np.sqrt(d),
        diagonal_offset=diagonal_offset,
        config=config,
    )
    return ours, ref


def _forward64(q, k, v, *, causal, window, offset):
    if not offset:
        return attention_float64(q, k, v, causal=causal, window=window)
    # rows 0..-offset-1 see no key: O = 0, lse = -inf; the rest is a shifted causal mask
    n, cut = q.shape[1], -offset
    o = np.zeros(q.shape)
    lse = np.full((q.shape[0], q.shape[2], n), -np.inf)
    o[:, cut:], lse[:, :, cut:] = attention_float64(
        q[:, cut:], k[:, : n - cut], v[:, : n - cut], causal=True
    )
    return o, lse


def _check_grads(case, config=None, scale=1.0):
    *shape, causal, window, dtype = case
    q, k, v = random_inputs(sum(shape[:6]), *shape, dtype, scale=scale)
    ours, ref = _grads(q, k, v, causal=causal, window=window, config=config)
    for name, g, r, x in zip(("dq", "dk", "dv"), ours, ref, (q, k, v), strict=True):
        assert g.shape == x.shape and g.dtype == x.dtype, name
        assert np.isfinite(np.asarray(g, np.float32)).all(), (name, "unwritten or non-finite")
        assert rel_err(g, r) < GRAD_TOLERANCE[dtype], (name, rel_err(g, r))


@needs_hopper
@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_gradients_match_float64(case):
    """The default launch (``heuristic_config``: the separate dQ kernel)."""
    _check_grads(case)


@needs_hopper
@pytest.mark.parametrize(
    "case", [CASES[i] for i in (0, 2, 8, 12)], ids=lambda c: "-".join(map(str, c))
)
def test_other_pipeline_matches_float64(case):
    """``Config.pipeline`` as the default does not have it: both consumer loops (the
    wgmmas waited for one by one, or one product kept in flight) give the gradients."""
    _check_grads(case, _other_pipeline(case[5]))


@needs_hopper
@pytest.mark.parametrize("case", SPLIT_CASES, ids=lambda c: "-".join(map(str, c)))
def test_split_kernels_match_float64(case):
    """d > 128: the split dK/dV kernel (consumers holding dV and dK, Pᵀ passed through
    shared memory) and the dQ kernel's 32-key tiles give the float64 gradients."""
    _check_grads(case, flash_mosaic_backward.SPLIT_CONFIG)


def _folded(d):
    config = flash_mosaic_backward.heuristic_config(d)
    return dataclasses.replace(config, dq="atomic", pipeline=False, num_stages=2)


def _other_pipeline(d):
    """The default launch with ``Config.pipeline`` flipped (two stages when off)."""
    config = flash_mosaic_backward.heuristic_config(d)
    stages = 3 if not config.pipeline else 2
    return dataclasses.replace(
        config, pipeline=not config.pipeline, num_stages=stages, dq_num_stages=stages
    )


#: d <= 64 and d = 128: the cases whose tiles ``dq_split`` can share
FOLDABLE = [c for c in CASES if flash_mosaic_backward.supported_fold(c[5])]


@needs_hopper
@pytest.mark.parametrize("case", FOLDABLE, ids=lambda c: "-".join(map(str, c)))
def test_folded_dq_matches_float64(case):
    """``dq="atomic"``: dQ summed in the dK/dV kernel by TMA reduce-adds."""
    _check_grads(case, _folded(case[5]))


@needs_hopper
@pytest.mark.parametrize(
    "case",
    [
        (1, 200, 200, 2, 1, 64, False, None, "float16"),
        (1, 70, 190, 2, 2, 128, True, None, "float16"),
    ],
)
def test_folded_dq_with_large_logits(case):
    """Scores of tens: the padded keys of the last block (masked in every tile when dQ
    is folded) must not turn into inf or NaN in dQ."""
    _check_grads(case, _folded(case[5]), scale=3.0)


#: GQA cases, each with a share of its group per CTA that divides it
GROUP_SPLITS = [(CASES[0], 2), (CASES[1], 3), (CASES[5], 4), (CASES[7], 3), (CASES[10], 3)]


@needs_hopper
@pytest.mark.parametrize(
    ("case", "share"),
    GROUP_SPLITS,
    ids=lambda c: "-".join(map(str, c)) if isinstance(c, tuple) else str(c),
)
def test_group_split_matches_float64(case, share):
    """``Config.group_split``: a GQA group's query heads spread over CTAs of the dK/dV
    kernel, their float32 partials summed after; and 1, the group summed on chip (the
    small test grids choose the split by default: ``group_split_for``)."""
    _check_grads(
        case,
        dataclasses.replace(flash_mosaic_backward.heuristic_config(case[5]), group_split=share),
    )
    _check_grads(
        case, dataclasses.replace(flash_mosaic_backward.heuristic_config(case[5]), group_split=1)
    )


@needs_hopper
def test_rows_that_see_no_key_give_no_nan():
    # the diagonal shifted down by 37: rows 0..36 see no key (lse = -inf)
    q, k, v = random_inputs(6, 1, 100, 100, 4, 2, 64, "bfloat16")
    ours, ref = _grads(q, k, v, causal=True, diagonal_offset=-37)
    for name, g, r in zip(("dq", "dk", "dv"), ours, ref, strict=True):
        g = np.asarray(g, np.float32)
        assert not np.isnan(g).any(), name
        assert rel_err(g, r) < GRAD_TOLERANCE["bfloat16"], (name, rel_err(g, r))
    assert (np.asarray(ours[0], np.float32)[:, :37] == 0).all()


@needs_hopper
@pytest.mark.parametrize("backend", ["mosaic", "triton"])
def test_jax_grad_runs_this_backward_on_hopper(backend):
    """Whichever backend ran the forward, jax.grad runs the Mosaic backward; gradients
    with the lse cotangent equal the float64 ones."""
    q, k, v = random_inputs(9, 2, 190, 190, 6, 2, 128, "float16")
    assert choose_backward(q, k, v, causal=True) == "mosaic"
    rng = np.random.default_rng(3)
    do = jnp.asarray(rng.standard_normal(q.shape), jnp.float32)
    w = jnp.asarray(rng.standard_normal((2, 6, 190)), jnp.float32)

    def loss(q, k, v):
        o, lse = flash_attention(q, k, v, causal=True, backend=backend, return_lse=True)
        return jnp.sum(o.astype(jnp.float32) * do) + jnp.sum(lse * w)

    grads = jax.grad(loss, argnums=(0, 1, 2))(q, k, v)
    ref = attention_grads_float64(q, k, v, do, causal=True, dlse=w)
    for name, g, r in zip(("dq", "dk", "dv"), grads, ref, strict=True):
        assert rel_err(g, r) < GRAD_TOLERANCE["float16"], (name, rel_err(g, r))


# ---------------------------------------------------------------- CPU: no GPU needed


@needs_mosaic_import
@pytest.mark.parametrize(
    ("shape", "kv_shape", "causal", "window"),
    [
        ((1, 100, 4, 64), (1, 77, 2, 64), True, None),
        ((2, 300, 4, 128), (2, 300, 1, 128), False, None),
        ((1, 300, 3, 80), (1, 300, 1, 80), True, (50, 0)),
        ((1, 200, 2, 64), (1, 200, 2, 64), False, (20, 30)),
    ],
)
@pytest.mark.parametrize("launch", ["default", "atomic", "pipeline", "no_pipeline"])
def test_kernels_trace_and_lower(shape, kv_shape, causal, window, launch):
    config = flash_mosaic_backward.heuristic_config(shape[3])
    if launch == "atomic":
        if not flash_mosaic_backward.supported_fold(shape[3]):
            pytest.skip(f"dq_split cannot share the dQ tile at d={shape[3]}")
        config = _folded(shape[3])
    elif launch != "default":
        config = dataclasses.replace(config, pipeline=launch == "pipeline")
    traced = _lowered(shape, kv_shape, causal, window, config)
    jaxpr = str(traced.jaxpr)
    if config.dq == "atomic":  # one kernel: 5 products per tile, dQ reduce-added by TMA
        assert jaxpr.count("wgmma") >= 5 and "reduction_op=add" in jaxpr
    else:  # dK/dV: 4 products per tile, dQ: 3; each kernel waits on barriers
        assert jaxpr.count("wgmma") >= 7 and jaxpr.count("barrier_wait") >= 6


@needs_mosaic_import
@pytest.mark.parametrize(
    ("shape", "kv_shape", "causal", "window"),
    [
        ((1, 300, 4, 256), (1, 300, 2, 256), True, None),
        ((2, 100, 3, 192), (2, 130, 1, 192), False, None),
        ((1, 200, 2, 160), (1, 200, 2, 160), False, (20, 30)),
        ((1, 150, 2, 200), (1, 150, 1, 200), True, (50, 0)),
    ],
)
def test_split_kernels_trace_and_lower(shape, kv_shape, causal, window):
    """The d > 128 launch: the split dK/dV kernel (two products per consumer, Pᵀ handed
    over on p_ready / p_free barriers) and the dQ kernel with 32-key tiles."""
    config = flash_mosaic_backward.heuristic_config(shape[3])
    assert config == flash_mosaic_backward.SPLIT_CONFIG
    jaxpr = str(_lowered(shape, kv_shape, causal, window, config).jaxpr)
    assert jaxpr.count("wgmma") >= 7 and jaxpr.count("barrier_wait") >= 8


def _lowered(shape, kv_shape, causal, window, config, group_split=1):
    """The traced backward of zeros at these shapes, after checking that the Mosaic GPU
    lowering runs without a GPU (it catches what tracing cannot)."""
    q, k = jnp.zeros(shape, jnp.bfloat16), jnp.zeros(kv_shape, jnp.bfloat16)
    b, n, h, d = shape
    lse = jnp.zeros((b, h, n), jnp.float32)
    plan = flash_mosaic_backward._Plan(
        batch=b,
        n=n,
        n_pad=-(-n // 128) * 128,
        heads=h,
        kv_heads=kv_shape[2],
        d=flash_mosaic_backward.run_head_dim(d),
        kv_len=kv_shape[1],
        kv_pad=-(-kv_shape[1] // 128) * 128,
        mask=flash_mosaic_backward.Mask.of(causal, window),
        scale=0.1,
        config=config,
        group_split=group_split,
    )
    traced = flash_mosaic_backward._backward.trace(q, k, k, q, lse, q, lse, plan)
    assert "mosaic_gpu" in traced.lower(lowering_platforms=("cuda",)).as_text()
    return traced


@needs_mosaic_import
@pytest.mark.parametrize("share", [2, 4])
def test_group_split_traces_and_lowers(share):
    """The dK/dV kernel with a GQA group of 4 over ``share`` CTAs: float32 partials."""
    config = flash_mosaic_backward.heuristic_config(128)
    traced = _lowered((1, 300, 4, 128), (1, 300, 1, 128), True, None, config, share)
    assert "reduce_sum" in str(traced.jaxpr) and str(traced.jaxpr).count("wgmma") >= 7


def test_group_split_rule():
    """The fewest CTAs per group that fill the grid's waves best."""
    rule = flash_mosaic_backward.group_split_for
    assert rule(batch=3, kv_blocks=8, kv_heads=1, group=6, sm_count=132) == 3  # 24 -> 72 CTAs
    assert rule(batch=1, kv_blocks=16, kv_heads=1, group=16, sm_count=132) == 8  # 128
    assert rule(batch=2, kv_blocks=32, kv_heads=1, group=8, sm_count=132) == 2  # 128
    assert rule(batch=1, kv_blocks=64, kv_heads=8, group=8, sm_count=132) == 1  # 512, 0.97
    assert rule(batch=4, kv_blocks=8, kv_heads=4, group=8, sm_count=132) == 1  # 128 fills
    assert rule(batch=1, kv_blocks=2, kv_heads=1, group=4, sm_count=132) == 4  # 8 CTAs
    m = flash_mosaic_backward
    with pytest.raises(ValueError, match="group_split=0"):
        m.Config(group_split=0)
    with pytest.raises(ValueError, match="group_split=2 needs the plain"):
        m.Config(dq="atomic", group_split=2)
    assert not m.SPLIT_CONFIG.splits_group and m.heuristic_config(128).splits_group
    # the float32 staging buffer of the partials is counted
    d = 128
    assert (
        m.heuristic_config(d).smem_bytes(d, 2)[0]
        == dataclasses.replace(m.heuristic_config(d), group_split=1).smem_bytes(d, 2)[0]
        + 2 * 64 * d * 4
    )
    with pytest.raises(ValueError, match="group_split=4 must divide the GQA group"):
        m._group_split(m.Config(group_split=4), 1, 8, 1, 6)


def test_mask_from_the_keys_side_swaps_the_sides():
    mask = flash_mosaic_backward.Mask.of(True, (30, 0))
    assert (mask.left, mask.right) == (30, 0)
    assert flash_mosaic_backward.Mask.of(True, None, diagonal_offset=-3).right == -3
    assert mask.seen_by_keys() == flash_mosaic_backward.Mask(left=0, right=30)
    assert flash_mosaic_backward.Mask.of(False, None) == flash_mosaic_backward.Mask()


@pytest.mark.parametrize(
    ("dtype", "d", "interpret", "match"),
    [
        (jnp.bfloat16, 64, True, "interpret"),
        (jnp.float32, 64, False, "float32"),
        (jnp.float16, 272, False, "d=272"),
    ],
)
def test_supported_names_the_limit(dtype, d, interpret, match):
    q = jnp.zeros((1, 8, 2, d), dtype)
    reason = flash_mosaic_backward.supported(q, q, q, causal=False, interpret=interpret)
    assert reason is not None and match in reason


def test_triton_backward_off_hopper_or_when_chosen():
    q = jnp.zeros((1, 8, 2, 64), jnp.bfloat16)
    chosen = flash_backward.Config(num_warps=8)
    assert choose_backward(q, q, q, causal=False, backward=chosen) == "triton"
    assert choose_backward(q, q, q, causal=False, interpret=True) == "triton"
    mosaic_cfg = flash_mosaic_backward.Config()
    assert choose_backward(q, q, q, causal=False, backward=mosaic_cfg) == "mosaic"
    expected = "mosaic" if ON_HOPPER else "triton"
    assert choose_backward(q, q, q, causal=True) == expected


def test_config_is_validated_and_fits_shared_memory():
    with pytest.raises(ValueError, match="block_q=32"):
        flash_mosaic_backward.Config(block_q=32)
    with pytest.raises(ValueError, match="dq_num_stages=1"):
        flash_mosaic_backward.Config(dq_num_stages=1)
    with pytest.raises(ValueError, match="dq='split'"):
        flash_mosaic_backward.Config(dq="split")
    with pytest.raises(ValueError, match="pipeline=True needs dq='two_pass'"):
        flash_mosaic_backward.Config(dq="atomic", pipeline=True)
    assert _other_pipeline(64).pipeline is not flash_mosaic_backward.heuristic_config(64).pipeline
    for d in (32, 64, 80, 96, 128):
        config = flash_mosaic_backward.heuristic_config(d)
        limit = flash_mosaic_backward.SMEM_LIMIT_BYTES
        folded = _folded(d)
        for c in (config, folded) if flash_mosaic_backward.supported_fold(d) else (config,):
            assert max(c.smem_bytes(flash_mosaic_backward.run_head_dim(d), 2)) <= limit
    # the fold shares dQ tiles of 128 rows (any d) or of 64 rows at d = 128
    fold = flash_mosaic_backward.supported_fold
    assert [fold(d) for d in (32, 64, 80, 96, 112, 128)] == [True, True, False, False, False, True]
    assert {flash_mosaic_backward.heuristic_config(d).dq for d in (64, 96, 128)} == {"two_pass"}
    q = jnp.zeros((1, 8, 2, 96), jnp.bfloat16)
    folded = flash_mosaic_backward.Config(dq="atomic")  # block_q = 64 at d = 96
    assert "dq_split" in flash_mosaic_backward.supported(q, q, q, config=folded)


def test_split_launch_above_128_is_validated_and_fits_shared_memory():
    m = flash_mosaic_backward
    with pytest.raises(ValueError, match="split=True needs"):
        m.Config(split=True, block_q=128)
    with pytest.raises(ValueError, match="split=True needs"):
        m.Config(split=True, dq="atomic")
    with pytest.raises(ValueError, match="dq_block_k=16"):
        m.Config(dq_block_k=16)
    for d in range(144, m.SPLIT_MAX_HEAD_DIM + 1, 16):
        assert m.heuristic_config(d) == m.SPLIT_CONFIG and not m.supported_fold(d)
        dkdv, dq = m.SPLIT_CONFIG.smem_bytes(d, 2)
        assert max(dkdv, dq) <= m.SMEM_LIMIT_BYTES, d
    # at d = 256: K, V of 64 keys, two stages of Q, dO, LSE, D, two Pᵀ buffers
    assert m.SPLIT_CONFIG.smem_bytes(256, 2)[0] == 64 * 1024 + 2 * (64 * 1024 + 512) + 16 * 1024
    assert m.heuristic_config(128).split is False  # d <= 128 launches as before
    q = jnp.zeros((1, 8, 2, 192), jnp.bfloat16)
    big = jnp.zeros((1, 8, 2, 272), jnp.bfloat16)
    assert "at most 256" in m.supported(big, big, big, config=m.SPLIT_CONFIG)
    if not m.SPLIT_DEFAULT:  # the default refuses d > 128; an explicit split launch is taken
        assert "Config(split=True)" in m.supported(q, q, q)
        assert choose_backward(q, q, q, causal=False) == "triton"
    reason = m.supported(q, q, q, config=m.SPLIT_CONFIG)
    assert reason is None if ON_HOPPER else "d=192" not in (reason or "")
