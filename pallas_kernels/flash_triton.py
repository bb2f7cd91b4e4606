"""Forward FlashAttention-2 in Pallas for NVIDIA GPUs (Triton lowering): any GPU, and CPU
through the Pallas interpreter. ``pallas_kernels.flash_attention`` is the entry point.

Layout is ``[batch, seq, heads, head_dim]`` for q, k and v (k and v may have fewer
heads: grouped-query attention). The kernel follows FlashAttention-2 (Dao 2023),
Algorithm 1: the Pallas grid is the outer loop over blocks of B_r = ``block_q`` query
rows, and inside each program a ``fori_loop`` streams blocks of B_c = ``block_k``
keys and values through on-chip memory with an online softmax (``m_i``, ``l_i``,
``acc``, all float32). Neither the n x n scores S nor the probabilities P touch HBM.

>>> import jax.numpy as jnp
>>> q = jnp.ones((1, 40, 2, 16), jnp.float32)
>>> triton_flash_attention(q, q, q, block_q=16, block_k=16, interpret=True).shape
(1, 40, 2, 16)
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
    LN_2,
    LOG2_E,
    check_qkv,
    is_power_of_two,
    pad_seq,
    softmax_scale,
    tile_range,
    triton_compiler_params,
    visible_bounds,
    window_bounds,
)

#: Head dims up to this run; one that is not a power of two >= 16 is zero-padded to one
#: (``native_head_dim``): Triton's block shapes are powers of two.
MAX_HEAD_DIM = 256
SUPPORTED_DTYPES = ("float32", "float16", "bfloat16")


def native_head_dim(d: int) -> int:
    """The head dim the kernel runs for ``d``: the next power of two, at least 16
    (d=96 runs as 128: Q, K and V zero-padded, 4/3 of the FLOPs)."""
    return max(16, 1 << (int(d) - 1).bit_length())


@dataclasses.dataclass(frozen=True, slots=True)
class Config:
    """One launch: ``block_q`` query rows (B_r), ``block_k`` key rows (B_c) per step, and
    Triton's ``num_warps`` and ``num_stages``; validated when made."""

    block_q: int = 128
    block_k: int = 128
    num_warps: int = 4
    num_stages: int = 2

    def __post_init__(self) -> None:
        for name in ("block_q", "block_k"):
            value = getattr(self, name)
            if not is_power_of_two(value) or value < 16:
                raise ValueError(f"{name}={value} must be a power of two >= 16")
        if self.num_warps not in (1, 2, 4, 8, 16):
            raise ValueError(f"num_warps={self.num_warps} must be one of 1, 2, 4, 8, 16")
        if self.num_stages < 1:
            raise ValueError(f"num_stages={self.num_stages} must be >= 1")

    def fit(self, n: int, kv_len: int) -> Config:
        """Shrink the blocks to the smallest power of two >= 16 that covers a short sequence."""
        cover = lambda m: max(16, pl.next_power_of_2(m))  # noqa: E731
        return dataclasses.replace(
            self, block_q=min(self.block_q, cover(n)), block_k=min(self.block_k, cover(kv_len))
        )


#: The launch per (largest head dim, causal): the winners of ``kernel_bench.bench --tune``
#: on the H200 (docs/perf-notes.md: d=128 non-causal 128x64/4/2, causal 128x128/8/3, d=64
#: 64x64/4/3); d=256: 64x32 with 8 warps and 1 stage, what the held-out run timed
#: (``specs/measurements/h200-heldout-2026-11-30.json``). specs/kernels/
#: pallas-triton.toml states the same tiles (tests/test_kernel_specs.py holds them equal).
HEURISTICS: tuple[tuple[int, bool, Config], ...] = (
    (64, False, Config(64, 64, 4, 3)),
    (64, True, Config(64, 64, 4, 3)),
    (128, False, Config(128, 64, 4, 2)),
    (128, True, Config(128, 128, 8, 3)),
    (256, False, Config(64, 32, 8, 1)),
    (256, True, Config(64, 32, 8, 1)),
)


def heuristic_config(d: int, causal: bool) -> Config:
    """The default launch for head dim ``d`` (the first ``HEURISTICS`` row that covers it)."""
    for d_max, row_causal, config in HEURISTICS:
        if native_head_dim(d) <= d_max and row_causal == bool(causal):
            return config
    raise ValueError(f"head_dim d={d} not supported: at most {MAX_HEAD_DIM}")


def supported(q, k, v, *, causal: bool = False, interpret: bool = False) -> str | None:
    """Why this kernel cannot run the call (None when it can): shapes, dtype, head dim."""
    del causal, interpret  # every mask, and the interpreter, run
    try:
        check_qkv(q, k, v, max_head_dim=MAX_HEAD_DIM, dtypes=SUPPORTED_DTYPES)
    except ValueError as err:
        return str(err)
    return None


def _q_block_index(program, n_programs, causal):
    """Causal: the last (longest) query blocks are launched first, so that the short
    ones fill the tail of the grid instead of leaving SMs idle at the end."""
    return n_programs - 1 - program if causal else program


def _flash_kernel(
    q_ref,
    k_ref,
    v_ref,
    *refs,
    scale_log2,
    causal,
    bounds,
    block_q,
    block_k,
    kv_len,
    n_poisoned,
):
    """One program: one block of ``block_q`` query rows of one (batch, head).

    Row i sees key j iff ``j < kv_len`` and ``i - left <= j <= i + right`` (``bounds``,
    None for an unbounded side: ``visible_bounds``). Key tiles wholly outside that range
    (above the causal diagonal, outside a window) are never loaded; only the tiles that
    straddle an edge of it, or hold the padded tail, are masked.

    ``refs`` are ``n_poisoned`` aliased output buffers (inputs, unused) then O and,
    optionally, the log-sum-exp.
    """
    o_ref, *lse_refs = refs[n_poisoned:]
    q_block = _q_block_index(pl.program_id(0), pl.num_programs(0), causal)
    q = q_ref[...]  # [block_q, d], stays on chip for the whole K/V loop
    d = q.shape[-1]
    # float32 inputs get float32 products (no tf32); 16-bit inputs use the tensor cores
    precision = lax.Precision.HIGHEST if q.dtype == jnp.float32 else None
    m_i = jnp.full((block_q,), -jnp.inf, jnp.float32)
    l_i = jnp.zeros((block_q,), jnp.float32)
    acc = jnp.zeros((block_q, d), jnp.float32)
    rows = q_block * block_q + lax.broadcasted_iota(jnp.int32, (block_q, block_k), 0)

    def step(k_tile, carry, *, masked):
        acc, m_i, l_i = carry
        start = pl.multiple_of(k_tile * block_k, block_k)
        k = k_ref[pl.ds(start, block_k), :]
        v = v_ref[pl.ds(start, block_k), :]
        qk = pltriton.dot(q, k, trans_b=True, precision=precision)  # f32 [block_q, block_k]
        if masked:
            cols = start + lax.broadcasted_iota(jnp.int32, (block_q, block_k), 1)
            qk = jnp.where(_visible(rows, cols, kv_len, bounds), qk, -jnp.inf)
        # m_i is kept in log2 units of the scaled scores: exp(x) = exp2(x * log2(e)), so
        # the scale and log2(e) fold into one fused multiply-add before the exp2.
        m_new = jnp.maximum(m_i, jnp.max(qk, axis=1) * scale_log2)
        # a row whose keys are all masked so far keeps m = -inf: subtract 0 instead
        m_new_safe = jnp.where(m_new == -jnp.inf, 0.0, m_new) if masked else m_new
        alpha = jnp.exp2(m_i - m_new_safe)
        p = jnp.exp2(qk * scale_log2 - m_new_safe[:, None])
        l_i = alpha * l_i + jnp.sum(p, axis=1)
        acc = acc * alpha[:, None] + pltriton.dot(p.astype(v.dtype), v, precision=precision)
        return acc, m_new, l_i

    lo, lo_full, hi_full, hi = tile_range(
        q_block * block_q,
        rows=block_q,
        tile=block_k,
        length=kv_len,
        left=bounds[0],
        right=bounds[1],
    )
    carry = (acc, m_i, l_i)
    if bounds[0] is not None:  # the window's left edge
        carry = lax.fori_loop(lo, lo_full, functools.partial(step, masked=True), carry)
    carry = lax.fori_loop(lo_full, hi_full, functools.partial(step, masked=False), carry)
    carry = lax.fori_loop(hi_full, hi, functools.partial(step, masked=True), carry)
    acc, m_i, l_i = carry
    l_safe = jnp.where(l_i == 0.0, 1.0, l_i)  # fully masked rows give O = 0, lse = -inf
    o_ref[...] = (acc / l_safe[:, None]).astype(o_ref.dtype)
    if lse_refs:
        lse_refs[0][...] = m_i * LN_2 + jnp.log(l_i)


def _visible(rows, cols, kv_len, bounds):
    """Key ``cols`` visible to query ``rows``: below kv_len and inside ``bounds``."""
    left, right = bounds
    visible = cols < kv_len
    if left is not None:
        visible &= cols >= rows - left
    if right is not None:
        visible &= cols <= rows + right
    return visible


def _pallas_forward(q, k, v, *, causal, window, sm_scale, config, interpret, return_lse, hooks):
    """The pallas_call; returns O and, if ``return_lse``, the log-sum-exp (else None).

    ``hooks`` is a ``_TestHooks`` (tests only; production passes the neutral one).
    """
    b, n, h, d = q.shape
    kv_len, h_kv = k.shape[1], k.shape[2]
    group = h // h_kv
    block_q, block_k = config.block_q, config.block_k
    q_p, k_p, v_p = pad_seq(q, block_q), pad_seq(k, block_k), pad_seq(v, block_k)
    n_pad, kv_pad = q_p.shape[1], k_p.shape[1]

    # The grid is the outer loop of FlashAttention-2 Algorithm 1 (over Q blocks); the
    # Q-block axis comes first so programs running at once share one head's K/V in L2.
    grid = (pl.cdiv(n_pad, block_q), b, h)
    n_q = grid[0]
    q_index = functools.partial(_q_block_index, n_programs=n_q, causal=causal)
    q_spec = pl.BlockSpec(
        (None, block_q, None, d), lambda q_blk, bi, hi: (bi, q_index(q_blk), hi, 0)
    )
    # K and V: the whole (padded) sequence of the kv head this query head reads (GQA).
    kv_spec = pl.BlockSpec((None, kv_pad, None, d), lambda q_blk, bi, hi: (bi, 0, hi // group, 0))
    out_shape = [jax.ShapeDtypeStruct((b, n_pad, h, d), q.dtype)]
    out_specs = [q_spec]
    if return_lse:
        out_shape.append(jax.ShapeDtypeStruct((b, h, n_pad), jnp.float32))
        out_specs.append(
            pl.BlockSpec((None, None, block_q), lambda q_blk, bi, hi: (bi, hi, q_index(q_blk)))
        )
    poisoned = [jnp.full(s.shape, jnp.nan, s.dtype) for s in out_shape] if hooks.poison else []
    kernel = functools.partial(
        _flash_kernel,
        scale_log2=sm_scale * LOG2_E,
        causal=causal,
        bounds=visible_bounds(causal, window, hooks.diagonal_offset),
        block_q=block_q,
        block_k=block_k,
        kv_len=kv_len,
        n_poisoned=len(poisoned),
    )
    outs = pl.pallas_call(
        kernel,
        grid=grid,
        in_specs=[q_spec, kv_spec, kv_spec, *out_specs[: len(poisoned)]],
        out_specs=out_specs,
        out_shape=out_shape,
        input_output_aliases={3 + i: i for i in range(len(poisoned))},
        compiler_params=triton_compiler_params(config.num_warps, config.num_stages),
        interpret=interpret,
        name="flash_attention_fwd",
    )(q_p, k_p, v_p, *poisoned)
    return outs[0][:, :n], (outs[1][:, :, :n] if return_lse else None)


@dataclasses.dataclass(frozen=True, slots=True)
class _TestHooks:
    """Tests only. ``diagonal_offset`` shifts the causal diagonal (key j visible to row i
    iff ``j <= i + offset``; negative offsets leave rows fully masked); ``poison`` fills
    the output buffers with NaN before the kernel runs (aliased inputs), so an element
    the kernel fails to write stays NaN."""

    diagonal_offset: int = 0
    poison: bool = False


_STATIC = ("causal", "window", "sm_scale", "config", "interpret", "return_lse", "hooks")
_jitted_forward = jax.jit(_pallas_forward, static_argnames=_STATIC)


def _resolve(q, k, v, sm_scale, options) -> dict:
    """Checked arguments and defaults: the static configuration of one call.

    ``options`` replace fields of ``heuristic_config(head_dim, causal)``."""
    reason = supported(q, k, v)
    if reason:
        raise ValueError(reason)
    causal = options.pop("causal")
    unknown = set(options) - set(Config.__dataclass_fields__)
    if unknown:
        raise TypeError(f"unknown Triton options {sorted(unknown)}; see flash_triton.Config")
    d = q.shape[-1]
    given = {key: value for key, value in options.items() if value is not None}
    config = dataclasses.replace(heuristic_config(d, causal), **given)
    return dict(sm_scale=softmax_scale(d, sm_scale), config=config.fit(q.shape[1], k.shape[1]))


def _pad_head_dim(x, d_pad: int):
    """Zero columns appended to the head dim (a copy; only where d is not native)."""
    pad = d_pad - x.shape[-1]
    return x if pad == 0 else jnp.pad(x, ((0, 0), (0, 0), (0, 0), (0, pad)))


def _run(q, k, v, *, causal, window, sm_scale, config, interpret, return_lse, hooks):
    """The jitted forward at the kernel's native head dim, O sliced back to ``d``."""
    d = q.shape[-1]
    d_pad = native_head_dim(d)
    q, k, v = (_pad_head_dim(x, d_pad) for x in (q, k, v))
    o, lse = _jitted_forward(
        q,
        k,
        v,
        causal=bool(causal),
        window=window_bounds(window, causal),
        sm_scale=sm_scale,
        config=config,
        interpret=bool(interpret),
        return_lse=bool(return_lse),
        hooks=hooks,
    )
    return o[..., :d], lse


def triton_flash_attention(
    q,
    k,
    v,
    *,
    causal: bool = False,
    window=None,
    sm_scale: float | None = None,
    return_lse: bool = False,
    interpret: bool = False,
    **options,
):
    """Attention ``softmax(sm_scale * q k^T) v`` without materialising the scores.

    Args:
      q: ``[batch, n, heads, head_dim]``; k, v: ``[batch, kv_len, kv_heads, head_dim]``
        with ``heads`` a multiple of ``kv_heads``; head_dim at most 256 (not a power of
        two: zero-padded to one). float32, float16 or bfloat16.
      causal: query i sees keys ``j <= i`` (top-left aligned, as ``jax.nn``).
      window: a sliding window, W or ``(left, right)`` keys
        (``_common.window_bounds``): query i sees keys ``i - left <= j <= i + right``.
      sm_scale: score scale, ``1/sqrt(head_dim)`` when None.
      return_lse: also return the natural-log log-sum-exp, f32 ``[batch, heads, n]``.
      interpret: run the kernel in the Pallas interpreter (any backend, e.g. CPU).
      options: fields of ``Config`` (``block_q``, ``block_k``, ``num_warps``,
        ``num_stages``) over ``heuristic_config(head_dim, causal)``; blocks are shrunk
        for short sequences.

    Returns:
      O with q's shape and dtype, and the log-sum-exp if ``return_lse``.
    """
    resolved = _resolve(q, k, v, sm_scale, {**options, "causal": causal})
    o, lse = _run(
        q,
        k,
        v,
        causal=causal,
        window=window,
        interpret=interpret,
        return_lse=return_lse,
        hooks=_TestHooks(),
        **resolved,
    )
    return (o, lse) if return_lse else o


def forward_with_test_hooks(
    q,
    k,
    v,
    *,
    causal,
    block_q,
    block_k,
    sm_scale=None,
    interpret,
    diagonal_offset=0,
    poison=True,
    window=None,
):
    """Tests' entry point: (O, lse) with the test hooks of ``_TestHooks``, 4 warps, 2 stages."""
    options = dict(block_q=block_q, block_k=block_k, num_warps=4, num_stages=2, causal=causal)
    resolved = _resolve(q, k, v, sm_scale, options)
    hooks = _TestHooks(diagonal_offset=diagonal_offset, poison=poison)
    return _run(
        q,
        k,
        v,
        causal=causal,
        window=window,
        interpret=interpret,
        return_lse=True,
        hooks=hooks,
        **resolved,
    )
