"""FP8 attention as a kernel runs it: what is FP8, and what the wider parts cost.

An FP8 flash kernel (FlashAttention-3 §3.3; cuDNN 9's FP8 SDPA) reads Q, K, V in FP8
and runs QKᵀ on the FP8 tensor cores, but keeps other parts wider (the facts per kernel
family are in ``specs/kernels``, ``[fp8]``):

* **P**: fed to the PV matmul in FP8 (both families above), so PV also runs at the FP8
  rate; a kernel keeping P in 16 bits would run PV at the 16-bit rate, and the two
  matmuls (equal FLOPs) at ``2 / (1/R_fp8 + 1/R_16)`` together (:func:`matmul_rate`).
  Converting P from the FP32 scores is one vector op a score (:func:`vector_per_score`).
* **Accumulators and softmax**: FP32, as in 16-bit kernels (no change in the model).
* **Scales**: one float32 descale factor per tensor or per (batch, K/V head): bytes
  negligible; the Q and K descales fold into the softmax scale (no extra op), V's is one
  multiply per output element (:func:`vector_per_output`).
* **O**: written in the family's output format (FA-3: BF16, two bytes; cuDNN: FP8):
  ``(s_out - s)`` bytes an output element more than the input dtype's (:func:`output_bytes`).
* **amax** (cuDNN): max|S| and max|O| for the next step's scales: one vector op a score
  and one an output element.

>>> matmul_rate(1979e12, 989e12, p="e4m3") / 1e12
1979.0
>>> round(matmul_rate(1979e12, 989e12, p="bf16") / 1e12, 1)
1318.9
"""

from __future__ import annotations

from perfmodel.errors import PerfmodelError

#: Bytes of one element of each format an FP8 kernel holds data in.
FORMAT_BYTES = {"e4m3": 1, "e5m2": 1, "bf16": 2, "fp16": 2, "fp32": 4}
#: Formats the FP8 tensor cores take.
EIGHT_BIT = frozenset({"e4m3", "e5m2"})


def _bytes(fmt: str) -> int:
    if fmt not in FORMAT_BYTES:
        raise PerfmodelError(f"unknown element format {fmt!r}; known: {sorted(FORMAT_BYTES)}")
    return FORMAT_BYTES[fmt]


def matmul_rate(fp8_peak: float, wide_peak: float, *, p: str) -> float:
    """The matrix rate of QKᵀ (FP8) and PV (at P's format) together: equal FLOPs each,
    so the harmonic mean of the two rates."""
    pv = fp8_peak if _bytes(p) == 1 else wide_peak
    return 2.0 / (1.0 / fp8_peak + 1.0 / pv)


def vector_per_score(*, p: str, amax: bool) -> int:
    """Vector ops a score beyond a 16-bit kernel's: P's conversion to FP8, and max|S|."""
    return int(_bytes(p) == 1) + int(amax)


def vector_per_output(*, amax: bool) -> int:
    """Vector ops an output element beyond a 16-bit kernel's: V's descale, and max|O|."""
    return 1 + int(amax)


def output_bytes(output: str) -> int:
    """Bytes of one output element as the kernel writes O."""
    return _bytes(output)
