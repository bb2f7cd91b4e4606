"""Ours against cuDNN on a seeded random set of shapes nobody tuned on (issue 22 item 4).

    PYTHONPATH=. python -m kernel_bench.bench_shapes --out FILE --seed 22 --count 28
    python -m kernel_bench.bench_shapes --table FILE        # ratios, no GPU
    python -m kernel_bench.bench_shapes --table FILE --details DETAILS   # and variants

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
PHASES = ("forward", "train")


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


def _fns(impl: str, causal: bool, options: dict | None = None):
    """(forward ``(q, k, v)``, training step ``(q, k, v, do)``) of one implementation."""
    import jax
    import jax.numpy as jnp

    if impl == "pallas_flash":
        from pallas_kernels import flash_attention

        def attn(q, k, v):
            return flash_attention(q, k, v, causal=causal, **(options or {}))
    else:

        def attn(q, k, v):
            return jax.nn.dot_product_attention(q, k, v, is_causal=causal, implementation="cudnn")

    def loss(q, k, v, do):
        return jnp.sum(attn(q, k, v).astype(jnp.float32) * do)

    return jax.jit(attn), jax.jit(jax.grad(loss, argnums=(0, 1, 2)))


#: Forward variants timed beside the default where they apply: (name, options, applies).
#: Empty since the head-dim padding was measured slower on all 12 shapes it applied to
#: (2026-12-01, docs/perf-notes.md); ``--variant`` times any launch on every shape.
VARIANTS: tuple = ()


def _structs(shape: dict):
    import jax
    import jax.numpy as jnp

    b, n, kv_len, h, h_kv, d = (shape[x] for x in ("batch", "n", "kv_len", "h", "h_kv", "d"))
    dt = getattr(jnp, shape["dtype"])
    q = jax.ShapeDtypeStruct((b, n, h, d), dt)
    kv = jax.ShapeDtypeStruct((b, kv_len, h_kv, d), dt)
    return (q, kv, kv), (q, kv, kv, jax.ShapeDtypeStruct((b, n, h, d), jnp.float32))


def jobs_of(
    shape: dict, phases=PHASES, extra: dict | None = None
) -> list[tuple[str, str, str, object, tuple]]:
    """(implementation, phase, variant, jitted function, argument structs) per shape;
    ``extra`` ({name: flash_attention options}, ``--variant``) applies to every shape."""
    fwd_args, train_args = _structs(shape)
    jobs = []
    for impl in IMPLS:
        fwd, train = _fns(impl, shape["causal"])
        calls = {"forward": (fwd, fwd_args), "train": (train, train_args)}
        jobs += [(impl, phase, "", *calls[phase]) for phase in phases]
    always = [(name, options, lambda s: True) for name, options in (extra or {}).items()]
    for name, options, applies in (*VARIANTS, *always):
        if applies(shape):
            fwd, _ = _fns("pallas_flash", shape["causal"], options)
            jobs.append(("pallas_flash", "forward", name, fwd, fwd_args))
    return jobs


def compile_all(shapes, workers: int = 12, phases=PHASES, extra=None) -> list[list[tuple]]:
    """Every job of every shape compiled (XLA and the kernel compilers run in threads);
    a job that fails keeps its exception in place of the executable."""
    from kernel_bench.bench import compile_jobs

    return compile_jobs([jobs_of(shape, phases, extra) for shape in shapes], workers)


def _rel(a, b) -> float:
    import numpy as np

    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def time_shape(shape: dict, compiled, *, budget_s: float) -> tuple[list[dict], dict]:
    """The points of one shape (forward, backward, train for ours and cuDNN) and its
    details: ours/cuDNN relative differences of O and of dQ, dK, dV, and the variants."""
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
    chosen = BACKEND_FAMILY[choose_backend(*sets[0], causal=shape["causal"])]
    points, details, outs, times = [], {"shape": shape, "auto": chosen, "variants": {}}, {}, {}
    for impl, phase, variant, exe in compiled:
        family = chosen if impl == "pallas_flash" else "cudnn"
        point = {**empty_point(impl, shape), "family": family, "phase": phase}
        args = sets if phase == "forward" else [(*x, do) for x in sets]
        try:
            if isinstance(exe, Exception):
                raise exe
            outs[(impl, phase, variant)] = jax.device_get(exe(*args[0]))
            timed = measure_all(exe, args, budget_s=budget_s)
            flops = nominal_flops(**{k: shape[k] for k in keys}, mode=phase)
            point.update(timed_fields(timed, flops=flops, tokens=b * n))
        except Exception as err:  # noqa: BLE001 - recorded, the run goes on
            record_failure(point, err)
        if variant:
            details["variants"][variant] = {
                k: point.get(k) for k in ("status", "error", "median_s", "tflops")
            }
            continue
        times[(impl, phase)] = point
        points.append(point)
    for impl in IMPLS:
        fwd, train = times.get((impl, "forward")), times.get((impl, "train"))
        if fwd and train and fwd["status"] == train["status"] == "ok":
            t = train["device_time_s"] - fwd["device_time_s"]
            if t > 0:
                flops = nominal_flops(**{k: shape[k] for k in keys}, mode="backward")
                bwd = {**empty_point(impl, shape), "family": fwd["family"], "phase": "backward"}
                bwd.update(
                    median_s=t,
                    device_time_s=t,
                    device_time_method=train["device_time_method"],
                    tflops=flops / t / 1e12,
                    tokens_per_s=b * n / t,
                    runs=min(train["runs"], fwd["runs"]),
                )
                points.append(bwd)
    ref_o, ref_g = outs.get(("cudnn", "forward", "")), outs.get(("cudnn", "train", ""))
    if ref_o is not None:
        for (impl, phase, variant), out in outs.items():
            if impl == "pallas_flash" and phase == "forward":
                details[f"o_rel_diff{'_' + variant if variant else ''}"] = _rel(out, ref_o)
    if ref_g is not None and ("pallas_flash", "train", "") in outs:
        ours = outs[("pallas_flash", "train", "")]
        details["grad_rel_diff"] = [_rel(g, r) for g, r in zip(ours, ref_g, strict=True)]
    del sets, outs
    gc.collect()
    return points, details


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


def variant_table(points, details) -> str:
    """Markdown: per shape and forward variant (``--variant``, kept in ``--details``), its
    time against our default's and cuDNN's from the same run; then the medians of
    ours/cuDNN with each variant where it ran (the default where it did not)."""
    import statistics

    keys = ("n", "kv_len", "d", "h", "h_kv", "batch", "dtype", "causal")
    fwd = {}
    for p in points:
        if p["phase"] == "forward" and p["status"] == "ok" and p["median_s"]:
            fwd.setdefault(tuple(p[k] for k in keys), {})[p["implementation"]] = p["median_s"]
    lines = [
        "| n | kv_len | d | h:h_kv | batch | causal | variant | ours ms | variant ms | "
        "ours/variant | cuDNN ms | ours/cuDNN | variant/cuDNN |",
        "|" + "---|" * 13,
    ]
    with_variant: dict[str, list[float]] = {}
    for shape_details in details:
        s = shape_details["shape"]
        cell = fwd.get(tuple(s[k] for k in keys), {})
        ours, cud = cell.get("pallas_flash"), cell.get("cudnn")
        for name, v in shape_details.get("variants", {}).items():
            t = v["median_s"] if v["status"] == "ok" else None
            if cud and ours:
                with_variant.setdefault(name, []).append(cud / (t or ours))
            fmt = lambda x, f="{:.2f}": "-" if not x else f.format(x)  # noqa: E731
            lines.append(
                f"| {s['n']} | {s['kv_len']} | {s['d']} | {s['h']}:{s['h_kv']} | {s['batch']} | "
                f"{'yes' if s['causal'] else 'no'} | {name} | {fmt(ours and ours * 1e3, '{:.4f}')} "
                f"| {fmt(t and t * 1e3, '{:.4f}') if t else v['status']} "
                f"| {fmt(t and ours and ours / t)} | {fmt(cud and cud * 1e3, '{:.4f}')} "
                f"| {fmt(cud and ours and cud / ours)} | {fmt(cud and t and cud / t)} |"
            )
    for name, r in with_variant.items():
        lines.append(f"\nforward with {name} where it ran: ours/cuDNN median "
                     f"{statistics.median(r):.2f}, min {min(r):.2f}, max {max(r):.2f} over "
                     f"{len(r)} shapes")  # fmt: skip
    return "\n".join(lines) + "\n"


#: Where the routing table chooses between the backends: d=64 causal, short n (batch,
#: n, heads, kv heads), each timed on Mosaic, on Triton and on cuDNN in one run.
ROUTING_SHAPES = [
    (b, n, h, h_kv, 64, True, "bfloat16")
    for b, n in ((16, 1024), (6, 2534), (4, 3500))
    for h, h_kv in ((16, 16), (24, 8))
]


def routing_run(path: Path, *, samples: int = 5) -> None:
    """One run of ``ROUTING_SHAPES``: ours forced to each backend, and cuDNN."""
    from kernel_bench.bench import RunWriter, new_run, time_point

    writer = RunWriter(path, new_run("routing"))
    for b, n, h, h_kv, d, causal, dtype in ROUTING_SHAPES:
        shape = dict(n=n, kv_len=n, d=d, h=h, h_kv=h_kv, batch=b, dtype=dtype, causal=causal)
        for impl, backend in (
            ("pallas_flash", "mosaic"),
            ("pallas_flash", "triton"),
            ("cudnn", ""),
        ):
            point = time_point(impl, shape, samples=samples, backend=backend or "triton")
            writer.add(point)
            print(f"routing {impl} {backend} {shape} {point['tflops']}", flush=True)


def routing_table(path: Path) -> str:
    """``pallas_kernels/routing.toml`` from the routing runs of a measurement file: per
    (head dim, mask), Triton below the smallest n above which Mosaic won every shape."""
    import json

    runs = [r for r in json.loads(path.read_text())["runs"] if r["run_id"].startswith("routing")]
    best: dict = {}
    for p in (p for r in runs for p in r["points"] if p["implementation"] == "pallas_flash"):
        if p["status"] == "ok":
            key = (p["d"], p["causal"], p["n"], p["h"], p["h_kv"])
            best.setdefault(key, {})[p["family"]] = p["median_s"]
    rows = []
    for d, causal in sorted({k[:2] for k in best}):
        cells = sorted((k[2], v) for k, v in best.items() if k[:2] == (d, causal) and len(v) == 2)
        won = [n for n, v in cells if v["pallas-triton"] < v["pallas-mosaic"]]
        lost = [n for n, v in cells if v["pallas-triton"] >= v["pallas-mosaic"]]
        if won and (not lost or max(won) < min(lost)):
            evidence = "; ".join(
                f"n={n}: Mosaic {v['pallas-mosaic'] * 1e6:.0f} us, Triton "
                f"{v['pallas-triton'] * 1e6:.0f} us"
                for n, v in cells
            )
            rows.append(
                f"\n[[route]]\nhead_dim_min = {d}\nhead_dim_max = {d}\n"
                f"causal = {str(causal).lower()}\nn_below = {max(won) + 1}\n"
                f'backend = "triton"\nevidence = "{evidence}"\n'
            )
    header = (
        '# Where flash_attention(backend="auto") sends a call that both forward backends run,'
        " on a\n# Hopper GPU: the first [[route]] row whose native head dim range"
        " (flash_mosaic.native_head_dim),\n# mask and n range hold, else `default`. Written by"
        f" `python -m kernel_bench.bench_shapes\n# --routing-table {path}`"
        " from its routing runs (each shape on Mosaic, on Triton\n# and on cuDNN, one run);"
        " do not edit by hand.\n"
        f'default = "mosaic"\nsources = ["{path}"]\n'
    )
    return header + "".join(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--table", type=Path, help="print the ratio table of a file and exit")
    ap.add_argument("--seed", type=int, default=22)
    ap.add_argument("--count", type=int, default=28)
    ap.add_argument("--point-budget-s", type=float, default=0.1)
    ap.add_argument("--budget-s", type=float, default=300.0, help="no shape starts after this")
    ap.add_argument("--details", type=Path, help="JSON: per shape ours-vs-cuDNN differences")
    ap.add_argument("--wait-for", type=Path, help="after compiling, wait until this file exists")
    ap.add_argument("--pick", help="comma-separated indices into the draw: time only these")
    ap.add_argument("--forward-only", action="store_true", help="no training steps")
    ap.add_argument(
        "--variant", action="append", default=[], help="NAME=JSON: our forward again with "
        "these flash_attention options on every shape"
    )  # fmt: skip
    ap.add_argument("--routing", action="store_true", help="time ROUTING_SHAPES into --out")
    ap.add_argument("--routing-table", type=Path, help="print routing.toml from a file's runs")
    args = ap.parse_args(argv)
    import json

    if args.table:
        runs = json.loads(args.table.read_text())["runs"]
        points = [p for r in runs if r["run_id"].startswith("shapes") for p in r["points"]]
        print(table(points))
        if args.details:  # with --table: the forward variants of that file's shapes
            print(variant_table(points, json.loads(args.details.read_text())["shapes"]))
        return 0
    if args.routing_table:
        print(routing_table(args.routing_table), end="")
        return 0
    if not args.out:
        raise SystemExit("--out FILE is required unless --table is given")
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    if args.routing:
        routing_run(args.out)
        return 0
    deadline = time.monotonic() + args.budget_s
    from kernel_bench.bench import RunWriter, new_run, parse_variants
    from perfmodel.atomic import write_json

    shapes = draw(args.seed, args.count)
    if args.pick:
        shapes = [shapes[int(i)] for i in args.pick.split(",")]
    phases = ("forward",) if args.forward_only else PHASES
    t0 = time.monotonic()
    compiled = compile_all(shapes, phases=phases, extra=parse_variants(args.variant))
    print(f"compiled {sum(map(len, compiled))} calls in {time.monotonic() - t0:.0f} s", flush=True)
    if args.wait_for:  # e.g. the GPU tests, run while this compiled: none while timing
        while not args.wait_for.exists():
            time.sleep(1)
    writer = RunWriter(args.out, new_run(f"shapes-seed{args.seed}"))
    writer.flush()
    details = []
    for i, (shape, jobs) in enumerate(zip(shapes, compiled, strict=True)):
        if time.monotonic() > deadline:
            print(f"budget reached: {len(shapes) - i} shapes not timed", flush=True)
            break
        points, detail = time_shape(shape, jobs, budget_s=args.point_budget_s)
        for point in points:
            writer.add(point)
        details.append(detail)
        if args.details:
            write_json(args.details, {"seed": args.seed, "shapes": details})
        cells = {(p["implementation"], p["phase"]): p for p in points}
        for phase in ("forward", "backward", "train"):
            ours, cud = cells.get(("pallas_flash", phase)), cells.get(("cudnn", phase))
            if ours and cud and ours["median_s"] and cud["median_s"]:
                print(
                    f"[{i + 1}/{len(shapes)}] {phase:8s} ours/cuDNN "
                    f"{cud['median_s'] / ours['median_s']:.2f} ({ours['tflops']:.0f} vs "
                    f"{cud['tflops']:.0f} TFLOP/s) {detail['auto']} {shape}",
                    flush=True,
                )
            else:
                errs = [p["error"] for p in (ours, cud) if p and p["error"]]
                print(f"[{i + 1}/{len(shapes)}] {phase:8s} failed: {errs}", flush=True)
        print(f"  details { ({k: v for k, v in detail.items() if k != 'shape'}) }", flush=True)
    print(summary(writer.run["points"]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
