"""The Pallas backward kernels and ``jax.grad`` through the flash forward.

On CPU the kernels run in the Pallas interpreter on tiny shapes (each distinct shape
compiles once, so the cases are few); on a GPU the same tests run the Triton kernels,
and the GPU-only test adds realistic shapes.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from pallas_kernels import flash_attention
from pallas_kernels.flash_backward import Config as BackwardConfig
from pallas_kernels.flash_backward import flash_attention_backward, heuristic_config
from pallas_kernels.reference import attention_grads_float64 as grads_float64
from pallas_kernels.reference import reference_attention

ON_GPU = jax.default_backend() == "gpu"
INTERPRET = not ON_GPU
DTYPES = {"float32": jnp.float32, "float16": jnp.float16, "bfloat16": jnp.bfloat16}
#: ‖grad − ref‖ / ‖ref‖ allowed per input dtype (float32 allows the GPU's rounding).
TOLERANCE = {"float32": 1e-4 if INTERPRET else 2e-3, "float16": 1e-2, "bfloat16": 3e-2}
TINY = BackwardConfig(block_q=16, block_k=32, dq_block_q=32, dq_block_k=16)
#: FlashAttention-2's own structure: dQ added with float32 atomics inside the dK/dV kernel.
TINY_ATOMIC = BackwardConfig(block_q=16, block_k=32, dq="atomic")
FAMILIES = pytest.mark.parametrize("config", [TINY, TINY_ATOMIC], ids=["two_pass", "atomic"])


def rel_err(out, ref) -> float:
    out = np.asarray(out, np.float64)
    return float(np.linalg.norm(out - ref) / np.linalg.norm(ref))


def random(seed, *shapes, dtype="float32"):
    rng = np.random.default_rng(seed)
    return [jnp.asarray(rng.standard_normal(s), DTYPES[dtype]) for s in shapes]


def check(grads, ref, dtype):
    for name, g, r in zip(("dq", "dk", "dv"), grads, ref, strict=True):
        assert g.dtype == DTYPES[dtype], name
        assert np.isfinite(np.asarray(g, np.float32)).all(), f"{name} has NaN or inf"
        assert rel_err(g, r) < TOLERANCE[dtype], f"{name}: {rel_err(g, r):.2e}"


@FAMILIES
def test_grad_causal_gqa_odd_n_with_lse_cotangent_matches_float64(config):
    """jax.grad through the custom_vjp: causal, GQA 4:2, n=40 (not a tile multiple),
    and a loss that uses the log-sum-exp too (its cotangent flows into D); both dQ
    families (separate pass, atomics)."""
    b, n, h, h_kv, d = 1, 40, 4, 2, 16
    q, k, v, do, w = random(
        1, (b, n, h, d), (b, n, h_kv, d), (b, n, h_kv, d), (b, n, h, d), (b, h, n)
    )

    def loss(q, k, v):
        o, lse = flash_attention(
            q,
            k,
            v,
            causal=True,
            return_lse=True,
            interpret=INTERPRET,
            backward=config,
            block_q=16,
            block_k=16,
        )
        return jnp.sum(o * do) + jnp.sum(lse * w)

    grads = jax.grad(loss, argnums=(0, 1, 2))(q, k, v)
    check(grads, grads_float64(q, k, v, do, causal=True, dlse=w), "float32")


def test_grad_matches_autodiff_of_the_reference_bf16_cross_attention():
    """Non-causal, kv_len != n, both odd; bf16 inputs against float64 and against
    jax.grad of the plain-JAX reference."""
    b, n, m, h, d = 2, 33, 50, 2, 32
    q, k, v, do = random(
        2, (b, n, h, d), (b, m, h, d), (b, m, h, d), (b, n, h, d), dtype="bfloat16"
    )

    def loss(f):
        return lambda q, k, v: jnp.sum(f(q, k, v).astype(jnp.float32) * do.astype(jnp.float32))

    ours = loss(lambda q, k, v: flash_attention(q, k, v, interpret=INTERPRET, backward=TINY))
    grads = jax.grad(ours, argnums=(0, 1, 2))(q, k, v)
    check(grads, grads_float64(q, k, v, do, causal=False), "bfloat16")
    ref = jax.grad(loss(reference_attention), argnums=(0, 1, 2))(q, k, v)
    for g, r in zip(grads, ref, strict=True):
        assert rel_err(g, np.asarray(r, np.float64)) < TOLERANCE["bfloat16"]


@FAMILIES
def test_fully_masked_rows_get_zero_gradient_and_no_nan(config):
    """Diagonal shifted by -8: query rows 0..7 see no key (lse = -inf, O = 0)."""
    b, n, h, d, offset = 1, 24, 2, 16, -8
    q, k, v, do = random(3, (b, n, h, d), (b, n, h, d), (b, n, h, d), (b, n, h, d))
    rows, cols = np.arange(n)[:, None], np.arange(n)[None, :]
    s = np.einsum("bqhd,bkhd->bhqk", np.asarray(q, np.float64), np.asarray(k, np.float64)) / 4
    s = np.where(cols <= rows + offset, s, -np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        m = s.max(-1, keepdims=True)
        lse = (m + np.log(np.exp(s - np.where(np.isfinite(m), m, 0)).sum(-1, keepdims=True)))[
            ..., 0
        ]
        p = np.nan_to_num(np.exp(s - lse[..., None]))
    o = np.einsum("bhqk,bkhd->bqhd", p, np.asarray(v, np.float64))
    grads = flash_attention_backward(
        q,
        k,
        v,
        jnp.asarray(o, jnp.float32),
        jnp.asarray(lse, jnp.float32),
        do,
        causal=True,
        sm_scale=0.25,
        config=config,
        interpret=INTERPRET,
        diagonal_offset=offset,
    )
    ref = grads_float64(q, k, v, do, causal=True, sm_scale=0.25, offset=offset)
    check(grads, ref, "float32")
    assert not np.any(np.asarray(grads[0])[:, :8]), "rows that see no key must get dQ = 0"


def test_check_grads_numerically_through_the_entry_point():
    """jax.test_util.check_grads on ``pallas_kernels.flash_attention`` itself: the VJP
    (our backward kernels) against finite differences of the forward kernel."""
    q, k, v = random(4, (1, 20, 1, 16), (1, 20, 1, 16), (1, 20, 1, 16))

    def f(q, k, v):
        return flash_attention(
            q, k, v, causal=True, interpret=INTERPRET, backward=TINY, block_q=16, block_k=16
        )

    check_grads(f, (q, k, v), order=1, modes=["rev"], atol=2e-2, rtol=2e-2, eps=1e-2)


def test_bad_tile_is_a_clear_error():
    with pytest.raises(ValueError, match="block_k=24"):
        BackwardConfig(block_k=24)
    with pytest.raises(ValueError, match="num_warps=0"):
        BackwardConfig(num_warps=0)
    with pytest.raises(ValueError, match="dq='atomics' unknown"):
        BackwardConfig(dq="atomics")


@pytest.mark.skipif(not ON_GPU, reason="needs a GPU: realistic shapes compile the Triton kernels")
@pytest.mark.parametrize("dq", ["two_pass", "atomic"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(("dtype", "d", "h_kv"), [("float16", 64, 16), ("bfloat16", 128, 2)])
def test_gpu_shapes(dq, causal, dtype, d, h_kv):
    config = dataclasses.replace(heuristic_config(d), dq=dq)
    q, k, v, do, ref = _gpu_case(causal, dtype, d, h_kv)

    def loss(q, k, v):
        o = flash_attention(q, k, v, causal=causal, backward=config)
        return jnp.sum(o.astype(jnp.float32) * do.astype(jnp.float32))

    grads = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))(q, k, v)
    check(grads, ref, dtype)


@functools.cache
def _gpu_case(causal, dtype, d, h_kv):
    """Inputs and their float64 gradients, shared by the two dQ families."""
    b, n, h = 2, 1000, 16
    q, k, v, do = random(
        5, (b, n, h, d), (b, n, h_kv, d), (b, n, h_kv, d), (b, n, h, d), dtype=dtype
    )
    return q, k, v, do, grads_float64(q, k, v, do, causal=causal)
