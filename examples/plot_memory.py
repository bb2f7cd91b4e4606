"""Memory against n: S+P against the flash footprint, the HBM capacity, where naive runs out.

H200, d=128, h=16, bf16.

    python examples/plot_memory.py [OUT.png]
"""

from __future__ import annotations

import sys
from pathlib import Path

from perfmodel.report.figures import memory_chart
from perfmodel.shape import Shape

#: The benchmark's configuration: 16 heads, bf16, 16384 tokens per point.
SHAPE = Shape(d=128, h=16, dtype="bf16", tokens=16384)


def main(out: str | Path = "memory.png") -> Path:
    path = memory_chart("h200", out, shape=SHAPE)
    print(path)
    return path


if __name__ == "__main__":
    main(*sys.argv[1:2])
