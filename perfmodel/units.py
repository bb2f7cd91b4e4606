"""Display-only unit formatting (everything inside perfmodel is SI)."""

from __future__ import annotations


def _scaled(value: float, unit: str, base: float, prefixes: str) -> str:
    for i, prefix in reversed(list(enumerate(prefixes))):
        if abs(value) >= base**i:
            return f"{value / base**i:.3g} {prefix}{unit}".replace("  ", " ")
    return f"{value:.3g} {unit}"


def si(value: float | None, unit: str) -> str:
    """``si(3.4e-3, "s") == '3.4 ms'``; ``si(2.2e12, "FLOP") == '2.2 TFLOP'``."""
    if value is None:
        return "n/a"
    if unit == "s":
        for scale, prefix in ((1, ""), (1e-3, "m"), (1e-6, "µ"), (1e-9, "n")):
            if abs(value) >= scale:
                return f"{value / scale:.3g} {prefix}s"
        return f"{value:.3g} s"
    return _scaled(value, unit, 1000.0, " kMGTPE")


def binary(value: float | None) -> str:
    """Bytes with decimal prefixes and the exact count: ``67.1 MB (67,108,864 B)``."""
    if value is None:
        return "n/a"
    return f"{si(value, 'B')} ({int(round(value)):,} B)"
