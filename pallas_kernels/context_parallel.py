"""Attention with the sequence split over the devices of a JAX mesh (context parallelism).

Three schemes, each a ``shard_map`` over one mesh axis of ``P`` devices, each running
our flash kernel on local chunks and merging partial results by their log-sum-exp:

- ``ring`` (Ring Attention, Liu et al. 2023, §3): Q stays; the K/V chunks travel
  around the ring with ``lax.ppermute``, one hop per step, P steps. The next chunk is
  sent while the current one is computed on (XLA schedules the send asynchronously).
- ``allgather`` (Llama 3, Grattafiori et al. 2024, §3.3.2): ``lax.all_gather`` of K and
  V, then local attention of the Q chunk against the whole (causal: visible) K/V.
- ``ulysses`` (DeepSpeed-Ulysses, Jacobs et al. 2023, §3): ``lax.all_to_all`` turns
  sequence shards into head shards, full-sequence attention runs on h/P heads, and a
  second all-to-all turns O back. Needs ``h % P == 0``; K/V heads that do not divide
  by P are replicated up to lcm(h_kv, P).

Causal attention with a contiguous split leaves device P-1 with P times the work of
device 0. ``balance="zigzag"`` (Striped/zig-zag assignment, as in Brandon et al. 2023
and the Llama 3 CP) cuts the sequence into 2P chunks and gives device i chunks
``i`` and ``2P-1-i``, so every device has the same work at every ring step.

Merging two partial results ``(o_a, lse_a)`` and ``(o_b, lse_b)`` over disjoint key
sets is exact: ``lse = logaddexp(lse_a, lse_b)``,
``o = o_a·exp(lse_a - lse) + o_b·exp(lse_b - lse)`` (the online softmax of
FlashAttention, §3.1, applied across devices).

>>> import jax, jax.numpy as jnp
>>> mesh = jax.sharding.Mesh(jax.devices()[:1], ("sp",))
>>> q = jnp.ones((1, 32, 2, 16), jnp.float32)
>>> context_parallel_attention(q, q, q, mesh=mesh, axis="sp", interpret=True).shape
(1, 32, 2, 16)
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import PartitionSpec

SCHEMES = ("ring", "allgather", "ulysses")
BALANCES = ("contiguous", "zigzag")


# --- jax version compatibility ----------------------------------------------------
def shard_map_compat(f, *, mesh, in_specs, out_specs):
    """``jax.shard_map`` (jax >= 0.7) or ``jax.experimental.shard_map`` (older); no
    replication checks, since the Pallas calls inside carry no varying-axis rules."""
    if hasattr(jax, "shard_map"):
        return jax.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False)
    from jax.experimental.shard_map import shard_map  # pragma: no cover (jax < 0.7)

    return shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_rep=False)


# --- token orders -----------------------------------------------------------------
def zigzag_order(n: int, devices: int) -> jnp.ndarray:
    """Token indices in zig-zag order: device i's shard holds chunks i and 2P-1-i.

    >>> zigzag_order(8, 2).tolist()
    [0, 1, 6, 7, 2, 3, 4, 5]
    """
    chunks = 2 * devices
    if n % chunks:
        raise ValueError(f"zig-zag needs n divisible by 2*devices={chunks}: {n=}")
    size = n // chunks
    order = []
    for i in range(devices):
        for c in (i, chunks - 1 - i):
            order.extend(range(c * size, (c + 1) * size))
    return jnp.asarray(order, jnp.int32)


def to_zigzag(x, devices: int):
    """``x [b, n, ...]`` with its tokens put in zig-zag order (axis 1)."""
    return jnp.take(x, zigzag_order(x.shape[1], devices), axis=1)


def from_zigzag(x, devices: int):
    """The inverse of ``to_zigzag``."""
    inverse = jnp.argsort(zigzag_order(x.shape[1], devices))
    return jnp.take(x, inverse, axis=1)


# --- one chunk, and the merge -----------------------------------------------------
def _flash(q, k, v, *, causal, opts):
    """Our flash kernel on one chunk: ``(o float32 [b,n,h,d], lse [b,h,n])``."""
    from pallas_kernels import flash_attention_forward

    o, lse = flash_attention_forward(q, k, v, causal=causal, **opts)
    return o.astype(jnp.float32), lse


def _empty(q):
    """The partial result of a chunk that sees no key: O = 0, lse = -inf."""
    b, n, h, d = q.shape
    return jnp.zeros((b, n, h, d), jnp.float32), jnp.full((b, h, n), -jnp.inf, jnp.float32)


def merge(a, b):
    """Combine two partial results over disjoint keys by their log-sum-exp.

    Rows where both sides saw no key stay O = 0, lse = -inf.
    """
    (o_a, lse_a), (o_b, lse_b) = a, b
    top = jnp.maximum(lse_a, lse_b)
    top = jnp.where(jnp.isfinite(top), top, 0.0)
    w_a, w_b = jnp.exp(lse_a - top), jnp.exp(lse_b - top)
    total = w_a + w_b
    lse = top + jnp.log(total)
    scale = lambda w: jnp.transpose(w / jnp.where(total == 0, 1.0, total), (0, 2, 1))[..., None]  # noqa: E731
    return o_a * scale(w_a) + o_b * scale(w_b), lse


def _concat_rows(parts):
    """Partial results of consecutive query rows, joined along the sequence."""
    return (
        jnp.concatenate([p[0] for p in parts], axis=1),
        jnp.concatenate([p[1] for p in parts], axis=2),
    )


# --- ring ---------------------------------------------------------------------------
def _ring_step(q, k, v, src, *, me, causal, balance, opts):
    """Partial result of the local Q against the K/V shard that came from device ``src``."""
    full = functools.partial(_flash, causal=False, opts=opts)
    diag = functools.partial(_flash, causal=True, opts=opts)
    if not causal:
        return full(q, k, v)
    if balance == "contiguous":
        # earlier shard: all visible; own shard: the diagonal; later shard: nothing
        branches = (lambda: full(q, k, v), lambda: diag(q, k, v), lambda: _empty(q))
        return lax.switch(jnp.sign(src - me) + 1, branches)
    half = q.shape[1] // 2  # zig-zag: the shard is chunks (me, 2P-1-me)

    def earlier():  # src < me: all of Q sees the first K/V chunk only
        return full(q, k[:, :half], v[:, :half])

    def later():  # src > me: only the second Q chunk sees anything, and sees all of it
        return _concat_rows([_empty(q[:, :half]), full(q[:, half:], k, v)])

    return lax.switch(jnp.sign(src - me) + 1, (earlier, lambda: diag(q, k, v), later))


def _ring(q, k, v, *, axis, devices, causal, balance, opts):
    """Ring attention on one device's shards: P steps, K/V passed one hop per step.

    At step s the device holds the K/V shard that started on device ``me - s``; it
    sends that shard on before computing with it, so the transfer overlaps the compute.
    """
    me = lax.axis_index(axis)
    hop = [(i, (i + 1) % devices) for i in range(devices)]
    step = functools.partial(_ring_step, q, me=me, causal=causal, balance=balance, opts=opts)

    def send_and_compute(s, carry):
        k, v, acc = carry
        k_next, v_next = lax.ppermute((k, v), axis, hop)
        acc = merge(acc, step(k, v, (me - s) % devices))
        return k_next, v_next, acc

    k, v, acc = lax.fori_loop(0, devices - 1, send_and_compute, (k, v, _empty(q)))
    return merge(acc, step(k, v, (me + 1) % devices))  # the last shard: nothing to send


# --- all-gather -----------------------------------------------------------------
def _allgather(q, k, v, *, axis, devices, causal, balance, opts):
    """All-gather K/V (shards in device order), then attention of the local Q.

    Causal: the gathered K/V is walked shard by shard with the ring's per-shard rule,
    so shards wholly above the diagonal cost nothing and zig-zag balances the work.
    """
    k_all = lax.all_gather(k, axis, axis=1, tiled=True)
    v_all = lax.all_gather(v, axis, axis=1, tiled=True)
    if not causal:
        return _flash(q, k_all, v_all, causal=False, opts=opts)
    me, size = lax.axis_index(axis), k.shape[1]
    step = functools.partial(_ring_step, q, me=me, causal=causal, balance=balance, opts=opts)

    def one_shard(src, acc):
        shard = lambda x: lax.dynamic_slice_in_dim(x, src * size, size, axis=1)  # noqa: E731
        return merge(acc, step(shard(k_all), shard(v_all), src))

    return lax.fori_loop(0, devices, one_shard, _empty(q))


# --- Ulysses --------------------------------------------------------------------
def _seq_to_heads(x, axis):
    """``[b, n/P, h, d]`` sequence shard -> ``[b, n, h/P, d]`` head shard."""
    return lax.all_to_all(x, axis, split_axis=2, concat_axis=1, tiled=True)


def _heads_to_seq(x, axis):
    return lax.all_to_all(x, axis, split_axis=1, concat_axis=2, tiled=True)


def _ulysses(q, k, v, *, axis, devices, causal, balance, opts):
    """Two all-to-alls around full-sequence attention on h/P heads.

    Every device sees the whole sequence, so causal work is balanced whatever the
    token order; a zig-zag order is undone locally after the first all-to-all.
    """
    replicas = devices // math.gcd(k.shape[2], devices)
    if replicas > 1:  # GQA with h_kv not divisible by P: K/V heads up to lcm(h_kv, P)
        k, v = jnp.repeat(k, replicas, axis=2), jnp.repeat(v, replicas, axis=2)
    qh, kh, vh = (_seq_to_heads(x, axis) for x in (q, k, v))
    zigzag = causal and balance == "zigzag"
    if zigzag:
        qh, kh, vh = (from_zigzag(x, devices) for x in (qh, kh, vh))
    o, lse = _flash(qh, kh, vh, causal=causal, opts=opts)
    if zigzag:
        o = to_zigzag(o, devices)
        lse = jnp.swapaxes(to_zigzag(jnp.swapaxes(lse, 1, 2), devices), 1, 2)
    o = _heads_to_seq(o, axis)
    lse = lax.all_to_all(lse, axis, split_axis=2, concat_axis=1, tiled=True)
    return o, lse


_SCHEME_FNS = {"ring": _ring, "allgather": _allgather, "ulysses": _ulysses}


# --- the public entry point ---------------------------------------------------------
def _check(q, k, mesh, axis, scheme, balance) -> int:
    if scheme not in SCHEMES:
        raise ValueError(f"unknown scheme={scheme!r}; choose one of {SCHEMES}")
    if balance not in BALANCES:
        raise ValueError(f"unknown balance={balance!r}; choose one of {BALANCES}")
    if axis not in mesh.axis_names:
        raise ValueError(f"mesh has no axis {axis!r}; its axes are {mesh.axis_names}")
    devices = mesh.shape[axis]
    n, h = q.shape[1], q.shape[2]
    if k.shape[1] != n:
        raise ValueError(f"context parallelism needs kv_len == n: {n=}, kv_len={k.shape[1]}")
    chunks = devices * (2 if balance == "zigzag" else 1)
    if n % chunks:
        raise ValueError(f"sequence n={n} is not divisible by {chunks} ({balance}, {devices=})")
    if scheme == "ulysses" and h % devices:
        raise ValueError(f"ulysses needs heads divisible by devices: h={h}, devices={devices}")
    return devices


def sharded_attention(*, mesh, axis, scheme="ring", causal=False, balance="contiguous", **opts):
    """The jitted, shard_map'd function ``(q, k, v) -> (o, lse)`` over sequence shards.

    Inputs are global arrays whose tokens are already in the order ``balance`` implies
    (``to_zigzag`` for "zigzag"); the output keeps that order. This is what a training
    stack calls: it permutes tokens once, at the input. ``opts`` go to
    ``pallas_kernels.flash_attention_forward`` (``interpret``, ``block_q``, ...).
    """
    return jax.jit(_sharded(**_static(mesh, axis, scheme, causal, balance, opts)))


def _static(mesh, axis, scheme, causal, balance, opts: dict) -> dict:
    """The static (hashable) arguments of one call: ``opts`` as sorted pairs."""
    return dict(
        mesh=mesh,
        axis=axis,
        scheme=scheme,
        causal=bool(causal),
        balance=balance,
        opts=tuple(sorted(opts.items())),
    )


def _sharded(*, mesh, axis, scheme, causal, balance, opts):
    devices = mesh.shape[axis]
    body = functools.partial(
        _SCHEME_FNS[scheme],
        axis=axis,
        devices=devices,
        causal=causal,
        balance=balance,
        opts=dict(opts),
    )
    seq = PartitionSpec(None, axis, None, None)
    return shard_map_compat(
        body,
        mesh=mesh,
        in_specs=(seq, seq, seq),
        out_specs=(seq, PartitionSpec(None, None, axis)),
    )


def context_parallel_attention(
    q,
    k,
    v,
    *,
    mesh,
    axis,
    scheme: str = "ring",
    causal: bool = False,
    balance: str | None = None,
    return_lse: bool = False,
    **opts,
):
    """Attention with q, k, v split along the sequence over ``mesh``'s ``axis``.

    Args:
      q: ``[batch, n, heads, head_dim]``; k, v: ``[batch, n, kv_heads, head_dim]``
        (GQA), tokens in natural order; n must divide by the devices (2x for zig-zag).
      scheme: "ring", "allgather" or "ulysses".
      balance: "contiguous" or "zigzag"; by default zig-zag for causal ring and
        all-gather, contiguous otherwise (it changes nothing for Ulysses or non-causal).
      opts: passed to ``flash_attention_forward`` (sm_scale, interpret, block_q, ...).

    Returns:
      O in q's dtype and natural token order, and the lse ``[b, h, n]`` if asked.
    """
    if balance is None:
        balance = "zigzag" if causal and scheme != "ulysses" else "contiguous"
    _check(q, k, mesh, axis, scheme, balance)
    o, lse = _natural_order_attention(q, k, v, **_static(mesh, axis, scheme, causal, balance, opts))
    return (o, lse) if return_lse else o


@functools.partial(jax.jit, static_argnames=("mesh", "axis", "scheme", "causal", "balance", "opts"))
def _natural_order_attention(q, k, v, *, mesh, axis, scheme, causal, balance, opts):
    """One jitted program: permute to the balance's order, shard_map, permute back."""
    devices = mesh.shape[axis]
    fn = _sharded(mesh=mesh, axis=axis, scheme=scheme, causal=causal, balance=balance, opts=opts)
    if balance == "zigzag":
        q, k, v = (to_zigzag(x, devices) for x in (q, k, v))
    o, lse = fn(q, k, v)
    if balance == "zigzag":
        o = from_zigzag(o, devices)
        lse = jnp.swapaxes(from_zigzag(jnp.swapaxes(lse, 1, 2), devices), 1, 2)
    return o.astype(q.dtype), lse
