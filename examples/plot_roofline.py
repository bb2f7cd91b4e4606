"""The roofline chart: matmul, HBM, exp and vector roofs, the ridge point, naive and flash.

H200, d=128, h=16, bf16, n = 128 ... 128K.

    python examples/plot_roofline.py [OUT.png]
"""

from __future__ import annotations

import sys
from pathlib import Path

from perfmodel.report.figures import roofline_chart
from perfmodel.shape import Shape

#: The benchmark's configuration: 16 heads, bf16, 16384 tokens per point.
SHAPE = Shape(d=128, h=16, dtype="bf16", tokens=16384)


def main(out: str | Path = "roofline.png") -> Path:
    path = roofline_chart("h200", out, shape=SHAPE)
    print(path)
    return path


if __name__ == "__main__":
    main(*sys.argv[1:2])
