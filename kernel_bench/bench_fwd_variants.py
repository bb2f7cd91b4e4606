"""Launch variants of our Mosaic forward at d = 128 beside its default and cuDNN (issue 22).

One process: every shape of ``SHAPES`` (causal and not, MHA, GQA, MQA, n 2048-32768,
lengths not of 128 and not of 8), each timed as cuDNN
(``jax.nn.dot_product_attention(implementation="cudnn")``), our default
(``flash_mosaic.heuristic_config``) and each variant of ``variants(shape)`` (one knob of
``flash_mosaic.Config`` over the default). Device time is CUPTI kernel time
(``kernel_bench.timing.measure_all``). Two passes over every shape, the jobs of the second
in reverse order: pass ``a`` while later shapes still compile in threads, pass ``b`` after
every compile, each its own run in ``--out`` (measurement schema: variant points carry
``variant`` and ``tuning``). Only jax, ``pallas_kernels`` and ``kernel_bench.timing`` are
imported (the GPU image has no pydantic); the file is rewritten after every point.

    PYTHONPATH=. python -m kernel_bench.bench_fwd_variants --out $OUT/fwd-d128.json
    python -m kernel_bench.bench_fwd_variants --table FILE      # ratios, no GPU
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import statistics
import sys
import time
from pathlib import Path

#: (batch, n, kv_len, h, h_kv, causal, dtype), the first two from held-out draw 11 (0.89,
#: 0.91 x cuDNN), the third the tiled-layout twin of the first (n, kv_len multiples of 8).
SHAPES = (
    (1, 9755, 9135, 32, 8, False, "float16"),
    (1, 29746, 29746, 8, 1, True, "float16"),
    (1, 9752, 9136, 32, 8, False, "float16"),
    (4, 4096, 4096, 16, 16, False, "bfloat16"),
    (6, 2500, 2500, 16, 16, True, "float16"),
    (8, 2048, 2048, 8, 1, False, "float16"),
    (2, 13001, 13001, 16, 4, True, "bfloat16"),
    (1, 32768, 32768, 8, 2, False, "bfloat16"),
)
#: The causal d = 256 GQA shapes of held-out draw 12 (0.59, 0.60 x cuDNN) and draw 11's
#: non-causal MQA one (0.87), each beside its twin whose lengths are multiples of 8 (the
#: tiled layout): ``--set d256``, where only the layout and the persistence vary.
SHAPES_D256 = (
    (6, 1404, 1404, 24, 4, True, "float16"),
    (6, 1408, 1408, 24, 4, True, "float16"),
    (1, 16461, 16461, 12, 4, True, "float16"),
    (1, 16464, 16464, 12, 4, True, "float16"),
    (4, 5557, 5557, 12, 1, False, "bfloat16"),
    (4, 5560, 5560, 12, 1, False, "bfloat16"),
)
#: The causal d = 96 shapes of held-out draw 16 on the H100 (0.70, 0.70, 0.92 x cuDNN; the
#: tiled layout: lengths multiples of 8): ``--set d96``, the head dim padded to 128 (a
#: 128-byte swizzle) against the native 64-byte one, and the schedule's knobs.
SHAPES_D96 = (
    (7, 8448, 8448, 12, 1, True, "bfloat16"),
    (4, 8448, 8448, 32, 16, True, "float16"),
    (2, 4096, 4096, 8, 2, True, "float16"),
)
#: Causal shapes at head dims 64 to 192 (and d = 96 without the mask), each with its own
#: head dim (the eighth field), none of them measured before, lengths multiples of 8 (the
#: tiled layout): ``--set persist``, the persistent grid against one CTA per unit after
#: d = 96 causal ran 1.43-1.63x faster not persistent on the H100 (2026-12-08).
SHAPES_PERSIST = (
    (4, 8192, 8192, 16, 4, True, "bfloat16", 64),
    (4, 4096, 4096, 16, 4, True, "bfloat16", 80),
    (2, 8192, 8192, 16, 16, True, "bfloat16", 96),
    (2, 8192, 8192, 16, 16, False, "bfloat16", 96),
    (2, 8192, 8192, 16, 2, True, "float16", 112),
    (4, 8192, 8192, 16, 2, True, "bfloat16", 128),
    (2, 4096, 4096, 32, 8, True, "float16", 128),
    (2, 6144, 6144, 16, 4, True, "bfloat16", 160),
    (2, 4096, 4096, 16, 16, True, "float16", 192),
)
#: (head dim, shapes, knobs kept) of each set ``--set`` names (None: every knob; a head
#: dim of None: each shape's own, its eighth field)
SETS = {
    "d128": (128, SHAPES, None),
    "d256": (256, SHAPES_D256, ("not_persistent",)),
    "d96": (96, SHAPES_D96, ("pad_d", "not_persistent", "bk64_s4", "no_prefetch")),
    "persist": (None, SHAPES_PERSIST, ("not_persistent",)),
}
#: One knob each over the default (name: flash_attention options); ``variants`` picks.
KNOBS = {
    "bk64_s4": {"block_k": 64, "num_stages": 4},
    # the deepest ring that lowers: 320 keys ahead against 256 (3 stages of 128 keys, or
    # 2 of 192, need 232608 / 232560 bytes of the 232448 even without the Q prefetch)
    "bk64_s5": {"block_k": 64, "num_stages": 5, "prefetch_q": False},
    "no_prefetch": {"prefetch_q": False},
    "not_persistent": {"persistent": False},
    "pad_d": {"pad_head_dim": True},
}
D = 128


def shape_dict(t, d: int | None = D) -> dict:
    """A shape of the sets' tuples: (b, n, kv_len, h, h_kv, causal, dtype[, head dim]),
    at head dim ``d`` where the tuple names none."""
    b, n, kv_len, h, h_kv, causal, dtype = t[:7]
    d = t[7] if len(t) > 7 else d
    return dict(n=n, kv_len=kv_len, d=d, h=h, h_kv=h_kv, batch=b, dtype=dtype, causal=causal)


def variants(shape: dict) -> dict[str, dict]:
    """The knobs, the other overlap of the mask, and the other sequence layout: copies
    (``pad_seq``) where a length is not of 8 (the default is blocked there), else the
    blocked layout forced (the default is tiled)."""
    kept = shape.get("knobs")
    out = {k: v for k, v in KNOBS.items() if kept is None or k in kept}
    if kept is not None:  # a set that varies the layout only (and the knobs it keeps)
        of_8 = shape["n"] % 8 == 0 and shape["kv_len"] % 8 == 0
        out["blocked" if of_8 else "copies"] = {"blocked": True} if of_8 else {"pad_seq": True}
        return out
    out["overlap_pv" if shape["causal"] else "overlap_qk"] = {
        "overlap": "pv" if shape["causal"] else "qk"
    }
    of_8 = shape["n"] % 8 == 0 and shape["kv_len"] % 8 == 0
    out["blocked" if of_8 else "copies"] = {"blocked": True} if of_8 else {"pad_seq": True}
    return out


def nominal_flops(s: dict) -> float:
    """4 b h n kv_len d, halved when causal (kv_len = n here): perfmodel.costs.nominal."""
    f = 4.0 * s["batch"] * s["h"] * s["n"] * s["kv_len"] * s["d"]
    return f / 2 if s["causal"] else f


def _fn(impl: str, causal: bool, options: dict | None):
    import jax

    if impl == "cudnn":
        return jax.jit(
            lambda q, k, v: jax.nn.dot_product_attention(
                q, k, v, is_causal=causal, implementation="cudnn"
            )
        )
    from pallas_kernels import flash_attention

    opts = options or {}
    return jax.jit(
        lambda q, k, v: flash_attention(q, k, v, causal=causal, backend="mosaic", **opts)
    )


def _inputs(s: dict, sets: int = 2):
    import jax

    dt_ = getattr(jax.numpy, s["dtype"])
    out = []
    for i in range(sets):
        kq, kk, kv = jax.random.split(jax.random.fold_in(jax.random.key(1), i), 3)
        out.append(
            (
                jax.random.normal(kq, (s["batch"], s["n"], s["h"], s["d"]), dt_),
                jax.random.normal(kk, (s["batch"], s["kv_len"], s["h_kv"], s["d"]), dt_),
                jax.random.normal(kv, (s["batch"], s["kv_len"], s["h_kv"], s["d"]), dt_),
            )
        )
    return out


def jobs_of(s: dict) -> list[tuple[str, str, dict | None]]:
    """(implementation, variant name, options): cuDNN, our default, the variants."""
    jobs = [("cudnn", "", None), ("pallas_flash", "", None)]
    return jobs + [("pallas_flash", name, opts) for name, opts in variants(s).items()]


def launch_of(s: dict, options: dict | None) -> dict:
    from pallas_kernels import flash_mosaic

    config = flash_mosaic.heuristic_config(s["d"], s["causal"])
    return dataclasses.asdict(dataclasses.replace(config, **(options or {})))


def _write(path: Path, runs: list[dict]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps({"schema_version": 1, "runs": runs}, indent=1))
    os.replace(tmp, path)


def new_run(name: str) -> dict:
    import jax

    stamp = dt.datetime.now(dt.UTC).replace(microsecond=0)
    return {
        "run_id": f"{name}-{stamp.strftime('%Y%m%dT%H%M%SZ')}",
        "device_name": jax.devices()[0].device_kind,
        "jax_version": jax.__version__,
        "git_commit": os.environ.get("PERFMODEL_GIT_COMMIT", "unknown"),
        "timestamp": stamp.isoformat(),
        "ceilings": None,
        "points": [],
        "details": [],
    }


def _rel(a, b) -> float:
    import numpy as np

    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def time_shape(s: dict, compiled: list, *, budget_s: float, reverse: bool) -> tuple[list, dict]:
    """Points of one shape (cuDNN, default, variants) and its details (launches, kernel
    lists, O's relative difference to cuDNN's)."""
    import gc

    import jax

    from kernel_bench.timing import measure_all

    sets = _inputs(s)
    order = list(reversed(compiled)) if reverse else compiled
    points, outs = [], {}
    details = {"shape": s, "launches": {}, "kernels": {}, "o_rel_diff": {}}
    for (impl, variant, options), exe in order:
        shape = {k: v for k, v in s.items() if k != "knobs"}
        point = {
            "implementation": impl, **shape, "block_q": None, "block_k": None, "num_warps": None,
            "num_stages": None, "status": "ok", "error": None, "median_s": None, "runs": 0,
            "family": "cudnn" if impl == "cudnn" else "pallas-mosaic", "phase": "forward",
            "time_basis": "device",
        }  # fmt: skip
        if impl != "cudnn":
            launch = launch_of(s, options)
            details["launches"][variant or "default"] = launch
            point.update(block_q=128, block_k=launch["block_k"], num_stages=launch["num_stages"])
        if variant:
            point.update(variant=variant, tuning=True)
        try:
            if isinstance(exe, Exception):
                raise exe
            outs[variant or impl] = jax.device_get(exe(*sets[0]))
            t = measure_all(exe, sets, budget_s=budget_s, with_kernels=True)
            details["kernels"][variant or impl] = t.pop("kernel_list")
            dev = t["device_time_s"]
            point.update(
                {k: v for k, v in t.items() if k not in ("device_p10_s", "device_p90_s")},
                median_s=dev, p10_s=t["device_p10_s"], p90_s=t["device_p90_s"],
                min_s=t["device_p10_s"], device_p10_s=t["device_p10_s"],
                device_p90_s=t["device_p90_s"], runs=t["device_samples"],
                tflops=nominal_flops(s) / dev / 1e12, tokens_per_s=s["batch"] * s["n"] / dev,
            )  # fmt: skip
        except Exception as err:  # noqa: BLE001 - recorded, the run goes on
            point.update(status="error", error=f"{type(err).__name__}: {err}"[:2000])
        points.append(point)
    ref = outs.get("cudnn")
    if ref is not None:
        details["o_rel_diff"] = {k: _rel(v, ref) for k, v in outs.items() if k != "cudnn"}
    del sets, outs
    gc.collect()
    return points, details


def _line(s: dict, points: list) -> str:
    cud = next((p for p in points if p["implementation"] == "cudnn"), None)
    parts = []
    for p in points:
        if p["implementation"] == "cudnn":
            continue
        name = p.get("variant") or "default"
        if p["status"] != "ok":
            parts.append(f"{name} {p['status']}")
        elif cud and cud["status"] == "ok":
            parts.append(
                f"{name} {p['median_s'] * 1e6:.1f}us {cud['median_s'] / p['median_s']:.3f}"
            )
    c = f"cudnn {cud['median_s'] * 1e6:.1f}us" if cud and cud["status"] == "ok" else "cudnn -"
    return f"{s} {c} | " + "; ".join(parts)


def measure(
    out: Path, *, budget_s: float, point_budget_s: float, workers: int, which: str = "d128"
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    t_start = time.monotonic()
    d, listed, knobs = SETS[which]
    shapes = [{**shape_dict(t, d), "knobs": knobs} for t in listed]

    def build(s, job):
        impl, _, options = job
        try:
            return _fn(impl, s["causal"], options).lower(*_inputs_struct(s)).compile()
        except Exception as err:  # noqa: BLE001 - the point records it
            return err

    pool = ThreadPoolExecutor(workers)
    futures = [[(job, pool.submit(build, s, job)) for job in jobs_of(s)] for s in shapes]
    runs = [new_run("fwd-d128-a")]
    done = []
    for i, s in enumerate(shapes):
        compiled = [(job, f.result()) for job, f in futures[i]]
        if time.monotonic() - t_start > budget_s:
            print(f"budget reached in pass a: {len(shapes) - i} shapes not timed", flush=True)
            break
        points, details = time_shape(s, compiled, budget_s=point_budget_s, reverse=False)
        runs[0]["points"] += points
        runs[0]["details"].append(details)
        _write(out, runs)
        done.append((s, compiled))
        print(
            f"[a {i + 1}/{len(shapes)} {time.monotonic() - t_start:.0f}s] {_line(s, points)}",
            flush=True,
        )
    pool.shutdown(wait=False, cancel_futures=True)
    runs.append(new_run("fwd-d128-b"))
    for i, (s, compiled) in enumerate(done):
        if time.monotonic() - t_start > budget_s:
            print(f"budget reached in pass b: {len(done) - i} shapes not timed", flush=True)
            break
        points, details = time_shape(s, compiled, budget_s=point_budget_s, reverse=True)
        runs[1]["points"] += points
        runs[1]["details"].append(details)
        _write(out, runs)
        print(
            f"[b {i + 1}/{len(done)} {time.monotonic() - t_start:.0f}s] {_line(s, points)}",
            flush=True,
        )


def _inputs_struct(s: dict):
    import jax

    dt_ = getattr(jax.numpy, s["dtype"])
    q = jax.ShapeDtypeStruct((s["batch"], s["n"], s["h"], s["d"]), dt_)
    kv = jax.ShapeDtypeStruct((s["batch"], s["kv_len"], s["h_kv"], s["d"]), dt_)
    return q, kv, kv


def table(path: Path) -> str:
    """Markdown: per shape, cuDNN's time, and per launch its time in each pass and
    ours/cuDNN (cuDNN's time over ours, same pass), and the default's time over its
    (mean of the passes; above 1: faster than the default)."""
    runs = json.loads(path.read_text())["runs"]
    cells: dict = {}
    for r in runs:
        for p in r["points"]:
            key = tuple(p[k] for k in ("batch", "n", "kv_len", "h", "h_kv", "causal", "dtype"))
            name = "cudnn" if p["implementation"] == "cudnn" else p.get("variant") or "default"
            ok = p["status"] == "ok"
            cells.setdefault(key, {}).setdefault(name, []).append(p["median_s"] if ok else None)
    lines = [
        "| b × n × kv_len × h:h_kv, mask, dtype | launch | µs (pass a / b) | ours/cuDNN (a / b) | default ÷ it |",  # noqa: E501
        "|---|---|---|---|---|",
    ]  # fmt: skip
    for key, row in cells.items():
        b, n, kv, h, h_kv, causal, dtype = key
        label = f"{b} × {n} × {kv} × {h}:{h_kv}, {'causal' if causal else 'full'}, {dtype}"
        cud, base = row.get("cudnn", []), row.get("default", [])
        for name, times in row.items():
            us = " / ".join("-" if t is None else f"{t * 1e6:.1f}" for t in times)
            rat = [c / t for c, t in zip(cud, times, strict=False) if c and t]
            vs = [b_ / t for b_, t in zip(base, times, strict=False) if b_ and t]
            r = " / ".join(f"{x:.3f}" for x in rat) if name != "cudnn" else ""
            v = f"{statistics.mean(vs):.3f}" if vs and name not in ("cudnn", "default") else ""
            lines.append(f"| {label} | {name} | {us} | {r} | {v} |")
            label = ""
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--table", type=Path, help="print a file's table and exit (no GPU)")
    ap.add_argument("--budget-s", type=float, default=240.0, help="no shape starts after this")
    ap.add_argument("--point-budget-s", type=float, default=0.5)
    ap.add_argument("--workers", type=int, default=14)
    ap.add_argument("--set", default="d128", choices=sorted(SETS), help="shapes and knobs")
    args = ap.parse_args(argv)
    if args.table:
        print(table(args.table))
        return 0
    if not args.out:
        raise SystemExit("--out FILE is required unless --table is given")
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    measure(
        args.out,
        budget_s=args.budget_s,
        point_budget_s=args.point_budget_s,
        workers=args.workers,
        which=args.set,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
