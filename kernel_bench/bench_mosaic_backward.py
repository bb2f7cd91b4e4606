"""The Mosaic GPU backward against cuDNN on FlashAttention-3's anchor shapes (issue 22 item 1).

    PYTHONPATH=. python -m kernel_bench.bench_mosaic_backward --out FILE [--ns 1024,4096]
    python -m kernel_bench.bench_mosaic_backward --table FILE        # ratios, no GPU

FA-3's backward figure: bf16, d = 64 and 128, n = 512 ... 16K, causal and not, 16K
tokens per call (batch = 16384 / n), h = 2048 / d (here h = 16 at d = 128, 32 at d = 64).
Per shape, in one process and one run: ``flash_attention(backend="auto")`` (its forward
as auto picks it, its backward as ``choose_backward`` picks it, both recorded) and cuDNN
(``jax.nn.dot_product_attention(implementation="cudnn")``), each timed as a forward, as
the backward alone (the VJP function applied to residuals computed once) and as a
training step (``jax.grad`` of ``sum(O * dO)``). ``--variants`` runs ours again, backward
and training step, with other launches of the Mosaic backward (``VARIANTS``: the default
with ``Config.pipeline`` flipped, its stages as ``heuristic_config`` sets them then; the
pipelined kernels at two stages; dQ folded into the dK/dV kernel where ``supported_fold``;
``split``: the d > 128 kernels, ``SPLIT_CONFIG``, also where the default is the Triton
backward, which then runs last):
each of our points records its launch in ``backward_config``, and a variant's its name in
``variant`` and ``tuning`` (the model neither fits nor validates those). ``--d``, ``--h``,
``--causal`` pick the shapes (``--h``: the heads at every d). ``--ptxas D,...`` instead
compiles the backward at each head dim, default launch and flipped pipeline, one after
the other with a marker line before each: run it with ``MOSAIC_GPU_DUMP_PTXAS=1`` and
jaxlib prints ptxas's report (registers, spills, wgmma serialisation) of each kernel.
Device time is CUPTI kernel time (``kernel_bench.timing``); points in the measurement
schema, rewritten after each shape; the log line of each shape also gives our backward's
kernels one by one (``kernel_breakdown``: ``kernels_<launch>``, seconds each).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

IMPLS = ("pallas_flash", "cudnn")
TOKENS = 16384
NS = (512, 1024, 2048, 4096, 8192, 16384)


def anchor_shapes(ns=NS, ds=(128, 64), causals=(False, True), heads=None) -> list[dict]:
    """FA-3's shapes (``heads``: the heads at every d instead of 2048 / d)."""
    return [
        dict(
            n=n,
            kv_len=n,
            d=d,
            h=heads or 2048 // d,
            h_kv=heads or 2048 // d,
            batch=TOKENS // n,
            dtype="bfloat16",
            causal=causal,
        )
        for d in ds
        for causal in causals
        for n in ns
    ]


def parse_shapes(text: str) -> list[dict]:
    """``--shapes``: comma-separated ``BxNxHxHKVxD[xc]`` (c: causal), bfloat16, n = kv_len."""
    shapes = []
    for item in text.split(","):
        fields = item.strip().split("x")
        causal = fields[-1] == "c"
        try:
            b, n, h, h_kv, d = (int(x) for x in fields[:5])
        except ValueError:
            raise SystemExit(f"--shapes: {item!r} is not BxNxHxHKVxD[xc]") from None
        if len(fields) != 5 + causal:
            raise SystemExit(f"--shapes: {item!r} is not BxNxHxHKVxD[xc]")
        shapes.append(
            dict(n=n, kv_len=n, d=d, h=h, h_kv=h_kv, batch=b, dtype="bfloat16", causal=causal)
        )
    return shapes


def _flip_pipeline(config):
    stages = 2 if config.pipeline else 3  # as heuristic_config sets them with the flag
    return dataclasses.replace(
        config, pipeline=not config.pipeline, num_stages=stages, dq_num_stages=stages
    )


#: Other launches of the Mosaic backward, from the default one: (name, config or None
#: where the variant does not apply at that d).
VARIANTS = {
    "flip_pipeline": _flip_pipeline,
    "pipeline_2": lambda c: dataclasses.replace(c, pipeline=True, num_stages=2, dq_num_stages=2),
    "fold": lambda c: dataclasses.replace(c, dq="atomic", pipeline=False, num_stages=2),
    "split": lambda c: _split_config(),
    # the split kernels with the dQ kernel's K/V tiles 64 keys wide (d <= 128 only)
    "split_dq64": lambda c: dataclasses.replace(_split_config(), dq_block_k=64),
    # the paired default with deeper rings, or the dQ kernel's key tile doubled
    "stages_3": lambda c: dataclasses.replace(c, num_stages=3, dq_num_stages=3),
    "dq_128": lambda c: dataclasses.replace(c, dq_block_k=128),
    "dq_stages_3": lambda c: dataclasses.replace(c, dq_num_stages=3),
    # a GQA group summed by one CTA of the dK/dV kernel, whatever the grid
    "group_1": lambda c: dataclasses.replace(c, group_split=1),
}


def _split_config():
    from pallas_kernels import flash_mosaic_backward

    return flash_mosaic_backward.SPLIT_CONFIG


def _variant_name(config) -> str:
    """What a launch is, in words: the point's ``variant``."""
    if config.dq == "atomic":
        return "fold"
    if config.split:
        return "split" if config.dq_block_k == 32 else f"split_dq{config.dq_block_k}"
    if config.pipeline:
        return f"pipeline_{config.num_stages}"
    dq = "" if config.dq_block_k == 64 else f"_dq{config.dq_block_k}"
    dq += "" if config.dq_num_stages == config.num_stages else f"_dqs{config.dq_num_stages}"
    dq += "" if config.group_split is None else f"_g{config.group_split}"
    return f"no_pipeline_{config.num_stages}{dq}"


def _attn(impl: str, causal: bool, backward=None):
    import jax

    if impl == "pallas_flash":
        from pallas_kernels import flash_attention

        return lambda q, k, v: flash_attention(q, k, v, causal=causal, backward=backward)
    return lambda q, k, v: jax.nn.dot_product_attention(
        q, k, v, is_causal=causal, implementation="cudnn"
    )


def time_shape(
    shape: dict,
    *,
    budget_s: float,
    variants=(),
    phases=("forward", "backward", "train"),
    emit=None,
) -> tuple[list[dict], dict]:
    """Forward, backward alone and training step of ours and cuDNN at one shape;
    ``emit(point)`` is called on each point as it is made (a call cut short keeps them)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from kernel_bench.bench import (
        BACKEND_FAMILY,
        empty_point,
        make_inputs,
        record_failure,
        timed_fields,
    )
    from kernel_bench.timing import measure_all
    from pallas_kernels import flash_mosaic_backward
    from pallas_kernels.flash_attention import choose_backend, choose_backward
    from perfmodel.costs.nominal import nominal_flops

    keys = ("batch", "h", "n", "kv_len", "d", "causal")
    b, n, kv_len, h, h_kv, d, dtype = (
        shape[x] for x in ("batch", "n", "kv_len", "h", "h_kv", "d", "dtype")
    )
    sets = make_inputs(jax.random.key(1), b, n, kv_len, h, h_kv, d, getattr(jnp, dtype))
    do = jax.random.normal(jax.random.key(2), (b, n, h, d), jnp.float32)
    causal = shape["causal"]
    forward = BACKEND_FAMILY[choose_backend(*sets[0], causal=causal)]
    backward = choose_backward(*sets[0][:3], causal=causal)
    details = {"shape": shape, "forward": forward, "backward": backward}
    runs_of = [(impl, None) for impl in IMPLS]  # (implementation, Mosaic backward launch)
    default = None  # our default's Mosaic backward launch (None: the Triton backward)
    if backward == "mosaic":
        default = flash_mosaic_backward.heuristic_config(d, causal)
        runs_of[0] = ("pallas_flash", default)
    for name in variants:
        if name == "fold" and not flash_mosaic_backward.supported_fold(d):
            continue
        if default is None and name != "split":  # the others vary a Mosaic default
            continue
        other = VARIANTS[name](default)
        reason = flash_mosaic_backward.supported(*sets[0][:3], causal=causal, config=other)
        if other == default or reason:
            continue
        if default is None:  # a Mosaic launch over the Triton default: timed first
            runs_of.insert(0, ("pallas_flash", other))
        else:
            runs_of.insert(-1, ("pallas_flash", other))
    if default is None and len(runs_of) > len(IMPLS):  # the Triton default last
        runs_of.append(runs_of.pop(runs_of.index(("pallas_flash", None))))
    points, grads = [], {}
    for impl, config in runs_of:
        attn = _attn(impl, causal, config)
        variant = impl == "pallas_flash" and config != default

        def loss(q, k, v, attn=attn):
            return jnp.sum(attn(q, k, v).astype(jnp.float32) * do)

        fwd = jax.jit(attn)
        train = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))
        vjp_fn = jax.vjp(attn, *sets[0][:3])[1]
        bwd = jax.jit(lambda vjp_fn, g: vjp_fn(g))
        cotangents = [do.astype(sets[0][0].dtype), (do * 0.5).astype(sets[0][0].dtype)]
        runs = {
            "forward": (fwd, [s[:3] for s in sets]),
            "backward": (bwd, [(vjp_fn, g) for g in cotangents]),
            "train": (train, [s[:3] for s in sets]),
        }
        if variant:  # the same forward as the default's
            del runs["forward"]
        runs = {k: v for k, v in runs.items() if k in phases}
        for phase, (fn, args) in runs.items():
            family = "cudnn" if impl == "cudnn" else forward
            point = {**empty_point(impl, shape), "family": family, "phase": phase}
            if impl == "pallas_flash" and phase != "forward":  # the backward that ran
                point["backward_family"] = "pallas-triton" if config is None else "pallas-mosaic"
            if config is not None and phase != "forward":
                point["backward_config"] = _launch_of(config)
                if variant:  # the default's points are the family's
                    point["variant"] = _variant_name(config)
                    point["tuning"] = True
            try:
                out = fn(*args[0])
                if phase == "train":
                    grads[_variant_name(config) if variant else impl] = jax.device_get(out)
                timed = measure_all(fn, args, budget_s=budget_s)
                if impl == "pallas_flash" and phase == "backward":
                    name = _variant_name(config) if config is not None else "default"
                    details[f"kernels_{name}"] = kernel_breakdown(fn, args[0])
                flops = nominal_flops(**{k: shape[k] for k in keys}, mode=phase)
                point.update(timed_fields(timed, flops=flops, tokens=b * n))
            except Exception as err:  # noqa: BLE001 - recorded, the run goes on
                record_failure(point, err)
            points.append(point)
            if emit is not None:
                emit(point)
    if "cudnn" in grads:
        ref = list(map(np.float32, grads.pop("cudnn")))
        for name, ours in grads.items():  # ‖ours − cuDNN‖ / ‖cuDNN‖ of dQ, dK, dV
            key = "grad_rel_diff" + ("" if name == "pallas_flash" else f"_{name}")
            details[key] = [
                float(np.linalg.norm(np.float32(g) - r) / np.linalg.norm(r))
                for g, r in zip(ours, ref, strict=True)
            ]
    return points, details


def kernel_breakdown(fn, args, *, iterations: int = 5) -> list[tuple[str, float]] | None:
    """Median CUPTI duration (s) of each kernel of one call, in launch order, as
    ``(name, seconds)``: which of the backward's kernels (preprocessing, dK/dV, dQ)
    moved. None where CUPTI is unavailable (``kernel_bench.timing.kernel_timings``)."""
    import statistics

    from kernel_bench.timing import kernel_timings

    calls = kernel_timings(fn, args, iterations=iterations)
    if calls is None:
        return None
    return [
        (name, statistics.median(call[k][1] for call in calls))
        for k, (name, _) in enumerate(calls[0])
    ]


def compile_for_ptxas(ds) -> int:
    """Run the backward once per head dim and launch (default, flipped pipeline), with a
    marker line before each, for ptxas's report under ``MOSAIC_GPU_DUMP_PTXAS=1``."""
    import jax
    import jax.numpy as jnp

    from pallas_kernels import flash_mosaic_backward as m

    for d in ds:
        default = m.heuristic_config(d)
        for config in (default, _flip_pipeline(default)):
            print(f"=== ptxas: d={d} {_variant_name(config)} {config}", flush=True)
            q = jax.random.normal(jax.random.key(0), (1, 256, 2, d), jnp.bfloat16)
            lse = jnp.zeros((1, 2, 256), jnp.float32)
            grads = m.mosaic_attention_backward(
                q, q, q, q, lse, q, causal=False, sm_scale=d**-0.5, config=config
            )
            jax.block_until_ready(grads)
            print(f"=== done: d={d} {_variant_name(config)}", flush=True)
    return 0


def _launch_of(config) -> dict:
    """A ``flash_mosaic_backward.Config`` as the schema's ``backward_config``."""
    from pallas_kernels import flash_mosaic_backward as m

    two_pass = config.dq == "two_pass"
    return {
        "block_q": config.block_q,
        "block_k": m.ROWS if config.split else m.CTA_ROWS,
        "dq_block_q": m.CTA_ROWS if two_pass else None,
        "dq_block_k": config.dq_block_k if two_pass else None,
        "num_warps": 4 * m.CONSUMERS,
        "num_stages": config.num_stages,
        "dq": config.dq,
        "dq_num_stages": config.dq_num_stages if two_pass else None,
    }


def _column(p) -> str:
    """A point's column: its phase, and for our backward its launch (the variant's name
    where the point has one, else how it summed dQ)."""
    launch = p.get("backward_config") or {}
    ours = p["implementation"] == "pallas_flash" and launch.get("dq")
    return f"{p['phase']}[{p.get('variant') or launch['dq']}]" if ours else p["phase"]


def ratios(points) -> dict[str, list[tuple[dict, float]]]:
    """Per column (``_column``), (our point, cuDNN's time over ours) for every shape both
    measured."""
    cells: dict = {}
    for p in points:
        if p["status"] == "ok":
            key = tuple(p[k] for k in ("n", "kv_len", "d", "h", "h_kv", "batch", "dtype", "causal"))
            cells.setdefault(key, {})[(p["implementation"], _column(p))] = p
    out: dict = {}
    for row in cells.values():
        for (impl, column), p in row.items():
            cud = row.get(("cudnn", p["phase"]))
            if impl == "pallas_flash" and cud:
                out.setdefault(column, []).append((p, cud["median_s"] / p["median_s"]))
    return out


def table(points) -> str:
    """Markdown: ours/cuDNN speed per shape and column (ours TFLOP/s beside the
    backward's), and the medians."""
    import statistics

    found = ratios(points)
    columns = sorted(
        found, key=lambda c: (("forward", "backward", "train").index(c.split("[")[0]), c)
    )
    by: dict = {}
    for column, rows in found.items():
        for p, r in rows:
            key = (p["d"], p["causal"], p["n"], p["h"], p["batch"])
            by.setdefault(key, {})[column] = (r, p["tflops"])
    lines = [
        "| d | causal | n | h | batch | " + " | ".join(columns) + " |",
        "|---|---|---|---|---|" + "---|" * len(columns),
    ]
    for key in sorted(by):
        row = by[key]
        cells = []
        for column in columns:
            r, t = row.get(column, (None, None))
            tf = f" ({t:.0f})" if column.startswith("backward") and t else ""
            cells.append("-" if r is None else f"{r:.2f}{tf}")
        d, causal, n, h, b = key
        lines.append(
            f"| {d} | {'yes' if causal else 'no'} | {n} | {h} | {b} | " + " | ".join(cells) + " |"
        )
    for column in columns:
        r = [x for _, x in found[column]]
        lines.append(
            f"\n{column}: ours/cuDNN over {len(r)} shapes: median {statistics.median(r):.2f}, "
            f"min {min(r):.2f}, max {max(r):.2f}"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--table", type=Path, help="print the ratio table of a file and exit")
    ap.add_argument("--ns", default=",".join(map(str, NS)), help="comma-separated n values")
    ap.add_argument("--d", default="128,64", help="comma-separated head dims")
    ap.add_argument("--h", type=int, help="query (= K/V) heads at every d (default 2048 / d)")
    ap.add_argument("--causal", choices=("no", "yes", "both"), default="both")
    ap.add_argument("--shapes", help="BxNxHxHKVxD[xc],... instead of the anchor shapes")
    ap.add_argument("--variants", default="", help=f"comma-separated, of {sorted(VARIANTS)}")
    ap.add_argument("--first-variants", default="", help="more variants, on the first shape only")
    ap.add_argument("--phases", default="forward,backward,train")
    ap.add_argument("--point-budget-s", type=float, default=0.1)
    ap.add_argument("--budget-s", type=float, default=200.0, help="no shape starts after this")
    ap.add_argument("--ptxas", help="comma-separated head dims: compile, print markers, exit")
    args = ap.parse_args(argv)
    import json

    if args.ptxas:
        return compile_for_ptxas([int(x) for x in args.ptxas.split(",")])

    if args.table:
        runs = json.loads(args.table.read_text())["runs"]
        pts = [p for r in runs if r["run_id"].startswith("mosaic-backward") for p in r["points"]]
        print(table(pts), end="")
        return 0
    if not args.out:
        raise SystemExit("--out FILE is required unless --table is given")
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    from kernel_bench.bench import RunWriter, new_run

    deadline = time.monotonic() + args.budget_s
    causals = {"no": (False,), "yes": (True,), "both": (False, True)}[args.causal]
    shapes = (
        parse_shapes(args.shapes)
        if args.shapes
        else anchor_shapes(
            tuple(int(x) for x in args.ns.split(",")),
            tuple(int(x) for x in args.d.split(",")),
            causals,
            args.h,
        )
    )
    variants = [v for v in args.variants.split(",") if v]
    first = [v for v in args.first_variants.split(",") if v]
    for name in variants + first:
        if name not in VARIANTS:
            raise SystemExit(f"--variants: {name!r} is not one of {sorted(VARIANTS)}")
    writer = RunWriter(args.out, new_run("mosaic-backward"))
    for i, shape in enumerate(shapes):
        if time.monotonic() > deadline:
            print(f"budget reached: {len(shapes) - i} shapes not timed", flush=True)
            break
        t0 = time.monotonic()
        points, detail = time_shape(
            shape,
            budget_s=args.point_budget_s,
            variants=variants + (first if i == 0 else []),
            phases=tuple(args.phases.split(",")),
            emit=writer.add,
        )
        cudnn = {p["phase"]: p for p in points if p["implementation"] == "cudnn"}
        line = []
        for ours in (p for p in points if p["implementation"] == "pallas_flash"):
            cud = cudnn[ours["phase"]]
            ms = ours["median_s"] and f" ({ours['median_s'] * 1e3:.3f} ms)"
            if ours["median_s"] and cud["median_s"]:
                line.append(f"{_column(ours)} {cud['median_s'] / ours['median_s']:.2f}{ms}")
            else:
                line.append(f"{_column(ours)} failed: {ours['error'] or cud['error']}"[:300])
        print(
            f"[{i + 1}/{len(shapes)}] {shape} {time.monotonic() - t0:.0f}s: {line} "
            f"{ {k: v for k, v in detail.items() if k != 'shape'} }",
            flush=True,
        )
    print(table(writer.run["points"]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
