"""Nominal attention FLOPs: the count a TFLOP/s figure divides by, written once.

Benchmarks of attention kernels (the FlashAttention papers, cuDNN's, ours) report
throughput as a nominal count over the measured time, not as the work a kernel really
does: the matrix products over every score, ``4·b·h·n·m·d`` for the forward (QKᵀ and
PV, 2 FLOPs per multiply-add; ``terms.matmul_flops(terms.all_scores)``), halved when
causal (the triangle), softmax and masked-off tiles not counted. The backward counts
five such products (S recomputed, dV, dP, dQ, dK: FlashAttention-2 §3.2), 2.5× the
forward; a training step both.

Plain numbers in, a float out, and no pydantic or jax on the way: the GPU benchmarks
(``kernel_bench/bench*.py``) import it, and so does ``Point.nominal_flops`` in
``perfmodel.validation.measured``.

>>> nominal_flops(batch=1, h=1, n=1024, kv_len=1024, d=128)  # 4·1024²·128
536870912.0
>>> nominal_flops(batch=1, h=1, n=1024, kv_len=1024, d=128, causal=True, mode="backward")
671088640.0
"""

from __future__ import annotations

import functools

from perfmodel.compile import Compiled, compiled
from perfmodel.costs import terms as t
from perfmodel.errors import PerfmodelError
from perfmodel.vocabulary import symbol_values

#: Products of the score shape by d that each pass is credited with (``terms.gemm_flops``):
#: the forward's QKᵀ and PV; the backward's S = QKᵀ, dV = PᵀdO, dP = dO Vᵀ, dQ = dS K
#: and dK = dSᵀQ; a training step both.
NOMINAL_GEMMS = {"forward": 2, "backward": 5, "train": 7}
#: A causal pass is credited with half the scores (the triangle, diagonal included).
CAUSAL_SHARE = 0.5


@functools.cache
def _formula(mode: str) -> Compiled:
    return compiled(t.gemm_flops(t.all_scores, NOMINAL_GEMMS[mode]))


def nominal_flops(
    *, batch: int, h: int, n: int, kv_len: int, d: int, causal: bool = False, mode: str = "forward"
) -> float:
    """Nominal FLOPs of one attention call (module docstring): ``4·b·h·n·kv_len·d``
    for the forward, times 2.5 for the backward and 3.5 for a training step, halved
    when ``causal``. ``h`` counts query heads (GQA shares K/V, not the products)."""
    if mode not in NOMINAL_GEMMS:
        raise PerfmodelError(f"unknown mode={mode!r}; known: {tuple(NOMINAL_GEMMS)}")
    full = _formula(mode)(**symbol_values(batch=batch, h=h, n=n, kv_len=kv_len, d=d))
    return float(full * CAUSAL_SHARE if causal else full)


def visible_flops(*, batch: int, h: int, d: int, pairs: float, mode: str = "forward") -> float:
    """Nominal FLOPs over ``pairs`` visible query-key pairs of one (batch, head) under a
    mask (a window: ``costs.masks.keys_seen``): the same products per score as
    :func:`nominal_flops`, over the scores the mask keeps, not the triangle.

    >>> visible_flops(batch=1, h=1, d=128, pairs=1024 * 1024)  # = nominal_flops, no mask
    536870912.0
    """
    # the pairs of one (batch, head) as a 1 x pairs score matrix: the one formula
    return nominal_flops(batch=batch, h=h, n=pairs, kv_len=1, d=d, mode=mode)  # type: ignore[arg-type]
