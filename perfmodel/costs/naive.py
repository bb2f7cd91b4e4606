"""Naive (materialised) attention: three kernels that pass S and P through HBM.

    S = scale·Q Kᵀ        (kernel 1: read Q, K; write S)
    P = softmax(S)         (kernel 2: read S; write P)
    O = P V                (kernel 3: read P, V; write O)

The n×m matrices S and P are written and read once each: the "at least 4 big trips"
of the chapter. Causal masking does not shrink anything: the full S is computed and
stored, then masked. Left out: XLA's internal f32 upcasts and any multi-pass softmax
that re-reads S more than once (those only add bytes).
"""

from __future__ import annotations

from perfmodel.costs import terms as t
from perfmodel.costs.base import CostModel, Kernel


def build(causal: bool = False) -> CostModel:
    """The naive model; ``causal`` changes nothing in its costs (see module docstring)."""
    scores = t.all_scores
    qk = Kernel(
        name="qk",
        matmul_flops=t.matmul_flops(scores) / 2,
        vector_flops=scores,  # the scale
        exp_count=0 * scores,
        hbm_bytes=t.q_bytes + t.k_bytes + t.score_matrix_bytes,
    )
    softmax = Kernel(
        name="softmax",
        matmul_flops=0 * scores,
        vector_flops=(t.SOFTMAX_FLOPS_PER_SCORE - 1 + t.NORMALISE_FLOPS_PER_SCORE) * scores,
        exp_count=scores,
        hbm_bytes=2 * t.score_matrix_bytes,
    )
    pv = Kernel(
        name="pv",
        matmul_flops=t.matmul_flops(scores) / 2,
        vector_flops=0 * scores,
        exp_count=0 * scores,
        hbm_bytes=t.score_matrix_bytes + t.v_bytes + t.o_bytes,
    )
    return CostModel(
        name="naive",
        kernels=(qk, softmax, pv),
        extra_memory_bytes=2 * t.score_matrix_bytes,
        hbm_bytes_no_cache=qk.hbm_bytes + softmax.hbm_bytes + pv.hbm_bytes,
    )
