"""perfmodel: why FlashAttention is fast, as a roofline model you can check by hand.

>>> import perfmodel
>>> p = perfmodel.predict(n=8192, hw="a100")
>>> int(p.naive.extra_memory_bytes)
268435456
"""

from perfmodel.calibration import Calibration, load_calibration
from perfmodel.costs import symbolic
from perfmodel.errors import PerfmodelError
from perfmodel.hardware import HardwareSpec, known_names, load_hardware
from perfmodel.predict import AlgorithmPrediction, Config, Prediction, SweepResult, predict, sweep

__all__ = [
    "AlgorithmPrediction",
    "Calibration",
    "Config",
    "HardwareSpec",
    "PerfmodelError",
    "Prediction",
    "SweepResult",
    "known_names",
    "load_calibration",
    "load_hardware",
    "predict",
    "sweep",
    "symbolic",
]
__version__ = "0.1.0"
