"""Paged decode attention in Pallas for NVIDIA GPUs (Triton lowering), with its references.

The KV cache lives in a pool of pages ``k_pages, v_pages: [num_pages, page_size, h_kv, d]``;
sequence ``i`` owns the pages ``block_table[i, :]`` in order, and only its first
``lengths[i]`` tokens are valid (PagedAttention, Kwon et al. 2023, §4.1). Each sequence
has ``q_len`` new query tokens (1 for plain decode; a few for speculative decoding),
which sit at positions ``lengths[i] - q_len ...`` and attend causally.

The grid is ``(batch, h_kv, splits)``: one program per (sequence, KV head, KV chunk).
All ``h/h_kv`` query heads of one KV head (GQA) and all ``q_len`` tokens are the rows of
one query tile, so each K/V page is read from HBM once per (sequence, KV head). Inside a
program a ``fori_loop`` walks that chunk's pages, reading the page id from the block
table, with an online softmax (``m_i``, ``l_i``, ``acc``, float32). With ``splits > 1``
this is flash-decoding: each chunk writes a partial ``acc`` with its ``m_i``, ``l_i``,
and a small plain-JAX reduction combines them.

Split rule (``default_splits``, used when ``splits=None``): enough chunks for about
``PROGRAMS_PER_SM`` = 8 programs per SM, not one. A decode program streams K/V with
little arithmetic, so one SM needs several resident programs to keep enough loads in
flight to cover HBM latency. On the H200 (docs/perf-notes.md, "Device time: outcome";
split sweeps at b=1 m=16K, b=4 m=32K, b=16 m=4K) one program per SM, the rule before
2026-11-30, reached 1.96-2.63 TB/s, and 2-16 per SM 2.46-4.08 TB/s, within 6 % of the
best from 2 to 8. Chunks keep at least ``MIN_PAGES_PER_SPLIT`` pages, so the float32
partials stay small beside K/V.

The contiguous reference (``contiguous_decode_reference``) is the specification: the
same function over ``[batch, m, h_kv, d]`` K/V, in plain JAX with float32 math.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> q = rng.standard_normal((2, 1, 4, 16)).astype(np.float32)
>>> k = rng.standard_normal((2, 40, 2, 16)).astype(np.float32)
>>> lengths = np.array([40, 17], np.int32)
>>> k_pages, table = pages_from_contiguous(k, page_size=16, rng=rng)
>>> v_pages, _ = pages_from_contiguous(k, page_size=16, table=table)
>>> out = paged_decode_attention(q, k_pages, v_pages, table, lengths, interpret=True)
>>> ref = contiguous_decode_reference(q, k, k, lengths)
>>> bool(np.allclose(out, ref, atol=1e-5))
True
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from pallas_kernels._common import (
    LOG2_E,
    check_dtypes,
    is_power_of_two,
    softmax_scale,
    triton_compiler_params,
)

SUPPORTED_DTYPES = ("float32", "float16", "bfloat16")
#: Smallest tile side Triton's dot accepts; query rows are padded up to it.
MIN_TILE = 16
#: Programs per SM the default split aims for (latency hiding, not one wave).
PROGRAMS_PER_SM = 8
#: Fewest KV pages one chunk walks under the default split.
MIN_PAGES_PER_SPLIT = 4


def default_splits(batch: int, h_kv: int, pages: int, sm_count: int) -> int:
    """KV chunks per sequence: ``PROGRAMS_PER_SM * sm_count`` programs over the grid's
    ``batch * h_kv`` (sequence, KV head) pairs, at most one chunk per
    ``MIN_PAGES_PER_SPLIT`` pages, at least 1. ``perfmodel.costs.decode.auto_splits``
    with ``resident_ctas = PROGRAMS_PER_SM * sm_count`` and
    ``kv_blocks = ceil(pages / MIN_PAGES_PER_SPLIT)`` is the same rule.

    >>> default_splits(1, 8, 2048, 132), default_splits(64, 8, 128, 132)
    (132, 2)
    """
    most = -(-pages // MIN_PAGES_PER_SPLIT)
    return max(1, min(most, PROGRAMS_PER_SM * sm_count // (batch * h_kv)))


def device_sm_count() -> int | None:
    """Streaming multiprocessors of the default device, or None off a GPU."""
    dev = jax.devices()[0]
    return getattr(dev, "core_count", None) if dev.platform == "gpu" else None


def query_rows(q_len: int, group: int) -> int:
    """Rows of one query tile: ``q_len * group`` padded to a power of two >= 16."""
    return max(MIN_TILE, pl.next_power_of_2(q_len * group))


# --------------------------------------------------------------------------- kernel
def _decode_kernel(
    lengths_ref,
    table_ref,
    q_ref,
    k_ref,
    v_ref,
    acc_ref,
    m_ref,
    l_ref,
    *,
    scale_log2,
    page_size,
    pages_per_split,
    q_len,
    group,
):
    """One program: one chunk of one sequence's pages, for one KV head's query rows."""
    seq, split = pl.program_id(0), pl.program_id(2)
    length = lengths_ref[seq]
    q = q_ref[...]  # [rows, d]: every query head of this KV head, every query token
    rows, d = q.shape
    # Row r is query token r // group; token t sits at position length - q_len + t.
    token = lax.div(lax.broadcasted_iota(jnp.int32, (rows, page_size), 0), group)
    last_visible = length - q_len + token  # causal: key j visible iff j <= this

    def step(i, carry):
        acc, m_i, l_i = carry
        page = table_ref[i]
        k = k_ref[page]  # [page_size, d], one page of this KV head
        v = v_ref[page]
        s = plgpu.dot(q, k, trans_b=True) * scale_log2  # f32 scores in log2 units
        key = i * page_size + lax.broadcasted_iota(jnp.int32, (rows, page_size), 1)
        s = jnp.where(key <= last_visible, s, -jnp.inf)
        m_new = jnp.maximum(m_i, jnp.max(s, axis=1))
        m_safe = jnp.where(m_new == -jnp.inf, 0.0, m_new)  # a row masked so far stays empty
        alpha = jnp.exp2(m_i - m_safe)
        p = jnp.exp2(s - m_safe[:, None])
        l_i = alpha * l_i + jnp.sum(p, axis=1)
        acc = acc * alpha[:, None] + plgpu.dot(p.astype(v.dtype), v)
        return acc, m_new, l_i

    first = split * pages_per_split
    end = jnp.minimum(first + pages_per_split, lax.div(length + page_size - 1, page_size))
    carry = (
        jnp.zeros((rows, d), jnp.float32),
        jnp.full((rows,), -jnp.inf, jnp.float32),
        jnp.zeros((rows,), jnp.float32),
    )
    acc, m_i, l_i = lax.fori_loop(first, jnp.maximum(first, end), step, carry)
    acc_ref[...] = acc
    m_ref[...] = m_i
    l_ref[...] = l_i


def _combine(acc, m_i, l_i):
    """Merge the split partials ``[b, h_kv, splits, rows, ...]`` (m in log2 units)."""
    m_max = jnp.max(m_i, axis=2, keepdims=True)
    m_max = jnp.where(m_max == -jnp.inf, 0.0, m_max)
    w = jnp.exp2(m_i - m_max)  # 0 for an empty split
    l_tot = jnp.sum(w * l_i, axis=2)
    o = jnp.sum(w[..., None] * acc, axis=2)
    return o / jnp.where(l_tot == 0.0, 1.0, l_tot)[..., None]


@functools.partial(
    jax.jit,
    static_argnames=("sm_scale", "splits", "num_warps", "num_stages", "interpret"),
)
def _paged_forward(
    q, k_pages, v_pages, block_table, lengths, *, sm_scale, splits, num_warps, num_stages, interpret
):
    b, q_len, h, d = q.shape
    _, page_size, h_kv, _ = k_pages.shape
    group = h // h_kv
    rows = query_rows(q_len, group)
    pages_per_split = pl.cdiv(block_table.shape[1], splits)
    # [b, q_len, h_kv, group, d] -> [b, h_kv, q_len * group, d], padded to the tile.
    qt = q.reshape(b, q_len, h_kv, group, d).transpose(0, 2, 1, 3, 4)
    qt = qt.reshape(b, h_kv, q_len * group, d)
    qt = jnp.pad(qt, ((0, 0), (0, 0), (0, rows - q_len * group), (0, 0)))

    # Grid = (sequence, KV head, KV chunk); the in-kernel loop walks the chunk's pages.
    grid = (b, h_kv, splits)
    pages_spec = pl.BlockSpec(
        (k_pages.shape[0], page_size, None, d), lambda seq, kv_head, split: (0, 0, kv_head, 0)
    )
    in_specs = [
        pl.BlockSpec((b,), lambda seq, kv_head, split: (0,)),
        pl.BlockSpec((None, block_table.shape[1]), lambda seq, kv_head, split: (seq, 0)),
        pl.BlockSpec((None, None, rows, d), lambda seq, kv_head, split: (seq, kv_head, 0, 0)),
        pages_spec,
        pages_spec,
    ]
    part = (None, None, None, rows)
    index = lambda seq, kv_head, split: (seq, kv_head, split, 0)  # noqa: E731
    out_specs = [
        pl.BlockSpec((*part, d), lambda seq, kv_head, split: (seq, kv_head, split, 0, 0)),
        pl.BlockSpec(part, index),
        pl.BlockSpec(part, index),
    ]
    out_shape = [
        jax.ShapeDtypeStruct((b, h_kv, splits, rows, d), jnp.float32),
        jax.ShapeDtypeStruct((b, h_kv, splits, rows), jnp.float32),
        jax.ShapeDtypeStruct((b, h_kv, splits, rows), jnp.float32),
    ]
    kernel = functools.partial(
        _decode_kernel,
        scale_log2=sm_scale * LOG2_E,
        page_size=page_size,
        pages_per_split=pages_per_split,
        q_len=q_len,
        group=group,
    )
    acc, m_i, l_i = pl.pallas_call(
        kernel,
        grid=grid,
        in_specs=in_specs,
        out_specs=out_specs,
        out_shape=out_shape,
        compiler_params=triton_compiler_params(num_warps, num_stages),
        interpret=interpret,
        name="paged_decode_attention",
    )(lengths.astype(jnp.int32), block_table.astype(jnp.int32), qt, k_pages, v_pages)
    o = _combine(acc, m_i, l_i)[:, :, : q_len * group]  # [b, h_kv, q_len*group, d]
    o = o.reshape(b, h_kv, q_len, group, d).transpose(0, 2, 1, 3, 4)
    return o.reshape(b, q_len, h, d).astype(q.dtype)


def _check_args(q, k_pages, v_pages, block_table, lengths, splits, interpret):
    if q.ndim != 4 or k_pages.ndim != 4:
        raise ValueError(
            f"q must be [b, q_len, h, d], pages [num_pages, page_size, h_kv, d]:"
            f" {q.shape=} {k_pages.shape=}"
        )
    if k_pages.shape != v_pages.shape:
        raise ValueError(f"k and v pages must have one shape: {k_pages.shape=} {v_pages.shape=}")
    b, q_len, h, d = q.shape
    num_pages, page_size, h_kv, d_kv = k_pages.shape
    if d_kv != d:
        raise ValueError(f"head_dim differs: q has {d=}, pages have {d_kv}")
    if h_kv == 0 or h % h_kv:
        raise ValueError(f"heads {h=} must be a multiple of kv heads {h_kv=}")
    small = 1 if interpret else MIN_TILE  # Triton's dot needs tiles of at least 16
    for name, value in (("page_size", page_size), ("head_dim", d)):
        if not is_power_of_two(value) or value < small:
            raise ValueError(f"{name}={value} must be a power of two >= {small}")
    if block_table.ndim != 2 or block_table.shape[0] != b:
        raise ValueError(f"block_table must be [batch={b}, pages_per_seq]: {block_table.shape=}")
    if lengths.shape != (b,):
        raise ValueError(f"lengths must be [batch={b}]: {lengths.shape=}")
    if not isinstance(splits, int) or splits < 1:
        raise ValueError(f"{splits=} must be a positive integer")
    check_dtypes("q and pages", SUPPORTED_DTYPES, q=q, k_pages=k_pages, v_pages=v_pages)
    if not isinstance(lengths, jax.core.Tracer):
        lens = np.asarray(lengths)
        cap = block_table.shape[1] * page_size
        bad = (lens < q_len) | (lens > cap)
        if bad.any():
            raise ValueError(
                f"lengths={lens[bad][0]} must lie in [q_len={q_len}, {cap}] "
                f"(pages_per_seq x page_size)"
            )
    if not isinstance(block_table, jax.core.Tracer):
        table, lens = np.asarray(block_table), np.asarray(lengths)
        used = np.arange(table.shape[1])[None, :] < -(-lens[:, None] // page_size)
        bad = used & ((table < 0) | (table >= num_pages))
        if bad.any():
            raise ValueError(
                f"block_table entry {table[bad][0]} is not a page id in [0, num_pages={num_pages})"
            )


def paged_decode_attention(
    q,
    k_pages,
    v_pages,
    block_table,
    lengths,
    *,
    sm_scale: float | None = None,
    splits: int | None = None,
    num_warps: int = 4,
    num_stages: int = 2,
    interpret: bool = False,
):
    """Decode attention over a paged KV cache.

    Args:
      q: ``[batch, q_len, h, d]``, the new tokens of each sequence (causal among themselves).
      k_pages, v_pages: ``[num_pages, page_size, h_kv, d]``, the page pool.
      block_table: int ``[batch, pages_per_seq]``: page ids of each sequence, in order;
        entries past a sequence's last page are never read.
      lengths: int ``[batch]``: valid tokens of each sequence, the new ones included.
      splits: KV chunks per sequence (flash-decoding); partials merged in plain JAX.
        None: ``default_splits`` for this GPU's SM count (1 off a GPU).
      interpret: run in the Pallas interpreter (CPU); then any power-of-two page size.

    Returns:
      O ``[batch, q_len, h, d]`` in q's dtype.
    """
    q, k_pages, v_pages = (jnp.asarray(x) for x in (q, k_pages, v_pages))
    if splits is None:
        sms = device_sm_count()
        h_kv, pages = k_pages.shape[2], block_table.shape[1]
        splits = 1 if sms is None or interpret else default_splits(q.shape[0], h_kv, pages, sms)
    _check_args(q, k_pages, v_pages, block_table, lengths, splits, interpret)
    scale = softmax_scale(q.shape[-1], sm_scale)
    return _paged_forward(
        q,
        k_pages,
        v_pages,
        jnp.asarray(block_table),
        jnp.asarray(lengths),
        sm_scale=scale,
        splits=int(splits),
        num_warps=int(num_warps),
        num_stages=int(num_stages),
        interpret=bool(interpret),
    )


# ----------------------------------------------------------------------- references
@functools.partial(jax.jit, static_argnames=("sm_scale",))
def _reference(q, k, v, lengths, *, sm_scale):
    b, q_len, h, d = q.shape
    group = h // k.shape[2]
    k, v = (jnp.repeat(x.astype(jnp.float32), group, axis=2) for x in (k, v))
    exact = jax.lax.Precision.HIGHEST  # true f32 dots: no TF32 on the GPU
    s = jnp.einsum("bqhd,bkhd->bhqk", q.astype(jnp.float32), k, precision=exact) * sm_scale
    key = jnp.arange(k.shape[1])[None, None, None, :]
    last = (lengths[:, None] - q_len + jnp.arange(q_len)[None, :])[:, None, :, None]
    s = jnp.where(key <= last, s, -jnp.inf)
    p = jax.nn.softmax(s, axis=-1)
    return jnp.einsum("bhqk,bkhd->bqhd", p, v, precision=exact).astype(q.dtype)


def contiguous_decode_reference(q, k, v, lengths, *, sm_scale: float | None = None):
    """The specification: ``q [b, q_len, h, d]`` against contiguous ``k, v [b, m, h_kv, d]``.

    Keys at or past ``lengths[i]`` are ignored; query token t sees keys
    ``j <= lengths[i] - q_len + t``. float32 math, output in q's dtype.
    """
    q, k, v = (jnp.asarray(x) for x in (q, k, v))
    scale = softmax_scale(q.shape[-1], sm_scale)
    return _reference(q, k, v, jnp.asarray(lengths, jnp.int32), sm_scale=scale)


def pages_from_contiguous(kv, page_size: int, *, table=None, rng=None, spare_pages: int = 3):
    """Scatter contiguous ``kv [b, m, h_kv, d]`` into a shuffled page pool.

    Returns ``(pages [num_pages, page_size, h_kv, d], block_table [b, ceil(m/page_size)])``.
    Pages are placed at a random permutation of ids (``rng``), or at ``table``'s ids; the
    pool has ``spare_pages`` unused pages of garbage, so a wrong id gives a wrong answer.
    """
    kv = np.asarray(kv)
    b, m, h_kv, d = kv.shape
    per_seq = -(-m // page_size)
    padded = np.full((b, per_seq * page_size, h_kv, d), 1e4, kv.dtype)
    padded[:, :m] = kv
    chunks = padded.reshape(b * per_seq, page_size, h_kv, d)
    if table is None:
        rng = np.random.default_rng(0) if rng is None else rng
        ids = rng.permutation(b * per_seq + spare_pages)[: b * per_seq]
        table = ids.reshape(b, per_seq).astype(np.int32)
    table = np.asarray(table, np.int32)
    num_pages = max(int(table.max()) + 1, b * per_seq + spare_pages)
    pool = np.full((num_pages, page_size, h_kv, d), 1e4, kv.dtype)  # garbage, not zeros
    pool[table.reshape(-1)] = chunks
    return pool, table
