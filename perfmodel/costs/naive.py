"""Naive (materialised) attention: three kernels that pass S and P through HBM.

    S = scale·Q Kᵀ        (kernel 1: read Q, K; write S)
    P = softmax(S)         (kernel 2: read S; write P)
    O = P V                (kernel 3: read P, V; write O)

The n×m matrices S and P are written and read once each: at least four trips of an
n×m matrix through HBM. Causal masking does not shrink anything: the full S is computed and
stored, then masked. Left out: XLA's internal f32 upcasts and any multi-pass softmax
that re-reads S more than once (those only add bytes).
"""

from __future__ import annotations

import sympy as sp

from perfmodel.costs import terms as t
from perfmodel.costs.base import CostModel, Kernel
from perfmodel.costs.xla_rows import ROW_FUSION_KEYS, scores_apart, softmax_reads
from perfmodel.symbols import F32, b, h, h_kv, m, s
from perfmodel.vocabulary import NaiveCompile

#: How naive attention is compiled. "minimal": the four trips above, nothing more (the
#: textbook count, and the floor of any materialised implementation). "xla": what XLA
#: makes of the three-step baseline (pallas_kernels/naive.py), read off its optimised
#: HLO and step timings on the H200 (specs/measurements/details/h200-naive-*):
#: with a causal mask the score matmul becomes a cuBLAS call that writes float32 scores,
#: and a second fusion reads them, masks and rounds (+8 bytes per score); and a softmax
#: row longer than ``xla_rows.XLA_ROW_FUSION_BYTES`` of float32 overflows the registers of XLA's
#: one-fusion softmax, which then spills — counted as two extra passes over S (the
#: timing shows 2.3x the time per score of a short row, in the same single fusion).
#: Any other mask written as ``jnp.where(mask, s, -inf)`` (a sliding window, packed
#: documents, a block mask expanded from tiles) compiles the same way on the H200 (jax
#: 0.11.2): a cuBLAS call writing float32 scores, then one loop fusion that masks and
#: rounds (``benchmarks/naive_mask_hlo.py``, specs/measurements/details/
#: h200-naive-mask-hlo-2026-12-01.*); so ``causal`` here stands for any mask, and the
#: naive side of a masked prediction is the causal one: full n x m scores, then the mask.
#: A GQA group of more than one query head does the same with no mask: the product's
#: output is transposed to [b, h, n, m] by a second fusion (``xla_rows.scores_apart``).
#: "sdpa": ``jax.nn.dot_product_attention(implementation="xla")`` (jax 0.10-0.11,
#: ``_dot_product_attention_core``): the score einsum writes float32 logits
#: (``preferred_element_type`` float32), the scale, the mask and the float32 softmax read
#: them and write P in the input dtype, the PV einsum reads P: 4 + 4 + s + s bytes a
#: score, the softmax's re-reads past a row and the mask pass as "xla"'s.
#: Both compiles: where the call has a batch, the einsums' batch dimensions (b, heads) of
#: a tensor laid out [b, n, heads, d] have no single stride, and XLA copies it
#: head-major first (``wrapped_transpose`` fusions of Q and K before the score GEMM at
#: b = 2, bitcasts at b = 1: details/h200-naive-hlo-2026-11-29.txt): Q and O where
#: h > 1, K and V where h_kv > 1, each read and written once more (``batch_copies``).
IMPLEMENTATIONS = tuple(NaiveCompile)  #: the names, once: perfmodel.vocabulary.NaiveCompile


def _softmax_reads(implementation: str) -> sp.Expr:
    """``xla_rows.softmax_reads`` over the row length ``m``: its value within XLA's fusion
    row and past it (``xla_rows.ROW_FUSION_KEYS``), one expression where they agree."""
    within = softmax_reads(implementation, ROW_FUSION_KEYS)
    past = softmax_reads(implementation, ROW_FUSION_KEYS + 1)
    if within == past:
        return sp.Integer(within)
    return sp.Piecewise((within, m <= ROW_FUSION_KEYS), (past, True))


def batch_copies(implementation: str, heads: sp.Expr) -> sp.Expr:
    """1 where XLA copies a tensor of ``heads`` heads head-major before (or after) an
    einsum: a batch and more than one head (above), else 0; never in the minimal trips."""
    if implementation == "minimal":
        return sp.Integer(0)
    return sp.Piecewise((1, (b > 1) & (heads > 1)), (0, True))


def _scores_pass(implementation: str, causal: bool) -> tuple[sp.Expr, sp.Expr]:
    """(bytes a score, kernels) of the second pass over the scores a compile makes after
    its score product (``xla_rows.scores_apart``): a float32 write and read under a mask
    (counted here: the product's wider write and the masking fusion), S's bytes read and
    written again by a GQA group's transpose; over the group size, one expression where
    the two cases agree."""
    per_score = {"mask": 2 * F32, "transpose": 2 * s, None: sp.Integer(0)}
    alone = scores_apart(implementation, causal, grouped=False)
    grouped = scores_apart(implementation, causal, grouped=True)
    if alone == grouped:
        return per_score[alone], sp.Integer(int(alone is not None))
    return (
        sp.Piecewise((per_score[grouped], h > h_kv), (per_score[alone], True)),
        sp.Piecewise((int(grouped is not None), h > h_kv), (int(alone is not None), True)),
    )


def build(causal: bool = False, implementation: str = "minimal") -> CostModel:
    """The naive model. ``causal`` changes nothing in the minimal costs (see above)."""
    scores = t.all_scores
    pass_bytes, pass_kernels = _scores_pass(implementation, causal)
    # the bytes a score takes as the score matmul writes it and the softmax reads it
    logits = F32 * scores if implementation == "sdpa" else t.score_matrix_bytes
    q_and_o, k_and_v = (2 * batch_copies(implementation, x) for x in (h, h_kv))
    qk = Kernel(
        name="qk",
        matmul_flops=t.matmul_flops(scores) / 2,
        vector_flops=scores,  # the scale
        exp_count=0 * scores,
        hbm_bytes=(1 + q_and_o) * t.q_bytes + (1 + k_and_v) * t.k_bytes + logits,
    )
    scores_pass = Kernel(  # none in most compiles: its launches are 0 there
        name="scores_pass",
        matmul_flops=0 * scores,
        vector_flops=0 * scores,
        exp_count=0 * scores,
        hbm_bytes=pass_bytes * scores,
        launches=pass_kernels,
    )
    softmax = Kernel(
        name="softmax",
        matmul_flops=0 * scores,
        vector_flops=(t.SOFTMAX_FLOPS_PER_SCORE - 1 + t.NORMALISE_FLOPS_PER_SCORE) * scores,
        exp_count=scores,
        hbm_bytes=_softmax_reads(implementation) * logits + t.score_matrix_bytes,
    )
    pv = Kernel(
        name="pv",
        matmul_flops=t.matmul_flops(scores) / 2,
        vector_flops=0 * scores,
        exp_count=0 * scores,
        hbm_bytes=t.score_matrix_bytes + (1 + k_and_v) * t.v_bytes + (1 + q_and_o) * t.o_bytes,
    )
    minimal = implementation == "minimal"  # the textbook trips: no second pass to list
    return CostModel(
        name="naive" if minimal else f"naive-{implementation}",
        kernels=(qk, softmax, pv) if minimal else (qk, scores_pass, softmax, pv),
        extra_memory_bytes=2 * t.score_matrix_bytes,
        hbm_bytes_no_cache=qk.hbm_bytes + scores_pass.hbm_bytes + softmax.hbm_bytes + pv.hbm_bytes,
    )
