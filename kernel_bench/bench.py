"""Attention benchmark on a GPU: our Pallas kernel, naive, cuDNN and XLA, plus ceilings.

Sweep mode (default) times, in one process, every (n, d, causal) of the sweep for
four implementations and measures the device ceilings first::

    python -m kernel_bench.bench --out specs/measurements/h200.json
    python -m kernel_bench.bench --out FILE --tune        # block/warp/stage sweep
    python -m kernel_bench.bench --out FILE --backend mosaic  # ours on Mosaic GPU
    python -m kernel_bench.bench --table FILE             # markdown table, no GPU

Shapes: h = h_kv = 16 heads and ``batch = max(1, 16384 // n)``, so each point covers
16384 tokens (32768 at n = 32768). Each point: warm-up (compiles), then device time
(CUPTI kernel durations per call: ``median_s``), calls queued back to back rotating over
two input sets (``queued_time_s``) and one synchronous call (``call_latency_s``); see
``kernel_bench/timing.py``. Runs before 2026-11-30 recorded queued wall time only.
FLOPs are nominal (``perfmodel.costs.nominal``). ``peak_memory_bytes``
comes from XLA's compiled memory analysis (inputs, outputs and temporaries live at the
worst step), since jax cannot reset the device's peak-memory counter between points.
Results go to ``--out`` as plain JSON with the field names of
``perfmodel.validation.measured`` (the GPU image has no pydantic), rewritten
atomically after every point; a rerun appends a new run.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

from perfmodel.atomic import write_json as atomic_write_json

SWEEP_N = (512, 1024, 2048, 4096, 8192, 16384, 32768)
SWEEP_D = (64, 128)
HEADS = 16
TOKENS = 16384
IMPLEMENTATIONS = ("pallas_flash", "cudnn", "xla", "naive")
# (block_q, block_k, num_warps, num_stages) tried by --tune
TUNE_CONFIGS = [
    (bq, bk, w, s)
    for bq, bk in ((128, 64), (128, 128), (64, 64), (128, 32), (64, 128))
    for w in (4, 8)
    for s in (2, 3)
]
# Short list tried by --autotune at n = 8192 before the sweep, per (d, causal).
SHORTLIST = [
    (128, 128, 8, 3),
    (128, 64, 8, 3),
    (128, 64, 4, 2),
    (128, 128, 4, 3),
    (64, 64, 4, 3),
    (128, 128, 8, 4),
    (256, 64, 8, 2),
]
_CFG = ("block_q", "block_k", "num_warps", "num_stages")
#: --autotune's winners per (d, causal); elsewhere the kernel's own launch
#: (``flash_triton.heuristic_config``, the winners of --tune on the H200).
AUTOTUNED: dict[tuple[int, bool], dict] = {}


def tuned_config(d: int, causal: bool) -> dict:
    """The Triton knobs the sweep runs at (d, causal), as a dict."""
    import dataclasses

    from pallas_kernels.flash_triton import heuristic_config

    return AUTOTUNED.get((d, causal)) or dataclasses.asdict(heuristic_config(d, causal))


def autotune_shortlist(path: Path, ceilings: dict, ds, *, samples: int) -> None:
    """Time SHORTLIST at n = 8192 for each (d, causal); store the winners in AUTOTUNED."""
    writer = RunWriter(path, new_run("tune", ceilings=ceilings))
    for d in ds:
        for causal in (False, True):
            best = None
            for values in SHORTLIST:
                cfg = dict(zip(_CFG, values, strict=True))
                shape = shape_of(8192, d, causal)
                p = time_point("pallas_flash", shape, cfg=cfg, samples=samples)
                writer.add(p)
                if p["status"] == "ok" and (best is None or p["tflops"] > best["tflops"]):
                    best = p
            if best is not None:
                AUTOTUNED[(d, causal)] = {x: best[x] for x in _CFG}
                print(
                    f"autotune d={d} causal={causal}: {AUTOTUNED[(d, causal)]} "
                    f"{best['tflops']:.0f} TFLOP/s",
                    flush=True,
                )


# ---------------------------------------------------------------- JSON, no pydantic


class RunWriter:
    """Holds the current run and re-writes the file with it after every point."""

    def __init__(self, path: Path, run: dict):
        self.path, self.run = path, run
        self.earlier = []
        if path.exists():
            self.earlier = json.loads(path.read_text())["runs"]

    def add(self, point: dict) -> None:
        self.run["points"].append(point)
        self.flush()

    def flush(self) -> None:
        atomic_write_json(self.path, {"schema_version": 1, "runs": [*self.earlier, self.run]})


def git_commit() -> str:
    if os.environ.get("PERFMODEL_GIT_COMMIT"):
        return os.environ["PERFMODEL_GIT_COMMIT"]
    try:
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except Exception:  # noqa: BLE001 - the device copy of the tree has no .git
        return "unknown"


# ---------------------------------------------------------------- implementations


#: Kernel family of each implementation (specs/kernels/*.toml); mgpu_attention is
#: JAX's own Mosaic-GPU kernel, an FA-3-style design (TMA, wgmma, two compute warpgroups).
FAMILY = {
    "pallas_flash": "pallas-triton",
    "cudnn": "cudnn",
    "xla": "xla-naive",
    "naive": "xla-naive",
    "naive_jit": "xla-naive",
    "mgpu_attention": "pallas-mosaic",
}
#: Kernel family (specs/kernels/*.toml) of each backend of ``pallas_flash``.
BACKEND_FAMILY = {"triton": "pallas-triton", "mosaic": "pallas-mosaic"}


def impl_fn(impl: str, *, causal: bool, cfg: dict | None, backend: str = "triton"):
    """The jitted call; ``pallas_flash`` runs ``backend`` (Triton knobs ``cfg`` for triton,
    the backend's own defaults for mosaic and auto)."""
    import jax

    from pallas_kernels.flash_attention import flash_attention
    from pallas_kernels.naive import naive_attention

    if impl == "pallas_flash":
        knobs = (cfg or {}) if backend == "triton" else {}
        return jax.jit(
            lambda q, k, v: flash_attention(q, k, v, causal=causal, backend=backend, **knobs)
        )
    if impl in ("cudnn", "xla"):
        return jax.jit(
            lambda q, k, v: jax.nn.dot_product_attention(
                q, k, v, is_causal=causal, implementation=impl
            )
        )
    if impl == "naive":
        return lambda q, k, v: naive_attention(q, k, v, causal=causal)
    raise ValueError(f"{impl=} unknown")


def _bytes(x) -> int:
    return int(x.size * x.dtype.itemsize)


def _compiled_bytes(f, *args, **kwargs) -> int:
    m = f.lower(*args, **kwargs).compile().memory_analysis()
    return int(
        m.argument_size_in_bytes
        + m.output_size_in_bytes
        + m.temp_size_in_bytes
        - m.alias_size_in_bytes
    )


def peak_memory_bytes(impl: str, fn, q, k, v, causal: bool) -> int | None:
    """Bytes live at the worst step, from XLA's memory analysis of the compiled code."""
    try:
        if impl != "naive":
            return _compiled_bytes(fn, q, k, v)
        from pallas_kernels._common import softmax_scale
        from pallas_kernels.naive import pv_step, scores_step, softmax_step

        scale = softmax_scale(q.shape[-1], None)
        s = jax_shape_like_scores(q, k)
        p = s
        step1 = _compiled_bytes(scores_step, q, k, causal=causal, sm_scale=scale) + _bytes(v)
        step2 = _compiled_bytes(softmax_step, s) + _bytes(q) + _bytes(k) + _bytes(v)
        step3 = _compiled_bytes(pv_step, p, v) + _bytes(q) + _bytes(k)
        return max(step1, step2, step3)
    except Exception as err:  # noqa: BLE001
        print(f"memory analysis failed for {impl}: {err!r}")
        return None


def jax_shape_like_scores(q, k):
    import jax

    b, n, h, _ = q.shape
    return jax.ShapeDtypeStruct((b, h, n, k.shape[1]), q.dtype)


def timed_fields(timed: dict, *, flops: float, tokens: int) -> dict:
    """A point's timing fields from ``kernel_bench.timing.measure_all``: ``median_s`` and
    its quantiles are device time; TFLOP/s and tokens/s are over it."""
    dev = timed["device_time_s"]
    quantiles = ("device_p10_s", "device_p90_s", "device_samples")
    return {
        **{k: v for k, v in timed.items() if k not in quantiles},
        "median_s": dev,
        "p10_s": timed["device_p10_s"],
        "p90_s": timed["device_p90_s"],
        "min_s": timed["device_p10_s"],
        "runs": timed["device_samples"],
        "tflops": flops / dev / 1e12,
        "tokens_per_s": tokens / dev,
    }


def compile_jobs(per_shape, workers: int) -> list[list[tuple]]:
    """Each shape's jobs ``(*labels, fn, args)`` lowered and compiled on ``workers``
    threads, shape by shape (``per_shape`` may be lazy): ``(*labels, executable)``, or
    ``(*labels, the exception)`` for a job that fails."""
    from concurrent.futures import ThreadPoolExecutor

    def build(job):
        *head, fn, args = job
        try:
            return (*head, fn.lower(*args).compile())
        except Exception as err:  # noqa: BLE001 - recorded as the point's error
            return (*head, err)

    with ThreadPoolExecutor(workers) as pool:
        return [list(pool.map(build, jobs)) for jobs in per_shape]


def parse_variants(items) -> dict[str, dict]:
    """``NAME=JSON`` command-line items (``--variant``) as {name: flash_attention options}."""
    variants = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name:
            raise SystemExit(f"--variant {item!r}: expected NAME=JSON")
        variants[name] = json.loads(text)
    return variants


def record_failure(point: dict, err: Exception) -> None:
    """A failed point keeps its status and message (the sweep goes on); an unexpected
    error also prints its traceback."""
    point.update(status=classify_error(err), error=f"{type(err).__name__}: {err}"[:2000])
    if point["status"] == "error":
        traceback.print_exc(limit=3)


def classify_error(err: Exception) -> str:
    text = f"{type(err).__name__}: {err}"
    if "Shared memory size limit" in text:  # a kernel config too large, not device memory
        return "error"
    oom = ("RESOURCE_EXHAUSTED", "out of memory", "Out of memory", "OOM")
    return "oom" if any(s in text for s in oom) else "error"


def make_inputs(key, b, n, kv_len, h, h_kv, d, dtype, sets=2):
    import jax

    out = []
    for i in range(sets):
        kq, kk, kv = jax.random.split(jax.random.fold_in(key, i), 3)
        out.append(
            (
                jax.random.normal(kq, (b, n, h, d), dtype),
                jax.random.normal(kk, (b, kv_len, h_kv, d), dtype),
                jax.random.normal(kv, (b, kv_len, h_kv, d), dtype),
            )
        )
    return out


def empty_point(impl: str, shape: dict) -> dict:
    """A measured point before timing: the shape, no tile configuration, no times yet."""
    return {
        "implementation": impl,
        **shape,
        "block_q": None,
        "block_k": None,
        "num_warps": None,
        "num_stages": None,
        "status": "ok",
        "error": None,
        "median_s": None,
        "p10_s": None,
        "p90_s": None,
        "min_s": None,
        "runs": 0,
        "tflops": None,
        "tokens_per_s": None,
        "peak_memory_bytes": None,
        "family": FAMILY.get(impl),
        "time_basis": "device",
    }


def time_point(impl, shape, *, cfg=None, samples=20, backend="triton") -> dict:
    """Measure one implementation at one shape; never raises (errors become points).

    Device time (CUPTI kernel sum, ``kernel_bench/timing.py``) is ``median_s``;
    queued wall time and one synchronous call's latency are recorded beside it.
    ``samples`` sets the timing budget (about 7.5 ms of timed calls per sample).
    """
    import jax

    from kernel_bench.timing import measure_all
    from perfmodel.costs.nominal import nominal_flops

    b, n, kv_len, h, h_kv, d, dtype, causal = (
        shape[x] for x in ("batch", "n", "kv_len", "h", "h_kv", "d", "dtype", "causal")
    )
    point = empty_point(impl, shape)
    if impl == "pallas_flash" and backend == "triton":
        point.update(cfg or {})
    sets = None
    try:
        sets = make_inputs(jax.random.key(0), b, n, kv_len, h, h_kv, d, getattr(jax.numpy, dtype))
        if impl == "pallas_flash":
            from pallas_kernels.flash_attention import choose_backend

            chosen = choose_backend(*sets[0], causal=causal, backend=backend)
            point["family"] = BACKEND_FAMILY[chosen]
        fn = impl_fn(impl, causal=causal, cfg=cfg, backend=backend)
        jax.block_until_ready(fn(*sets[0]))  # compiles, untimed
        timed = measure_all(fn, sets, budget_s=0.0075 * samples)
        flops = nominal_flops(batch=b, h=h, n=n, kv_len=kv_len, d=d, causal=causal)
        point.update(
            timed_fields(timed, flops=flops, tokens=b * n),
            peak_memory_bytes=peak_memory_bytes(impl, fn, *sets[0], causal),
        )
    except Exception as err:  # noqa: BLE001 - recorded as a point, the sweep goes on
        record_failure(point, err)
    finally:
        del sets
        gc.collect()
    return point


def shape_of(n, d, causal, dtype="bfloat16", heads=HEADS, h_kv=None, tokens=TOKENS) -> dict:
    return {
        "n": n,
        "kv_len": n,
        "d": d,
        "h": heads,
        "h_kv": h_kv or heads,
        "batch": max(1, tokens // n),
        "dtype": dtype,
        "causal": causal,
    }


# ---------------------------------------------------------------- runs


def new_run(kind: str, ceilings: dict | None = None) -> dict:
    import jax

    from kernel_bench.probes import measure_ceilings

    stamp = dt.datetime.now(dt.UTC).replace(microsecond=0)
    if ceilings is None:
        t0 = time.perf_counter()
        ceilings = measure_ceilings()
        print(f"ceilings ({time.perf_counter() - t0:.1f} s): {json.dumps(ceilings)}")
    return {
        "run_id": f"{kind}-{stamp.strftime('%Y%m%dT%H%M%SZ')}",
        "device_name": jax.devices()[0].device_kind,
        "jax_version": jax.__version__,
        "git_commit": git_commit(),
        "timestamp": stamp.isoformat(),
        "ceilings": ceilings,
        "points": [],
    }


def _progress(total):
    try:
        from tqdm import tqdm

        return tqdm(total=total, file=sys.stdout, mininterval=5.0)
    except ImportError:

        class Counter:
            i = 0

            def update(self, k=1):
                self.i += k
                print(f"[{self.i}/{total}]", flush=True)

            def set_postfix_str(self, s):
                print(s, flush=True)

            def close(self):
                pass

        return Counter()


def _run_jobs(
    writer: RunWriter, jobs, *, deadline: float, samples: int, backend: str = "triton"
) -> None:
    bar = _progress(len(jobs))
    for impl, shape, cfg in jobs:
        if time.monotonic() > deadline:
            print(f"deadline reached: {len(jobs) - len(writer.run['points'])} points skipped")
            break
        point = time_point(impl, shape, cfg=cfg, samples=samples, backend=backend)
        writer.add(point)
        tf = f"{point['tflops']:.0f}" if point["tflops"] else point["status"]
        bar.set_postfix_str(f"{impl} n={shape['n']} d={shape['d']} c={shape['causal']} {tf}")
        bar.update(1)
    bar.close()


def sweep_jobs(ns, ds, impls, cfg_for, dtype="bfloat16") -> list:
    jobs = []
    for n in ns:
        for d in ds:
            for causal in (False, True):
                for impl in impls:
                    jobs.append((impl, shape_of(n, d, causal, dtype), cfg_for(d, causal)))
    if dtype != "bfloat16":
        return jobs
    for n in (4096, 16384):  # fp16 at a few points
        if n in ns and 128 in ds:
            for causal in (False, True):
                for impl in ("pallas_flash", "cudnn"):
                    jobs.append((impl, shape_of(n, 128, causal, "float16"), cfg_for(128, causal)))
    return jobs


def tune_jobs(ns, ds) -> list:
    jobs = []
    for n in ns:
        for d in ds:
            for causal in (False, True):
                jobs.append(("cudnn", shape_of(n, d, causal), None))
                for bq, bk, w, s in TUNE_CONFIGS:
                    cfg = {"block_q": bq, "block_k": bk, "num_warps": w, "num_stages": s}
                    jobs.append(("pallas_flash", shape_of(n, d, causal), cfg))
    return jobs


def print_tune_summary(points) -> None:
    best: dict = {}
    cudnn: dict = {}
    for p in points:
        key = (p["n"], p["d"], p["causal"], p["dtype"])
        if p["status"] != "ok":
            continue
        if p["implementation"] == "cudnn":
            cudnn[key] = p["tflops"]
        elif p["tflops"] > best.get(key, {"tflops": 0})["tflops"]:
            best[key] = p
    for key, p in sorted(best.items()):
        c = cudnn.get(key)
        ratio = f"{p['tflops'] / c:.2f}" if c else "-"
        print(
            f"best n={key[0]} d={key[1]} causal={key[2]}: {p['tflops']:.0f} TFLOP/s "
            f"bq={p['block_q']} bk={p['block_k']} w={p['num_warps']} s={p['num_stages']} "
            f"cudnn={c and round(c)} ratio={ratio}"
        )


# ---------------------------------------------------------------- table (no GPU)


def _load_runs(path: Path) -> list[dict]:
    try:
        from perfmodel.validation.measured import read_measurement_file

        return [r.model_dump() for r in read_measurement_file(path).runs]
    except ImportError:
        return json.loads(path.read_text())["runs"]


def markdown_table(path: Path, since: str | None = None) -> str:
    """TFLOP/s per shape with ours/cuDNN, from the sweep runs in ``path``.

    Runs are read in file order and a later run's point replaces an earlier one of the
    same implementation and shape; ``since`` skips sweep runs whose id sorts before it.
    """
    runs = [r for r in _load_runs(path) if r["run_id"].startswith("sweep")]
    runs = [r for r in runs if since is None or r["run_id"] >= since]
    if not runs:
        raise SystemExit(f"no sweep run in {path}")
    cells: dict = {}
    source: dict = {}
    for i, run in enumerate(runs):
        for p in run["points"]:
            key = (p["dtype"], p["d"], p["causal"], p["n"], p["batch"], p["h"])
            cells.setdefault(key, {})[p["implementation"]] = p
            source.setdefault(key, {})[p["implementation"]] = i + 1
    lines = ["Sweep runs used (a later run's point replaces an earlier one):", ""]
    for i, run in enumerate(runs):
        c = run["ceilings"]
        lines.append(
            f"{i + 1}. `{run['run_id']}` on {run['device_name']}, jax {run['jax_version']}, "
            f"commit `{run['git_commit'][:12]}`; ceilings of that run: bf16 matmul "
            f"{c['matmul_bf16_flops_per_s'] / 1e12:.0f} TFLOP/s, copy "
            f"{c['copy_bytes_per_s'] / 1e12:.2f} TB/s (read + write)."
        )
    lines += [
        "",
        "TFLOP/s = nominal 4·b·h·n²·d (halved when causal) / median time; "
        "`oom`/`error` = not measured (see the JSON); `-` = not run. "
        "The last column names the run(s) of the row.",
        "",
        "| dtype | d | causal | n | batch×heads | ours | naive | cuDNN | XLA | ours/cuDNN | run |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def cell(p):
        if p is None:
            return "-"
        return f"{p['tflops']:.0f}" if p["status"] == "ok" else p["status"]

    for key in sorted(cells):
        row = cells[key]
        ours, cud = row.get("pallas_flash"), row.get("cudnn")
        ratio = "-"
        if ours and cud and ours["status"] == cud["status"] == "ok":
            ratio = f"{ours['tflops'] / cud['tflops']:.2f}"
        dtype, d, causal, n, b, h = key
        lines.append(
            f"| {dtype} | {d} | {'yes' if causal else 'no'} | {n} | {b}×{h} | {cell(ours)} | "
            f"{cell(row.get('naive'))} | {cell(cud)} | {cell(row.get('xla'))} | {ratio} | "
            f"{','.join(map(str, sorted(set(source[key].values()))))} |"
        )
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- main


def _parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, help="measurement JSON to append a run to")
    ap.add_argument("--table", type=Path, help="print the markdown table of a file and exit")
    ap.add_argument("--since", help="with --table: ignore sweep runs whose id sorts before this")
    ap.add_argument("--tune", action="store_true", help="sweep block sizes/warps/stages")
    ap.add_argument(
        "--autotune",
        type=Path,
        metavar="TUNE_FILE",
        help="before the sweep, time the short list at n=8192 (saved here)",
    )
    ap.add_argument("--quick", action="store_true", help="n in {1024, 4096}, d=128 only")
    ap.add_argument("--n", type=int, nargs="+")
    ap.add_argument("--d", type=int, nargs="+")
    ap.add_argument("--impl", nargs="+", default=list(IMPLEMENTATIONS))
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16"])
    ap.add_argument(
        "--backend",
        default="triton",
        choices=["triton", "mosaic", "auto"],
        help="backend of pallas_flash (its family is recorded per point)",
    )
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument(
        "--budget-s",
        type=float,
        default=480.0,
        help="stop starting new points after this many seconds",
    )
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = _parse(argv)
    if args.table:
        print(markdown_table(args.table, args.since), end="")
        return 0
    if not args.out:
        raise SystemExit("--out FILE is required unless --table is given")
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    os.environ.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.92")
    deadline = time.monotonic() + args.budget_s
    import jax

    print(f"jax {jax.__version__} on {jax.devices()[0].device_kind}", flush=True)
    ns = args.n or ((1024, 4096) if args.quick else SWEEP_N)
    ds = args.d or ((128,) if args.quick else SWEEP_D)
    if args.tune:
        jobs = tune_jobs(args.n or (4096, 16384), args.d or (128,))
    else:
        jobs = sweep_jobs(ns, ds, args.impl, tuned_config, args.dtype)
    run = new_run("tune" if args.tune else "sweep")
    if args.autotune and not args.tune:
        autotune_shortlist(args.autotune, run["ceilings"], ds, samples=args.samples)
        jobs = sweep_jobs(ns, ds, args.impl, tuned_config, args.dtype)
    writer = RunWriter(args.out, run)
    writer.flush()
    _run_jobs(writer, jobs, deadline=deadline, samples=args.samples, backend=args.backend)
    if args.tune:
        print_tune_summary(writer.run["points"])
    else:
        print(markdown_table(args.out), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
