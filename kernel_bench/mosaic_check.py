"""The Mosaic GPU flash kernel on a Hopper GPU: correctness, then speed beside its peers.

One process, two parts, everything printed and saved to ``--out`` (plain JSON, no
pydantic on the GPU image), rewritten after every item:

1. **Correctness** against the float64 reference (``reference.attention_float64``) on
   odd lengths, GQA, causal, fully masked rows (the test hook ``diagonal_offset``),
   large logits, head dims 64/128/256, float16 and bfloat16, and each schedule
   schedule variant (``overlap``: pv, qk, none; ``persistent``).
2. **Speed** per shape of every backend in the same run: ours (Mosaic, and its
   variants at one shape), our Triton kernel, cuDNN
   (``jax.nn.dot_product_attention(implementation="cudnn")``) and JAX's own Mosaic GPU
   attention (``jax.experimental.pallas.ops.gpu.attention_mgpu``, float16 only: its
   shared-memory buffers are float16). Device time is CUPTI kernel time
   (``kernel_bench.timing.kernel_time``), with calls queued back to back as a
   second measure; TFLOP/s are nominal (``perfmodel.costs.nominal``).

    PYTHONPATH=. python -m kernel_bench.mosaic_check --out $OUT/mosaic_check.json
"""

from __future__ import annotations

import argparse
import ast
import datetime as dt
import os
import sys
import time
import traceback
from pathlib import Path

from perfmodel.atomic import write_json

TOKENS = 16384
CORRECTNESS = [
    # (batch, n, kv_len, heads, kv_heads, d, causal, dtype, options)
    (1, 256, 256, 4, 4, 128, False, "float16", {}),
    (1, 256, 256, 4, 4, 128, True, "float16", {}),
    (2, 1000, 1000, 8, 2, 128, False, "bfloat16", {}),
    (2, 1000, 1000, 8, 2, 128, True, "bfloat16", {}),
    (1, 300, 517, 3, 1, 64, False, "bfloat16", {}),
    (1, 517, 300, 3, 1, 64, True, "float16", {}),
    (1, 200, 200, 2, 2, 256, False, "bfloat16", {}),
    (1, 384, 384, 4, 2, 256, True, "float16", {}),
    (1, 1, 1, 2, 2, 128, True, "bfloat16", {}),
    (1, 640, 640, 4, 4, 128, True, "bfloat16", {"overlap": "qk"}),
    (1, 640, 640, 4, 4, 128, True, "bfloat16", {"overlap": "none"}),
    (1, 640, 640, 4, 1, 128, False, "bfloat16", {"overlap": "qk"}),
    (1, 640, 640, 4, 4, 128, True, "bfloat16", {"persistent": False}),
    (2, 1000, 1000, 8, 2, 128, True, "bfloat16", {"persistent": True}),
    (3, 700, 700, 3, 3, 64, False, "float16", {"persistent": True}),
    (2, 520, 520, 4, 2, 256, True, "bfloat16", {"persistent": True}),
    (1, 640, 640, 2, 2, 64, True, "float16", {"block_k": 64, "num_stages": 3}),
    # head dims not a multiple of 64 (zero-padded) and 192 (native)
    (1, 300, 300, 4, 2, 96, True, "bfloat16", {}),
    (1, 257, 257, 2, 1, 80, False, "float16", {}),
    (2, 200, 333, 4, 4, 112, False, "bfloat16", {}),
    (1, 300, 300, 6, 2, 160, True, "float16", {}),
    (1, 384, 384, 4, 2, 192, True, "bfloat16", {}),
    (1, 200, 200, 2, 2, 192, False, "float16", {}),
]
TOLERANCE = {"float16": 4e-3, "bfloat16": 2e-2}
#: Schedule variants timed beside the default at n=4096, d=128, bfloat16.
VARIANTS = (
    {},
    {"persistent": True},
    {"persistent": True, "overlap": "pv"},
)
#: Shapes the variants are timed at: (batch, n, heads, kv_heads, d, causal, dtype).
VARIANT_SHAPES = (
    (4, 4096, 16, 16, 128, True, "bfloat16"),
    (4, 4096, 32, 8, 128, True, "bfloat16"),
    (16, 1024, 16, 16, 128, True, "bfloat16"),
    (16, 1024, 32, 8, 128, True, "bfloat16"),
)


def _now() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()


def _inputs(seed, b, n, kv_len, h, h_kv, d, dtype, scale=1.0):
    import jax.numpy as jnp
    import numpy as np

    rng = np.random.default_rng(seed)
    q = rng.standard_normal((b, n, h, d)) * scale
    k = rng.standard_normal((b, kv_len, h_kv, d))
    v = rng.standard_normal((b, kv_len, h_kv, d))
    return tuple(jnp.asarray(x, getattr(jnp, dtype)) for x in (q, k, v))


def check_one(case, *, scale=1.0, diagonal_offset=0) -> dict:
    """Run one case; compare O and lse with float64."""
    import numpy as np

    from pallas_kernels.flash_mosaic import forward_with_test_hooks
    from pallas_kernels.reference import attention_float64

    b, n, kv_len, h, h_kv, d, causal, dtype, options = case
    q, k, v = _inputs(n * 7 + d, b, n, kv_len, h, h_kv, d, dtype, scale)
    row = {"case": [b, n, kv_len, h, h_kv, d, causal, dtype], "options": options}
    row.update(scale=scale, diagonal_offset=diagonal_offset)
    o, lse = forward_with_test_hooks(
        q, k, v, causal=causal, diagonal_offset=diagonal_offset, **options
    )
    o, lse = np.asarray(o, np.float64), np.asarray(lse, np.float64)
    row["nan_count"] = int(np.isnan(o).sum() + np.isnan(lse).sum())
    skip = max(0, -diagonal_offset)  # rows that see no key at all
    if skip:
        row["masked_rows_zero"] = bool((o[:, :skip] == 0).all())
        row["masked_rows_lse_neg_inf"] = bool((lse[:, :, :skip] == -np.inf).all())
        ref_o, ref_lse = attention_float64(
            q[:, skip:], k[:, : kv_len - skip], v[:, : kv_len - skip], causal=True
        )
        o, lse = o[:, skip:], lse[:, :, skip:]
    else:
        ref_o, ref_lse = attention_float64(q, k, v, causal=causal)
    row["rel_err"] = float(np.linalg.norm(o - ref_o) / np.linalg.norm(ref_o))
    row["max_abs_err"] = float(np.abs(o - ref_o).max())
    row["lse_max_abs_err"] = float(np.abs(lse - ref_lse).max())
    ok = row["nan_count"] == 0 and row["rel_err"] < TOLERANCE[dtype]
    ok &= row["lse_max_abs_err"] < 1e-2 * max(1.0, float(np.abs(ref_lse).max()) * 1e-3)
    if skip:
        ok &= row["masked_rows_zero"] and row["masked_rows_lse_neg_inf"]
    row["ok"] = bool(ok)
    return row


def correctness(record, only=None) -> None:
    cases = [(c, {}) for c in CORRECTNESS]
    cases.append(((1, 256, 256, 2, 2, 128, False, "float16", {}), {"scale": 300.0}))
    cases.append(((1, 256, 256, 2, 2, 128, True, "bfloat16", {}), {"scale": 300.0}))
    cases.append(((1, 256, 256, 4, 2, 128, True, "bfloat16", {}), {"diagonal_offset": -70}))
    cases.append(((1, 256, 256, 2, 2, 64, True, "float16", {}), {"diagonal_offset": -130}))
    if only is not None:
        cases = [cases[i] for i in only]
    for case, extra in cases:
        t0 = time.perf_counter()
        try:
            row = check_one(case, **extra)
        except Exception as err:  # noqa: BLE001 - a failed case is recorded, the run goes on
            traceback.print_exc(limit=4)
            row = {"case": list(case[:8]), "options": case[8], **extra, "ok": False}
            row["error"] = f"{type(err).__name__}: {err}"[:3000]
        row["seconds"] = round(time.perf_counter() - t0, 2)
        print(f"{'PASS' if row['ok'] else 'FAIL'} {row}", flush=True)
        record("correctness", row)


# ---------------------------------------------------------------- speed


def _fn(impl: str, *, causal: bool, d: int, options: dict):
    import jax

    from pallas_kernels.flash_attention import flash_attention

    if impl == "mosaic":
        return jax.jit(
            lambda q, k, v: flash_attention(q, k, v, causal=causal, backend="mosaic", **options)
        )
    if impl == "triton":
        from kernel_bench.bench import tuned_config

        cfg = tuned_config(d, causal)
        return jax.jit(
            lambda q, k, v: flash_attention(q, k, v, causal=causal, backend="triton", **cfg)
        )
    if impl == "cudnn":
        return jax.jit(
            lambda q, k, v: jax.nn.dot_product_attention(
                q, k, v, is_causal=causal, implementation="cudnn"
            )
        )
    if impl == "jax_mgpu":
        from jax.experimental.pallas.ops.gpu import attention_mgpu as am

        config = am.TuningConfig(
            block_q=64, block_kv=128 if d <= 128 else 64, max_concurrent_steps=2, causal=causal
        )
        return jax.jit(lambda q, k, v: am.attention(q, k, v, config))
    raise ValueError(f"{impl=}")


def time_one(impl, shape, options) -> dict:
    import jax

    from kernel_bench.timing import kernel_time, queued_time, spin_up
    from perfmodel.costs.nominal import nominal_flops

    b, n, h, h_kv, d, causal, dtype = shape
    row = {"impl": impl, "options": options, "batch": b, "n": n, "h": h, "h_kv": h_kv, "d": d}
    row.update(causal=causal, dtype=dtype, status="ok")
    try:
        key = jax.random.key(0)
        sets = []
        for i in range(2):
            kq, kk, kv = jax.random.split(jax.random.fold_in(key, i), 3)
            dt_ = getattr(jax.numpy, dtype)
            sets.append(
                (
                    jax.random.normal(kq, (b, n, h, d), dt_),
                    jax.random.normal(kk, (b, n, h_kv, d), dt_),
                    jax.random.normal(kv, (b, n, h_kv, d), dt_),
                )
            )
        if impl == "mosaic":
            from pallas_kernels.flash_mosaic import resolve_config

            row["config"] = resolve_config(sets[0][0], causal, options).__repr__()
        fn = _fn(impl, causal=causal, d=d, options=options)
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*sets[0]))
        row["compile_s"] = round(time.perf_counter() - t0, 2)
        spin_up(fn, sets[0])
        kern = kernel_time(fn, sets[0], iterations=10)
        queued = queued_time(fn, sets, samples=5, calls=10)
        flops = nominal_flops(batch=b, h=h, n=n, kv_len=n, d=d, causal=causal)
        row["device_time_s"] = kern["median"] if kern else None
        row["device_p10_s"] = kern["p10"] if kern else None
        row["device_p90_s"] = kern["p90"] if kern else None
        row["queued_time_s"] = queued["median"]
        t = row["device_time_s"] or row["queued_time_s"]
        row["tflops"] = flops / t / 1e12
    except Exception as err:  # noqa: BLE001
        row.update(status="error", error=f"{type(err).__name__}: {err}"[:2000])
        traceback.print_exc(limit=3)
    return row


def speed_shapes(quick: bool):
    shapes = []
    ns = (1024, 2048, 4096, 16384) if quick else (1024, 2048, 4096, 8192, 16384)
    for n in ns:
        for causal in (False, True):
            shapes.append((max(1, TOKENS // n), n, 16, 16, 128, causal, "bfloat16"))
            shapes.append((max(1, TOKENS // n), n, 32, 8, 128, causal, "bfloat16"))
    for n in (4096, 16384):
        for causal in (False, True):
            shapes.append((max(1, TOKENS // n), n, 16, 16, 128, causal, "float16"))
            shapes.append((max(1, TOKENS // n), n, 32, 8, 128, causal, "float16"))
    for d in (64, 256):
        for n in (1024, 4096):
            for causal in (False, True):
                shapes.append((max(1, TOKENS // n), n, 16, 16, d, causal, "bfloat16"))
    return shapes


def variant_jobs() -> list:
    jobs = []
    for shape in VARIANT_SHAPES:
        jobs.append(("cudnn", shape, {}))
        if shape[6] == "float16":
            jobs.append(("jax_mgpu", shape, {}))
        jobs += [("mosaic", shape, opt) for opt in VARIANTS]
    return jobs


def best_options(points, short: bool) -> dict:
    """The variant with the highest geometric-mean TFLOP/s over the variant shapes of
    one class (n < 4096 when ``short``, else n >= 4096)."""
    import math

    score: dict = {}
    for p in points:
        if p["impl"] != "mosaic" or p["status"] != "ok" or (p["n"] < 4096) != short:
            continue
        score.setdefault(repr(sorted(p["options"].items())), []).append(math.log(p["tflops"]))
    counts = {len(v) for v in score.values()}
    score = {k: v for k, v in score.items() if len(v) == max(counts, default=0)}
    if not score:
        return {}
    best = max(score, key=lambda key: sum(score[key]) / len(score[key]))
    return dict(ast.literal_eval(best))


def sweep_jobs(quick: bool, options, impls=("mosaic", "cudnn", "triton")) -> list:
    """``options``: a dict, or a function of the shape giving one."""
    jobs = []
    for shape in speed_shapes(quick):
        opts = options(shape) if callable(options) else options
        names = list(impls) + (["jax_mgpu"] if shape[6] == "float16" else [])
        jobs += [(impl, shape, opts if impl == "mosaic" else {}) for impl in names]
    return jobs


def speed(record, jobs, *, deadline: float) -> None:
    for impl, shape, options in jobs:
        if time.monotonic() > deadline:
            print(f"deadline: skipping {impl} {shape}", flush=True)
            continue
        row = time_one(impl, shape, options)
        tf = f"{row['tflops']:.0f}" if row.get("tflops") else row["status"]
        print(f"{impl:8s} {options} {shape} {tf} TFLOP/s", flush=True)
        record("speed", row)


def summary(points) -> str:
    cud = {}
    for p in points:
        if p["impl"] == "cudnn" and p["status"] == "ok":
            cud[(p["n"], p["h"], p["h_kv"], p["d"], p["causal"], p["dtype"])] = p["tflops"]
    lines = ["impl     options  n  h:h_kv d causal dtype  TFLOP/s  /cuDNN"]
    for p in points:
        key = (p["n"], p["h"], p["h_kv"], p["d"], p["causal"], p["dtype"])
        tf = p.get("tflops")
        ratio = f"{tf / cud[key]:.2f}" if tf and key in cud else "-"
        tf_s = f"{tf:.0f}" if tf else p["status"]
        lines.append(
            f"{p['impl']:8s} {p['options'] or ''} {p['n']} {p['h']}:{p['h_kv']} {p['d']} "
            f"{p['causal']} {p['dtype']} {tf_s} {ratio}"
        )
    return "\n".join(lines)


def _schedule(point, commit: str) -> str:
    """A short name of the Mosaic schedule a point ran: overlap, ping-pong, persistent.

    Files before the ``config`` field give options only; the defaults then were, at
    commit 142d6eb (call 1), QK look-ahead with ping-pong, and at 7803f5e (call 2) the
    FA-3 PV overlap without ping-pong; neither persistent."""
    if "config" in point:
        c = point["config"]
        parts = [c.split("overlap='")[1].split("'")[0]]
        parts += ["ping-pong"] if "ping_pong=True" in c else []
        parts += ["persistent"] if "persistent=True" in c else []
        return ", ".join(parts)
    opts = dict(point["options"])
    if commit[:7] == "142d6eb":  # the first version: booleans overlap_qk, ping_pong (on)
        overlap = "qk" if opts.pop("overlap_qk", True) else "none"
        opts.setdefault("ping_pong", True)
    else:
        overlap = opts.pop("overlap", "pv" if commit[:7] == "7803f5e" else "default")
    parts = [overlap]
    parts += ["ping-pong"] if opts.pop("ping_pong", False) else []
    parts += ["persistent"] if opts.pop("persistent", False) else []
    return ", ".join(parts + [f"{k}={v}" for k, v in opts.items()])


def markdown_table(paths) -> str:
    """Every Mosaic point of the files with cuDNN (and Triton, JAX's Mosaic attention)
    at the same shape in the same file: each ratio is within one run."""
    import json

    lines = [
        "| run | dtype | d | causal | n | b×h:h_kv | schedule | ours | cuDNN | ours/cuDNN "
        "| Triton/cuDNN | JAX mgpu/cuDNN |",
        "|" + "---|" * 12,
    ]
    for path in paths:
        data = json.loads(Path(path).read_text())
        by_shape: dict = {}
        for p in data["speed"]:
            key = (p["dtype"], p["d"], p["causal"], p["n"], p["h"], p["h_kv"], p["batch"])
            by_shape.setdefault(key, []).append(p)
        for key in sorted(by_shape):
            group = by_shape[key]
            peers = {p["impl"]: p for p in group if p["impl"] != "mosaic" and p["status"] == "ok"}
            cud = peers.get("cudnn")

            def ratio(x, cud=cud):
                ok = x and cud and x["status"] == "ok"
                return f"{x['tflops'] / cud['tflops']:.2f}" if ok else "-"

            dtype, d, causal, n, h, h_kv, b = key
            for p in group:
                if p["impl"] != "mosaic":
                    continue
                ours = f"{p['tflops']:.0f}" if p["status"] == "ok" else p["status"]
                lines.append(
                    f"| {Path(path).stem.removeprefix('h200-mosaic-')} | {dtype} | {d} | "
                    f"{'yes' if causal else 'no'} | {n} | {b}×{h}:{h_kv} | "
                    f"{_schedule(p, data['git_commit'])} | {ours} | "
                    f"{cud['tflops']:.0f} | "
                    if cud
                    else "- | "
                )
                lines[-1] += (
                    f"{ratio(p)} | {ratio(peers.get('triton'))} | {ratio(peers.get('jax_mgpu'))} |"
                )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--table", type=Path, nargs="+", help="print the markdown table and exit")
    ap.add_argument("--skip-correctness", action="store_true")
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument("--quick", action="store_true", help="fewer sequence lengths")
    ap.add_argument("--variants", action="store_true", help="time the schedule variants first")
    ap.add_argument("--cases", help="correctness: only these indices of CORRECTNESS (a,b,c)")
    ap.add_argument("--impls", default="mosaic,cudnn,triton", help="sweep implementations")
    ap.add_argument("--options", default="{}", help="Mosaic options for the sweep (a dict)")
    ap.add_argument("--budget-s", type=float, default=420.0)
    args = ap.parse_args(argv)
    if args.table:
        print(markdown_table(args.table), end="")
        return 0
    if not args.out:
        raise SystemExit("--out FILE is required unless --table is given")
    deadline = time.monotonic() + args.budget_s
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import jax

    result = {
        "schema": "mosaic_check/1",
        "started": _now(),
        "jax_version": jax.__version__,
        "device": jax.devices()[0].device_kind,
        "git_commit": os.environ.get("PERFMODEL_GIT_COMMIT", "unknown"),
        "correctness": [],
        "speed": [],
    }
    print(f"jax {jax.__version__} on {result['device']}", flush=True)

    def record(part, row):
        result[part].append(row)
        write_json(args.out, result)

    if not args.skip_correctness:
        only = [int(i) for i in args.cases.split(",")] if args.cases else None
        correctness(record, only)
    if not args.skip_speed:
        options = ast.literal_eval(args.options)
        impls = tuple(args.impls.split(","))
        if args.variants:
            speed(record, variant_jobs(), deadline=deadline)
        speed(record, sweep_jobs(args.quick, options, impls), deadline=deadline)
        print(summary(result["speed"]), flush=True)
    fails = [r for r in result["correctness"] if not r["ok"]]
    print(f"correctness: {len(result['correctness']) - len(fails)} pass, {len(fails)} fail")
    return 0


if __name__ == "__main__":
    sys.exit(main())
