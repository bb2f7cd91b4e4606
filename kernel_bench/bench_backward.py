"""Training-step benchmark on a GPU: forward and backward of one attention call.

Three implementations, timed in one process: ours (``pallas_kernels.flash_attention``,
whose backward is ``pallas_kernels.flash_backward``), cuDNN (``jax.grad`` of
``jax.nn.dot_product_attention(implementation="cudnn")``) and XLA's naive attention
(``naive.naive_attention_jit`` and its autodiff). Per point and phase:

* ``forward``: the jitted forward; ``backward``: the jitted VJP function alone, applied
  to residuals computed once beforehand (``jax.vjp``); ``train`` = forward + backward.
* device time (CUPTI kernel time where available, else calls queued back to back),
  queued time and single-call latency, labelled apart (``kernel_bench.timing``);
* peak memory of a training step from XLA's memory analysis of the compiled backward
  (its arguments are the forward's residuals: what training keeps between the passes)
  and ``residual_bytes``, the size of those residuals.

TFLOP/s are nominal (``perfmodel.costs.nominal``: forward 4·b·h·n²·d, backward 2.5×
that, FlashAttention-2 §3.2; halved when causal). The GPU image has no pydantic: plain
JSON, written atomically after every point::

    python -m kernel_bench.bench_backward --out specs/measurements/h200-backward.json
    python -m kernel_bench.bench_backward --table specs/measurements/h200-backward.json
    python -m kernel_bench.bench_backward --variants --out FILE --budget-s 60
    python -m kernel_bench.bench_backward --variants --table FILE
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import math
import os
import sys
import time
import traceback
from pathlib import Path

from perfmodel.atomic import write_json

HEADS = 16
TOKENS = 16384
IMPLEMENTATIONS = ("pallas_flash", "cudnn", "naive_jit")
#: Backward tiles tried at n=8192, d=128 before the sweep: (block_q, block_k,
#: dq_block_q, dq_block_k, num_warps, num_stages). The winner serves every point.
CANDIDATES = (
    (64, 64, 64, 64, 4, 2),
    (64, 128, 128, 64, 8, 2),
    (32, 128, 128, 32, 4, 3),
)
#: ``--variants``: backward configurations (``flash_backward.Config`` keywords) raced at n=8192,
#: d=128, causal and not, against cuDNN in the same run; the fastest (summed time) then
#: runs the other d=128 shapes beside the two-pass default and cuDNN.
VARIANTS = {
    "two_pass 64x64 w4": dict(block_q=64, block_k=64, num_warps=4, num_stages=2),
    "atomic 64x64 w4": dict(block_q=64, block_k=64, num_warps=4, num_stages=2, dq="atomic"),
    "atomic 128x64 w8": dict(block_q=128, block_k=64, num_warps=8, num_stages=2, dq="atomic"),
    "atomic 64x128 w8": dict(block_q=64, block_k=128, num_warps=8, num_stages=2, dq="atomic"),
    "atomic 64x64 w8": dict(block_q=64, block_k=64, num_warps=8, num_stages=2, dq="atomic"),
    "two_pass 64x64 w4, dQ 128x64 w8": dict(
        block_q=64,
        block_k=64,
        dq_block_q=128,
        dq_block_k=64,
        num_warps=4,
        num_stages=2,
        dq_num_warps=8,
    ),
}
BASELINE = "two_pass 64x64 w4"
#: ``--variants``: (n, h_kv, causal) after the race, in priority order (d=128, h=16).
VARIANT_SHAPES = (
    (4096, 16, False),
    (4096, 16, True),
    (16384, 16, False),
    (16384, 16, True),
    (32768, 16, False),
    (32768, 16, True),
    (4096, 2, False),
    (16384, 2, True),
    (4096, 2, True),
    (16384, 2, False),
)


def shape_of(n, d, causal, *, h=HEADS, h_kv=None, dtype="bfloat16") -> dict:
    return {
        "n": n,
        "kv_len": n,
        "d": d,
        "h": h,
        "h_kv": h_kv or h,
        "batch": max(1, TOKENS // n),
        "dtype": dtype,
        "causal": causal,
    }


def phase_flops(shape: dict, phase: str) -> float:
    """Nominal FLOPs of ``phase`` ("forward", "backward" or "train") at ``shape``."""
    from perfmodel.costs.nominal import nominal_flops

    keys = ("batch", "h", "n", "kv_len", "d", "causal")
    return nominal_flops(**{k: shape[k] for k in keys}, mode=phase)


# ------------------------------------------------------------------ implementations
def attention_fn(impl: str, causal: bool, backward_cfg=None):
    import jax

    if impl == "pallas_flash":
        from pallas_kernels.flash_attention import flash_attention

        return lambda q, k, v: flash_attention(
            q, k, v, causal=causal, backend="triton", backward=backward_cfg
        )
    if impl == "cudnn":
        return lambda q, k, v: jax.nn.dot_product_attention(
            q, k, v, is_causal=causal, implementation="cudnn"
        )
    if impl == "naive_jit":
        from pallas_kernels.naive import naive_attention_jit

        return lambda q, k, v: naive_attention_jit(q, k, v, causal=causal)
    raise ValueError(f"{impl=} unknown; known: {IMPLEMENTATIONS}")


def _inputs(shape: dict, sets: int = 2):
    import jax

    dt_ = getattr(jax.numpy, shape["dtype"])
    b, n, m, h, hk, d = (shape[x] for x in ("batch", "n", "kv_len", "h", "h_kv", "d"))
    out = []
    for i in range(sets):
        kq, kk, kv, kd = jax.random.split(jax.random.key(i), 4)
        out.append(
            (
                jax.random.normal(kq, (b, n, h, d), dt_),
                jax.random.normal(kk, (b, m, hk, d), dt_),
                jax.random.normal(kv, (b, m, hk, d), dt_),
                jax.random.normal(kd, (b, n, h, d), dt_),
            )
        )
    return out


def _memory(compiled) -> int:
    m = compiled.memory_analysis()
    return int(
        m.argument_size_in_bytes
        + m.output_size_in_bytes
        + m.temp_size_in_bytes
        - m.alias_size_in_bytes
    )


def _leaf_bytes(tree) -> int:
    import jax

    return int(sum(x.size * x.dtype.itemsize for x in jax.tree_util.tree_leaves(tree)))


def time_point(
    impl: str, shape: dict, *, backward_cfg=None, budget_s: float = 0.15, tuning: bool = False
) -> list:
    """Points for the forward, backward and train phases (``tuning``: the backward alone,
    no memory analysis); errors become points."""
    import jax

    from kernel_bench.timing import measure_all

    base = {"implementation": impl, **shape, "status": "ok", "error": None}
    if impl == "pallas_flash" and backward_cfg is not None:
        base["backward_config"] = dataclasses.asdict(backward_cfg)
    try:
        f = attention_fn(impl, shape["causal"], backward_cfg)
        sets = _inputs(shape)
        fwd = jax.jit(f)
        fwd_sets = [s[:3] for s in sets]
        # one set of residuals (a second would retrace: each VJP function is its own
        # pytree type), two dO; the residuals alone exceed the 60 MB L2
        vjp_fn = jax.vjp(f, *sets[0][:3])[1]
        bwd = jax.jit(lambda vjp_fn, do: vjp_fn(do))
        bwd_sets = [(vjp_fn, s[3]) for s in sets]
        t_bwd = measure_all(bwd, bwd_sets, budget_s=budget_s)
        if tuning:
            flops = phase_flops(shape, "backward")
            return [
                {
                    **base,
                    "phase": "backward",
                    **t_bwd,
                    "tuning": True,
                    "tflops": flops / t_bwd["device_time_s"] / 1e12,
                }
            ]
        t_fwd = measure_all(fwd, fwd_sets, budget_s=budget_s)
        memory = {
            "peak_memory_bytes": max(
                _memory(fwd.lower(*fwd_sets[0]).compile()),
                _memory(bwd.lower(*bwd_sets[0]).compile()),
            ),
            "residual_bytes": _leaf_bytes(vjp_fn),
        }
    except Exception as err:  # noqa: BLE001 - recorded as a point, the sweep goes on
        text = f"{type(err).__name__}: {err}"[:1500]
        oom = any(s in text for s in ("RESOURCE_EXHAUSTED", "out of memory", "Out of memory"))
        if not oom:
            traceback.print_exc(limit=2)
        return [{**base, "phase": "train", "status": "oom" if oom else "error", "error": text}]
    out = []
    for phase, t in {"forward": t_fwd, "backward": t_bwd}.items():
        fl = phase_flops(shape, phase)
        out.append({**base, "phase": phase, **t, "tflops": fl / t["device_time_s"] / 1e12})
    train = {k: t_fwd[k] + t_bwd[k] for k in ("device_time_s", "queued_time_s", "call_latency_s")}
    train_flops = phase_flops(shape, "train")
    out.append(
        {
            **base,
            "phase": "train",
            **train,
            "device_time_method": t_fwd["device_time_method"],
            "tflops": train_flops / train["device_time_s"] / 1e12,
            **memory,
        }
    )
    return out


# ------------------------------------------------------------------ the run
def jobs() -> list:
    """(impl, shape) in priority order: the target first (d=128, n >= 4096)."""
    out = []
    for n in (4096, 8192, 16384, 32768):
        for causal in (False, True):
            out += [("pallas_flash", shape_of(n, 128, causal)), ("cudnn", shape_of(n, 128, causal))]
    for n in (4096, 16384):  # GQA 16:2
        for causal in (False, True):
            for impl in ("pallas_flash", "cudnn"):
                out.append((impl, shape_of(n, 128, causal, h_kv=2)))
    for n in (512, 1024, 2048, 4096, 8192):
        for causal in (False, True):
            out.append(("naive_jit", shape_of(n, 128, causal)))
    for n in (512, 2048):
        for causal in (False, True):
            out += [("pallas_flash", shape_of(n, 128, causal)), ("cudnn", shape_of(n, 128, causal))]
    for n in (1024, 4096, 16384):
        for causal in (False, True):
            out += [("pallas_flash", shape_of(n, 64, causal)), ("cudnn", shape_of(n, 64, causal))]
    return out


def pick_backward_config(writer, budget_s: float):
    """Time CANDIDATES' backward at n=8192, d=128 (not causal); return the fastest."""
    from pallas_kernels.flash_backward import Config as BackwardConfig

    best, best_t = None, math.inf
    for values in CANDIDATES:
        cfg = BackwardConfig(*values)
        points = time_point(
            "pallas_flash",
            shape_of(8192, 128, False),
            backward_cfg=cfg,
            budget_s=budget_s,
            tuning=True,
        )
        for p in points:
            writer.add({**p, "tuning": True})
        bwd = [p for p in points if p.get("phase") == "backward" and p["status"] == "ok"]
        if bwd:
            print(f"tune {values}: backward {bwd[0]['tflops']:.0f} TFLOP/s", flush=True)
            if bwd[0]["device_time_s"] < best_t:
                best, best_t = cfg, bwd[0]["device_time_s"]
    return best


class Writer:
    def __init__(self, path: Path, run: dict):
        self.path, self.run = path, run
        self.earlier = json.loads(path.read_text())["runs"] if path.exists() else []

    def add(self, point: dict) -> None:
        self.run["points"].append(point)
        write_json(self.path, {"schema_version": 1, "runs": [*self.earlier, self.run]})


def new_run() -> dict:
    import jax

    stamp = dt.datetime.now(dt.UTC).replace(microsecond=0)
    return {
        "run_id": f"backward-{stamp.strftime('%Y%m%dT%H%M%SZ')}",
        "device_name": jax.devices()[0].device_kind,
        "jax_version": jax.__version__,
        "git_commit": os.environ.get("PERFMODEL_GIT_COMMIT", "unknown"),
        "timestamp": stamp.isoformat(),
        "points": [],
    }


def _variant_point(writer, name, impl, shape, cfg, point_budget_s) -> float:
    """Time one backward (``tuning`` mode: the VJP alone); record and return its time."""
    for p in time_point(impl, shape, backward_cfg=cfg, budget_s=point_budget_s, tuning=True):
        writer.add({**p, "variant": name})
        ok = p["status"] == "ok"
        what = f"{p['tflops']:.0f} TFLOP/s" if ok else p["status"] + ": " + str(p["error"])[:300]
        print(
            f"{name} n={shape['n']} h_kv={shape['h_kv']} causal={shape['causal']}: {what}",
            flush=True,
        )
        return p["device_time_s"] if ok else math.inf
    return math.inf


def run_variants(path: Path, budget_s: float, point_budget_s: float) -> None:
    """Race ``VARIANTS`` at n=8192, d=128 (causal and not), then time the winner, the
    two-pass baseline and cuDNN at ``VARIANT_SHAPES`` until ``budget_s``."""
    from pallas_kernels.flash_backward import Config as BackwardConfig

    deadline = time.monotonic() + budget_s
    writer = Writer(path, new_run())
    totals = {}
    race = [shape_of(8192, 128, False), shape_of(8192, 128, True)]
    for shape in race:
        _variant_point(writer, "cudnn", "cudnn", shape, None, point_budget_s)
    for name, kw in VARIANTS.items():
        if time.monotonic() > deadline:
            break
        cfg = BackwardConfig(**kw)
        totals[name] = sum(
            _variant_point(writer, name, "pallas_flash", s, cfg, point_budget_s) for s in race
        )
    best = min(totals, key=totals.get) if totals else BASELINE
    print(
        f"fastest: {best} ({totals.get(best, math.inf) * 1e3:.2f} ms, two race shapes)", flush=True
    )
    names = [best] if best == BASELINE else [best, BASELINE]
    for n, h_kv, causal in VARIANT_SHAPES:
        if time.monotonic() > deadline:
            print("budget reached", flush=True)
            break
        shape = shape_of(n, 128, causal, h_kv=h_kv)
        _variant_point(writer, "cudnn", "cudnn", shape, None, point_budget_s)
        for name in names:
            cfg = BackwardConfig(**VARIANTS[name])
            _variant_point(writer, name, "pallas_flash", shape, cfg, point_budget_s)


def variants_table(path: Path) -> str:
    """Backward TFLOP/s of each variant and cuDNN per shape, and variant/cuDNN, newest run."""
    run_ = json.loads(path.read_text())["runs"][-1]
    cells: dict = {}
    for p in run_["points"]:
        key = (p["h_kv"], p["causal"], p["n"])
        cells.setdefault(key, {})[p["variant"]] = p
    names = [v for v in VARIANTS if any(v in row for row in cells.values())]
    head = "| h_kv | causal | n | cuDNN | " + " | ".join(f"{v} (/cuDNN)" for v in names) + " |"
    lines = [
        f"Run `{run_['run_id']}` on {run_['device_name']}, jax {run_['jax_version']}, commit "
        f"`{run_['git_commit'][:12]}`; backward (VJP alone) TFLOP/s from device time, d=128, "
        "h=16, bf16, 16384 tokens per point; in brackets the ratio to cuDNN in the same run.",
        "",
        head,
        "|" + "---|" * (4 + len(names)),
    ]
    for key in sorted(cells):
        row = cells[key]
        cud = row.get("cudnn")
        ok = lambda p: p is not None and p["status"] == "ok"  # noqa: E731
        out = []
        for v in names:
            p = row.get(v)
            if p is None:
                out.append("-")
            elif not ok(p):
                out.append(p["status"])
            else:
                ratio = f" ({p['tflops'] / cud['tflops']:.2f})" if ok(cud) else ""
                out.append(f"{p['tflops']:.0f}{ratio}")
        h_kv, causal, n = key
        c = f"{cud['tflops']:.0f}" if ok(cud) else "-"
        lines.append(f"| {h_kv} | {'yes' if causal else 'no'} | {n} | {c} | {' | '.join(out)} |")
    return "\n".join(lines) + "\n"


def run(path: Path, budget_s: float, point_budget_s: float) -> None:
    deadline = time.monotonic() + budget_s
    writer = Writer(path, new_run())
    cfg = pick_backward_config(writer, point_budget_s)
    print(f"backward config: {cfg}", flush=True)
    todo = jobs()
    for i, (impl, shape) in enumerate(todo):
        if time.monotonic() > deadline:
            print(f"budget reached: {len(todo) - i} of {len(todo)} jobs skipped", flush=True)
            break
        t0 = time.monotonic()
        for p in time_point(impl, shape, backward_cfg=cfg, budget_s=point_budget_s):
            writer.add(p)
        print(
            f"{impl} n={shape['n']} d={shape['d']} h_kv={shape['h_kv']} "
            f"causal={shape['causal']}: {time.monotonic() - t0:.1f} s",
            flush=True,
        )


# ------------------------------------------------------------------ table (no GPU)
def markdown_table(path: Path) -> str:
    """Backward and train TFLOP/s per shape, ours/cuDNN, and peak memory, newest run."""
    run_ = json.loads(path.read_text())["runs"][-1]
    cells: dict = {}
    for p in run_["points"]:
        if p.get("tuning"):
            continue
        key = (p["d"], p["h_kv"], p["causal"], p["n"], p["batch"])
        cells.setdefault(key, {})[(p["implementation"], p["phase"])] = p
    lines = [
        f"Run `{run_['run_id']}` on {run_['device_name']}, jax {run_['jax_version']}, "
        f"commit `{run_['git_commit'][:12]}`; h=16, bf16, batch·n = 16384 tokens. "
        "TFLOP/s from device time (nominal FLOPs: backward 2.5× forward, halved when "
        "causal); memory: peak of a training step (XLA memory analysis), GB.",
        "",
        "| d | h_kv | causal | n | ours bwd | cuDNN bwd | ours/cuDNN bwd | ours train | "
        "cuDNN train | XLA naive train | mem ours | mem cuDNN | mem naive |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def tf(p):
        if p is None:
            return "-"
        return f"{p['tflops']:.0f}" if p["status"] == "ok" else p["status"]

    def mem(p):
        if p is None or p["status"] != "ok":
            return "-" if p is None else p["status"]
        return f"{p['peak_memory_bytes'] / 1e9:.2f}"

    for key in sorted(cells):
        row = cells[key]
        ours, cud = row.get(("pallas_flash", "backward")), row.get(("cudnn", "backward"))
        ratio = "-"
        if ours and cud and ours["status"] == cud["status"] == "ok":
            ratio = f"{ours['tflops'] / cud['tflops']:.2f}"
        train = [row.get((impl, "train")) for impl in IMPLEMENTATIONS]
        d, h_kv, causal, n, _ = key
        lines.append(
            f"| {d} | {h_kv} | {'yes' if causal else 'no'} | {n} | {tf(ours)} | {tf(cud)} | "
            f"{ratio} | {' | '.join(tf(p) for p in train)} | "
            f"{' | '.join(mem(p) for p in train)} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, help="measurement JSON to append a run to")
    ap.add_argument("--table", type=Path, help="print the markdown table of a file and exit")
    ap.add_argument("--budget-s", type=float, default=100.0, help="stop starting jobs after")
    ap.add_argument("--point-budget-s", type=float, default=0.12)
    ap.add_argument(
        "--variants", action="store_true", help="race VARIANTS (backward alone) against cuDNN"
    )
    args = ap.parse_args(argv)
    if args.table:
        table = variants_table if args.variants else markdown_table
        print(table(args.table), end="")
        return 0
    if not args.out:
        raise SystemExit("--out FILE is required unless --table is given")
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    if args.variants:
        run_variants(args.out, args.budget_s, args.point_budget_s)
        print(variants_table(args.out), end="")
        return 0
    run(args.out, args.budget_s, args.point_budget_s)
    print(markdown_table(args.out), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
