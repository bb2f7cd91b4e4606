"""How fast is the model? predict() latency, sweep throughput, import time.

Compares, in the same run, the compiled (lambdify) path against plain sympy
``.subs()`` evaluation of the same flash and naive formulas. Prints a table and, with
``--out FILE``, writes the figures there as JSON.

    python benchmarks/predict_speed.py [--out /tmp/predict_speed.json]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

import numpy as np

from perfmodel.atomic import write_json


def _median_s(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def import_time_s(first_call: bool = False) -> float:
    """``import perfmodel`` in a fresh process; with ``first_call``, plus the first predict()."""
    body = "import perfmodel" + ("; perfmodel.predict(n=8192, hw='a100')" if first_call else "")
    code = f"import time; t=time.perf_counter(); {body}; print(time.perf_counter()-t)"
    runs = [float(subprocess.check_output([sys.executable, "-c", code])) for _ in range(5)]
    return statistics.median(runs)


def subs_time_s() -> float:
    """The same formulas evaluated by sympy substitution, one point (L2 and SMs: the H200's)."""
    from perfmodel.catalog.hardware import load_hardware
    from perfmodel.costs import symbolic
    from perfmodel.symbols import SHAPE, l2_capacity, resident_ctas

    spec = load_hardware("h200")
    values = dict(zip(SHAPE, (8192, 8192, 128, 16, 16, 1, 128, 128, 2), strict=True))
    values |= {l2_capacity: spec.l2_bytes, resident_ctas: spec.sm_count}
    exprs = []
    for name in ("naive", "flash"):
        model = symbolic(name)
        for k in model.kernels:
            exprs += [k.matmul_flops, k.vector_flops, k.exp_count, k.hbm_bytes, k.l2_bytes]
    return _median_s(lambda: [float(e.subs(values)) for e in exprs], 20)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="JSON file to write the figures to")
    args = parser.parse_args(argv)
    import perfmodel

    perfmodel.predict(n=8192, hw="a100")  # warm-up: compile and cache
    predict_s = _median_s(lambda: perfmodel.predict(n=8192, hw="a100", h=16), 2000)
    n = np.arange(1, 1_000_001) * 16
    perfmodel.sweep("h200", n=n[:10])
    sweep_s = _median_s(lambda: perfmodel.sweep("h200", n=n), 5)
    result = {
        "python": sys.version.split()[0],
        "import_s": import_time_s(),
        "import_and_first_predict_s": import_time_s(first_call=True),
        "predict_s": predict_s,
        "subs_one_point_s": subs_time_s(),
        "sweep_points": int(n.size),
        "sweep_s": sweep_s,
    }
    result["sweep_points_per_s"] = n.size / sweep_s
    result["subs_over_predict"] = result["subs_one_point_s"] / predict_s
    print(f"import perfmodel            {result['import_s'] * 1e3:8.1f} ms   (goal <= 500 ms)")
    print(
        f"import + first predict()    {result['import_and_first_predict_s']:8.2f} s    "
        "(sympy, pydantic load; formulas compile once)"
    )
    print(f"predict() one shape         {predict_s * 1e6:8.1f} µs   (goal <= 200 µs)")
    print(
        f"sympy .subs(), same formulas{result['subs_one_point_s'] * 1e6:8.0f} µs   "
        f"({result['subs_over_predict']:.0f}x predict)"
    )
    print(
        f"sweep of {n.size:,} points     {sweep_s:8.3f} s    (goal <= 1 s), "
        f"{result['sweep_points_per_s']:.3g} points/s"
    )
    if args.out:
        write_json(args.out, result)
    return result


if __name__ == "__main__":
    main()
