"""Speedup against n, with the symbolic n→∞ limit and the crossover n (H200, d=128, h=16, bf16).

python examples/plot_speedup.py [OUT.png]
"""

from __future__ import annotations

import sys
from pathlib import Path

from perfmodel.report.figures import speedup_chart
from perfmodel.shape import Shape

#: The benchmark's configuration: 16 heads, bf16, 16384 tokens per point.
SHAPE = Shape(d=128, h=16, dtype="bf16", tokens=16384)


def main(out: str | Path = "speedup.png") -> Path:
    path = speedup_chart("h200", out, shape=SHAPE)
    print(path)
    return path


if __name__ == "__main__":
    main(*sys.argv[1:2])
