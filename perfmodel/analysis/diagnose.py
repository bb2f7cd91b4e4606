"""A bottleneck diagnosis: from HBM and SM utilisation to a verdict.

Utilisations come from a profiler (Nsight Compute's DRAM throughput and SM busy,
as fractions of peak) or from one measured time and the model's counts for that
shape (:func:`utilisation_from_time`: bytes / time / bandwidth, FLOPs / time / peak).

The rules, checked in this order:

1. HBM utilisation high (>= ``HBM_HIGH``): bandwidth-bound — flash helps, it removes bytes.
2. SMs busy (>= ``SM_BUSY``) and HBM not full: compute-bound — flash will not help much.
3. Both low (HBM <= ``HBM_LOW`` and SM below ``SM_LOW``): the bottleneck is outside
   attention (pre-processing, tokenisation, the sampling loop, launches) — or, when the
   time is attention's alone, the kernels are latency-bound.
4. Otherwise (HBM between the two thresholds, SMs idle): no clear verdict.

>>> diagnose(hbm_util=0.92, sm_util=0.35).verdict
'bandwidth-bound'
>>> diagnose(hbm_util=0.2, sm_util=0.15).verdict
'outside attention'
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from perfmodel.arguments import check
from perfmodel.errors import PerfmodelError

#: Thresholds, as fractions of datasheet peak ("near 90–100%" of HBM is
#: bandwidth-bound; "about 30%" with idle SMs is waiting).
#: SM utilisation is against the dense matmul peak, of which tuned kernels reach about
#: 80% (the default calibration): 40% of it already means busy tensor cores.
HBM_HIGH = 0.70
SM_BUSY = 0.40
HBM_LOW = 0.40
SM_LOW = SM_BUSY


@dataclass(frozen=True)
class Diagnosis:
    """A verdict, whether flash attention would help, and why, in one or two sentences."""

    verdict: str  #: bandwidth-bound, compute-bound, outside attention, inconclusive
    flash_helps: bool | None
    hbm_util: float
    sm_util: float
    explanation: str
    source: str = "given utilisations"
    #: Which implementation was measured: for a flash run, switching to flash is moot.
    algorithm: str = "naive"

    def __str__(self) -> str:
        helps = {True: "yes", False: "not much", None: "unclear"}[self.flash_helps]
        helps_line = (
            "flash attention: already in use (the run measured is flash)"
            if self.algorithm == "flash"
            else f"flash attention helps: {helps}"
        )
        return (
            f"verdict: {self.verdict} (HBM {self.hbm_util:.0%}, SM {self.sm_util:.0%}; "
            f"{self.source})\n{helps_line}\n{self.explanation}"
        )


def diagnose(
    hbm_util: float,
    sm_util: float,
    *,
    source: str = "given utilisations",
    attention_only: bool = False,
    algorithm: str = "naive",
) -> Diagnosis:
    """The verdict from HBM and SM utilisation (fractions of peak, 0..1).

    ``attention_only``: the utilisations cover the attention kernels alone (a timed
    kernel, not a whole step), so "both low" cannot point outside attention: the kernels
    themselves wait (launch gaps, small grids, latency) — verdict "latency-bound".
    ``algorithm``: what was measured; for "flash", ``flash_helps`` is None (moot) and the
    explanation says what is left instead.
    """
    args = check(
        hbm_util=hbm_util, sm_util=sm_util, attention_only=attention_only, algorithm=algorithm
    )
    hbm, sm, attention_only = args["hbm_util"], args["sm_util"], args["attention_only"]
    verdict = _verdict(hbm, sm, attention_only, source)
    if args["algorithm"] != "flash":
        return verdict
    left = {
        "bandwidth-bound": "The run is already flash attention: the bytes left are its own "
        "Q/K/V/O traffic and K/V re-reads (larger query tiles or GQA packing cut those).",
        "compute-bound": "The run is already flash attention, and its matmuls are the limit.",
    }.get(verdict.verdict, "The run is already flash attention.")
    text = verdict.explanation.replace(", so it helps here.", ".").replace(
        ", so flash will not help much.", "."
    )
    return dataclasses.replace(
        verdict, flash_helps=None, explanation=f"{text} {left}", algorithm="flash"
    )


def _verdict(hbm: float, sm: float, attention_only: bool, source: str) -> Diagnosis:
    """The verdict for a run that is not flash attention."""
    pct = f"HBM bandwidth is at {hbm:.0%} of peak and the SMs at {sm:.0%}"
    if hbm >= HBM_HIGH:
        return Diagnosis(
            "bandwidth-bound",
            True,
            hbm,
            sm,
            (
                f"{pct}: memory traffic is the limit (≥ {HBM_HIGH:.0%}). FlashAttention removes "
                "the HBM round trips of S and P, so it helps here."
            ),
            source,
        )
    if sm >= SM_BUSY:
        return Diagnosis(
            "compute-bound",
            False,
            hbm,
            sm,
            (
                f"{pct}: the SMs are busy (≥ {SM_BUSY:.0%}) while bandwidth is not full. Fewer "
                "bytes will not make the arithmetic faster, so flash will not help much."
            ),
            source,
        )
    if hbm <= HBM_LOW and attention_only:
        return Diagnosis(
            "latency-bound",
            False,
            hbm,
            sm,
            (
                f"{pct}: both are low (≤ {HBM_LOW:.0%} and < {SM_LOW:.0%}) for a time that covers "
                "attention alone, so the kernels wait on launches, small grids or latency, not "
                "on bytes; removing bytes will not help much."
            ),
            source,
        )
    if hbm <= HBM_LOW:
        return Diagnosis(
            "outside attention",
            False,
            hbm,
            sm,
            (
                f"{pct}: both are low (≤ {HBM_LOW:.0%} and < {SM_LOW:.0%}), so the GPU is waiting. "
                "Look outside attention — pre-processing, tokenisation, the sampling loop, "
                "kernel launches — before changing the kernel."
            ),
            source,
        )
    return Diagnosis(
        "inconclusive",
        None,
        hbm,
        sm,
        (
            f"{pct}: bandwidth is partly used and the SMs are idle — neither roof is the limit "
            "(small grids, dependent launches). Profile per kernel before deciding."
        ),
        source,
    )


def utilisation_from_time(
    time_s: float,
    n: int,
    hw: Any,
    *,
    algorithm: str = "naive",
    hbm_bytes_per_s: float | None = None,
    matmul_flops_per_s: float | None = None,
    **shape: Any,
) -> tuple[float, float]:
    """(HBM, SM) utilisation of one measured time, from the model's bytes and FLOPs.

    HBM: the model's HBM bytes / time / bandwidth. SM: matmul FLOPs / time / matmul
    peak (tensor-core utilisation, the part flash cannot reduce). The rates are the
    datasheet's unless measured ceilings are given (``hbm_bytes_per_s``: a copy's
    read + write rate; ``matmul_flops_per_s``: a large GEMM's rate).

    >>> hbm, sm = utilisation_from_time(60e-6, 4096, "h200")
    >>> round(hbm, 2), round(sm, 2)
    (0.48, 0.14)
    """
    from perfmodel.prediction import predict

    args = check(
        time_s=time_s,
        algorithm=algorithm,
        hbm_bytes_per_s=hbm_bytes_per_s,
        matmul_flops_per_s=matmul_flops_per_s,
    )
    t = args["time_s"]
    p = predict(n=n, hw=hw, **shape)
    a = getattr(p, args["algorithm"])
    bw = args["hbm_bytes_per_s"] or p.hardware.hbm_bandwidth_bytes_per_s
    peak = args["matmul_flops_per_s"] or p.hardware.peak(p.config.dtype)
    return a.hbm_bytes / t / bw, a.matmul_flops / t / peak


def check_floor(time_s: float, n: int, hw: Any, *, algorithm: str = "naive", **shape: Any) -> None:
    """Refuse a measured time below the model's floor ``t_lower_s``: no kernel beats its
    roofline, so the time, its unit or the shape is wrong.

    >>> check_floor(1e-9, 4096, "h200")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    perfmodel.errors.PerfmodelError: time_s=1e-09 is below the model's floor ... s ...
    """
    from perfmodel.prediction import predict

    args = check(time_s=time_s, algorithm=algorithm)
    p = predict(n=n, hw=hw, **shape)
    floor = getattr(p, args["algorithm"]).t_lower_s
    if args["time_s"] < floor:
        raise PerfmodelError(
            f"time_s={time_s!r} is below the model's floor t_lower_s={floor:.3g} s for "
            f"{algorithm} attention at n={n} on {p.hardware.name}: check the time's unit "
            "and the shape"
        )


def diagnose_time(
    time_s: float,
    n: int,
    hw: Any,
    *,
    algorithm: str = "naive",
    hbm_bytes_per_s: float | None = None,
    matmul_flops_per_s: float | None = None,
    **shape: Any,
) -> Diagnosis:
    """:func:`diagnose` on the utilisations implied by one measured attention time.

    A time below the model's floor is refused (:func:`check_floor`), as is a measured
    rate that this time would exceed: neither is clamped into a verdict.
    """
    check_floor(time_s, n, hw, algorithm=algorithm, **shape)
    hbm, sm = utilisation_from_time(
        time_s,
        n,
        hw,
        algorithm=algorithm,
        hbm_bytes_per_s=hbm_bytes_per_s,
        matmul_flops_per_s=matmul_flops_per_s,
        **shape,
    )
    rates = "datasheet" if hbm_bytes_per_s is None and matmul_flops_per_s is None else "measured"
    source = (
        f"{algorithm} attention, n={n}, measured {time_s * 1e6:.3g} µs; model's "
        f"bytes/FLOPs over {rates} rates"
    )
    for name, util, rate in (
        ("hbm_bytes_per_s", hbm, hbm_bytes_per_s),
        ("matmul_flops_per_s", sm, matmul_flops_per_s),
    ):
        if util > 1:  # above the floor, so only a measured rate below the datasheet's
            raise PerfmodelError(
                f"{name}={rate!r} is below the rate this time implies ({util:.2f}x it): "
                "the measured ceiling is too low for this kernel"
            )
    return diagnose(hbm, sm, source=source, attention_only=True, algorithm=algorithm)
