"""How fast is the model? predict() latency, sweep throughput, import time.

Compares, in the same run, the compiled (lambdify) path against plain sympy
``.subs()`` evaluation of the same flash and naive formulas. Prints a table and, with
``--out FILE``, writes the figures there as JSON. The machine may be shared: the
1-minute load average before and after is recorded beside the figures, and predict()
also as CPU time per call (steadier than the wall-clock median under load).

With ``--baseline DIR`` (another checkout: ``git archive REV perfmodel specs | tar -x -C
DIR``), both trees are also timed in fresh processes, alternately, as CPU time: predict()
per call and the sweep, and the ratio of this tree to that one.

    python benchmarks/predict_speed.py [--out /tmp/predict_speed.json] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from perfmodel.atomic import write_json

ROOT = Path(__file__).resolve().parents[1]

#: One tree's CPU times in a fresh process: predict() of two shapes (the second with a
#: K/V split, so flash's floor is also taken over the unsplit launch), the sweep.
CHILD = r"""
import json, time
import numpy as np
import perfmodel

def cpu(fn, repeat):
    t = time.process_time()
    for _ in range(repeat):
        fn()
    return (time.process_time() - t) / repeat

perfmodel.predict(n=8192, hw="a100", h=16)
out = {"predict_cpu_s": cpu(lambda: perfmodel.predict(n=8192, hw="a100", h=16), 2000)}
out["predict_split_cpu_s"] = cpu(lambda: perfmodel.predict(n=8192, hw="h200"), 1000)
n = np.arange(1, 1_000_001) * 16
perfmodel.sweep("h200", n=n[:10])
out["sweep_cpu_s"] = min(cpu(lambda: perfmodel.sweep("h200", n=n), 1) for _ in range(2))
print(json.dumps(out))
"""


def _child(root: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, cwd=root
    )
    if out.returncode:
        raise SystemExit(f"timing failed ({root}):\n{out.stderr[-2000:]}")
    return json.loads(out.stdout)


def against_baseline(baseline: Path, rounds: int = 2) -> dict:
    """This tree and ``baseline``, alternately in fresh processes; the least CPU time of
    each figure over the rounds, and this tree's over the baseline's."""
    runs: dict[str, list[dict]] = {"this": [], "baseline": []}
    for _ in range(rounds):
        runs["this"].append(_child(ROOT))
        runs["baseline"].append(_child(baseline.resolve()))
    best = {k: {f: min(r[f] for r in v) for f in v[0]} for k, v in runs.items()}
    ratio = {f: best["this"][f] / best["baseline"][f] for f in best["this"]}
    return {"baseline_dir": str(baseline), **best, "this_over_baseline": ratio}


def _median_s(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _cpu_s(fn, repeat: int) -> float:
    """CPU time of this process per call, over ``repeat`` calls."""
    t0 = time.process_time()
    for _ in range(repeat):
        fn()
    return (time.process_time() - t0) / repeat


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
    parser.add_argument("--baseline", type=Path, default=None, help="another checkout, timed too")
    args = parser.parse_args(argv)
    import perfmodel

    load_before = os.getloadavg()[0]
    perfmodel.predict(n=8192, hw="a100")  # warm-up: compile and cache

    def one_shape():
        return perfmodel.predict(n=8192, hw="a100", h=16)

    predict_s = _median_s(one_shape, 2000)
    predict_cpu_s = _cpu_s(one_shape, 2000)
    n = np.arange(1, 1_000_001) * 16
    perfmodel.sweep("h200", n=n[:10])
    sweep_s = _median_s(lambda: perfmodel.sweep("h200", n=n), 5)
    result = {
        "python": sys.version.split()[0],
        "import_s": import_time_s(),
        "import_and_first_predict_s": import_time_s(first_call=True),
        "predict_s": predict_s,
        "predict_cpu_s": predict_cpu_s,
        "subs_one_point_s": subs_time_s(),
        "sweep_points": int(n.size),
        "sweep_s": sweep_s,
    }
    result["sweep_points_per_s"] = n.size / sweep_s
    result["load_average_1m"] = [load_before, os.getloadavg()[0]]
    result["subs_over_predict"] = result["subs_one_point_s"] / predict_s
    print(f"import perfmodel            {result['import_s'] * 1e3:8.1f} ms   (goal <= 500 ms)")
    print(
        f"import + first predict()    {result['import_and_first_predict_s']:8.2f} s    "
        "(sympy, pydantic load; formulas compile once)"
    )
    print(
        f"predict() one shape         {predict_s * 1e6:8.1f} µs   (goal <= 200 µs); "
        f"CPU {predict_cpu_s * 1e6:.1f} µs/call"
    )
    print(
        f"sympy .subs(), same formulas{result['subs_one_point_s'] * 1e6:8.0f} µs   "
        f"({result['subs_over_predict']:.0f}x predict)"
    )
    print(
        f"sweep of {n.size:,} points     {sweep_s:8.3f} s    (goal <= 1 s), "
        f"{result['sweep_points_per_s']:.3g} points/s"
    )
    if args.baseline:
        result["against_baseline"] = b = against_baseline(args.baseline)
        for f, r in b["this_over_baseline"].items():
            print(
                f"{f:<28}{b['this'][f]:10.4g} s  baseline {b['baseline'][f]:.4g} s  "
                f"(this / baseline: {r:.2f})"
            )
        result["load_average_1m"][1] = os.getloadavg()[0]
    before, after = result["load_average_1m"]
    print(f"load average (1 min)        {before:8.2f} before, {after:.2f} after")
    if args.out:
        write_json(args.out, result)
    return result


if __name__ == "__main__":
    main()
