"""Decode attention: ``q_len`` new query tokens per sequence against a KV cache of m tokens.

One program per (sequence, KV head) holds every query head of its group (GQA/MQA:
``h/h_kv`` heads share one K/V) and every new token as the rows of one tile, so K and V
cross HBM once per step: ``kv_bytes = 2·b·h_kv·m·d·s``. FLOPs are the prefill formula
with n = q_len, so both FLOPs and bytes are O(m) and the intensity tends to a constant,
``(4d + 4)·h·q_len / (2·h_kv·d·s)`` (about 1 FLOP/byte for MHA, q_len = 1, fp16): attention
starved of arithmetic ("anaemic"), far below any GPU's ridge point.

Paged: the program also reads one block-table entry (int32) per page it visits
(PagedAttention, Kwon et al. 2023, §4.1). Split-KV (flash-decoding, Dao et al. 2023):
each (sequence, KV head) is cut into ``splits`` chunks walked by separate programs,
which write float32 partials (acc, m_i, l_i); a second kernel reads them back and writes
O. That fills the SMs when ``b·h_kv`` alone cannot (:func:`sm_occupancy`).

Left out: writing the new tokens' K/V into the cache (a separate kernel,
``2·b·h_kv·q_len·d·s``); padding rows of the query tile; a last page's unused slots
(loads of them are masked off).

>>> model = build(paged=True)
>>> sorted(str(x) for x in model.hbm_bytes.free_symbols)
['b', 'd', 'h', 'h_kv', 'm', 'page', 'q_len', 's']
"""

from __future__ import annotations

import functools

import sympy as sp

from perfmodel.costs import terms as t
from perfmodel.costs.base import CostModel, Kernel
from perfmodel.costs.flash import TABLE_ENTRY_BYTES
from perfmodel.symbols import F32, b, d, h, h_kv, m, n, page, q_len, splits
from perfmodel.symbols import resident_ctas as resident

#: The paged kernel's split rule (``pallas_kernels.paged_decode.default_splits``): about
#: this many programs resident per SM (several loads in flight hide HBM latency), and
#: chunks of at least this many pages (so the float32 partials stay small).
PROGRAMS_PER_SM = 8
MIN_PAGES_PER_SPLIT = 4

# --- shared pieces, written once --------------------------------------------------
q_bytes = t.q_bytes.subs(n, q_len)
o_bytes = t.o_bytes.subs(n, q_len)
scores = t.all_scores.subs(n, q_len)
#: Pages one sequence's m tokens occupy; each (sequence, KV head) program reads their ids.
pages_per_seq = sp.ceiling(m / page)
table_bytes = b * h_kv * pages_per_seq * TABLE_ENTRY_BYTES
#: Float32 acc (d) plus m_i and l_i per query row, per split.
partial_bytes = b * h * q_len * splits * (d + 2) * F32


def work_items() -> sp.Expr:
    """Programs launched: one per (sequence, KV head, KV chunk)."""
    return b * h_kv * splits


def waves() -> sp.Expr:
    """Rounds of programs when ``resident_ctas`` (one per SM) run at once."""
    return sp.ceiling(work_items() / resident)


def sm_occupancy() -> sp.Expr:
    """Average fraction of SMs busy over the waves: the share of HBM bandwidth reachable."""
    return work_items() / (waves() * resident)


def auto_splits(kv_blocks: sp.Expr = pages_per_seq) -> sp.Expr:
    """Flash-decoding split rule: the most chunks that keep ``b·h_kv·splits`` in one wave."""
    return sp.Max(1, sp.Min(kv_blocks, sp.floor(resident / (b * h_kv))))


def paged_splits(
    pages: sp.Expr = pages_per_seq, min_pages: sp.Expr | int = MIN_PAGES_PER_SPLIT
) -> sp.Expr:
    """:func:`auto_splits` with chunks of at least ``min_pages`` pages: the paged kernel's
    rule, with ``resident_ctas = PROGRAMS_PER_SM × SMs``."""
    return auto_splits(kv_blocks=sp.ceiling(pages / min_pages))


def _attend(kv_read: sp.Expr, out: sp.Expr, normalise: sp.Expr) -> Kernel:
    """The attention kernel: online softmax over the scores, plus ``normalise`` FLOPs."""
    return Kernel(
        name="attend",
        matmul_flops=t.matmul_flops(scores),
        vector_flops=t.SOFTMAX_FLOPS_PER_SCORE * scores + normalise,
        exp_count=scores,
        hbm_bytes=q_bytes + kv_read + out,
    )


@functools.cache
def build(paged: bool = False, split: bool = False) -> CostModel:
    """Decode attention; ``paged`` adds block-table reads, ``split`` the flash-decoding pass."""
    kv_read = t.kv_bytes + (table_bytes if paged else 0)
    rows = b * h * q_len
    if not split:
        kernels: tuple[Kernel, ...] = (_attend(kv_read, o_bytes, normalise=rows * d),)
    else:
        reduce = Kernel(
            name="reduce",
            matmul_flops=0 * rows,
            # rescale and sum the partials, divide by l: about 3 FLOPs per value
            vector_flops=3 * rows * splits * (d + 2),
            exp_count=rows * splits,
            hbm_bytes=partial_bytes + o_bytes,
        )
        kernels = (_attend(kv_read, partial_bytes, normalise=0 * rows), reduce)
    hbm = sp.Add(*(k.hbm_bytes for k in kernels))
    return CostModel(
        name="decode" + ("-paged" if paged else "") + ("-split" if split else ""),
        kernels=kernels,
        extra_memory_bytes=partial_bytes if split else sp.Integer(0),
        hbm_bytes_no_cache=hbm,
        notes={"kv": "K/V read once per (sequence, KV head) per step"},
    )


def asymptotic(expr: sp.Expr) -> sp.Expr:
    """``expr`` with every ceiling/floor replaced by its argument (exact as m → ∞ in ratio)."""
    return expr.replace(sp.ceiling, lambda x: x).replace(sp.floor, lambda x: x)


def intensity_limit(model: CostModel) -> sp.Expr:
    """lim_{m→∞} FLOPs / HBM bytes: finite, so decode intensity is O(1) in m.

    >>> sp.simplify(intensity_limit(build()))
    2*h*q_len*(d + 1)/(d*h_kv*s)
    """
    return sp.limit(asymptotic(model.intensity), m, sp.oo)
