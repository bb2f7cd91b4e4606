"""Device-time measurements on the GPU: the committed sweep again, and held-out shapes.

Two modes, each appending one run to ``--out`` (plain JSON, the field names of
``perfmodel.validation.measured``; the GPU image has no pydantic)::

    python -m kernel_bench.bench_heldout remeasure --out FILE --budget-s 150
    python -m kernel_bench.bench_heldout heldout --out FILE --budget-s 150
    python -m kernel_bench.bench_heldout remeasure heldout --out A B --budget-s 110 100
    python -m kernel_bench.bench_heldout remeasure --skip-done A --out C   # the rest
    python -m kernel_bench.bench_heldout remeasure --skip-done A --min-n 16384 --out C

``mgpu`` times float16 held-out shapes that JAX's Mosaic-GPU attention accepts
(``MGPU``), beside ours and cuDNN.

``remeasure`` times, in device time, the one-head series (h = 1, batch 1, d = 128,
n = 1024..32768: naive, ours, cuDNN) and then the 16-head sweep of
``specs/measurements/h200-2026-11-29.json`` (n = 512..32768, d = 64/128, causal and
not, bf16; the short-n points first, where host dispatch mattered).

``heldout`` times shapes chosen not to match that sweep (``HELDOUT``: GQA 32:8 and
64:8, head dims 64/96/128/256, n = 1000, 3000, 12345 and others, batch 1-8, one head,
causal and not, fp16 and bf16) for ours, cuDNN, naive written as one jitted function
(``naive_jit``: what a user writes) and JAX's own Pallas Mosaic-GPU attention
(``mgpu_attention``, jax.experimental.pallas.ops.gpu.attention_mgpu: an FA-3-style
peer with TMA, wgmma and warp specialisation), all in the same run.

Every point records device time (``device_time_s``: CUPTI kernel time, else calls
queued back to back), ``queued_time_s`` and ``call_latency_s`` (one synchronous call);
``median_s`` is the device time. See ``kernel_bench/timing.py``. A point that
fails (unsupported shape, out of memory) is recorded with its error; the run file is
rewritten atomically after every point, and no point starts after ``--budget-s``.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from pathlib import Path

ONE_HEAD_NS = (1024, 2048, 4096, 8192, 16384, 32768)
SWEEP_N = (512, 1024, 2048, 4096, 8192, 16384, 32768)
_CFG = ("block_q", "block_k", "num_warps", "num_stages")

# (batch, n, h, h_kv, d, causal, dtype): none of these is a point of the 16-head sweep.
HELDOUT = [
    (2, 3000, 32, 8, 128, True, "bfloat16"),  # GQA 4:1, odd n
    (1, 12345, 32, 8, 128, False, "bfloat16"),
    (2, 4096, 64, 8, 128, False, "bfloat16"),  # GQA 8:1
    (1, 6144, 64, 8, 128, True, "float16"),
    (4, 3000, 16, 16, 96, False, "bfloat16"),  # d = 96 (not a power of two)
    (1, 8192, 32, 8, 96, True, "float16"),
    (2, 4096, 16, 16, 256, False, "bfloat16"),  # d = 256
    (1, 12345, 8, 8, 256, True, "bfloat16"),
    (8, 1000, 32, 32, 64, True, "float16"),  # d = 64, short rows
    (3, 6144, 24, 24, 64, False, "bfloat16"),
    (8, 1000, 16, 16, 128, False, "float16"),
    (5, 3000, 16, 16, 128, True, "bfloat16"),
    (1, 12345, 1, 1, 128, False, "bfloat16"),  # one head
    (1, 3000, 1, 1, 64, True, "float16"),
    (8, 1000, 1, 1, 128, False, "bfloat16"),
    (4, 2560, 1, 1, 256, True, "bfloat16"),
    (1, 24576, 16, 16, 128, True, "float16"),
    (6, 5120, 12, 4, 64, True, "bfloat16"),  # GQA 3:1
]
HELDOUT_IMPLS = ("pallas_flash", "cudnn", "mgpu_attention", "naive_jit")
# JAX's Mosaic-GPU attention takes float16 only, n a multiple of 128 and d of 64:
# held-out shapes it can run, timed beside ours and cuDNN (mode "mgpu").
MGPU = [
    (2, 4096, 64, 8, 128, False, "float16"),
    (2, 4096, 16, 16, 256, False, "float16"),
    (3, 6144, 24, 24, 64, False, "float16"),
    (4, 2560, 1, 1, 256, True, "float16"),
    (6, 5120, 12, 4, 64, True, "float16"),
    (1, 16384, 32, 8, 128, True, "float16"),
    (4, 8192, 16, 16, 64, False, "float16"),
]
#: Skip naive (S and P in HBM) above this many score bytes per call: seconds per call.
NAIVE_MAX_SCORE_BYTES = 6e9


# ---------------------------------------------------------------- implementations


def _mgpu_fn(causal: bool, block_q: int, block_k: int, stages: int = 2):
    import jax
    from jax.experimental.pallas.ops.gpu import attention_mgpu as am

    config = am.TuningConfig(
        block_q=block_q, block_kv=block_k, max_concurrent_steps=stages, causal=causal
    )
    return jax.jit(lambda q, k, v: am.attention(q, k, v, config))


def candidates(impl: str, d: int, causal: bool, cfg: dict | None) -> list[dict | None]:
    """Kernel configurations to try in order; the first that compiles is timed."""
    if impl == "pallas_flash":
        if cfg:
            return [cfg]
        from kernel_bench.bench import tuned_config

        return [tuned_config(d, causal)]
    if impl == "mgpu_attention":
        return [{"block_q": 64, "block_k": bk, "num_stages": 2} for bk in (128, 64)]
    return [None]


def make_fns(impl: str, causal: bool, cfg: dict | None):
    """(fn, device_fn): the call to time, and None (the kernel timer times ``fn``)."""
    import jax

    from pallas_kernels.naive import naive_attention_jit

    if impl == "naive_jit":
        f = jax.jit(lambda q, k, v: naive_attention_jit(q, k, v, causal=causal))
        return f, None
    if impl == "naive":
        from kernel_bench.bench import impl_fn

        return impl_fn("naive", causal=causal, cfg=None), None
    if impl == "mgpu_attention":
        return _mgpu_fn(causal, cfg["block_q"], cfg["block_k"], cfg["num_stages"]), None
    from kernel_bench.bench import impl_fn

    return impl_fn(impl, causal=causal, cfg=cfg), None


# ---------------------------------------------------------------- one point


def _shape(batch, n, h, h_kv, d, causal, dtype) -> dict:
    return {
        "n": n,
        "kv_len": n,
        "d": d,
        "h": h,
        "h_kv": h_kv,
        "batch": batch,
        "dtype": dtype,
        "causal": causal,
    }


def _empty_point(impl: str, shape: dict) -> dict:
    from kernel_bench.bench import empty_point

    return empty_point(impl, shape)


def time_point(impl: str, shape: dict, cfg: dict | None = None, budget_s: float = 0.15) -> dict:
    """One implementation at one shape, device time and latency; never raises."""
    import jax

    from kernel_bench.bench import make_inputs, record_failure, timed_fields
    from kernel_bench.timing import measure_all
    from perfmodel.costs.nominal import nominal_flops

    point = _empty_point(impl, shape)
    b, n, h, h_kv, d = (shape[x] for x in ("batch", "n", "h", "h_kv", "d"))
    causal = shape["causal"]
    sets = None
    try:
        dtype = getattr(jax.numpy, shape["dtype"])
        sets = make_inputs(jax.random.key(0), b, n, shape["kv_len"], h, h_kv, d, dtype)
        last_err = None
        for config in candidates(impl, d, causal, cfg):
            try:
                fn, device_fn = make_fns(impl, causal, config)
                jax.block_until_ready(fn(*sets[0]))  # compiles; a config that cannot fit fails
            except Exception as err:  # noqa: BLE001 - try the next configuration
                last_err = err
                continue
            if config:
                point.update({k: config.get(k) for k in _CFG})
            fields = measure_all(fn, sets, device_fn=device_fn, budget_s=budget_s)
            break
        else:
            raise last_err
        flops = nominal_flops(batch=b, h=h, n=n, kv_len=shape["kv_len"], d=d, causal=causal)
        point.update(timed_fields(fields, flops=flops, tokens=b * n))
    except Exception as err:  # noqa: BLE001 - recorded as a point, the run goes on
        record_failure(point, err)
    finally:
        del sets
        gc.collect()
    return point


# ---------------------------------------------------------------- jobs


def remeasure_jobs() -> list[tuple]:
    from kernel_bench.bench import tuned_config

    jobs = []
    for n in ONE_HEAD_NS:  # the one-head series, as kernel_bench.recheck timed it
        shape = _shape(1, n, 1, 1, 128, False, "bfloat16")
        ours = dict(zip(_CFG, (128, 128, 8, 3), strict=True))
        jobs += [("naive", shape, None), ("pallas_flash", shape, ours), ("cudnn", shape, None)]
    later = []
    for n in SWEEP_N:
        for d in (64, 128):
            for causal in (False, True):
                shape = _shape(max(1, 16384 // n), n, 16, 16, d, causal, "bfloat16")
                for impl in ("pallas_flash", "cudnn", "naive", "xla"):
                    job = (impl, shape, tuned_config(d, causal) if impl == "pallas_flash" else None)
                    # dispatch matters at short n: those first; long naive/xla calls last
                    slow = n >= 16384 and impl in ("naive", "xla")
                    (later if slow else jobs).append(job)
    return jobs + later


def _key(impl: str, shape: dict) -> tuple:
    return (impl, *(shape[x] for x in ("batch", "n", "h", "h_kv", "d", "causal", "dtype")))


def without_done(jobs: list[tuple], done_file: Path | None, redo=("naive",)) -> list[tuple]:
    """``jobs`` less those measured ok in ``done_file``'s runs; ``redo`` implementations
    are timed again, after the rest except for the one-head points (first)."""
    if done_file is None:
        return jobs
    import json

    done = {
        _key(p["implementation"], p)
        for r in json.loads(Path(done_file).read_text())["runs"]
        for p in r["points"]
        if p["status"] == "ok"
    }
    first, rest, last = [], [], []
    for job in jobs:
        impl, shape, _ = job
        if _key(impl, shape) not in done:
            rest.append(job)
        elif impl in redo:
            (first if shape["h"] == 1 else last).append(job)
    return first + rest + last


def heldout_jobs(shapes=None, impls=HELDOUT_IMPLS) -> list[tuple]:
    jobs = []
    for batch, n, h, h_kv, d, causal, dtype in shapes or HELDOUT:
        shape = _shape(batch, n, h, h_kv, d, causal, dtype)
        for impl in impls:
            if impl.startswith("naive") and 2 * batch * h * n * n > NAIVE_MAX_SCORE_BYTES:
                continue
            jobs.append((impl, shape, None))
    return jobs


def run(mode: str, out: Path, budget_s: float, ceilings=None, skip_done=None, min_n=0) -> dict:
    from kernel_bench.bench import RunWriter, new_run

    deadline = time.monotonic() + budget_s
    if mode == "remeasure":
        jobs = without_done(remeasure_jobs(), skip_done)
        if min_n:  # the 16-head sweep from ``min_n`` on only (no one-head series)
            jobs = [j for j in jobs if j[1]["h"] > 1 and j[1]["n"] >= min_n]
    elif mode == "mgpu":
        jobs = heldout_jobs(MGPU, ("mgpu_attention", "cudnn", "pallas_flash"))
    else:
        jobs = heldout_jobs()
    kind = {"remeasure": "devtime", "mgpu": "heldout-mgpu"}.get(mode, "heldout")
    writer = RunWriter(out, new_run(kind, ceilings))
    writer.flush()
    for i, (impl, shape, cfg) in enumerate(jobs):
        if time.monotonic() > deadline:
            print(f"budget reached: {len(jobs) - i} of {len(jobs)} points not started")
            break
        p = time_point(impl, shape, cfg)
        writer.add(p)
        if p["status"] == "ok":
            what = (
                f"dev {p['device_time_s'] * 1e6:9.1f} us ({p['device_time_method'][:5]}) "
                f"queued {p['queued_time_s'] * 1e6:9.1f} lat {p['call_latency_s'] * 1e6:9.1f} "
                f"{p['tflops']:6.1f} TF/s"
            )
        else:
            what = f"{p['status']}: {p['error'][:90]}"
        print(
            f"{impl:15s} b={shape['batch']} n={shape['n']} h={shape['h']}/{shape['h_kv']} "
            f"d={shape['d']} c={int(shape['causal'])} {shape['dtype'][:4]}  {what}",
            flush=True,
        )
    return writer.run["ceilings"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", nargs="+", choices=["remeasure", "heldout", "mgpu"])
    ap.add_argument("--out", type=Path, nargs="+", required=True, help="one file per mode")
    ap.add_argument("--budget-s", type=float, nargs="+", default=[150.0], help="one per mode")
    ap.add_argument("--skip-done", type=Path, help="remeasure: skip points ok in this file")
    ap.add_argument("--min-n", type=int, default=0, help="remeasure: 16-head points n >= this only")
    args = ap.parse_args(argv)
    if not len(args.mode) == len(args.out) == len(args.budget_s):
        ap.error("give one --out and one --budget-s per mode")
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    ceilings = None  # measured once, shared by the modes of this process
    for mode, out, budget in zip(args.mode, args.out, args.budget_s, strict=True):
        ceilings = run(mode, out, budget, ceilings, args.skip_done, args.min_n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
