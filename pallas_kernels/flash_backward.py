"""Backward FlashAttention-2 in Pallas for NVIDIA GPUs (Triton lowering): any GPU, and
CPU through the Pallas interpreter. ``pallas_kernels.flash_attention`` wires it into the
``jax.custom_vjp`` of the forward.

FlashAttention-2 (Dao 2023), §3.2 and Algorithm 2. dQ is a sum over K blocks, which
Algorithm 2's loop order cannot keep on chip; ``Config.dq`` picks how it is
summed (the two families of ``perfmodel/costs/backward.py``):

* ``"two_pass"``: a separate dQ pass (the structure of Triton's fused-attention
  tutorial), three ``pallas_call``s as listed below; 7 n×m×d products.
* ``"atomic"``: FlashAttention-2's own structure (Algorithm 2, line 21): the dK/dV
  kernel also forms each tile's dS K_j and adds it into a float32 dQ buffer with
  ``pallas.triton.atomic_add``; a scale-and-cast turns the buffer into dQ. No step 3;
  5 products. Correct, but slow in Pallas: its Triton lowering emits acquire-release
  ``atomic_rmw`` at GPU scope that return the old value (jax 0.10-0.11,
  ``_src/pallas/triton/lowering._atomic_rmw``), where FlashAttention-2 issues relaxed
  ``atomicAdd``; on the H200 it took 3.3-6.1× the two-pass's time (docs/perf-notes.md).

The steps:

1. ``delta``: D = rowsum(dO ∘ O) per query row (Algorithm 2, line 4).
2. ``dkdv``: the grid is Algorithm 2's outer loop, over blocks of B_c = ``block_k``
   keys of one (batch, kv head). K_j, V_j and the float32 accumulators dK_j, dV_j stay
   on chip while a ``fori_loop`` streams the query heads of the GQA group and their
   blocks of B_r = ``block_q`` rows of Q, dO, LSE and D, recomputing
   S = Q K_jᵀ and P = exp(scale·S − LSE) tile by tile:
   dV_j += Pᵀ dO,  dP = dO V_jᵀ,  dS = P ∘ (dP − D),  dK_j += dSᵀ Q.
   Summing the group inside one program gives GQA's dK, dV without a reduction pass.
3. ``dq``: the forward's loop order (grid over Q blocks, loop over K/V blocks), which
   recomputes S, P and dP and keeps dQ_i on chip: dQ_i += dS K_j.

No n×m matrix touches HBM. Tiles wholly above the causal diagonal or outside a sliding
window are skipped, and only tiles that cross an edge are masked. Layout ``[batch, seq,
heads, head_dim]``; a head dim that is not a power of two is zero-padded to one (as the
Triton forward).
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

from pallas_kernels._common import (
    LOG2_E,
    is_power_of_two,
    pad_seq,
    tile_range,
    triton_compiler_params,
    visible_bounds,
)
from pallas_kernels.flash_triton import native_head_dim

#: How dQ is summed over K blocks (``perfmodel.costs.backward.DQ_FAMILIES``).
DQ_FAMILIES = ("two_pass", "atomic")


@dataclasses.dataclass(frozen=True, slots=True)
class Config:
    """Tiles and launch parameters of the two main kernels, validated when made.

    ``block_q``/``block_k``: B_r/B_c of the dK/dV kernel (its K block is the one kept on
    chip); ``dq_block_q``/``dq_block_k`` the same for the dQ kernel (its Q block is kept).
    """

    block_q: int = 64
    block_k: int = 64
    dq_block_q: int = 64
    dq_block_k: int = 64
    num_warps: int = 4
    num_stages: int = 2
    #: how dQ is summed over K blocks: one of ``DQ_FAMILIES``
    dq: str = "two_pass"
    #: launch parameters of the dQ pass (None: the dK/dV kernel's)
    dq_num_warps: int | None = None
    dq_num_stages: int | None = None

    def __post_init__(self) -> None:
        if self.dq not in DQ_FAMILIES:
            raise ValueError(f"dq={self.dq!r} unknown; known: {DQ_FAMILIES}")
        for name in ("block_q", "block_k", "dq_block_q", "dq_block_k"):
            value = getattr(self, name)
            if not is_power_of_two(value) or value < 16:
                raise ValueError(f"{name}={value} must be a power of two >= 16")
        for name in ("num_warps", "num_stages", "dq_num_warps", "dq_num_stages"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)} must be positive")

    def fit(self, n: int, kv_len: int) -> Config:
        """Shrink tiles to the smallest power of two >= 16 covering a short sequence."""
        cover = lambda x, blk: min(blk, max(16, pl.next_power_of_2(x)))  # noqa: E731
        return dataclasses.replace(
            self,
            block_q=cover(n, self.block_q),
            block_k=cover(kv_len, self.block_k),
            dq_block_q=cover(n, self.dq_block_q),
            dq_block_k=cover(kv_len, self.dq_block_k),
        )


def heuristic_config(d: int) -> Config:
    """Per head dim: the two-pass family, 64×64 tiles, 4 warps (8 above d=128), 2 stages
    (1 at d=256).

    Measured on the H200 at d=128, n=8192 (``bench_backward --variants``, run
    ``backward-20261130T120417Z``): this is the fastest of six; the atomic family runs at
    0.10-0.19 of cuDNN's speed (Pallas' Triton atomics are acquire-release read-modify-
    writes, one per element), the two-pass at 0.61-0.63 there (0.60-0.68 at n >= 4096).
    """
    d = native_head_dim(d)
    return Config(num_warps=4 if d <= 128 else 8, num_stages=2 if d <= 128 else 1)


def _dot(a, b, *, trans_a=False, trans_b=False):
    """Tensor-core product with f32 accumulation; f32 inputs get f32 products (no tf32)."""
    precision = lax.Precision.HIGHEST if a.dtype == jnp.float32 else None
    return pltriton.dot(a, b, trans_a=trans_a, trans_b=trans_b, precision=precision)


# --- 1. D = rowsum(dO ∘ O) ---------------------------------------------------------------
def _delta_kernel(o_ref, do_ref, dlse_ref, delta_ref):
    """D_i = rowsum(dO_i ∘ O_i), minus the cotangent of the log-sum-exp (dS absorbs it)."""
    o = o_ref[...].astype(jnp.float32)
    do = do_ref[...].astype(jnp.float32)
    delta_ref[...] = jnp.sum(o * do, axis=1) - dlse_ref[...]


def _delta(o_p, do_p, dlse_p, *, block_q, interpret):
    b, n_pad, h, d = o_p.shape
    row_spec = pl.BlockSpec((None, block_q, None, d), lambda i, bi, hi: (bi, i, hi, 0))
    stat_spec = pl.BlockSpec((None, None, block_q), lambda i, bi, hi: (bi, hi, i))
    return pl.pallas_call(
        _delta_kernel,
        grid=(n_pad // block_q, b, h),
        in_specs=[row_spec, row_spec, stat_spec],
        out_specs=stat_spec,
        out_shape=jax.ShapeDtypeStruct((b, h, n_pad), jnp.float32),
        compiler_params=triton_compiler_params(4, 1),
        interpret=interpret,
        name="flash_attention_bwd_delta",
    )(o_p, do_p, dlse_p)


# --- 2. dK, dV: Algorithm 2's loop order ---------------------------------------------------
def _dkdv_kernel(
    q_ref,
    k_ref,
    v_ref,
    do_ref,
    lse_ref,
    delta_ref,
    *refs,
    scale,
    bounds,
    block_q,
    block_k,
    group,
    n_q_tiles,
    atomic_dq,
):
    """One program: K block ``j`` of one (batch, kv head); loops over the group's query
    heads and their Q blocks. ``lse_ref`` holds the log-sum-exp in log2 units.

    ``refs``: ``dk_ref, dv_ref``; with ``atomic_dq`` first the float32 dQ buffer as an
    input (aliased, unused) and last the same buffer as an output, into which every
    tile adds its dS K_j atomically (FlashAttention-2, Algorithm 2, line 21)."""
    if atomic_dq:
        _, dk_ref, dv_ref, dq_ref = refs
    else:
        dk_ref, dv_ref = refs
    j = pl.program_id(0)
    k = k_ref[...]  # [block_k, d], on chip for the whole loop
    v = v_ref[...]
    d = k.shape[-1]
    cols = j * block_k + lax.broadcasted_iota(jnp.int32, (block_q, block_k), 1)
    # Key j is seen by rows i in [j - right, j + left]: the forward's range, sides swapped.
    # Padded rows have lse = +inf (P = 0): no tile needs a mask for them.
    left, right = bounds
    lo, lo_full, hi_full, hi = tile_range(
        j * block_k,
        rows=block_k,
        tile=block_q,
        length=n_q_tiles * block_q,
        left=right,
        right=left,
    )

    def step(i, carry, *, head, masked):
        dk, dv = carry
        start = pl.multiple_of(i * block_q, block_q)
        q = q_ref[pl.ds(start, block_q), head, :]  # [block_q, d]
        do = do_ref[pl.ds(start, block_q), head, :]
        lse = lse_ref[head, pl.ds(start, block_q)]  # log2 units; +inf on empty rows
        delta = delta_ref[head, pl.ds(start, block_q)]
        s = _dot(q, k, trans_b=True)  # S = Q K_jᵀ, f32 [block_q, block_k]
        p = jnp.exp2(s * (scale * LOG2_E) - lse[:, None])  # P, recomputed
        if masked:
            rows = start + lax.broadcasted_iota(jnp.int32, (block_q, block_k), 0)
            p = _masked(p, rows, cols, bounds)
        dv = dv + _dot(p.astype(do.dtype), do, trans_a=True)  # dV_j += Pᵀ dO
        dp = _dot(do, v, trans_b=True)  # dP = dO V_jᵀ
        ds = p * (dp - delta[:, None])  # dS = P ∘ (dP − D)
        dk = dk + _dot(ds.astype(q.dtype), q, trans_a=True)  # dK_j += dSᵀ Q
        if atomic_dq:  # dQ_i += dS K_j, summed over K blocks in the float32 buffer
            dq_tile = _dot(ds.astype(k.dtype), k)
            pltriton.atomic_add(dq_ref, (pl.ds(start, block_q), head, slice(None)), dq_tile)
        return dk, dv

    def head_loop(head, carry):
        masked = functools.partial(step, head=head, masked=True)
        if right is not None:  # the rows above the causal diagonal or the window's right edge
            carry = lax.fori_loop(lo, lo_full, masked, carry)
        carry = lax.fori_loop(
            lo_full, hi_full, functools.partial(step, head=head, masked=False), carry
        )
        if left is not None:  # the rows past the window's left edge
            carry = lax.fori_loop(hi_full, hi, masked, carry)
        return carry

    zeros = jnp.zeros((block_k, d), jnp.float32)
    dk, dv = lax.fori_loop(0, group, head_loop, (zeros, zeros))
    dk_ref[...] = (dk * scale).astype(dk_ref.dtype)
    dv_ref[...] = dv.astype(dv_ref.dtype)


def _masked(p, rows, cols, bounds):
    """P with 0 where key ``cols`` is outside the ``bounds`` of query ``rows``
    (``visible_bounds``); padded keys and rows need no mask here (zero K, V; lse = +inf)."""
    left, right = bounds
    if left is not None:
        p = jnp.where(cols >= rows - left, p, 0.0)
    if right is not None:
        p = jnp.where(cols <= rows + right, p, 0.0)
    return p


def _dkdv(q_p, k_p, v_p, do_p, lse2_p, delta_p, *, cfg, bounds, scale, interpret):
    """``(dK, dV)``, or ``(dK, dV, dQ·scale⁻¹ in float32)`` when ``cfg.dq == "atomic"``."""
    b, n_pad, h, d = q_p.shape
    kv_pad, h_kv = k_p.shape[1], k_p.shape[2]
    group = h // h_kv
    # The grid is Algorithm 2's outer loop (K blocks first: programs running together
    # share one head's Q, dO in L2); Q, dO, LSE, D: the whole group of query heads.
    grid = (kv_pad // cfg.block_k, b, h_kv)
    kv_spec = pl.BlockSpec((None, cfg.block_k, None, d), lambda j, bi, g: (bi, j, g, 0))
    rows_spec = pl.BlockSpec((None, n_pad, group, d), lambda j, bi, g: (bi, 0, g, 0))
    stat_spec = pl.BlockSpec((None, group, n_pad), lambda j, bi, g: (bi, g, 0))
    atomic_dq = cfg.dq == "atomic"
    kernel = functools.partial(
        _dkdv_kernel,
        scale=scale,
        bounds=bounds,
        block_q=cfg.block_q,
        block_k=cfg.block_k,
        group=group,
        n_q_tiles=n_pad // cfg.block_q,
        atomic_dq=atomic_dq,
    )
    in_specs = [rows_spec, kv_spec, kv_spec, rows_spec, stat_spec, stat_spec]
    out_specs = [kv_spec, kv_spec]
    out_shape = [jax.ShapeDtypeStruct(k_p.shape, k_p.dtype)] * 2
    args = [q_p, k_p, v_p, do_p, lse2_p, delta_p]
    if atomic_dq:  # the zeroed float32 buffer goes in and comes back out, summed
        in_specs.append(rows_spec)
        out_specs.append(rows_spec)
        out_shape.append(jax.ShapeDtypeStruct(q_p.shape, jnp.float32))
        args.append(jnp.zeros(q_p.shape, jnp.float32))
    return pl.pallas_call(
        kernel,
        grid=grid,
        in_specs=in_specs,
        out_specs=out_specs,
        out_shape=out_shape,
        input_output_aliases={6: 2} if atomic_dq else {},
        compiler_params=triton_compiler_params(cfg.num_warps, cfg.num_stages),
        interpret=interpret,
        name="flash_attention_bwd_dkdvdq" if atomic_dq else "flash_attention_bwd_dkdv",
    )(*args)


# --- 3. dQ: the forward's loop order ------------------------------------------------------
def _dq_kernel(
    q_ref,
    k_ref,
    v_ref,
    do_ref,
    lse_ref,
    delta_ref,
    dq_ref,
    *,
    scale,
    bounds,
    block_q,
    block_k,
    n_k_tiles,
):
    """One program: Q block ``i`` of one (batch, head); loops over K/V blocks."""
    i = pl.program_id(0)
    q = q_ref[...]  # [block_q, d], on chip with dO, LSE, D and the dQ accumulator
    do = do_ref[...]
    lse = lse_ref[...]
    delta = delta_ref[...]
    rows = i * block_q + lax.broadcasted_iota(jnp.int32, (block_q, block_k), 0)

    def step(j, dq, *, masked):
        start = pl.multiple_of(j * block_k, block_k)
        k = k_ref[pl.ds(start, block_k), :]
        v = v_ref[pl.ds(start, block_k), :]
        p = jnp.exp2(_dot(q, k, trans_b=True) * (scale * LOG2_E) - lse[:, None])
        if masked:
            cols = start + lax.broadcasted_iota(jnp.int32, (block_q, block_k), 1)
            p = _masked(p, rows, cols, bounds)
        ds = p * (_dot(do, v, trans_b=True) - delta[:, None])  # dS = P ∘ (dO V_jᵀ − D)
        return dq + _dot(ds.astype(k.dtype), k)  # dQ_i += dS K_j

    # padded keys are zero: they add nothing to dQ, so only the window's edges are masked
    lo, lo_full, hi_full, hi = tile_range(
        i * block_q,
        rows=block_q,
        tile=block_k,
        length=n_k_tiles * block_k,
        left=bounds[0],
        right=bounds[1],
    )
    dq = jnp.zeros(q.shape, jnp.float32)
    if bounds[0] is not None:
        dq = lax.fori_loop(lo, lo_full, functools.partial(step, masked=True), dq)
    dq = lax.fori_loop(lo_full, hi_full, functools.partial(step, masked=False), dq)
    if bounds[1] is not None:
        dq = lax.fori_loop(hi_full, hi, functools.partial(step, masked=True), dq)
    dq_ref[...] = (dq * scale).astype(dq_ref.dtype)


def _dq(q_p, k_p, v_p, do_p, lse2_p, delta_p, *, cfg, bounds, scale, interpret):
    b, n_pad, h, d = q_p.shape
    kv_pad, h_kv = k_p.shape[1], k_p.shape[2]
    group = h // h_kv
    bq = cfg.dq_block_q
    grid = (n_pad // bq, b, h)
    row_spec = pl.BlockSpec((None, bq, None, d), lambda i, bi, hi: (bi, i, hi, 0))
    kv_spec = pl.BlockSpec((None, kv_pad, None, d), lambda i, bi, hi: (bi, 0, hi // group, 0))
    stat_spec = pl.BlockSpec((None, None, bq), lambda i, bi, hi: (bi, hi, i))
    kernel = functools.partial(
        _dq_kernel,
        scale=scale,
        bounds=bounds,
        block_q=bq,
        block_k=cfg.dq_block_k,
        n_k_tiles=kv_pad // cfg.dq_block_k,
    )
    return pl.pallas_call(
        kernel,
        grid=grid,
        in_specs=[row_spec, kv_spec, kv_spec, row_spec, stat_spec, stat_spec],
        out_specs=row_spec,
        out_shape=jax.ShapeDtypeStruct(q_p.shape, q_p.dtype),
        compiler_params=triton_compiler_params(
            cfg.dq_num_warps or cfg.num_warps, cfg.dq_num_stages or cfg.num_stages
        ),
        interpret=interpret,
        name="flash_attention_bwd_dq",
    )(q_p, k_p, v_p, do_p, lse2_p, delta_p)


# --- the three kernels together --------------------------------------------------------
def flash_attention_backward(
    q,
    k,
    v,
    o,
    lse,
    do,
    dlse=None,
    *,
    causal,
    sm_scale,
    config,
    interpret=False,
    diagonal_offset=0,
    window=None,
):
    """``(dQ, dK, dV)`` of attention from the forward's O and natural-log ``lse``.

    ``window``: the forward's sliding window (``_common.window_bounds``); tiles wholly
    outside it are skipped in both passes, as those above the causal diagonal.
    ``dlse`` is the cotangent of the log-sum-exp (None: zero). ``diagonal_offset``
    shifts the causal diagonal as the forward's test hook does (tests only). A head dim
    that is not native (``flash_triton.native_head_dim``) is zero-padded, the
    gradients sliced back.
    """
    d = q.shape[-1]
    d_pad = native_head_dim(d)
    pad = ((0, 0), (0, 0), (0, 0), (0, d_pad - d))
    q, k, v, o, do = (x if d_pad == d else jnp.pad(x, pad) for x in (q, k, v, o, do))
    grads = _backward(
        q,
        k,
        v,
        o,
        lse,
        do,
        dlse,
        bounds=visible_bounds(causal, window, diagonal_offset),
        sm_scale=sm_scale,
        config=config,
        interpret=interpret,
    )
    return tuple(g[..., :d] for g in grads)


@functools.partial(jax.jit, static_argnames=("bounds", "sm_scale", "config", "interpret"))
def _backward(q, k, v, o, lse, do, dlse, *, bounds, sm_scale, config, interpret):
    n, kv_len = q.shape[1], k.shape[1]
    cfg = config.fit(n, kv_len)
    # powers of two: the larger tile is a multiple of the smaller, so pad to it
    if cfg.dq == "atomic":  # no dQ pass: its tiles do not pad anything
        cfg = dataclasses.replace(cfg, dq_block_q=cfg.block_q, dq_block_k=cfg.block_k)
    q_mult, k_mult = max(cfg.block_q, cfg.dq_block_q), max(cfg.block_k, cfg.dq_block_k)
    q_p, o_p, do_p = (pad_seq(x, q_mult) for x in (q, o, do))
    k_p, v_p = pad_seq(k, k_mult), pad_seq(v, k_mult)
    n_pad = q_p.shape[1]
    stat_pad = ((0, 0), (0, 0), (0, n_pad - n))
    # Rows that see no key (lse = -inf) and padding rows get P = exp(s - inf) = 0.
    lse2 = jnp.where(jnp.isneginf(lse), jnp.inf, lse * LOG2_E)
    lse2 = jnp.pad(lse2, stat_pad, constant_values=jnp.inf)
    dlse = jnp.zeros_like(lse) if dlse is None else dlse
    delta = _delta(o_p, do_p, jnp.pad(dlse, stat_pad), block_q=q_mult, interpret=interpret)
    kw = dict(cfg=cfg, bounds=bounds, scale=sm_scale, interpret=interpret)
    if cfg.dq == "atomic":
        dk, dv, dq_f32 = _dkdv(q_p, k_p, v_p, do_p, lse2, delta, **kw)
        dq = (dq_f32[:, :n] * sm_scale).astype(q.dtype)  # the small convert step
        return dq, dk[:, :kv_len], dv[:, :kv_len]
    dk, dv = _dkdv(q_p, k_p, v_p, do_p, lse2, delta, **kw)
    dq = _dq(q_p, k_p, v_p, do_p, lse2, delta, **kw)
    return dq[:, :n], dk[:, :kv_len], dv[:, :kv_len]
