"""Naive attention: the three unfused steps that the roofline model calls "naive".

1. ``S = sm_scale * Q K^T`` written to HBM in the input dtype, ``[b, h, n, kv_len]``;
2. ``P = softmax(S)`` read back and written to HBM in the input dtype;
3. ``O = P V`` read back.

Each step is its own ``jax.jit`` function, called one after the other from Python, so
XLA compiles three executables and cannot fuse across them: S and P are the outputs
of steps 1 and 2 and must exist in device memory (``tests/test_naive_kernel.py``
checks the compiled HLO of each step). That is the at-least-four n x n HBM trips of
the model (write S, read S, write P, read P). ``naive_attention_jit`` is the same
attention as one jitted function, written as a user writes it (scores, mask, softmax,
product; K/V heads repeated for GQA): XLA then compiles the whole and may fuse across
the steps the three-step version keeps apart. Causal masking is top-left aligned;
masked scores are -inf. K/V may have fewer heads (grouped-query attention).

>>> import jax.numpy as jnp
>>> x = jnp.ones((1, 8, 2, 16), jnp.bfloat16)
>>> naive_attention(x, x, x, causal=True).shape
(1, 8, 2, 16)
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from pallas_kernels._common import softmax_scale
from pallas_kernels.reference import attention_float64, reference_attention

__all__ = [
    "attention_float64",
    "naive_attention",
    "naive_attention_jit",
    "reference_attention",
    "scores_step",
    "softmax_step",
    "pv_step",
]


@functools.partial(jax.jit, static_argnames=("causal", "sm_scale"))
def scores_step(q, k, *, causal: bool, sm_scale: float):
    """Step 1: ``S [b, h, n, kv_len]`` in q's dtype (f32 products, rounded on store)."""
    b, n, h, d = q.shape
    kv_len, h_kv = k.shape[1], k.shape[2]
    qg = q.reshape(b, n, h_kv, h // h_kv, d)
    s = jnp.einsum("bqgjd,bkgd->bgjqk", qg, k, preferred_element_type=jnp.float32)
    s = s * sm_scale
    if causal:  # computed from iotas inside the step: no n x kv_len mask read from HBM
        rows = jax.lax.broadcasted_iota(jnp.int32, (n, kv_len), 0)
        cols = jax.lax.broadcasted_iota(jnp.int32, (n, kv_len), 1)
        s = jnp.where(cols <= rows, s, -jnp.inf)
    return s.reshape(b, h, n, kv_len).astype(q.dtype)


@jax.jit
def softmax_step(s):
    """Step 2: ``P = softmax(S)`` over keys, computed in f32, stored in S's dtype."""
    return jax.nn.softmax(s.astype(jnp.float32), axis=-1).astype(s.dtype)


@jax.jit
def pv_step(p, v):
    """Step 3: ``O = P V`` as ``[b, n, h, d]`` with f32 accumulation."""
    b, h, n, kv_len = p.shape
    h_kv, d = v.shape[2], v.shape[3]
    pg = p.reshape(b, h_kv, h // h_kv, n, kv_len)
    o = jnp.einsum("bgjqk,bkgd->bqgjd", pg, v, preferred_element_type=jnp.float32)
    return o.reshape(b, n, h, d).astype(v.dtype)


def naive_attention(q, k, v, *, causal: bool = False, sm_scale: float | None = None):
    """Attention as three separately compiled steps; S and P round-trip through HBM."""
    b, n, h, d = q.shape
    if h % k.shape[2]:
        raise ValueError(f"heads {h=} must be a multiple of kv heads h_kv={k.shape[2]}")
    scale = softmax_scale(d, sm_scale)
    # S is dropped as soon as P exists, as a careful unfused implementation would
    p = softmax_step(scores_step(q, k, causal=bool(causal), sm_scale=scale))
    return pv_step(p, v)


@functools.partial(jax.jit, static_argnames=("causal", "sm_scale"))
def naive_attention_jit(q, k, v, *, causal: bool = False, sm_scale: float | None = None):
    """Attention as one jitted function, the way a user writes it; XLA decides what
    reaches HBM. Scores and softmax in the input dtype, as ``jax.nn.softmax`` gives."""
    b, n, h, d = q.shape
    if h % k.shape[2]:
        raise ValueError(f"heads {h=} must be a multiple of kv heads h_kv={k.shape[2]}")
    group = h // k.shape[2]
    k, v = jnp.repeat(k, group, axis=2), jnp.repeat(v, group, axis=2)
    scale = softmax_scale(d, sm_scale)
    s = jnp.einsum("bqhd,bkhd->bhqk", q, k) * jnp.asarray(scale, q.dtype)
    if causal:
        s = jnp.where(jnp.tril(jnp.ones((n, k.shape[1]), bool)), s, -jnp.inf)
    p = jax.nn.softmax(s, axis=-1)
    return jnp.einsum("bhqk,bkhd->bqhd", p, v)
