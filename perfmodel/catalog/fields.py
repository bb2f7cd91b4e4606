"""The number and flag types of every data file: finite, positive where physics says so,
inside a stated range, and of the kind written (a TOML ``true`` is not the count 1).

Each schema under ``perfmodel.catalog`` (devices, calibration, kernel families, models,
workloads, ceilings) and the measurement files (``perfmodel.validation.measured``)
declare their figures with these types, so that a figure a result could not survive
(``inf``, ``1e-300`` B/s, a launch gap of ``1e308`` s) is refused where it is read, with
the file, the field and the value:

>>> from pydantic import BaseModel
>>> class Spec(BaseModel):
...     bandwidth_bytes_per_s: BytesPerSecond
...     count: Count
>>> Spec(bandwidth_bytes_per_s=4.8e12, count=132).count
132
>>> Spec(bandwidth_bytes_per_s=float("inf"), count=132)
Traceback (most recent call last):
...
pydantic_core._pydantic_core.ValidationError: 1 validation error for Spec
bandwidth_bytes_per_s
  Value error, must be a finite number ...

The ranges are wide (six or more orders of magnitude around today's devices): they
refuse what no device has, not what a new one might.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, StrictBool

__all__ = [
    "BytesPerSecond",
    "ByteCount",
    "Count",
    "Finite",
    "Flag",
    "FlopsPerSecond",
    "Latency",
    "Fraction",
    "NonNegativeCount",
    "Overhead",
    "PositiveFraction",
    "Ratio",
    "Seconds",
    "INTEGER",
    "NUMBER",
    "within",
]

#: A boolean written as a boolean (TOML ``true``, JSON ``true``), never 1 or "yes".
Flag = StrictBool


def _number(value: Any) -> float:
    """A finite real number as written: not a bool, not text, not NaN or infinity."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"must be a number, not {type(value).__name__}")
    if not math.isfinite(value):
        raise ValueError("must be a finite number")
    return float(value)


def _integer(value: Any) -> int:
    """A whole number as written (``141e9`` counts as one); not a bool, text or 2.5."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"must be an integer, not {type(value).__name__}")
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise ValueError("must be a whole number")
    return int(value)


def _range(low: float, high: float, *, open_low: bool, unit: str) -> Callable[[float], float]:
    shown = f"{'above' if open_low else 'at least'} {low:g}{unit} and at most {high:g}{unit}"

    def check(value: float) -> float:
        if not ((value > low if open_low else value >= low) and value <= high):
            raise ValueError(f"must be {shown}")
        return value

    return check


#: Before a range check: a finite float, or a whole number for a count (never a bool or
#: text); a field is ``Annotated[float, NUMBER, within(0, 1)]``.
NUMBER = BeforeValidator(_number)
INTEGER = BeforeValidator(_integer)


def within(low: float, high: float, *, open_low: bool = False, unit: str = "") -> AfterValidator:
    """The range check of a number field: ``[low, high]`` (``(low, high]`` with
    ``open_low``), its message in ``unit``."""
    return AfterValidator(_range(low, high, open_low=open_low, unit=unit))


#: Any finite number (a fit statistic, a relative error).
Finite = Annotated[float, NUMBER]
#: Matrix, vector and special-function rates: 1 GFLOP/s to 1 EFLOP/s.
FlopsPerSecond = Annotated[float, NUMBER, within(1e9, 1e18, unit=" FLOP/s")]
#: Memory, cache and link bandwidths, and measured copy rates: 1 MB/s to 10 PB/s.
BytesPerSecond = Annotated[float, NUMBER, within(1e6, 1e16, unit=" B/s")]
#: Byte sizes (memory capacity, SRAM, caches): 1 B to 1 PiB.
ByteCount = Annotated[int, INTEGER, within(1, 2**50, unit=" B")]
#: Counts of hardware units, heads, layers, tiles, warps, stages: 1 to 2^31.
Count = Annotated[int, INTEGER, within(1, 2**31)]
#: A count that may be zero (timed runs, peak bytes).
NonNegativeCount = Annotated[int, INTEGER, within(0, 2**62)]
#: Fixed costs (a launch gap, a latency, a host dispatch): 0 to 1 s.
Overhead = Annotated[float, NUMBER, within(0.0, 1.0, unit=" s")]
#: A latency that time is divided by: above 0, at most 1 s.
Latency = Annotated[float, NUMBER, within(0.0, 1.0, open_low=True, unit=" s")]
#: A measured time: above 0, at most 10^6 s (the largest time ``diagnose`` accepts).
Seconds = Annotated[float, NUMBER, within(0.0, 1e6, open_low=True, unit=" s")]
#: A share of a roof reached, or of a whole: (0, 1].
PositiveFraction = Annotated[float, NUMBER, within(0.0, 1.0, open_low=True)]
#: A share that may be zero: [0, 1].
Fraction = Annotated[float, NUMBER, within(0.0, 1.0)]
#: A non-negative dimensionless figure (tiles of overhead, a clock ratio): 0 to 10^6.
Ratio = Annotated[float, NUMBER, within(0.0, 1e6)]
