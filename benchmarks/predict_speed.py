"""How fast is the model? predict() warm, a random-shape sweep, the first predict().

Each figure is measured in fresh processes, this tree and a baseline checkout
alternately, and reported with this tree's over the baseline's (the machine may be
shared: a ratio measured in the same run is the figure to read, not the seconds):

- ``predict_warm_s``: CPU time of one ``predict()`` of a shape already asked for (the
  same shape, 2000 times, after one call);
- ``predict_varied_s``: CPU time of one ``predict()`` of a shape not asked for before
  (400 random shapes, each once, after a warm-up on others): no remembered result
  helps; the code traced for their cases by earlier processes does, where a tree keeps
  it in the cache folder (``prediction._traces_file``), as the compiled expressions;
- ``predict_varied_fresh_s``: the same in a cache folder that holds the compiled
  expressions only (no traces: each case's branches are traced in the run);
- ``sweep_cpu_s`` and ``sweep_bytes``: CPU time and peak memory above the imports of a
  10⁶-point sweep whose n, d, h, batch and causal are drawn per point
  (``grid=False``), with the columns a user asks for (``flash.time_s``, ``speedup``);
- ``first_predict_s``: wall time of ``import perfmodel`` and the first ``predict()``
  in a fresh process, after an earlier process has left its compiled expressions in
  the cache folder (``perfmodel.compile``; the usual case: any earlier use);
- ``first_predict_cold_s``: the same with an empty cache folder (the first use of a
  version of the cost models: sympy builds and prints them). A tree without the cache
  reads neither folder: its two figures measure the same thing. ``*_cpu_s``: the CPU
  time of the same (less disturbed by a loaded machine than the wall time).

    python benchmarks/predict_speed.py --baseline DIR [--rounds 2] [--out FILE.json]

``DIR`` is another checkout (``git worktree add DIR REV``, with ``perfmodel/specs`` a
link to ``../specs``). Figures go to stdout as a table and, with ``--out``, to JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from perfmodel.atomic import write_json
from perfmodel.compile import cache_folder

ROOT = Path(__file__).resolve().parents[1]
#: Points of the random-shape sweep.
SWEEP_POINTS = 10**6

#: One tree's figures in one fresh process (printed as JSON).
CHILD = r"""
import json, resource, sys, time
import numpy as np
import perfmodel

def cpu(fn, repeat):
    t = time.process_time()
    for _ in range(repeat):
        fn()
    return (time.process_time() - t) / repeat

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()

rng = np.random.default_rng(0)
def shapes(k):
    return [dict(n=int(rng.integers(1, 32769)), d=int(rng.choice([64, 128])),
                 h=int(rng.choice([1, 8, 16, 32])), batch=int(rng.integers(1, 9)),
                 causal=bool(rng.integers(0, 2))) for _ in range(k)]

out = {}
perfmodel.predict(n=8192, hw="h200", h=16)
out["predict_warm_s"] = cpu(lambda: perfmodel.predict(n=8192, hw="h200", h=16), 2000)
for s in shapes(50):
    perfmodel.predict(hw="h200", **s)
varied = shapes(400)
t = time.process_time()
for s in varied:
    perfmodel.predict(hw="h200", **s)
out["predict_varied_s"] = (time.process_time() - t) / len(varied)
N = int(sys.argv[1])
if not N:  # the predict figures only
    print(json.dumps(out))
    sys.exit(0)
cols = dict(
    n=rng.integers(1, 32769, N), d=rng.choice([64, 128], N), h=rng.choice([1, 8, 16, 32], N),
    batch=rng.integers(1, 9, N), causal=rng.integers(0, 2, N).astype(bool),
)
wanted = ["flash.time_s", "speedup"]
perfmodel.sweep("h200", **{k: v[:100] for k, v in cols.items()}, grid=False, columns=wanted)
before = rss()
t = time.process_time()
r = perfmodel.sweep("h200", **cols, grid=False, columns=wanted)
out["sweep_cpu_s"] = time.process_time() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
out["sweep_bytes"] = peak - before
out["sweep_points"] = len(r)
print(json.dumps(out))
"""

FIRST = (
    "import time; t = time.perf_counter(); c = time.process_time(); import perfmodel; "
    "perfmodel.predict(n=8192, hw='h200', h=16); "
    "print(time.perf_counter() - t, time.process_time() - c)"
)


def _compiled_files() -> list[Path]:
    """The compiled expressions an earlier process left in the cache folder."""
    folder = cache_folder()
    return [] if folder is None else sorted(folder.glob("compiled-*.json"))


def _env(root: Path, cache: str | None = None) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    if cache is not None:
        env["PERFMODEL_CACHE"] = cache
    return env


def _run(root: Path, code: str, *args: str, cache: str | None = None) -> str:
    """The output of ``code`` run by a fresh Python on ``root``'s package."""
    out = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env=_env(root, cache),
        cwd=root,
    )
    if out.returncode:
        raise SystemExit(f"timing failed ({root}):\n{out.stderr[-2000:]}")
    return out.stdout


def _child(root: Path, points: int) -> dict[str, float]:
    figures: dict[str, float] = json.loads(_run(root, CHILD, str(points)))
    with tempfile.TemporaryDirectory() as cache:  # the compiled expressions, no traces
        for kept in _compiled_files():
            shutil.copy(kept, cache)
        fresh = json.loads(_run(root, CHILD, "0", cache=cache))
        figures["predict_varied_fresh_s"] = fresh["predict_varied_s"]
    with tempfile.TemporaryDirectory() as cache:
        for name in ("first_predict_cold_s", "first_predict_s"):  # empty, then filled
            wall, cpu = _run(root, FIRST, cache=cache).split()
            figures[name] = float(wall)
            figures[name[:-2] + "_cpu_s"] = float(cpu)
    return figures


def measure(baseline: Path, rounds: int, points: int) -> dict[str, object]:
    """Both trees, alternately in fresh processes; the least of each figure over the
    rounds (the least disturbed run), and this tree's over the baseline's."""
    runs: dict[str, list[dict[str, float]]] = {"this": [], "baseline": []}
    for _ in range(rounds):
        runs["this"].append(_child(ROOT, points))
        runs["baseline"].append(_child(baseline.resolve(), points))
    best = {k: {f: min(r[f] for r in v) for f in v[0]} for k, v in runs.items()}
    ratio = {f: best["this"][f] / best["baseline"][f] for f in best["this"] if best["baseline"][f]}
    return {
        "baseline_dir": str(baseline),
        "rounds": rounds,
        "load_average_1m": os.getloadavg()[0],
        **best,
        "this_over_baseline": ratio,
    }


def main(argv: list[str] | None = None) -> dict[str, object]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--baseline", type=Path, required=True, help="another checkout")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--points", type=int, default=SWEEP_POINTS, help="sweep points")
    parser.add_argument("--out", default=None, help="JSON file to write the figures to")
    args = parser.parse_args(argv)
    result = measure(args.baseline, args.rounds, args.points)
    this, base = result["this"], result["baseline"]
    assert isinstance(this, dict) and isinstance(base, dict)
    ratio = result["this_over_baseline"]
    assert isinstance(ratio, dict)
    print(f"{'figure':<18} {'this tree':>12} {'baseline':>12} {'ratio':>7}")
    for f in this:
        print(f"{f:<18} {this[f]:>12.4g} {base[f]:>12.4g} {ratio.get(f, float('nan')):>7.3f}")
    if args.out:
        write_json(Path(args.out), result)
    return result


if __name__ == "__main__":
    main()
