"""Would interpolating between the explorer's grid points be honest? Measured.

``perfmodel explore`` ships sweep()'s numbers on a log grid of n and shows an n between
grid points at the nearest one. This script measures the alternative it rejected:
for random settings of the page's default grid and a random n strictly between two
grid points (n >= 16), each column interpolated linearly in (log n, log value) between
the two neighbours' sweep() values, against predict() at that n. Prints, per column,
the median, 99th percentile and largest relative error, and the setting of the largest.

    python benchmarks/explore_interpolation.py [--points 2000] [--seed 5] [--out FILE]
"""

from __future__ import annotations

import argparse
import random
import sys

import numpy as np

from perfmodel import predict, sweep
from perfmodel.atomic import write_json
from perfmodel.catalog.hardware import load_hardware
from perfmodel.errors import PerfmodelError
from perfmodel.report.explore import device_entry, flash_families
from perfmodel.report.explore_grid import Grid

#: Result columns measured (one value per side; launch choices and labels left out).
COLUMNS = ("time_s", "t_lower_s", "t_compute_s", "t_memory_s", "hbm_bytes", "flops")


def setting(rng: random.Random, grid: Grid) -> dict:
    hw = rng.choice(grid.devices())
    dev = device_entry(load_hardware(hw), grid)
    h, h_kv = rng.choice(grid.heads)
    return dict(
        hw=hw,
        d=rng.choice(grid.d),
        h=h,
        h_kv=h_kv,
        batch=rng.choice(grid.batch),
        dtype=rng.choice(dev["dtypes"]),
        causal=rng.random() < 0.5,
        mode=rng.choice(["forward", "backward", "train"]),
        kernel=rng.choice(flash_families()),
    )


def interpolated(cfg: dict, lo: int, hi: int, n: int) -> dict[str, float]:
    """Each column (and the speedup) interpolated in log-log between n = lo and n = hi."""
    r = sweep(cfg["hw"], n=[lo, hi], **{k: v for k, v in cfg.items() if k != "hw"})
    w = (np.log(n) - np.log(lo)) / (np.log(hi) - np.log(lo))
    out = {}
    names = [f"{a}.{c}" for a in ("naive", "flash") for c in COLUMNS] + ["speedup"]
    for name in names:
        a, b = (float(v) for v in r[name])
        if a > 0 and b > 0:
            out[name] = float(np.exp(np.log(a) + w * (np.log(b) - np.log(a))))
        else:
            out[name] = a + w * (b - a)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--out", help="write the figures as JSON")
    args = parser.parse_args(argv)
    grid = Grid()
    ns = grid.n()
    rng = random.Random(args.seed)
    errors: dict[str, list[tuple[float, dict]]] = {}
    done = 0
    while done < args.points:
        cfg = setting(rng, grid)
        i = rng.randrange(len(ns) - 1)
        if ns[i] < 16 or ns[i + 1] - ns[i] < 2:
            continue
        n = rng.randint(ns[i] + 1, ns[i + 1] - 1)
        try:
            p = predict(n=n, **cfg)
            got = interpolated(cfg, ns[i], ns[i + 1], n)
        except PerfmodelError:
            continue
        for name, value in got.items():
            side, _, col = name.partition(".")
            want = p.speedup if name == "speedup" else getattr(getattr(p, side), col)
            errors.setdefault(name, []).append((abs(value - want) / abs(want), cfg | {"n": n}))
        done += 1
    rows = {}
    per = grid.steps_per_octave
    print(f"{done} settings of the default grid, n between grid points ({per} per octave)")
    print(f"{'column':24s} {'median':>9s} {'p99':>9s} {'largest':>9s}  setting of the largest")
    for name, found in sorted(errors.items()):
        e = np.array([x[0] for x in found])
        worst = max(found, key=lambda x: x[0])
        rows[name] = dict(
            median=float(np.median(e)),
            p99=float(np.quantile(e, 0.99)),
            largest=float(e.max()),
            setting=worst[1],
        )
        row = rows[name]
        print(
            f"{name:24s} {row['median']:9.2%} {row['p99']:9.2%} {row['largest']:9.2%}  {worst[1]}"
        )
    if args.out:
        write_json(args.out, dict(points=done, seed=args.seed, grid=grid.n(), columns=rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
