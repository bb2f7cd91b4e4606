"""perfmodel: why FlashAttention is fast, as a roofline model you can check by hand.

>>> import perfmodel
>>> p = perfmodel.predict(n=8192, hw="a100")
>>> int(p.naive.extra_memory_bytes)
268435456

The public names load on first use, so ``import perfmodel`` stays fast (sympy and
pydantic load when a model is first needed; jax and matplotlib never do here).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "predict": "perfmodel.prediction",
    "sweep": "perfmodel.prediction",
    "Prediction": "perfmodel.results",
    "AlgorithmPrediction": "perfmodel.results",
    "Shape": "perfmodel.shape",
    "SweepResult": "perfmodel.prediction",
    "symbolic": "perfmodel.costs",
    "HardwareSpec": "perfmodel.catalog.hardware",
    "load_hardware": "perfmodel.catalog.hardware",
    "known_names": "perfmodel.catalog.hardware",
    "Calibration": "perfmodel.catalog.calibration",
    "load_calibration": "perfmodel.catalog.calibration",
    "PerfmodelError": "perfmodel.errors",
    "estimate": "perfmodel.analysis.estimate",
}

__all__ = [
    "AlgorithmPrediction",
    "Calibration",
    "HardwareSpec",
    "PerfmodelError",
    "Prediction",
    "Shape",
    "SweepResult",
    "estimate",
    "known_names",
    "load_calibration",
    "load_hardware",
    "predict",
    "sweep",
    "symbolic",
]
__version__ = "0.1.0"

if TYPE_CHECKING:
    from perfmodel.analysis.estimate import estimate
    from perfmodel.catalog.calibration import Calibration, load_calibration
    from perfmodel.catalog.hardware import HardwareSpec, known_names, load_hardware
    from perfmodel.costs import symbolic
    from perfmodel.errors import PerfmodelError
    from perfmodel.prediction import SweepResult, predict, sweep
    from perfmodel.results import AlgorithmPrediction, Prediction
    from perfmodel.shape import Shape


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'perfmodel' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
