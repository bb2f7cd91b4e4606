"""Speed and memory of ``sweep`` at size: 10^6 random shapes, each measured in a fresh process.

Shapes are random per point (n, d, h, batch, causal), broadcast together (``grid=False``).
Each case runs in its own child process, so its peak resident memory (``ru_maxrss``) is
its own: the figure reported is the peak minus the resident memory just before the sweep
(after imports and a warm-up). Time is the median of three sweeps, wall and CPU; next to
it, in the same process, a reference: one float64 numpy expression over the same 10^6
points (``4*b*h*n*n*d``), so that a loaded machine shows in both and the ratio holds.

    python benchmarks/sweep_memory.py --out FILE.json [--points 1000000] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

CHILD = r"""
import json, resource, statistics, sys, time
import numpy as np
import perfmodel

points, columns = int(sys.argv[1]), json.loads(sys.argv[2])
rng = np.random.default_rng(0)
kw = dict(n=rng.integers(1, 2**17, points), d=rng.choice([64, 128, 256], points),
          h=rng.integers(1, 65, points), batch=rng.integers(1, 17, points),
          causal=rng.random(points) < 0.5, block_q=64, block_k=64, grid=False)
if columns is not None:
    kw["columns"] = columns
perfmodel.sweep("h200", **{k: v[:10] if isinstance(v, np.ndarray) else v for k, v in kw.items()})

def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 1e6

before = rss_mb()
wall, cpu, ref = [], [], []
for _ in range(3):
    t, c = time.perf_counter(), time.process_time()
    r = perfmodel.sweep("h200", **kw)
    wall.append(time.perf_counter() - t)
    cpu.append(time.process_time() - c)
    kept = len(r.keys())
    del r
    b, h, n, d = (kw[k].astype(np.float64) for k in ("batch", "h", "n", "d"))
    t = time.perf_counter()
    _ = 4 * b * h * n * n * d
    ref.append(time.perf_counter() - t)
    del b, h, n, d, _
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3
print(json.dumps(dict(points=points, columns=columns, kept_columns=kept,
                      wall_s=statistics.median(wall), cpu_s=statistics.median(cpu),
                      reference_s=statistics.median(ref), rss_before_mb=before,
                      peak_rss_mb=peak, peak_over_before_mb=peak - before)))
"""

CASES = {
    "all columns": None,
    "times only": ["naive.time_s", "flash.time_s", "speedup"],
}
ROOT = Path(__file__).resolve().parents[1]


def run_case(points: int, columns: list[str] | None, root: Path = ROOT) -> dict:
    """One case in a fresh process, importing perfmodel from the checkout at ``root``."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    env["PYTHONPATH"] = str(root)
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(points), json.dumps(columns)],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
    )
    if out.returncode:
        raise SystemExit(f"case failed ({root}):\n{out.stderr[-2000:]}")
    return json.loads(out.stdout)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="JSON file to write the figures to")
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="another checkout (`git archive REV perfmodel specs | tar -x -C DIR`), "
        "its sweep of all columns timed in the same run",
    )
    args = parser.parse_args(argv)
    from perfmodel.atomic import write_json

    load = os.getloadavg()
    result: dict = {"load_average": load, "cpus": os.cpu_count(), "cases": {}}
    print(
        f"sweep of {args.points:,} random shapes (fresh process per case; "
        f"load average {load[0]:.1f} on {os.cpu_count()} CPUs)"
    )
    cases = [(name, columns, ROOT) for name, columns in CASES.items()]
    if args.baseline:
        cases.append((f"baseline ({args.baseline})", None, args.baseline.resolve()))
    for name, columns, root in cases:
        r = run_case(args.points, columns, root)
        result["cases"][name] = r
        print(
            f"  {name:<12} {r['kept_columns']:>3} columns  wall {r['wall_s']:6.3f} s  "
            f"cpu {r['cpu_s']:6.3f} s  ({r['wall_s'] / r['reference_s']:5.1f}x one numpy "
            f"expression)  peak +{r['peak_over_before_mb']:6.0f} MB over "
            f"{r['rss_before_mb']:.0f} MB"
        )
    result["timestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    write_json(args.out, result)
    return result


if __name__ == "__main__":
    main()
