"""The headline numbers for one device and one fixed shape: X, Y, Z and the n→∞ limit.

>>> c = conclusions("h200")
>>> c.throughput_gain == predict(n=4096, hw="h200").speedup - 1
True
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from perfmodel.analysis.asymptotics import (
    Asymptote,
    along_n,
    asymptotic_speedup,
    crossover_n,
    naive_oom_n,
)
from perfmodel.catalog.hardware import load_hardware
from perfmodel.prediction import predict
from perfmodel.shape import Shape

#: The reference length of the headline "at n=4096 throughput is +Y%".
N_REFERENCE = 4096
#: Lengths of the misconception-2 table.
N_GROWTH = (1024, 4096, 16384, 65536)


@dataclass(frozen=True)
class Conclusions:
    """The headline numbers (crossover X, gain Y, memory saving Z, the n→∞ limit) for one
    device and one fixed shape."""

    hardware: str
    shape: Shape
    threshold: float
    n_max: int  #: the top of the sweep: "beyond X" means for every n in [X, n_max]
    x_estimate: int | None  #: sustained crossover on the estimate (time_s)
    x_lower: int | None  #: sustained crossover on the roofline bound (t_lower_s)
    x_first: int | None  #: first n at which the estimate reaches the threshold
    n_reference: int
    speedup: float  #: naive/flash time_s at n_reference
    throughput_gain: float  #: flash tokens/s over naive tokens/s, minus 1
    memory_saving: float  #: 1 - flash footprint / naive footprint (Q, K, V, O included)
    sp_bytes: float  #: S + P at n_reference
    asymptote: Asymptote
    asymptote_lower: Asymptote
    n_oom: int | None

    def headline(self) -> str:
        p = f"{(self.threshold - 1) * 100:.0f}%"
        tail = (
            f"at n={self.n_reference:,} throughput is {self.throughput_gain:+.0%} and "
            f"attention memory −{self.memory_saving:.1%}"
        )
        if self.x_estimate is None:
            return f"The model never has flash {p} faster at every n up to {self.n_max:,}; {tail}."
        if self.x_estimate == 1:
            return (
                f"Gains are significant at every n (flash at least {p} faster from n = 1 "
                f"to {self.n_max:,}); {tail}."
            )
        return (
            f"Gains become significant beyond n ≈ {self.x_estimate:,} (flash at least "
            f"{p} faster at every n from there to {self.n_max:,}); {tail}."
        )


def conclusions(
    hw: Any,
    shape: Shape | None = None,
    *,
    threshold: float = 1.5,
    n_reference: int = N_REFERENCE,
    n_max: int = max(N_GROWTH) * 2,
) -> Conclusions:
    """X, Y, Z and the n→∞ limit, from the model."""
    spec, shape = load_hardware(hw), shape or Shape()
    ref = predict(n=n_reference, hw=spec, **shape.kwargs(n_reference))
    cols = along_n(spec, [n_reference], shape)
    saving = 1 - cols["flash.footprint_bytes"][0] / cols["naive.footprint_bytes"][0]
    cross = functools.partial(crossover_n, spec, threshold, shape=shape, n_max=n_max)
    return Conclusions(
        hardware=spec.name,
        shape=shape,
        threshold=threshold,
        n_max=n_max,
        x_estimate=cross(sustained=True),
        x_lower=cross(metric="t_lower_s", sustained=True),
        x_first=cross(),
        n_reference=n_reference,
        speedup=ref.speedup,
        throughput_gain=ref.speedup - 1,
        memory_saving=float(saving),
        sp_bytes=ref.naive.extra_memory_bytes,
        asymptote=asymptotic_speedup(spec, shape=shape),
        asymptote_lower=asymptotic_speedup(spec, metric="t_lower_s", shape=shape),
        n_oom=naive_oom_n(spec, shape),
    )
