"""Reference attention: the specification every kernel is tested against.

``reference_attention`` is plain JAX with float32 accumulation (XLA may fuse it as it
likes); ``attention_float64`` is the same function in float64 numpy, the ground truth
of the tests, and ``attention_grads_float64`` its gradients. All take
``[batch, seq, heads, head_dim]`` and grouped-query K/V, and causal masking is top-left
aligned (query i sees keys j <= i), as in ``jax.nn``.

>>> import numpy as np
>>> q = np.ones((1, 3, 2, 4))
>>> out, lse = attention_float64(q, q, q, causal=True)
>>> out.shape, lse.shape
((1, 3, 2, 4), (1, 2, 3))
"""

from __future__ import annotations

import math

import numpy as np


def _scale(d: int, sm_scale: float | None) -> float:
    return 1.0 / math.sqrt(d) if sm_scale is None else float(sm_scale)


def causal_mask(n: int, kv_len: int) -> np.ndarray:
    """Boolean ``[n, kv_len]``: True where query i may attend key j (j <= i)."""
    return np.arange(kv_len)[None, :] <= np.arange(n)[:, None]


def visible_mask(n: int, kv_len: int, *, causal=False, window=None, offset=0) -> np.ndarray:
    """Boolean ``[n, kv_len]``: True where query i may attend key j. Causal: ``j <= i +
    offset``; ``window`` (W or ``(left, right)``, as ``flash_attention`` reads it):
    ``i - left <= j <= i + right``."""
    from pallas_kernels._common import window_bounds

    rows, cols = np.arange(n)[:, None], np.arange(kv_len)[None, :]
    visible = np.ones((n, kv_len), bool)
    if causal:
        visible &= cols <= rows + offset
    left, right = window_bounds(window, causal) or (None, None)
    if left is not None:
        visible &= cols >= rows - left
    if right is not None and not causal:  # causal: the diagonal above is the right edge
        visible &= cols <= rows + right
    return visible


def attention_float64(q, k, v, *, causal=False, sm_scale=None, window=None):
    """Attention in float64 numpy; returns ``(O [b,n,h,d], lse [b,h,n])``.

    Rows with every key masked give O = 0 and lse = -inf, like the kernel.
    """
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    group = q.shape[2] // k.shape[2]
    k, v = np.repeat(k, group, axis=2), np.repeat(v, group, axis=2)
    s = np.einsum("bqhd,bkhd->bhqk", q, k) * _scale(q.shape[-1], sm_scale)
    if causal or window is not None:
        s = np.where(visible_mask(q.shape[1], k.shape[1], causal=causal, window=window), s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    m_safe = np.where(np.isfinite(m), m, 0.0)
    p = np.exp(s - m_safe)
    l = p.sum(axis=-1, keepdims=True)  # noqa: E741
    o = np.einsum("bhqk,bkhd->bqhd", p / np.where(l == 0, 1.0, l), v)
    with np.errstate(divide="ignore"):
        lse = (m_safe + np.log(l))[..., 0]
    return o, lse


def attention_grads_float64(
    q, k, v, do, *, causal=False, sm_scale=None, offset=0, dlse=None, window=None
):
    """dQ, dK, dV of ``sum(O∘dO) + sum(lse∘dlse)`` in float64 numpy, from the formulas of
    FlashAttention-2 §3.2 on materialised matrices; GQA K/V gradients summed per group.
    ``offset`` shifts the causal diagonal (key j visible to row i iff j <= i + offset)."""
    q, k, v, do = (np.asarray(x, np.float64) for x in (q, k, v, do))
    group = q.shape[2] // k.shape[2]
    kk, vv = np.repeat(k, group, axis=2), np.repeat(v, group, axis=2)
    scale = _scale(q.shape[-1], sm_scale)
    s = np.einsum("bqhd,bkhd->bhqk", q, kk, optimize=True) * scale
    if causal or window is not None:
        visible = visible_mask(q.shape[1], k.shape[1], causal=causal, window=window, offset=offset)
        s = np.where(visible, s, -np.inf)
    m = np.max(s, axis=-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(m), m, 0))
    total = e.sum(-1, keepdims=True)
    p = e / np.where(total == 0, 1, total)
    o = np.einsum("bhqk,bkhd->bqhd", p, vv, optimize=True)
    dv = np.einsum("bhqk,bqhd->bkhd", p, do, optimize=True)
    dp = np.einsum("bqhd,bkhd->bhqk", do, vv, optimize=True)
    delta = np.einsum("bqhd,bqhd->bhq", do, o, optimize=True)[..., None]
    if dlse is not None:
        delta = delta - np.asarray(dlse, np.float64)[..., None]
    ds = p * (dp - delta) * scale
    dq = np.einsum("bhqk,bkhd->bqhd", ds, kk, optimize=True)
    dk = np.einsum("bhqk,bqhd->bkhd", ds, q, optimize=True)
    fold = lambda x: x.reshape(*x.shape[:2], k.shape[2], group, x.shape[-1]).sum(3)  # noqa: E731
    return dq, fold(dk), fold(dv)


def reference_attention(q, k, v, *, causal=False, sm_scale=None):
    """Plain-JAX attention with float32 scores, softmax and accumulation; O in q's dtype.

    >>> import jax.numpy as jnp
    >>> reference_attention(jnp.ones((1, 4, 2, 8)), jnp.ones((1, 4, 1, 8)),
    ...                     jnp.ones((1, 4, 1, 8)), causal=True).shape
    (1, 4, 2, 8)
    """
    import jax
    import jax.numpy as jnp

    b, n, h, d = q.shape
    kv_len, h_kv = k.shape[1], k.shape[2]
    qg = q.reshape(b, n, h_kv, h // h_kv, d)
    hi = jax.lax.Precision.HIGHEST  # a specification: no tf32 for float32 inputs
    s = jnp.einsum("bqgjd,bkgd->bgjqk", qg, k, preferred_element_type=jnp.float32, precision=hi)
    s = s * _scale(d, sm_scale)
    if causal:
        s = jnp.where(jnp.asarray(causal_mask(n, kv_len)), s, -jnp.inf)
    p = jax.nn.softmax(s, axis=-1)
    o = jnp.einsum("bgjqk,bkgd->bqgjd", p, v.astype(jnp.float32), precision=hi)
    return o.reshape(b, n, h, d).astype(q.dtype)
