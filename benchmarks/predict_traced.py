"""predict() of a new shape once every branch of the workload is traced: where the time goes.

``predict_speed.py`` measures a fresh process (400 new shapes, some of their branches
still traced during the run). This measures the steady state of one process: after
``--warmup`` random shapes (drawn as ``predict_speed.py`` draws them) with every new
branch traced at once (``prediction._CREDIT`` unbounded), the CPU time of ``--shapes``
more, each new (the least of 3 rounds), and of its parts: the printed code of the
point's case (``Paths.fn``), the printed builder of its result, the rest (checking,
keying, remembering). It also prints each case's traced branches (leaves) and how many
points the printed code answered.

    python benchmarks/predict_traced.py [--warmup 5000] [--shapes 2000]
"""

from __future__ import annotations

import argparse
import math
import time
from typing import Any

import numpy as np

from predict_profile import shapes  # drawn as predict_speed.py draws them

import perfmodel
from perfmodel import prediction


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--warmup", type=int, default=5000)
    parser.add_argument("--shapes", type=int, default=2000)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    prediction._CREDIT.left = math.inf  # every new branch traced at once
    for s in shapes(rng, args.warmup):
        perfmodel.predict(hw="h200", **s)
    clock = time.process_time
    best = {"predict_s": math.inf, "printed_code_s": math.inf, "build_s": math.inf}
    answered = 0
    for _ in range(3):
        varied = shapes(rng, args.shapes)
        start = clock()
        for s in varied:
            perfmodel.predict(hw="h200", **s)
        best["predict_s"] = min(best["predict_s"], (clock() - start) / len(varied))
        found = []
        for s in varied:
            case = next(
                c
                for k, c in prediction._CASES.items()
                if isinstance(c, prediction._Case) and dict(k[1:]) == _case_of(s)
            )
            found.append((case.paths, (s["n"], s["n"], s["h"], s["h"], s["batch"])))
        start = clock()
        results = [paths.fn(*point) for paths, point in found]
        best["printed_code_s"] = min(best["printed_code_s"], (clock() - start) / len(found))
        built = [
            (paths.leaves[r[0]], r[1])
            for (paths, _), r in zip(found, results, strict=True)
            if r is not None and r[0] >= 0
        ]
        answered = len(built)
        start = clock()
        for build, values in built:
            build(values)
        best["build_s"] = min(best["build_s"], (clock() - start) / max(len(built), 1))
    for k, v in best.items():
        print(f"{k:<16} {v * 1e6:8.1f} µs")
    print(f"answered by printed code: {answered} of {args.shapes}")
    for key, case in prediction._CASES.items():
        if isinstance(case, prediction._Case):
            print(f"  {dict(key[1:])}: {len(case.paths.leaves)} branches traced")
    return best


def _case_of(shape: dict[str, Any]) -> dict[str, Any]:
    """A shape's case key entries (its arguments but the shape's numbers)."""
    return {k: (type(v), v) for k, v in shape.items() if k not in prediction._SHAPE_ARGS}


if __name__ == "__main__":
    main()
