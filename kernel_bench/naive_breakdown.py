"""Per-step anatomy of the naive baseline on a GPU: time, XLA's byte count, kernel count.

The roofline model bounds naive attention kernel by kernel (QKᵀ, softmax, PV); this
script checks that decomposition step by step. For each shape it times each of the
three jitted steps on its own (median of ``--samples`` synchronised samples after
warm-up), reads XLA's ``bytes accessed`` from the compiled step, and counts the
kernels (fusions and library calls) in its optimised HLO. Plain JSON out; no pydantic.

    python -m kernel_bench.naive_breakdown --out FILE
"""

from __future__ import annotations

import argparse
import re
import statistics

import jax
import jax.numpy as jnp

from kernel_bench.bench import atomic_write_json, git_commit
from kernel_bench.probes import median_time
from pallas_kernels.naive import pv_step, scores_step, softmax_step

SHAPES = [  # (n, d, causal); batch = 16384 // n tokens, h = 16 as in the sweep
    (n, 128, c) for n in (2048, 8192, 16384) for c in (False, True)
] + [(4096, 64, False)]


def _kernels(compiled) -> int:
    text = compiled.as_text()
    return len(re.findall(r"^\s*ROOT .*|^\s*\S+ = .*(?:fusion|custom-call)\(", text, re.M)) - 1


def _time(fn, args, samples: int) -> dict:
    jax.block_until_ready(fn(*args))  # compile
    times = sorted(median_time(fn, [args], samples=samples))
    return {
        "median_s": statistics.median(times),
        "min_s": times[0],
        "p90_s": times[int(0.9 * (len(times) - 1))],
    }


def _cost(fn, args) -> dict:
    compiled = jax.jit(fn).lower(*args).compile()
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    return {
        "xla_bytes_accessed": float(cost.get("bytes accessed", 0.0)),
        "xla_flops": float(cost.get("flops", 0.0)),
        "kernels": _kernels(compiled),
    }


def measure(n: int, d: int, causal: bool, samples: int) -> dict:
    b, h = max(1, 16384 // n), 16
    key = jax.random.key(n + d)
    q, k, v = (jax.random.normal(kk, (b, n, h, d), jnp.bfloat16) for kk in jax.random.split(key, 3))
    scale = d**-0.5
    s = scores_step(q, k, causal=causal, sm_scale=scale)
    p = softmax_step(s)
    steps = {
        "qk": (lambda q, k: scores_step(q, k, causal=causal, sm_scale=scale), (q, k)),
        "softmax": (softmax_step, (s,)),
        "pv": (pv_step, (p, v)),
    }
    out = {
        "n": n,
        "kv_len": n,
        "d": d,
        "h": h,
        "h_kv": h,
        "batch": b,
        "dtype": "bfloat16",
        "causal": causal,
        "steps": {},
    }
    for name, (fn, args) in steps.items():
        out["steps"][name] = {**_time(fn, args, samples), **_cost(fn, args)}
    del s, p
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--samples", type=int, default=20)
    args = ap.parse_args(argv)
    result = {
        "device_name": jax.devices()[0].device_kind,
        "jax_version": jax.__version__,
        "git_commit": git_commit(),
        "points": [],
    }
    from pathlib import Path

    for n, d, causal in SHAPES:
        point = measure(n, d, causal, args.samples)
        result["points"].append(point)
        atomic_write_json(Path(args.out), result)
        row = "  ".join(
            f"{k} {v['median_s'] * 1e3:7.3f} ms "
            f"{v['xla_bytes_accessed'] / 1e9:6.2f} GB {v['kernels']}k"
            for k, v in point["steps"].items()
        )
        print(f"n={n:>5} d={d} causal={causal!s:<5} {row}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
