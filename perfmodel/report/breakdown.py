"""Per kernel of both algorithms, the seconds on each roof: the time-breakdown figure's numbers."""

from __future__ import annotations

from typing import Any

from perfmodel.catalog.hardware import load_hardware
from perfmodel.evaluate import kernel_roofs, shape_values
from perfmodel.prediction import predict
from perfmodel.shape import Shape
from perfmodel.vocabulary import ALGORITHMS

KERNEL_LABELS = {
    "qk": "naive: S = QKᵀ",
    "softmax": "naive: P = softmax(S)",
    "pv": "naive: O = PV",
    "flash": "flash: fused kernel",
}


def kernel_roof_times(hw: Any, n: int, shape: Shape | None = None) -> dict[str, dict[str, float]]:
    """Seconds on each roof for each kernel of both algorithms (roofline, no derating).

    Compute roofs are stretched where the grid leaves SMs idle, as ``t_lower_s`` does:
    the sum over an algorithm's kernels of each kernel's largest roof is its t_lower_s.
    """
    spec, shape = load_hardware(hw), shape or Shape()
    predict(n=n, hw=spec, **shape.kwargs(n))  # checks the shape
    values = shape_values(spec, n=n, m=n, **shape.symbol_values(n, spec))
    peak = spec.peak(shape.dtype)
    out = {}
    for algo in ALGORITHMS:
        for k in kernel_roofs(algo, causal=shape.causal, hw=spec, peak=peak, values=values):
            # k.floor: compute roofs stretched by SMs that get no block (as in t_lower_s)
            out[KERNEL_LABELS.get(k.name, f"{algo}: {k.name}")] = {
                r: float(t) for r, t in k.floor.items()
            }
    return out
