"""Decode attention: ``q_len`` new query tokens per sequence against a KV cache of m tokens.

Its cost is the engine's own forward flash model (``perfmodel.costs.flash``, as
``predict(n=q_len, kv_len=m, page_tokens=..., splits=...)`` evaluates it) at a decode
launch, :func:`launch_model`: one program per (sequence, KV head) holds every query head
of its group (GQA/MQA: ``h/h_kv`` heads share one K/V) and every new token as the rows of
one tile, so K and V cross HBM once per step: ``kv_bytes = 2·b·h_kv·m·d·s``. FLOPs are
O(m) too, so the intensity tends to a constant (:func:`intensity_limit`, about
1 FLOP/byte for MHA, q_len = 1, fp16): attention starved of arithmetic ("anaemic"), far
below any GPU's ridge point. Paged, each program also reads one block-table entry per
page it visits; split (flash-decoding), each (sequence, KV head) is cut into ``splits``
chunks whose float32 partials a second kernel combines.

This module holds what is decode's own: the paged kernel's split rule
(:func:`paged_splits`, ``pallas_kernels.paged_decode.default_splits``) and the limit.

>>> model = launch_model(paged=True)
>>> sorted(str(x) for x in model.hbm_bytes.free_symbols)
['b', 'd', 'h', 'h_kv', 'm', 'page', 'q_len', 's']
"""

from __future__ import annotations

import functools
from dataclasses import replace

import sympy as sp

from perfmodel.costs import flash
from perfmodel.costs.base import CostModel
from perfmodel.symbols import b, block_q, h, h_kv, m, n, pack, page, q_len
from perfmodel.symbols import resident_ctas as resident

#: The paged kernel's split rule (``pallas_kernels.paged_decode.default_splits``): about
#: this many programs resident per SM (several loads in flight hide HBM latency), and
#: chunks of at least this many pages (so the float32 partials stay small).
PROGRAMS_PER_SM = 8
MIN_PAGES_PER_SPLIT = 4

#: Pages one sequence's m tokens occupy.
pages_per_seq = sp.ceiling(m / page)


@functools.cache
def launch_model(paged: bool = False, split: bool = False) -> CostModel:
    """The forward flash model the engine evaluates (``costs.flash.build``, a kernel
    family's launch, no L2 level) at a decode launch: the group's ``h/h_kv`` query heads
    packed in one tile of all their ``q_len`` rows, so one program per (sequence, KV
    head, chunk); ``paged`` adds the block-table reads, ``split`` the partials and their
    combine kernel. Its symbols are the model's less the launch's (``q_len`` for n)."""
    model = flash.build(causal=False, l2=False, split=split, paged=paged, launch=True)
    group = h / h_kv
    at_decode = model.subs({pack: group, block_q: n * group}).subs({n: q_len})
    name = "decode" + ("-paged" if paged else "") + ("-split" if split else "")
    return replace(at_decode, name=name)


def auto_splits(kv_blocks: sp.Expr = pages_per_seq) -> sp.Expr:
    """Flash-decoding split rule: the most chunks that keep ``b·h_kv·splits`` in one wave."""
    return sp.Max(1, sp.Min(kv_blocks, sp.floor(resident / (b * h_kv))))


def paged_splits(
    pages: sp.Expr = pages_per_seq, min_pages: sp.Expr | int = MIN_PAGES_PER_SPLIT
) -> sp.Expr:
    """:func:`auto_splits` with chunks of at least ``min_pages`` pages: the paged kernel's
    rule, with ``resident_ctas = PROGRAMS_PER_SM × SMs``."""
    return auto_splits(kv_blocks=sp.ceiling(pages / min_pages))


def asymptotic(expr: sp.Expr) -> sp.Expr:
    """``expr`` with every ceiling/floor replaced by its argument (exact as m → ∞ in ratio)."""
    return expr.replace(sp.ceiling, lambda x: x).replace(sp.floor, lambda x: x)


def intensity_limit(model: CostModel) -> sp.Expr:
    """lim_{m→∞} FLOPs / HBM bytes: finite, so decode intensity is O(1) in m.

    >>> sp.simplify(intensity_limit(launch_model()))
    h*q_len*(4*block_k*(d + 1) + d)/(2*block_k*d*h_kv*s)
    """
    return sp.limit(asymptotic(model.intensity), m, sp.oo)
