"""The Mosaic GPU flash kernel (pallas_kernels.flash_mosaic).

Mosaic GPU kernels run only on a Hopper GPU: there the tests compare O and the
log-sum-exp with the float64 reference (``mosaic_check.check_one``) on odd lengths,
GQA, causal, fully masked rows and large logits. jax 0.10's Mosaic GPU interpreter
lacks what this kernel uses (``transpose_ref`` operands of wgmma, ``run_state``,
``layout_cast``), so on CPU the kernel is only traced to a jaxpr, which catches
errors in the Python that builds it; that test needs ``jax.experimental.pallas.
mosaic_gpu`` to import (it needs absl) and skips otherwise.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pallas_kernels import flash_attention, flash_mosaic
from pallas_kernels._common import is_hopper
from pallas_kernels.mosaic_check import CORRECTNESS, check_one
from pallas_kernels.reference import attention_float64

ON_HOPPER = is_hopper()
needs_hopper = pytest.mark.skipif(
    not ON_HOPPER, reason="needs a Hopper (sm_90) GPU: Mosaic GPU kernels do not run on CPU"
)
_IMPORT_ERROR = flash_mosaic._mosaic_gpu_import_error()
needs_mosaic_import = pytest.mark.skipif(
    _IMPORT_ERROR is not None, reason=f"Mosaic GPU unavailable: {_IMPORT_ERROR}"
)


@needs_mosaic_import
@pytest.mark.parametrize(
    ("shape", "kv_shape", "causal", "options"),
    [
        ((1, 256, 2, 128), (1, 256, 2, 128), False, {}),
        ((1, 100, 4, 64), (1, 77, 2, 64), True, {}),
        ((1, 200, 3, 256), (1, 200, 1, 256), True, {"overlap": "none"}),
        ((1, 128, 2, 128), (1, 128, 2, 128), True, {"overlap": "qk", "ping_pong": True}),
        ((2, 300, 4, 128), (2, 300, 2, 128), True, {"persistent": True}),
        ((2, 300, 4, 64), (2, 300, 4, 64), False, {"persistent": True, "ping_pong": True}),
    ],
)
def test_kernel_traces(shape, kv_shape, causal, options):
    q, k = jnp.zeros(shape, jnp.bfloat16), jnp.zeros(kv_shape, jnp.bfloat16)
    config = flash_mosaic.MosaicConfig(
        **{**_fields(flash_mosaic.default_config(shape[-1])), **options}
    )
    plan = flash_mosaic._plan(q, k, causal=causal, sm_scale=0.1, return_lse=True, config=config)
    jaxpr = str(
        jax.jit(flash_mosaic._forward, static_argnames=("plan",)).trace(q, k, k, plan=plan).jaxpr
    )
    assert jaxpr.count("wgmma") >= 3 and "barrier_wait" in jaxpr


def _fields(config):
    return {f: getattr(config, f) for f in config.__dataclass_fields__}


def test_plan_pairs_gqa_heads_and_pads_to_the_tile():
    q = jnp.zeros((2, 100, 8, 128), jnp.bfloat16)
    k = jnp.zeros((2, 77, 2, 128), jnp.bfloat16)
    config = flash_mosaic.default_config(128)
    plan = flash_mosaic._plan(q, k, causal=True, sm_scale=0.1, return_lse=False, config=config)
    assert plan.heads_paired and plan.head_units == 4 and plan.n_pad == 128 and plan.q_units == 2
    assert plan.kv_pad == 128
    q3 = jnp.zeros((1, 100, 3, 64), jnp.bfloat16)
    k3 = jnp.zeros((1, 100, 1, 64), jnp.bfloat16)
    plan3 = flash_mosaic._plan(q3, k3, causal=False, sm_scale=0.1, return_lse=False, config=config)
    assert not plan3.heads_paired and plan3.n_pad == 128 and plan3.q_units == 1


@pytest.mark.parametrize(
    ("dtype", "d", "interpret", "match"),
    [
        (jnp.bfloat16, 64, True, "interpret"),
        (jnp.float32, 64, False, "float32"),
        (jnp.float16, 32, False, "d=32"),
    ],
)
def test_unsupported_reason_names_the_limit(dtype, d, interpret, match):
    q = jnp.zeros((1, 8, 2, d), dtype)
    reason = flash_mosaic.unsupported_reason(q, q, q, causal=False, interpret=interpret)
    assert reason is not None and match in reason


def test_too_much_shared_memory_is_refused():
    q = jnp.zeros((1, 8, 2, 256), jnp.bfloat16)
    config = flash_mosaic.MosaicConfig(block_k=256, num_stages=4)
    reason = flash_mosaic.unsupported_reason(q, q, q, causal=False, config=config)
    assert "shared memory" in reason


@needs_hopper
@pytest.mark.parametrize("case", CORRECTNESS, ids=lambda c: f"{c[:8]}{c[8]}")
def test_matches_float64_reference(case):
    row = check_one(case)
    assert row["ok"], row


@needs_hopper
@pytest.mark.parametrize("causal", [False, True])
def test_large_logits(causal):
    row = check_one((1, 256, 256, 2, 2, 128, causal, "bfloat16", {}), scale=300.0)
    assert row["ok"], row


@needs_hopper
@pytest.mark.parametrize(("heads", "offset"), [((4, 2), -70), ((2, 2), -130)])
def test_fully_masked_rows_give_zero(heads, offset):
    row = check_one((1, 256, 256, *heads, 128, True, "float16", {}), diagonal_offset=offset)
    assert row["ok"], row


@needs_hopper
def test_entry_point_mosaic_and_auto():
    rng = np.random.default_rng(1)
    q, k, v = (jnp.asarray(rng.standard_normal((1, 300, 4, 128)), jnp.bfloat16) for _ in range(3))
    o, lse = flash_attention(q, k, v, causal=True, backend="mosaic", return_lse=True)
    ref, ref_lse = attention_float64(q, k, v, causal=True)
    out = np.asarray(o, np.float64)
    assert np.linalg.norm(out - ref) / np.linalg.norm(ref) < 2e-2
    np.testing.assert_allclose(np.asarray(lse), ref_lse, atol=1e-2)
    o_auto = flash_attention(q, k, v, causal=True)
    assert o_auto.shape == q.shape
