"""The Mosaic GPU flash kernel (pallas_kernels.flash_mosaic).

Mosaic GPU kernels run only on a Hopper GPU: there ``TestMosaicBackend`` runs the
contract every backend keeps (tests/backend_base.py: float64 reference, large logits,
fully masked rows, GQA, odd n, a padded head dim, gradients), plus head dims 80-192 and
each schedule. On CPU these skip with that reason; the committed GPU logs of them are
``specs/measurements/h200-mosaic-*.log``. jax 0.10's Mosaic GPU interpreter lacks what
this kernel uses (``transpose_ref`` operands of wgmma, ``run_state``, ``layout_cast``),
so on CPU the kernel is only traced to a jaxpr, which catches errors in the Python that
builds it; that needs ``jax.experimental.pallas.mosaic_gpu`` to import (absl-py, in the
``test`` extra).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from backend_base import CASES, TOLERANCE, BackendContract, random_inputs, rel_err

from pallas_kernels import flash_mosaic
from pallas_kernels._common import is_hopper
from pallas_kernels.reference import attention_float64

ON_HOPPER = is_hopper()
needs_hopper = pytest.mark.skipif(
    not ON_HOPPER, reason="needs a Hopper (sm_90) GPU: Mosaic GPU kernels do not run on CPU"
)
_IMPORT_ERROR = flash_mosaic.import_error()
needs_mosaic_import = pytest.mark.skipif(
    _IMPORT_ERROR is not None, reason=f"Mosaic GPU unavailable: {_IMPORT_ERROR}"
)


@needs_hopper
class TestMosaicBackend(BackendContract):
    backend = "mosaic"

    def forward(self, q, k, v, *, causal, diagonal_offset=0, window=None, **options):
        return flash_mosaic.forward_with_test_hooks(
            q, k, v, causal=causal, diagonal_offset=diagonal_offset, window=window, **options
        )

    @pytest.mark.parametrize(
        "options",
        [
            {"overlap": "qk"},
            {"overlap": "pv"},
            {"overlap": "none"},
            {"persistent": False},
            {"block_k": 128, "num_stages": 2},  # the head dim's tile (the default: 64)
        ],
    )
    @pytest.mark.parametrize(
        ("causal", "window", "h", "h_kv"), [(True, 200, 3, 1), (False, (300, 70), 4, 2)]
    )
    def test_sliding_window_schedules(self, options, causal, window, h, h_kv):
        """Each schedule under a window over many key tiles: the two consumers' key ranges
        differ (odd group: adjacent row tiles) or coincide (paired heads). (Until
        2026-12-02 the options were not passed on: the GPU runs before then ran the
        default schedule each time.)"""
        q, k, v = random_inputs(11, 1, 1500, 1500, h, h_kv, 128, "bfloat16")
        self.check(q, k, v, causal=causal, window=window, **options)

    @pytest.mark.parametrize("d", [72, 80, 112, 160, 192, 256])
    @pytest.mark.parametrize("causal", [False, True])
    def test_head_dims(self, d, causal):
        q, k, v = random_inputs(d, 1, 300, 300, 4, 2, d, "bfloat16")
        self.check(q, k, v, causal=causal)

    @pytest.mark.parametrize("d", [72, 80, 96, 112, 160])
    def test_padded_head_dims(self, d):
        """``pad_head_dim=True``: d padded to a multiple of 64 (the default runs d as it
        is, test_head_dims)."""
        q, k, v = random_inputs(d + 1, 1, 300, 300, 4, 2, d, "bfloat16")
        o, lse = self.forward(q, k, v, causal=True, pad_head_dim=True)
        ref_o, ref_lse = attention_float64(q, k, v, causal=True)
        assert rel_err(o, ref_o) < TOLERANCE["bfloat16"], rel_err(o, ref_o)
        np.testing.assert_allclose(np.asarray(lse), ref_lse, rtol=1e-3, atol=1e-2)

    @pytest.mark.parametrize(
        "options", [{"pad_seq": True}, {"blocked": True}], ids=["pad_seq", "blocked"]
    )
    @pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
    def test_sequence_layouts_match_float64(self, case, options):
        """The contract's cases (the default: no copies, the blocked layout where a
        length is not a multiple of 8) also hold with the padding copies, and with the
        blocked layout at every length."""
        *shape, causal, dtype = case
        q, k, v = random_inputs(sum(shape) + 2, *shape, dtype)
        o, lse = self.forward(q, k, v, causal=causal, **options)
        ref_o, ref_lse = attention_float64(q, k, v, causal=causal)
        assert rel_err(o, ref_o) < TOLERANCE[q.dtype.name], rel_err(o, ref_o)
        np.testing.assert_allclose(np.asarray(lse), ref_lse, rtol=1e-3, atol=1e-2)

    @pytest.mark.parametrize("block_k", [64, 128])
    @pytest.mark.parametrize(("h", "window"), [(3, (30, 40)), (3, (None, 5)), (4, (100, 64))])
    def test_last_partial_block_under_a_right_window(self, h, window, block_k):
        """n = 150 over 400 keys: the last unit's rows 128-149 (one consumer; with an odd
        group the other consumer's rows 192-255 are all past n) load only the tiles rows
        below n see."""
        q, k, v = random_inputs(h + block_k, 1, 150, 400, h, 1, 128, "bfloat16")
        self.check(q, k, v, causal=False, window=window, block_k=block_k, num_stages=2)

    @pytest.mark.parametrize(
        ("b", "n", "h", "h_kv", "causal", "window"),
        [
            (2, 4096, 8, 2, True, None),  # paired heads, 512 units: ~4 a CTA
            (4, 3001, 3, 1, False, None),  # odd group, the blocked layout, 288 units
            (2, 5000, 4, 1, True, 200),  # a small window: the 64-key tile
            (1, 6000, 6, 2, False, (300, 40)),  # two-sided window, odd group
        ],
    )
    def test_prefetched_q_is_bitwise_the_default(self, b, n, h, h_kv, causal, window):
        """``prefetch_q`` (the default where it fits) against one Q buffer: the next
        unit's Q loaded during this one changes no arithmetic;
        enough units that each CTA runs several (both Q buffers in turn)."""
        q, k, v = random_inputs(n + h, b, n, n, h, h_kv, 128, "bfloat16")
        o, lse = self.forward(q, k, v, causal=causal, window=window, prefetch_q=True)
        ref, ref_lse = self.forward(q, k, v, causal=causal, window=window, prefetch_q=False)
        np.testing.assert_array_equal(np.asarray(o, np.float32), np.asarray(ref, np.float32))
        np.testing.assert_array_equal(np.asarray(lse), np.asarray(ref_lse))

    @pytest.mark.parametrize(
        "options", [{"overlap": "qk"}, {"overlap": "none"}, {"persistent": False}]
    )
    def test_schedules(self, options):
        q, k, v = random_inputs(3, 2, 640, 640, 4, 2, 128, "bfloat16")
        o, lse = self.forward(q, k, v, causal=True, **options)
        ref, ref_lse = self.forward(q, k, v, causal=True)
        assert float(jnp.max(jnp.abs(lse - ref_lse))) < 1e-2
        assert float(jnp.max(jnp.abs(o.astype(jnp.float32) - ref.astype(jnp.float32)))) < 2e-2


@needs_mosaic_import
@pytest.mark.parametrize(
    ("shape", "kv_shape", "causal", "options"),
    [
        ((1, 256, 2, 128), (1, 256, 2, 128), False, {}),
        ((1, 100, 4, 64), (1, 77, 2, 64), True, {}),
        ((1, 200, 3, 256), (1, 200, 1, 256), True, {"overlap": "none"}),
        ((1, 128, 2, 128), (1, 128, 2, 128), True, {"overlap": "qk", "persistent": False}),
        ((2, 300, 4, 192), (2, 300, 2, 192), True, {}),
        ((2, 300, 4, 64), (2, 300, 4, 64), False, {"overlap": "pv"}),
        ((1, 200, 4, 96), (1, 200, 2, 96), True, {}),
        ((1, 200, 2, 80), (1, 200, 2, 80), False, {}),
        ((1, 200, 2, 128), (1, 200, 2, 128), False, {"pad_head_dim": True}),
        ((2, 301, 3, 128), (2, 157, 1, 128), True, {"pad_seq": True}),
        ((1, 1000, 4, 64), (1, 1000, 2, 64), False, {"overlap": "pv"}),
        ((1, 1001, 4, 112), (1, 999, 2, 112), True, {"overlap": "qk"}),
        ((1, 256, 2, 128), (1, 256, 2, 128), False, {"blocked": True}),
        ((1, 1000, 4, 64), (1, 1000, 2, 64), True, {"prefetch_q": True}),
        ((2, 301, 3, 128), (2, 157, 1, 128), False, {"prefetch_q": True}),
        ((1, 300, 4, 192), (1, 300, 2, 192), True, {"prefetch_q": True}),
    ],
)
def test_kernel_traces_and_lowers(shape, kv_shape, causal, options):
    q, k = jnp.zeros(shape, jnp.bfloat16), jnp.zeros(kv_shape, jnp.bfloat16)
    config = dataclasses.replace(flash_mosaic.heuristic_config(shape[-1], causal), **options)
    plan = flash_mosaic._plan(q, k, causal=causal, sm_scale=0.1, return_lse=True, config=config)
    lengths_of_8 = shape[1] % 8 == 0 and kv_shape[1] % 8 == 0
    assert plan.blocked == options.get("blocked", not lengths_of_8 and not config.pad_seq)
    traced = jax.jit(flash_mosaic._forward, static_argnames=("plan",)).trace(q, k, k, plan=plan)
    jaxpr = str(traced.jaxpr)
    assert jaxpr.count("wgmma") >= 3 and "barrier_wait" in jaxpr
    # jax 0.10's Mosaic GPU lowering runs without a GPU: it builds the TMA descriptors,
    # which refuse a tiled sequence that is not a multiple of 8 rows (the tiled layout)
    hlo = traced.lower(lowering_platforms=("cuda",)).as_text()
    assert "mosaic_gpu" in hlo
    # no padding copies unless asked for
    assert ("stablehlo.pad" in hlo) == (config.pad_seq and shape[1] % 128 != 0)


def test_tiled_layout_at_a_length_not_of_8_is_refused():
    q = jnp.zeros((1, 100, 2, 128), jnp.bfloat16)
    config = flash_mosaic.Config(blocked=False)
    with pytest.raises(ValueError, match="blocked=False"):
        flash_mosaic._plan(q, q, causal=False, sm_scale=0.1, return_lse=False, config=config)


@needs_mosaic_import
@pytest.mark.parametrize("overlap", ["pv", "qk", "none"])
@pytest.mark.parametrize(
    ("shape", "kv_shape", "causal", "window"),
    [
        ((1, 700, 3, 128), (1, 700, 1, 128), True, 200),
        ((1, 700, 4, 64), (1, 700, 2, 64), False, (300, 70)),
        ((1, 300, 2, 128), (1, 100, 1, 128), False, (10, None)),
    ],
)
def test_kernel_traces_with_a_window(shape, kv_shape, causal, window, overlap):
    q, k = jnp.zeros(shape, jnp.bfloat16), jnp.zeros(kv_shape, jnp.bfloat16)
    config = dataclasses.replace(flash_mosaic.heuristic_config(shape[-1], causal), overlap=overlap)
    plan = flash_mosaic._plan(
        q, k, causal=causal, window=window, sm_scale=0.1, return_lse=True, config=config
    )
    assert plan.bounds == ((window, 0) if causal else window)
    jaxpr = str(
        jax.jit(flash_mosaic._forward, static_argnames=("plan",)).trace(q, k, k, plan=plan).jaxpr
    )
    assert jaxpr.count("wgmma") >= 3 and "barrier_wait" in jaxpr


@needs_mosaic_import
@pytest.mark.parametrize(
    ("shape", "causal", "window", "block_k"),
    [
        ((1, 700, 3, 128), True, 200, 64),
        ((1, 701, 4, 128), False, (300, 70), 64),
        ((1, 701, 4, 64), False, (300, 70), 128),
        ((2, 333, 4, 128), False, (5, 150), 64),
        ((1, 1000, 2, 128), True, 2000, 128),
        ((1, 300, 2, 160), True, 100, 64),
    ],
)
def test_kernel_lowers_with_a_window(shape, causal, window, block_k):
    """The default launch under a window (a 64-key tile, four stages, under a small one)
    lowers: both layouts, an odd group, a paired one."""
    q = jnp.zeros(shape, jnp.bfloat16)
    config = flash_mosaic.heuristic_config(shape[-1], causal, window)
    assert config.block_k == block_k
    plan = flash_mosaic._plan(
        q, q, causal=causal, window=window, sm_scale=0.1, return_lse=True, config=config
    )
    traced = jax.jit(flash_mosaic._forward, static_argnames=("plan",)).trace(q, q, q, plan=plan)
    assert "mosaic_gpu" in traced.lower(lowering_platforms=("cuda",)).as_text()


@pytest.mark.parametrize(
    ("d", "causal", "window", "tile"),
    [
        (128, True, 146, (64, 4)),
        (128, True, 1024, (64, 4)),
        (128, True, 1025, (128, 2)),
        (128, False, 512, (64, 4)),
        (96, False, 513, (128, 2)),
        (64, False, 100, (128, 4)),
        (128, False, (None, 10), (128, 2)),
        (128, False, (10, None), (128, 2)),
        (128, True, None, (128, 2)),
        (256, True, 100, (64, 2)),
    ],
)
def test_small_windows_take_the_narrow_tile(d, causal, window, tile):
    """``SMALL_WINDOW_TILE``: left + right up to its span, both sides bounded, at native
    head dim 128 only; ``resolve_config`` applies it under the options."""
    config = flash_mosaic.heuristic_config(d, causal, window)
    assert (config.block_k, config.num_stages) == tile
    q = jnp.zeros((1, 8, 2, d), jnp.bfloat16)
    assert flash_mosaic.resolve_config(q, causal, {}, window) == config
    assert flash_mosaic.resolve_config(q, causal, {"block_k": 128}, window).block_k == 128


def test_last_partial_block_loads_only_what_rows_below_n_see():
    """n = 150 queries over 400 keys, an odd group (two 64-row blocks a unit), window (30,
    40): the last unit's tiles are those rows 128-149 see (keys 98-189: tiles 1 and 2 of
    64), not those of its rows 150-255 (until 2026-12-02 tiles 1-4); its second consumer
    (rows 192-255, all past n) takes row 149's range, inside its partner's."""
    q = jnp.zeros((1, 150, 3, 128), jnp.bfloat16)
    k = jnp.zeros((1, 400, 1, 128), jnp.bfloat16)
    config = flash_mosaic.Config(block_k=64, persistent=True)
    plan = flash_mosaic._plan(
        q, k, causal=False, window=(30, 40), sm_scale=0.1, return_lse=False, config=config
    )
    last = (jnp.int32(1), jnp.int32(0), jnp.int32(0))  # (query unit, head unit, batch)
    lo, hi = (int(x) for x in flash_mosaic._unit_tiles(plan, last))
    assert (lo, hi) == (1, 3)
    tail = [int(x) for x in flash_mosaic._key_tiles(plan, jnp.int32(192))]
    assert tail[0] >= lo and tail[3] <= hi


def test_plan_pairs_gqa_heads_and_pads_to_the_tile():
    q = jnp.zeros((2, 100, 8, 128), jnp.bfloat16)
    k = jnp.zeros((2, 77, 2, 128), jnp.bfloat16)
    config = flash_mosaic.heuristic_config(128)
    plan = flash_mosaic._plan(q, k, causal=True, sm_scale=0.1, return_lse=False, config=config)
    assert plan.heads_paired and plan.head_units == 4 and plan.n_pad == 128 and plan.q_units == 2
    assert plan.kv_pad == 128
    q3 = jnp.zeros((1, 100, 3, 64), jnp.bfloat16)
    k3 = jnp.zeros((1, 100, 1, 64), jnp.bfloat16)
    plan3 = flash_mosaic._plan(q3, k3, causal=False, sm_scale=0.1, return_lse=False, config=config)
    assert not plan3.heads_paired and plan3.n_pad == 128 and plan3.q_units == 1


@pytest.mark.parametrize(("d", "prefetch"), [(64, True), (128, True), (192, True), (256, False)])
def test_q_is_prefetched_where_its_second_buffer_fits(d, prefetch):
    config = flash_mosaic.heuristic_config(d, True)
    assert config.prefetch_q is prefetch and config.q_slots == (2 if prefetch else 1)
    assert config.smem_bytes(d, 2, True) <= flash_mosaic.SMEM_LIMIT_BYTES
    assert dataclasses.replace(config, persistent=False).q_slots == 1


def test_head_dims_pad_to_a_multiple_of_64():
    assert [flash_mosaic.native_head_dim(d) for d in (16, 64, 80, 96, 160, 192, 256)] == [
        64,
        64,
        128,
        128,
        192,
        192,
        256,
    ]
    assert flash_mosaic.heuristic_config(96).block_k == 128
    assert flash_mosaic.heuristic_config(160).block_k == 64
    config = flash_mosaic.Config()
    assert [flash_mosaic.run_head_dim(d, config) for d in (72, 80, 96, 256)] == [80, 80, 96, 256]
    padded = flash_mosaic.Config(pad_head_dim=True)
    assert [flash_mosaic.run_head_dim(d, padded) for d in (72, 80, 96, 256)] == [128] * 3 + [256]


@pytest.mark.parametrize(
    ("dtype", "d", "interpret", "match"),
    [
        (jnp.bfloat16, 64, True, "interpret"),
        (jnp.float32, 64, False, "float32"),
        (jnp.float16, 320, False, "d=320"),
    ],
)
def test_supported_names_the_limit(dtype, d, interpret, match):
    q = jnp.zeros((1, 8, 2, d), dtype)
    reason = flash_mosaic.supported(q, q, q, causal=False, interpret=interpret)
    assert reason is not None and match in reason


def test_too_much_shared_memory_is_refused():
    q = jnp.zeros((1, 8, 2, 256), jnp.bfloat16)
    config = flash_mosaic.Config(block_k=256, num_stages=4)
    reason = flash_mosaic.supported(q, q, q, causal=False, config=config)
    assert "shared memory" in reason


def test_config_is_validated():
    with pytest.raises(ValueError, match="overlap='both'"):
        flash_mosaic.Config(overlap="both")
    with pytest.raises(ValueError, match="num_stages=1"):
        flash_mosaic.Config(num_stages=1)
