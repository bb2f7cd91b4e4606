"""Ours against cuDNN on a seeded random set of shapes nobody tuned on (issue 22 item 4).

    PYTHONPATH=. python -m kernel_bench.bench_shapes --out FILE --seed 22 --count 28
    python -m kernel_bench.bench_shapes --table FILE        # ratios, no GPU

``draw(seed, count)`` draws each shape independently: GQA group from {1, 2, 3, 4, 6, 8}
or MQA (one K/V head), head dim from {64, 80, 96, 112, 128, 160, 192, 256}, n
log-uniform in [512, 65536] (any integer, so mostly odd), a quarter of the shapes cross
attention (kv_len drawn the same way, not causal), the rest causal or not with equal
odds, fp16 or bf16, batch 1-16 capped so that a call covers at most 64K query tokens.
The draw is done before anything is timed and does not look at any kernel.

Per shape, in one process and one run: ``flash_attention(backend="auto")`` (its family
recorded: the backend auto chose) and cuDNN (``jax.nn.dot_product_attention(
implementation="cudnn")``), each as a forward and as a training step (``jax.grad`` of
``sum(O * dO)`` with a fixed random dO); the backward alone is the training step's device
time minus the forward's. Device time is CUPTI kernel time (``kernel_bench.timing``).
Points are in the measurement schema (``perfmodel.validation.measured``, ``phase``
forward / backward / train); the file is rewritten after every point.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from pathlib import Path

GROUPS = (1, 2, 3, 4, 6, 8, "mqa")
HEAD_DIMS = (64, 80, 96, 112, 128, 160, 192, 256)
N_RANGE = (512, 65536)
MAX_TOKENS = 65536
IMPLS = ("pallas_flash", "cudnn")


def _log_uniform(rng, lo: int, hi: int) -> int:
    return int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))


def draw(seed: int, count: int) -> list[dict]:
    """``count`` shapes from ``numpy.random.default_rng(seed)`` (module docstring)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    shapes = []
    for _ in range(count):
        group = GROUPS[rng.integers(len(GROUPS))]
        h_kv = 1 if group == "mqa" else int(rng.choice([1, 2, 4, 8]))
        h = int(rng.choice([8, 16, 32])) if group == "mqa" else h_kv * int(group)
        d = int(HEAD_DIMS[rng.integers(len(HEAD_DIMS))])
        n = _log_uniform(rng, *N_RANGE)
        cross = rng.uniform() < 0.25
        kv_len = _log_uniform(rng, *N_RANGE) if cross else n
        causal = bool(not cross and rng.uniform() < 0.5)
        dtype = "float16" if rng.uniform() < 0.5 else "bfloat16"
        batch = int(min(rng.integers(1, 17), max(1, MAX_TOKENS // n)))
        shapes.append(
            dict(n=n, kv_len=kv_len, d=d, h=h, h_kv=h_kv, batch=batch, dtype=dtype, causal=causal)
        )
    return shapes


def _fns(impl: str, causal: bool, do):
    """(forward, training step) of one implementation, jitted."""
    import jax
    import jax.numpy as jnp

    if impl == "pallas_flash":
        from pallas_kernels import flash_attention

        def attn(q, k, v):
            return flash_attention(q, k, v, causal=causal)
    else:

        def attn(q, k, v):
            return jax.nn.dot_product_attention(q, k, v, is_causal=causal, implementation="cudnn")

    def loss(q, k, v):
        return jnp.sum(attn(q, k, v).astype(jnp.float32) * do)

    return jax.jit(attn), jax.jit(jax.grad(loss, argnums=(0, 1, 2)))


def time_shape(shape: dict, *, budget_s: float) -> list[dict]:
    """The six points of one shape (forward, backward, train for ours and cuDNN)."""
    import gc

    import jax
    import jax.numpy as jnp

    from kernel_bench.bench import (
        BACKEND_FAMILY,
        empty_point,
        make_inputs,
        record_failure,
        timed_fields,
    )
    from kernel_bench.timing import measure_all
    from pallas_kernels.flash_attention import choose_backend
    from perfmodel.costs.nominal import nominal_flops

    keys = ("batch", "h", "n", "kv_len", "d", "causal")
    b, n, kv_len, h, h_kv, d, dtype = (
        shape[x] for x in ("batch", "n", "kv_len", "h", "h_kv", "d", "dtype")
    )
    sets = make_inputs(jax.random.key(1), b, n, kv_len, h, h_kv, d, getattr(jnp, dtype))
    do = jax.random.normal(jax.random.key(2), (b, n, h, d), jnp.float32)
    points = []
    for impl in IMPLS:
        family = "cudnn"
        if impl == "pallas_flash":
            family = BACKEND_FAMILY[choose_backend(*sets[0], causal=shape["causal"])]
        times = {}
        for phase, fn in zip(("forward", "train"), _fns(impl, shape["causal"], do), strict=True):
            point = {**empty_point(impl, shape), "family": family, "phase": phase}
            try:
                jax.block_until_ready(fn(*sets[0]))  # compiles, untimed
                timed = measure_all(fn, sets, budget_s=budget_s)
                flops = nominal_flops(**{k: shape[k] for k in keys}, mode=phase)
                point.update(timed_fields(timed, flops=flops, tokens=b * n))
                times[phase] = point
            except Exception as err:  # noqa: BLE001 - recorded, the run goes on
                record_failure(point, err)
            points.append(point)
        if len(times) == 2:
            t = times["train"]["device_time_s"] - times["forward"]["device_time_s"]
            if t > 0:
                flops = nominal_flops(**{k: shape[k] for k in keys}, mode="backward")
                bwd = {**empty_point(impl, shape), "family": family, "phase": "backward"}
                bwd.update(
                    median_s=t,
                    device_time_s=t,
                    device_time_method=times["train"]["device_time_method"],
                    tflops=flops / t / 1e12,
                    tokens_per_s=b * n / t,
                    runs=min(times["train"]["runs"], times["forward"]["runs"]),
                )
                points.append(bwd)
    del sets
    gc.collect()
    return points


def ratios(points) -> dict[str, list[tuple[dict, float]]]:
    """Per phase, (shape, ours/cuDNN speed) for every shape both measured."""
    cells: dict = {}
    for p in points:
        if p["status"] != "ok":
            continue
        key = tuple(p[k] for k in ("n", "kv_len", "d", "h", "h_kv", "batch", "dtype", "causal"))
        cells.setdefault((p["phase"], key), {})[p["implementation"]] = p
    out: dict = {}
    for (phase, _), row in cells.items():
        if "pallas_flash" in row and "cudnn" in row:
            ours, cud = row["pallas_flash"], row["cudnn"]
            out.setdefault(phase, []).append((ours, cud["median_s"] / ours["median_s"]))
    return out


def summary(points) -> str:
    lines = []
    for phase, rows in sorted(ratios(points).items()):
        r = [x for _, x in rows]
        lines.append(
            f"{phase}: ours/cuDNN speed over {len(r)} shapes: median {statistics.median(r):.2f}, "
            f"min {min(r):.2f}, max {max(r):.2f}; >= 1.0 on {sum(x >= 1 for x in r)}"
        )
    return "\n".join(lines)


def table(points) -> str:
    """Markdown: one row per shape, ours/cuDNN per phase, the backend auto chose."""
    by: dict = {}
    for phase, rows in ratios(points).items():
        for p, r in rows:
            key = tuple(p[k] for k in ("n", "kv_len", "d", "h", "h_kv", "batch", "dtype", "causal"))
            by.setdefault(key, {"family": p["family"]})[phase] = (r, p["tflops"])
    lines = [
        "| n | kv_len | d | h:h_kv | batch | dtype | causal | ours (forward) | fwd | bwd | train |",
        "|" + "---|" * 11,
    ]
    for key in sorted(by):
        n, kv, d, h, h_kv, b, dtype, causal = key
        row = by[key]

        def cell(phase, row=row):
            return f"{row[phase][0]:.2f}" if phase in row else "-"

        lines.append(
            f"| {n} | {kv} | {d} | {h}:{h_kv} | {b} | {dtype} | {'yes' if causal else 'no'} | "
            f"{row['family']} | {cell('forward')} | {cell('backward')} | {cell('train')} |"
        )
    return "\n".join(lines) + "\n\n" + summary(points) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--table", type=Path, help="print the ratio table of a file and exit")
    ap.add_argument("--seed", type=int, default=22)
    ap.add_argument("--count", type=int, default=28)
    ap.add_argument("--point-budget-s", type=float, default=0.1)
    ap.add_argument("--budget-s", type=float, default=300.0, help="no shape starts after this")
    args = ap.parse_args(argv)
    import json

    if args.table:
        runs = json.loads(args.table.read_text())["runs"]
        print(table([p for r in runs if r["run_id"].startswith("shapes") for p in r["points"]]))
        return 0
    if not args.out:
        raise SystemExit("--out FILE is required unless --table is given")
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    deadline = time.monotonic() + args.budget_s
    from kernel_bench.bench import RunWriter, new_run

    shapes = draw(args.seed, args.count)
    writer = RunWriter(args.out, new_run(f"shapes-seed{args.seed}"))
    writer.flush()
    for i, shape in enumerate(shapes):
        if time.monotonic() > deadline:
            print(f"budget reached: {len(shapes) - i} shapes not timed", flush=True)
            break
        t0 = time.monotonic()
        for point in time_shape(shape, budget_s=args.point_budget_s):
            writer.add(point)
            tf = f"{point['tflops']:.0f}" if point["tflops"] else point["status"]
            print(
                f"[{i + 1}/{len(shapes)}] {point['implementation']:12s} {point['phase']:8s} "
                f"{point['family']:13s} {shape} {tf} TFLOP/s",
                flush=True,
            )
        print(f"  shape {i + 1}: {time.monotonic() - t0:.1f} s", flush=True)
    print(summary(writer.run["points"]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
