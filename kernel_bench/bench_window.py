"""Sliding-window attention: our kernels against cuDNN's ``local_window_size``, with
perfmodel's predictions committed before the run (issue 24, item 4).

    python -m kernel_bench.bench_window predict --out PRED.json          # CPU, perfmodel
    git add PRED.json && git commit                                       # the evidence
    PYTHONPATH=. python -m kernel_bench.bench_window measure \\
        --predictions PRED.json --out MEAS.json --budget-s 240            # GPU, jax only
    python -m kernel_bench.bench_window report --predictions PRED.json --measured MEAS.json

**The draw** (``draw``, ``numpy.random.default_rng(seed)``, before anything is timed):
``count`` self-attention shapes, three in four causal with window ``(W, 0)``, the rest
two-sided ``(W, W)``; W log-uniform in [128, 8192]; n log-uniform in [4096, 131072]
(any integer; the first shape n = 131072) and at least 2 W; GQA group from {1, 2, 4, 8}
over 1, 2, 4 or 8 K/V heads; head dim 64 or 128; fp16 or bf16; batch 1-8 with at most
128K query tokens a call; batch, then heads, halved until the visible scores' FLOPs are
at most 1.5e13 (a call takes tens of milliseconds).

**predict** writes, per shape, ``perfmodel.predict(..., window=...)``'s forward time for
our forward's family (``pallas-mosaic``: ``backend="auto"`` runs it on Hopper) and for
cuDNN, and its training step (a refusal, should the model give one, is recorded). It also
writes the key tiles our kernels visit under the window (``_common.tile_range``, the rule
the kernels loop by) beside the dense causal count, for the kernel family data.

**measure** (GPU; imports no pydantic, no perfmodel model code): per shape, in one
process, ``flash_attention(window=...)`` and ``jax.nn.dot_product_attention(...,
local_window_size=..., implementation="cudnn")``, each as a forward and as a training
step (``jax.grad`` of ``sum(O * dO)``); device time by CUPTI (``kernel_bench.timing``).
cuDNN refuses a right window without the causal mask (jax: "cuDNN doesn't support right
window"); those points keep that error. ``tflops`` is over the FLOPs of the visible
scores (4 d per visible query-key pair, times 3.5 for a training step), not the dense
nominal count. Each point carries its ``window`` (``perfmodel.validation.measured.Point``
has the field), so ``perfmodel validate FILE`` predicts it under that window; the files
live under ``specs/measurements/details/``, outside the default validation set.

**report**: the model's signed median and median absolute error (predicted / measured
- 1) per implementation, and ours/cuDNN speed per phase.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

SEED = 24
COUNT = 16
WINDOW_RANGE = (128, 8192)
N_RANGE = (4096, 131072)
MAX_TOKENS = 131072
FLOPS_CAP = 1.5e13
#: a training step's FLOPs over its forward's (forward 4, backward 10 n·m·d products)
TRAIN_FLOPS_FACTOR = 3.5
IMPLS = ("pallas_flash", "cudnn")
PHASES = ("forward", "train")
FAMILY = {"pallas_flash": "pallas-mosaic", "cudnn": "cudnn"}


def _log_uniform(rng, lo: int, hi: int) -> int:
    return int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))


def bounds(shape: dict) -> tuple[int, int]:
    """``(left, right)`` of the shape's window."""
    w = shape["window"]
    return (w, 0) if shape["causal"] else (w, w)


def visible_pairs(n: int, left: int, right: int) -> int:
    """Query-key pairs inside the window, self-attention of length n (exact)."""
    import numpy as np

    q = np.arange(n, dtype=np.int64)
    return int((np.minimum(q + right, n - 1) - np.maximum(q - left, 0) + 1).sum())


def forward_flops(shape: dict) -> float:
    """4 d per visible pair, times batch and heads."""
    return (
        4.0 * shape["d"] * shape["batch"] * shape["h"] * visible_pairs(shape["n"], *bounds(shape))
    )


def draw(seed: int = SEED, count: int = COUNT) -> list[dict]:
    """``count`` shapes (module docstring)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    kinds = np.array([True] * (count - count // 4) + [False] * (count // 4))
    rng.shuffle(kinds)
    shapes = []
    for i in range(count):
        w = _log_uniform(rng, *WINDOW_RANGE)
        n = N_RANGE[1] if i == 0 else max(_log_uniform(rng, *N_RANGE), 2 * w)
        h_kv = int(rng.choice([1, 2, 4, 8]))
        h = h_kv * int(rng.choice([1, 2, 4, 8]))
        d = int(rng.choice([64, 128]))
        dtype = "float16" if rng.uniform() < 0.5 else "bfloat16"
        batch = int(min(rng.integers(1, 9), max(1, MAX_TOKENS // n)))
        s = dict(n=n, kv_len=n, d=d, h=h, h_kv=h_kv, batch=batch, dtype=dtype)
        s.update(causal=bool(kinds[i]), window=w)
        while forward_flops(s) > FLOPS_CAP and (s["batch"] > 1 or s["h"] > s["h"] // s["h_kv"]):
            if s["batch"] > 1:
                s["batch"] //= 2
            else:  # halve the K/V heads, keeping the group
                s["h"], s["h_kv"] = s["h"] // 2, max(1, s["h_kv"] // 2)
        shapes.append(s)
    return shapes


def launch(shape: dict, options: dict | None = None):
    """Our forward's ``flash_mosaic.Config`` for the shape: its default under the window
    (``heuristic_config``), with ``options`` (a variant's) over it."""
    import dataclasses

    from pallas_kernels import flash_mosaic

    config = flash_mosaic.heuristic_config(shape["d"], shape["causal"], bounds(shape))
    return dataclasses.replace(config, **(options or {}))


def other_tile(shape: dict) -> dict:
    """The key tile our forward does not take for the shape, as ``flash_attention``
    options: the head dim's ``TILES`` tile where the window took the narrow one
    (``flash_mosaic.SMALL_WINDOW_TILE``), else the narrow one (the ``--other-tile``
    variant: both tiles of every shape in one process)."""
    from pallas_kernels import flash_mosaic

    plain = flash_mosaic.heuristic_config(shape["d"], shape["causal"])
    chosen = launch(shape)
    if chosen.block_k != plain.block_k:
        return {"block_k": plain.block_k, "num_stages": plain.num_stages}
    _, _, block_k, stages = flash_mosaic.SMALL_WINDOW_TILE
    return {"block_k": block_k, "num_stages": stages}


def launched_family(shape: dict, options: dict | None = None):
    """perfmodel's pallas-mosaic family with its tiles as our forward launches the shape
    (``launch``: the family file states the head dim's tile, not the window's)."""
    from perfmodel.catalog.kernels import load_kernel

    fam = load_kernel("pallas-mosaic")
    config = launch(shape, options)
    tiles = tuple(
        t.model_copy(update={"block_k": config.block_k, "kv_stages": config.num_stages})
        for t in fam.tiles
    )
    return fam.model_copy(update={"tiles": tiles})


def tiles_visited(shape: dict) -> dict:
    """Key tiles our Mosaic forward visits per (batch, query head) under the window: its
    64-row consumer blocks, the tile of its default launch (``heuristic_config``), the
    ranges of ``_common.tile_range``; and the dense causal count at the same tiles."""
    import numpy as np

    from pallas_kernels import flash_mosaic
    from pallas_kernels._common import tile_range

    n, bk = shape["n"], launch(shape).block_k
    rows = flash_mosaic.ROWS_PER_CONSUMER
    left, right = bounds(shape)

    def count(lft, rgt):
        first = np.arange(0, n, rows, dtype=np.int32)  # every consumer block at once
        lo, lo_full, hi_full, hi = (
            np.asarray(x)
            for x in tile_range(first, rows=rows, tile=bk, length=n, left=lft, right=rgt, queries=n)
        )
        return int((hi - lo).sum()), int(((hi - lo) - (hi_full - lo_full)).sum())

    visited, masked = count(left, right)
    dense, _ = count(None, 0)
    return dict(block_q=rows, block_k=bk, visited=visited, masked=masked, dense_causal=dense)


# ---------------------------------------------------------------- predictions (CPU)


def predictions(seed: int, count: int) -> dict:
    from kernel_bench.bench import git_commit
    from perfmodel import __version__, predict
    from perfmodel.errors import PerfmodelError

    shapes = draw(seed, count)
    rows = []
    for s in shapes:
        dtype = {"float16": "fp16", "bfloat16": "bf16"}[s["dtype"]]
        kw = {k: s[k] for k in ("d", "h", "h_kv", "batch", "causal")}
        row = {"shape": s, "tiles": tiles_visited(s), "visible_flops": forward_flops(s)}
        families = {"pallas_flash": launched_family(s), "cudnn": FAMILY["cudnn"]}
        families["pallas_flash_other_tile"] = launched_family(s, other_tile(s))
        row["other_tile"] = other_tile(s)
        for impl, family in families.items():
            for mode in ("forward", "train"):
                try:
                    p = predict(
                        s["n"], "h200", **kw, dtype=dtype, window=bounds(s),
                        kernel=family, mode=mode,
                    ).flash  # fmt: skip
                    row[f"{impl}_{mode}"] = {
                        "time_s": float(p.time_s),
                        "t_lower_s": float(p.t_lower_s),
                    }
                except PerfmodelError as err:
                    row[f"{impl}_{mode}"] = {"refused": str(err)}
        rows.append(row)
    return {
        "what": "perfmodel predictions (default deratings, hw h200) for the sliding-window "
        "draw of kernel_bench/bench_window.py, committed before the GPU run; pallas_flash at "
        "the tile our forward launches under the window (flash_mosaic.heuristic_config), "
        "pallas_flash_other_tile at the other one (bench_window.other_tile)",
        "seed": seed,
        "count": count,
        "perfmodel_version": __version__,
        "git_commit": git_commit(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "rows": rows,
    }


#: the copy rate of jnp.pad / slice kernels measured in run window-20261202T020510Z
#: (docs/perf-notes.md, "Sliding windows in our kernels")
COPY_RATE_BPS = 4.18e12


def nopad_prediction(meas_path: Path) -> str:
    """Per shape of a measured window run: our forward without the sequence-padding copies
    (``pad_seq=False``) as perfmodel gives it (the measured default less the share of its
    ``pad_copies`` effect in its forward time) and as the copies' bytes give it (the
    measured default less (n + n_pad) rows of Q, K, V and O at ``COPY_RATE_BPS``), and
    ours/cuDNN of each; then the medians. The model's family is pallas-mosaic as that run
    launched it: sequences padded per consumer (``pad_seq=True`` was the default then)."""
    from perfmodel import predict
    from perfmodel.catalog.kernels import load_kernel

    padded = load_kernel("pallas-mosaic").model_copy(update={"sequence_padding": "per_consumer"})

    run = json.loads(meas_path.read_text())["runs"][-1]
    cells = {}
    for p in run["points"]:
        key = (p["n"], tuple(p["window"]), p["d"], p["h"], p["h_kv"], p["batch"], p["dtype"])
        cells.setdefault(key, {})[(p["implementation"], p["phase"])] = p
    lines = [
        "| n | window | d | h:h_kv | batch | ours ms | cuDNN ms | model nopad ms | bytes nopad ms"
        " | ours/cuDNN | model nopad/cuDNN | bytes nopad/cuDNN |",
        "|" + "---|" * 12,
    ]
    ratios: dict[str, list[float]] = {"now": [], "model": [], "bytes": []}
    for (n, window, d, h, h_kv, b, dtype), cell in cells.items():
        ours, cud = cell.get(("pallas_flash", "forward")), cell.get(("cudnn", "forward"))
        if not ours or not ours["median_s"]:
            continue
        kw = dict(d=d, h=h, h_kv=h_kv, batch=b, causal=window[1] == 0, window=window)
        half = {"float16": "fp16", "bfloat16": "bf16"}[dtype]
        flash = predict(n, "h200", dtype=half, kernel=padded, **kw).flash
        # the model's own time is ~38 % fast here: its share of the copies, applied to ours
        share = flash.effects_s.get("pad_copies", 0.0) / flash.time_s
        model = ours["median_s"] * (1 - share)
        block_k = 128 if d <= 128 else 64
        size = 2 * b * d
        copied = sum(
            (n + -(-n // tile) * tile) * heads * size
            for tile, heads in ((64, h), (block_k, h_kv), (block_k, h_kv), (64, h))
            if n % tile
        )
        est = ours["median_s"] - copied / COPY_RATE_BPS
        ref = cud["median_s"] if cud and cud["median_s"] else None
        cols = [f"{x:.2f}" if ref else "-" for x in (ref / ours["median_s"] if ref else 0,
                ref / model if ref else 0, ref / est if ref else 0)]  # fmt: skip
        if ref:
            for k, t in (("now", ours["median_s"]), ("model", model), ("bytes", est)):
                ratios[k].append(ref / t)
        lines.append(
            f"| {n} | {tuple(window)} | {d} | {h}:{h_kv} | {b} | {ours['median_s'] * 1e3:.3f} "
            f"| {ref * 1e3 if ref else float('nan'):.3f} | {model * 1e3:.3f} | {est * 1e3:.3f} | "
            + " | ".join(cols)
            + " |"
        )
    for k, r in ratios.items():
        if r:
            lines.append(f"ours/cuDNN forward, {k}: median {statistics.median(r):.2f}, "
                         f"min {min(r):.2f}, max {max(r):.2f} over {len(r)} shapes")  # fmt: skip
    return "\n".join(lines) + "\n"


def tile_prediction(pred_path: Path, meas_path: Path) -> str:
    """Per shape: the tile our forward now launches and the model's time there over its
    time at the other tile (``predict`` rows ``pallas_flash`` and ``pallas_flash_other_
    tile``), applied to a measured run at the other tile (``meas_path``: its ours and
    cuDNN); then the medians of ours/cuDNN measured and so predicted."""
    rows = json.loads(pred_path.read_text())["rows"]
    run = json.loads(meas_path.read_text())["runs"][-1]
    cells: dict = {}
    for p in run["points"]:
        cells.setdefault((p["n"], p["d"], p["h"], p["batch"]), {})[p["implementation"]] = p
    lines = [
        "| n | window | d | h:h_kv | block_k | model ms | model other tile ms | ratio | "
        "measured ms (other tile) | cuDNN ms | ours/cuDNN then | predicted ours/cuDNN |",
        "|" + "---|" * 12,
    ]
    then, now = [], []
    for r in rows:
        s = r["shape"]
        cell = cells.get((s["n"], s["d"], s["h"], s["batch"]), {})
        new, other = (
            r[k]["time_s"] for k in ("pallas_flash_forward", "pallas_flash_other_tile_forward")
        )
        ours, cud = (cell.get(i, {}).get("median_s") for i in IMPLS)
        if r["tiles"]["block_k"] == r["other_tile"]["block_k"] or not ours:
            continue
        # the measured run launched the head dim's tile: the other one where the window
        # now takes the narrow tile, this one elsewhere
        changed = r["other_tile"]["block_k"] > r["tiles"]["block_k"]
        ratio = new / other if changed else 1.0
        fmt = lambda x: f"{x:.2f}" if x else "-"  # noqa: E731
        if cud:
            then.append(cud / ours)
            now.append(cud / (ours * ratio))
        lines.append(
            f"| {s['n']} | {bounds(s)} | {s['d']} | {s['h']}:{s['h_kv']} | "
            f"{r['tiles']['block_k']} | {new * 1e3:.3f} | {other * 1e3:.3f} | {new / other:.2f} | "
            f"{ours * 1e3:.3f} | {cud * 1e3 if cud else float('nan'):.3f} | "
            f"{fmt(cud and cud / ours)} | {fmt(cud and cud / (ours * ratio))} |"
        )
    for name, r in (("measured", then), ("predicted", now)):
        if r:
            lines.append(f"ours/cuDNN forward, {name}: median {statistics.median(r):.2f}, "
                         f"min {min(r):.2f}, max {max(r):.2f} over {len(r)} shapes")  # fmt: skip
    return "\n".join(lines) + "\n"


#: SMs of the H200 (the persistent grid's CTAs)
H200_SMS = 132


def units_per_cta(shape: dict, options: dict | None = None) -> float:
    """Work units a persistent CTA of our forward runs at the shape (``flash_mosaic._plan``
    on an H200's SMs), on average."""
    import jax
    import jax.numpy as jnp

    from pallas_kernels import flash_mosaic

    dt = getattr(jnp, shape["dtype"])
    q = jax.ShapeDtypeStruct((shape["batch"], shape["n"], shape["h"], shape["d"]), dt)
    k = jax.ShapeDtypeStruct((shape["batch"], shape["n"], shape["h_kv"], shape["d"]), dt)
    plan = flash_mosaic._plan(
        q, k, causal=shape["causal"], sm_scale=1.0, return_lse=False,
        config=launch(shape, options), window=bounds(shape),
    )  # fmt: skip
    return plan.units / min(plan.units, H200_SMS)


def prefetch_prediction(pred_path: Path, meas_path: Path, per_unit_s: float) -> str:
    """Per shape of a measured run: our forward with the next unit's Q prefetched
    (``Config.prefetch_q``) as perfmodel gives it (the measured default less the share
    of its ``prologue`` effect, one memory latency and one Q tile per wave, that waves
    after a CTA's first no longer wait for) and as a fixed wait per unit gives it
    (``per_unit_s`` for each unit of a CTA after its first); ours/cuDNN of each."""
    import math

    rows = {r["shape"]["n"]: r for r in json.loads(pred_path.read_text())["rows"]}
    run = json.loads(meas_path.read_text())["runs"][-1]
    cells: dict = {}
    for p in run["points"]:
        if p["phase"] == "forward" and p["status"] == "ok":
            cells.setdefault(p["n"], {})[p["implementation"]] = p["median_s"]
    from perfmodel import predict

    lines = [
        "| n | window | d | h:h_kv | batch | units a CTA | ours ms | cuDNN ms | prologue share "
        "| model ms | wait ms | ours/cuDNN | model/cuDNN | wait/cuDNN |",
        "|" + "---|" * 14,
    ]
    ratios: dict[str, list[float]] = {"now": [], "model": [], "wait": []}
    for n, cell in cells.items():
        s = rows[n]["shape"]
        ours, cud = cell.get(IMPLS[0]), cell.get("cudnn")
        if not ours:
            continue
        kw = {k: s[k] for k in ("d", "h", "h_kv", "batch", "causal")}
        half = {"float16": "fp16", "bfloat16": "bf16"}[s["dtype"]]
        flash = predict(
            n, "h200", **kw, dtype=half, window=bounds(s), kernel=launched_family(s)
        ).flash
        per_cta = units_per_cta(s)
        waves = math.ceil(per_cta)
        share = flash.effects_s.get("prologue", 0.0) * (1 - 1 / waves) / flash.time_s
        model, wait = ours * (1 - share), ours - (per_cta - 1) * per_unit_s
        if cud:
            for key, t in (("now", ours), ("model", model), ("wait", wait)):
                ratios[key].append(cud / t)
        cols = [f"{cud / t:.2f}" if cud else "-" for t in (ours, model, wait)]
        lines.append(
            f"| {n} | {bounds(s)} | {s['d']} | {s['h']}:{s['h_kv']} | {s['batch']} | "
            f"{per_cta:.1f} | {ours * 1e3:.3f} | {cud * 1e3 if cud else float('nan'):.3f} | "
            f"{share:.0%} | {model * 1e3:.3f} | {wait * 1e3:.3f} | " + " | ".join(cols) + " |"
        )
    for key, r in ratios.items():
        if r:
            lines.append(f"ours/cuDNN forward, {key}: median {statistics.median(r):.2f}, "
                         f"min {min(r):.2f}, max {max(r):.2f} over {len(r)} shapes")  # fmt: skip
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- measurement (GPU)


def _fns(impl: str, shape: dict, options: dict | None = None):
    """(forward ``(q, k, v)``, training step ``(q, k, v, do)``), jitted; ``options`` go to
    ``flash_attention`` (a variant's launch knobs)."""
    import jax
    import jax.numpy as jnp

    causal, window = shape["causal"], bounds(shape)
    if impl == "pallas_flash":
        from pallas_kernels import flash_attention

        def attn(q, k, v):
            return flash_attention(q, k, v, causal=causal, window=window, **(options or {}))
    else:

        def attn(q, k, v):
            return jax.nn.dot_product_attention(
                q, k, v, is_causal=causal, local_window_size=window, implementation="cudnn"
            )

    def loss(q, k, v, do):
        return jnp.sum(attn(q, k, v).astype(jnp.float32) * do)

    return jax.jit(attn), jax.jit(jax.grad(loss, argnums=(0, 1, 2)))


def _compile_all(shapes, variants, phases=PHASES, workers: int = 12):
    """Per shape, [(impl, phase, variant, executable or the exception)] for ``phases``,
    compiled in threads; each of ``variants(shape)`` (name: flash_attention options) adds
    our forward."""
    import jax
    import jax.numpy as jnp

    from kernel_bench.bench import compile_jobs

    def jobs(s):
        dt = getattr(jnp, s["dtype"])
        q = jax.ShapeDtypeStruct((s["batch"], s["n"], s["h"], s["d"]), dt)
        kv = jax.ShapeDtypeStruct((s["batch"], s["n"], s["h_kv"], s["d"]), dt)
        do = jax.ShapeDtypeStruct(q.shape, jnp.float32)
        out = []
        for impl in IMPLS:
            fwd, train = _fns(impl, s)
            calls = {"forward": (fwd, (q, kv, kv)), "train": (train, (q, kv, kv, do))}
            out += [(impl, phase, "", *calls[phase]) for phase in phases]
        for name, options in variants(s).items():
            out.append(
                ("pallas_flash", "forward", name, _fns(IMPLS[0], s, options)[0], (q, kv, kv))
            )
        return out

    return compile_jobs((jobs(s) for s in shapes), workers)


def _rel(a, b) -> float:
    import numpy as np

    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def time_shape(
    shape: dict, compiled, flops: float, *, budget_s: float, variant_options: dict | None = None
):
    """The points of one shape (forward, train, backward = train - forward) and ours vs
    cuDNN relative differences of O and of dQ, dK, dV; ``variant_options``: each
    variant's flash_attention options (its launch, recorded in its point)."""
    import jax
    import jax.numpy as jnp

    from pallas_kernels import flash_mosaic

    variant_options = {"": None, **(variant_options or {})}
    from kernel_bench.bench import empty_point, make_inputs, record_failure, timed_fields
    from kernel_bench.timing import measure_all

    b, n, h, h_kv, d = (shape[k] for k in ("batch", "n", "h", "h_kv", "d"))
    sets = make_inputs(jax.random.key(1), b, n, n, h, h_kv, d, getattr(jnp, shape["dtype"]))
    do = jax.random.normal(jax.random.key(2), (b, n, h, d), jnp.float32)
    left, right = bounds(shape)
    base = {k: v for k, v in shape.items() if k != "window"}
    points, outs, variants = [], {}, []
    for impl, phase, variant, exe in compiled:
        point = {**empty_point(impl, base), "family": FAMILY[impl], "phase": phase}
        point["window"] = [left, right]
        if variant:
            point["variant"] = variant
        if impl == "pallas_flash" and phase == "forward":  # the tile it ran, for validate
            config = launch(shape, variant_options.get(variant))
            rows = flash_mosaic.ROWS_PER_CONSUMER * flash_mosaic.CONSUMERS
            point.update(block_q=rows, block_k=config.block_k, num_stages=config.num_stages)
        args = sets if phase == "forward" else [(*x, do) for x in sets]
        try:
            if isinstance(exe, Exception):
                raise exe
            outs[(impl, phase, variant)] = jax.device_get(exe(*args[0]))
            timed = measure_all(exe, args, budget_s=budget_s)
            f = flops * (TRAIN_FLOPS_FACTOR if phase == "train" else 1.0)
            point.update(timed_fields(timed, flops=f, tokens=b * n))
        except Exception as err:  # noqa: BLE001 - recorded, the run goes on
            record_failure(point, err)
        (variants if variant else points).append(point)
    cells = {(p["implementation"], p["phase"]): p for p in points}
    for impl in IMPLS:
        fwd, train = cells[(impl, "forward")], cells.get((impl, "train"))
        if train and fwd["status"] == train["status"] == "ok":
            t = train["device_time_s"] - fwd["device_time_s"]
            bwd = {**empty_point(impl, base), "family": FAMILY[impl], "phase": "backward"}
            bwd.update(window=[left, right], median_s=t, device_time_s=t, runs=train["runs"])
            bwd.update(device_time_method=train["device_time_method"])
            bwd["tflops"] = flops * (TRAIN_FLOPS_FACTOR - 1) / t / 1e12 if t > 0 else None
            points.append(bwd)
    details = {"shape": shape}
    ref_o = outs.get(("cudnn", "forward", ""))
    for (impl, phase, variant), out in outs.items():
        if ref_o is not None and impl == "pallas_flash" and phase == "forward":
            details["o_rel_diff" + (f"_{variant}" if variant else "")] = _rel(out, ref_o)
    if variants:  # our default forward is their reference where cuDNN runs no such window
        ours_o = outs.get(("pallas_flash", "forward", ""))
        for p in variants:
            out = outs.get(("pallas_flash", "forward", p["variant"]))
            if ours_o is not None and out is not None:
                details[f"o_rel_diff_{p['variant']}_vs_default"] = _rel(out, ours_o)
        details["variants"] = variants
    if ("cudnn", "train", "") in outs and ("pallas_flash", "train", "") in outs:
        ours, ref = outs[("pallas_flash", "train", "")], outs[("cudnn", "train", "")]
        details["grad_rel_diff"] = [_rel(g, r) for g, r in zip(ours, ref, strict=True)]
    del sets, outs
    gc.collect()
    return points, details


def measure(
    pred_path: Path,
    out: Path,
    budget_s: float,
    wait_for: Path | None,
    variants,
    phases=PHASES,
) -> int:
    """Time every shape of the predictions file (``variants(shape)``: name -> options of
    our forward's extra launches); the file is rewritten after each shape."""
    from kernel_bench.bench import RunWriter, new_run
    from pallas_kernels.flash_attention import choose_backend

    deadline = time.monotonic() + budget_s
    rows = json.loads(pred_path.read_text())["rows"]
    shapes = [r["shape"] for r in rows]
    t0 = time.monotonic()
    compiled = _compile_all(shapes, variants, phases)
    print(f"compiled {sum(map(len, compiled))} calls in {time.monotonic() - t0:.0f} s", flush=True)
    if wait_for:  # the GPU tests run while this compiles: none while timing
        while not wait_for.exists():
            time.sleep(1)
    writer = RunWriter(out, new_run("window"))
    writer.run["details"] = []
    for i, (row, jobs) in enumerate(zip(rows, compiled, strict=True)):
        s = row["shape"]
        if time.monotonic() > deadline:
            print(f"budget reached: {len(rows) - i} shapes not timed", flush=True)
            break
        points, detail = time_shape(
            s, jobs, row["visible_flops"], budget_s=0.1, variant_options=variants(s)
        )
        import jax
        import jax.numpy as jnp

        dt = getattr(jnp, s["dtype"])
        q = jax.ShapeDtypeStruct((s["batch"], s["n"], s["h"], s["d"]), dt)
        kv = jax.ShapeDtypeStruct((s["batch"], s["n"], s["h_kv"], s["d"]), dt)
        detail["auto"] = choose_backend(q, kv, kv, causal=s["causal"])
        writer.run["details"].append(detail)
        for p in points:
            writer.add(p)
        cell = {(p["implementation"], p["phase"]): p for p in points}
        for phase in phases:
            ours, cud = cell[("pallas_flash", phase)], cell[("cudnn", phase)]
            t = [p["median_s"] * 1e3 if p["median_s"] else None for p in (ours, cud)]
            ratio = f"{t[1] / t[0]:.2f}" if all(t) else "-"
            errs = [p["error"][:90] for p in (ours, cud) if p["error"]]
            print(f"[{i + 1}/{len(rows)}] {phase:7s} ours {t[0]} ms cuDNN {t[1]} ms ratio {ratio}"
                  f" {s} {errs or ''}", flush=True)  # fmt: skip
        for v in detail.get("variants", ()):
            ours = cell[("pallas_flash", "forward")]
            if v["median_s"] and ours["median_s"]:
                print(f"  variant {v['variant']}: {v['median_s'] * 1e3:.3f} ms, default/variant "
                      f"{ours['median_s'] / v['median_s']:.2f}", flush=True)  # fmt: skip
        shown = {k: v for k, v in detail.items() if k not in ("shape", "variants")}
        print(f"  {shown}", flush=True)
    return 0


# ---------------------------------------------------------------- report (CPU)


def report(pred_path: Path, meas_path: Path) -> str:
    rows = json.loads(pred_path.read_text())["rows"]
    run = json.loads(meas_path.read_text())["runs"][-1]
    key = lambda s: (s["n"], s["d"], s["h"], s["h_kv"], s["batch"], s["dtype"], s["causal"])  # noqa: E731
    pred = {key(r["shape"]): r for r in rows}
    cells: dict = {}
    for p in run["points"]:
        cells.setdefault(key(p), {})[(p["implementation"], p["phase"])] = p
    lines = [
        "| n | window | d | h:h_kv | batch | dtype | tiles visited / dense causal | ours fwd ms"
        " | cuDNN fwd ms | fwd ours/cuDNN | train ours/cuDNN | model error ours | model error "
        "cuDNN |",
        "|" + "---|" * 13,
    ]
    errors: dict = {impl: [] for impl in IMPLS}
    ratio: dict = {"forward": [], "train": [], "backward": []}
    for k, cell in cells.items():
        r = pred[k]
        s, tiles = r["shape"], r["tiles"]

        def ok(impl, phase, cell=cell):
            p = cell.get((impl, phase))
            return p["median_s"] if p and p["status"] == "ok" else None

        model = {}
        for impl in IMPLS:
            t, guess = ok(impl, "forward"), r[f"{impl}_forward"].get("time_s")
            model[impl] = guess / t - 1 if t and guess else None
            if model[impl] is not None:
                errors[impl].append(model[impl])
        for phase in ratio:
            ours, cud = ok("pallas_flash", phase), ok("cudnn", phase)
            if ours and cud and ours > 0 and cud > 0:
                ratio[phase].append(cud / ours)
        fmt = lambda x, f="{:.2f}": "-" if x is None else f.format(x)  # noqa: E731
        o, c = ok("pallas_flash", "forward"), ok("cudnn", "forward")
        to, tc = ok("pallas_flash", "train"), ok("cudnn", "train")
        w = f"({s['window']}, {0 if s['causal'] else s['window']})"
        lines.append(
            f"| {s['n']} | {w} | {s['d']} | {s['h']}:{s['h_kv']} | {s['batch']} | {s['dtype']} "
            f"| {tiles['visited']} / {tiles['dense_causal']} | {fmt(o and o * 1e3, '{:.3f}')} "
            f"| {fmt(c and c * 1e3, '{:.3f}')} | {fmt(c / o if o and c else None)} "
            f"| {fmt(tc / to if to and tc else None)} | {fmt(model['pallas_flash'], '{:+.0%}')} "
            f"| {fmt(model['cudnn'], '{:+.0%}')} |"
        )
    out = ["\n".join(lines), ""]
    out += _variant_lines(pred, run, key)
    for impl, errs in errors.items():
        if errs:
            out.append(
                f"model error, {impl} forward ({len(errs)} shapes): signed median "
                f"{statistics.median(errs):+.1%}, median |error| "
                f"{statistics.median(abs(e) for e in errs):.1%}"
            )
    for phase, rs in ratio.items():
        if rs:
            out.append(
                f"{phase}: ours/cuDNN over {len(rs)} shapes: median {statistics.median(rs):.2f}, "
                f"min {min(rs):.2f}, max {max(rs):.2f}; >= 1.0 on {sum(x >= 1 for x in rs)}"
            )
    return "\n".join(out) + "\n"


def _variant_lines(pred: dict, run: dict, key) -> list[str]:
    """Our default forward against each variant of the run, per shape (measured time over
    the variant's), and, for ``other_tile``, the model's (predictions' ``pallas_flash``
    over ``pallas_flash_other_tile``)."""
    ours = {key(p): p for p in run["points"] if p["implementation"] == IMPLS[0]}
    ours = {k: p for k, p in ours.items() if p["phase"] == "forward" and p["status"] == "ok"}
    lines = []
    for detail in run.get("details", []):
        s = detail["shape"]
        for v in detail.get("variants", []):
            mine = ours.get(key(s))
            if not (mine and v["status"] == "ok" and v["median_s"]):
                continue
            if not lines:
                lines = [
                    "| n | window | d | variant | default block_k | default ms | variant "
                    "block_k | variant ms | default/variant measured | model |",
                    "|" + "---|" * 10,
                ]
            r = pred[key(s)]
            model = "-"
            if v["variant"] == "other_tile" and "pallas_flash_other_tile_forward" in r:
                guess = r["pallas_flash_forward"].get("time_s")
                other = r["pallas_flash_other_tile_forward"].get("time_s")
                model = f"{guess / other:.2f}" if guess and other else "-"
            lines.append(
                f"| {s['n']} | {bounds(s)} | {s['d']} | {v['variant']} | {mine['block_k']} | "
                f"{mine['median_s'] * 1e3:.3f} | {v['block_k']} | {v['median_s'] * 1e3:.3f} | "
                f"{mine['median_s'] / v['median_s']:.2f} | {model} |"
            )
    return lines + [""] if lines else []


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("predict")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--seed", type=int, default=SEED)
    p.add_argument("--count", type=int, default=COUNT)
    m = sub.add_parser("measure")
    m.add_argument("--predictions", type=Path, required=True)
    m.add_argument("--out", type=Path, required=True)
    m.add_argument("--budget-s", type=float, default=240.0, help="no shape starts after this")
    m.add_argument("--wait-for", type=Path, help="after compiling, wait until this file exists")
    m.add_argument(
        "--variant",
        action="append",
        default=[],
        help="NAME=JSON: our forward again with these flash_attention options, e.g. "
        "nopad='{\"pad_seq\": false}'",
    )
    m.add_argument("--forward-only", action="store_true", help="no training steps")
    m.add_argument(
        "--other-tile",
        action="store_true",
        help="our forward again at the key tile its default does not take (other_tile)",
    )
    e = sub.add_parser("nopad-predict", help="ours without the padding copies, predicted")
    e.add_argument("--measured", type=Path, required=True)
    t = sub.add_parser("tile-predict", help="ours at the window's tile, predicted")
    t.add_argument("--predictions", type=Path, required=True)
    t.add_argument("--measured", type=Path, required=True)
    f = sub.add_parser("prefetch-predict", help="ours with the next unit's Q prefetched")
    f.add_argument("--predictions", type=Path, required=True)
    f.add_argument("--measured", type=Path, required=True)
    f.add_argument("--per-unit-us", type=float, default=1.25, help="the wait per unit")
    r = sub.add_parser("report")
    r.add_argument("--predictions", type=Path, required=True)
    r.add_argument("--measured", type=Path, required=True)
    args = ap.parse_args(argv)
    if args.cmd == "predict":
        from perfmodel.atomic import write_json

        write_json(args.out, predictions(args.seed, args.count))
        return 0
    if args.cmd == "measure":
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        from kernel_bench.bench import parse_variants

        phases = ("forward",) if args.forward_only else PHASES
        given = parse_variants(args.variant)

        def variants(shape):
            return {**given, **({"other_tile": other_tile(shape)} if args.other_tile else {})}

        return measure(args.predictions, args.out, args.budget_s, args.wait_for, variants, phases)
    if args.cmd == "tile-predict":
        print(tile_prediction(args.predictions, args.measured), end="")
        return 0
    if args.cmd == "prefetch-predict":
        per_unit = args.per_unit_us * 1e-6
        print(prefetch_prediction(args.predictions, args.measured, per_unit), end="")
        return 0
    if args.cmd == "nopad-predict":
        print(nopad_prediction(args.measured), end="")
        return 0
    print(report(args.predictions, args.measured), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
