"""Whole-model benchmark on a GPU: a Llama-shaped network, prefill and decode (a scaling
study: fixed model, batch, dtype and device; the sequence length swept).

    python -m kernel_bench.bench_llama --model llama-3.1-8b --out DIR/llama.json \
        --budget-s 75 --git-commit SHA

Full depth, random bf16 weights (``pallas_kernels.llama``), layers run in chunks of
``--chunk`` (one compilation per shape). Points run in a fixed priority order until
``--budget-s`` seconds have passed since start; the JSON is rewritten (atomically) after
every point, so a run cut short still leaves its data.

* **prefill** (``attention`` = naive, flash, cudnn; batch ``--batch``; n tokens): the
  time to first token (embedding, every layer, the LM head on the last token; the K/V
  of every layer are outputs, as a cache would be written);
* **decode** (``kv`` = contiguous, paged; batch b; a cache of m tokens): one step, the
  time per output token. Paged: 64-token pages, a shuffled block table over the same
  bytes, ``splits`` by the kernel's own rule (``paged_decode.default_splits``).

Per point, two timings, labelled: ``device_s``: forwards queued back to back (``calls``
per synchronised sample), median over samples; ``latency_s``: one forward then block,
median (host dispatch and synchronisation included). Memory: bytes in use before the
call (weights, cache, inputs) plus the largest chunk's temporaries and outputs from
XLA's buffer assignment (``memory_analysis``); and the process's peak so far.
"""

from __future__ import annotations

import os

# Before jax loads: cuBLAS GEMMs chosen by its heuristics (no autotuning sweep at compile
# time, no Triton GEMMs), and room for the naive scratch.
os.environ.setdefault("XLA_FLAGS", "--xla_gpu_autotune_level=0 --xla_gpu_enable_triton_gemm=false")
os.environ.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.95")

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import datetime as dt  # noqa: E402
import gc  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from kernel_bench.device import device_spec  # noqa: E402
from pallas_kernels.llama import (  # noqa: E402
    LlamaConfig,
    LlamaModel,
    decode_chunk,
    embed,
    head,
    prefill_chunk,
)
from pallas_kernels.paged_decode import default_splits  # noqa: E402
from perfmodel.atomic import write_json  # noqa: E402

PAGE = 64
#: SMs of the device the run is sized for (the H200's spec file), for the split rule.
SM_COUNT = device_spec()["sm_count"]
#: (kind, attention or kv, n or (b, m)), in the order they run: the n = 4096
#: comparison (the size of the README's worked numbers) first, then decode, then the
#: rest of the sweep.
PLAN = (
    ("prefill", "flash", 4096), ("prefill", "naive", 4096), ("prefill", "cudnn", 4096),
    ("decode", "contiguous", (16, 4096)), ("decode", "paged", (16, 4096)),
    ("prefill", "flash", 512), ("prefill", "naive", 512), ("prefill", "cudnn", 512),
    ("decode", "contiguous", (1, 8192)), ("decode", "paged", (1, 8192)),
    ("prefill", "flash", 16384), ("prefill", "naive", 16384), ("prefill", "cudnn", 16384),
    ("decode", "contiguous", (64, 2048)), ("decode", "paged", (64, 2048)),
    ("prefill", "flash", 32768), ("prefill", "cudnn", 32768),
    ("decode", "contiguous", (1, 32768)), ("decode", "paged", (1, 32768)),
    ("prefill", "flash", 1024), ("prefill", "naive", 1024),
    ("prefill", "flash", 8192), ("prefill", "naive", 8192), ("prefill", "cudnn", 8192),
    ("decode", "contiguous", (64, 8192)), ("decode", "paged", (64, 8192)),
)  # fmt: skip


def _memory() -> dict:
    stats = jax.devices()[0].memory_stats() or {}
    return {k: stats.get(k) for k in ("bytes_in_use", "peak_bytes_in_use", "bytes_limit")}


def _analysis(compiled) -> dict:
    m = compiled.memory_analysis()
    return {
        k: int(getattr(m, k, 0) or 0)
        for k in (
            "temp_size_in_bytes",
            "argument_size_in_bytes",
            "output_size_in_bytes",
            "alias_size_in_bytes",
        )
    }


def time_forward(forward, *, target_s: float = 1.0) -> dict:
    """Warm up, then single-call latency and queued device time of ``forward()``."""
    t0 = time.perf_counter()
    jax.block_until_ready(forward())
    warm = time.perf_counter() - t0
    lat = []
    for _ in range(3 if warm < 0.1 else 1):
        t0 = time.perf_counter()
        jax.block_until_ready(forward())
        lat.append(time.perf_counter() - t0)
    calls = max(1, min(20, int(0.25 / max(warm, 1e-4))))
    samples = max(2, min(7, int(target_s / (calls * max(min(lat), 1e-4)))))
    dev = []
    for _ in range(samples):
        t0 = time.perf_counter()
        outs = [forward() for _ in range(calls)]
        jax.block_until_ready(outs)
        dev.append((time.perf_counter() - t0) / calls)
        del outs
    return {
        "device_s": statistics.median(dev),
        "device_samples_s": dev,
        "calls_per_sample": calls,
        "latency_s": statistics.median(lat),
        "latency_samples_s": lat,
        "warm_s": warm,
    }


def prefill_point(model: LlamaModel, attention: str, n: int, batch: int) -> dict:
    cfg = model.cfg
    tokens = jax.random.randint(jax.random.key(n), (batch, n), 0, cfg.vocab, jnp.int32)
    positions = jnp.broadcast_to(jnp.arange(n, dtype=jnp.int32), (batch, n))
    x0 = embed(model.ends["embed"], tokens)
    t0 = time.perf_counter()
    chunk = prefill_chunk.lower(
        model.chunks[0], x0, positions, cfg=cfg, attention=attention
    ).compile()
    compile_s = time.perf_counter() - t0
    before = _memory()

    def forward():
        x = embed(model.ends["embed"], tokens)
        cache = []
        for layers in model.chunks:
            x, ks, vs = chunk(layers, x, positions)
            cache.append((ks, vs))
        return head(model.ends, x, cfg=cfg), cache

    out = time_forward(forward)
    return {
        "compile_s": compile_s,
        "memory_before": before,
        "memory_after": _memory(),
        "chunk_memory": _analysis(chunk),
        **out,
    }


def make_cache(model: LlamaModel, batch: int, m: int) -> list:
    """Random K/V pages for every layer: ``caches[chunk][layer] = (k_pages, v_pages)``."""
    cfg = model.cfg
    shape = (batch * (m // PAGE), PAGE, cfg.kv_heads, cfg.head_dim)
    fill = jax.jit(lambda key: jax.random.normal(key, (2, *shape), jnp.bfloat16))
    key = jax.random.key(batch * 100_003 + m)
    caches, i = [], 0
    for layers in model.chunks:
        chunk = []
        for _ in layers:
            kv = fill(jax.random.fold_in(key, i))
            chunk.append((kv[0], kv[1]))
            i += 1
        caches.append(chunk)
    jax.block_until_ready(caches)
    return caches


def decode_point(model: LlamaModel, kv: str, batch: int, m: int, caches) -> dict:
    cfg = model.cfg
    pages = m // PAGE
    rng = np.random.default_rng(m + batch)
    table = jnp.asarray(rng.permutation(batch * pages).reshape(batch, pages).astype(np.int32))
    lengths = jnp.full((batch,), m, jnp.int32)
    tokens = jax.random.randint(jax.random.key(m), (batch,), 0, cfg.vocab, jnp.int32)
    splits = default_splits(batch, cfg.kv_heads, pages, SM_COUNT) if kv == "paged" else 1
    x0 = embed(model.ends["embed"], tokens[:, None])
    positions = (lengths - 1)[:, None]
    t0 = time.perf_counter()
    chunk = decode_chunk.lower(
        model.chunks[0], caches[0], x0, positions, table, lengths, cfg=cfg, kv=kv, splits=splits
    ).compile()
    compile_s = time.perf_counter() - t0
    before = _memory()

    def forward():
        x = embed(model.ends["embed"], tokens[:, None])
        for layers, cache in zip(model.chunks, caches, strict=True):
            x = chunk(layers, cache, x, positions, table, lengths)
        return head(model.ends, x, cfg=cfg)

    out = time_forward(forward)
    return {
        "compile_s": compile_s,
        "splits": splits,
        "page": PAGE,
        "memory_before": before,
        "memory_after": _memory(),
        "chunk_memory": _analysis(chunk),
        **out,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="llama-3.1-8b", help="file name under specs/models")
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-s", type=float, default=75.0)
    ap.add_argument("--chunk", type=int, default=2, help="layers per compiled chunk")
    ap.add_argument("--batch", type=int, default=1, help="prefill batch")
    ap.add_argument("--git-commit", default=os.environ.get("PERFMODEL_GIT_COMMIT", "unknown"))
    ap.add_argument("--only", default=None, help="comma list of plan indices (for a rerun)")
    ap.add_argument("--smoke", action="store_true", help="a tiny network and shapes (CPU check)")
    ap.add_argument(
        "--weight-layout",
        default="in_out",
        choices=("in_out", "out_in"),
        help="weights [in, out] (x @ w) or [out, in] (x @ w.T, PyTorch)",
    )
    args = ap.parse_args(argv)
    start = time.perf_counter()
    cfg = LlamaConfig.from_toml(args.model)
    cfg = dataclasses.replace(cfg, weight_layout=args.weight_layout)
    plan = list(enumerate(PLAN))
    if args.smoke:  # every path once, at a size the Pallas interpreter runs in seconds
        cfg = LlamaConfig(
            layers=2,
            hidden=64,
            heads=4,
            kv_heads=2,
            head_dim=16,
            intermediate=96,
            vocab=101,
            weight_layout=args.weight_layout,
        )
        plan = [
            (i, (k, a, s // 128 if k == "prefill" else (s[0], s[1] // 16)))
            for i, (k, a, s) in plan[:5]
        ]
    dev = jax.devices()[0]
    run = {
        "model": args.model,
        "config": cfg.__dict__,
        "device": dev.device_kind,
        "jax": jax.__version__,
        "git_commit": args.git_commit,
        "chunk": args.chunk,
        "prefill_batch": args.batch,
        "xla_flags": os.environ.get("XLA_FLAGS"),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "budget_s": args.budget_s,
        "points": [],
        "skipped": [],
    }
    model = LlamaModel.random(cfg, chunk=args.chunk, seed=0)
    jax.block_until_ready((model.chunks, model.ends))
    run["init_s"] = time.perf_counter() - start
    run["memory_weights"] = _memory()
    print(f"init {run['init_s']:.1f} s, {run['memory_weights']}", flush=True)
    write_json(args.out, run)
    if args.only:
        keep = {int(i) for i in args.only.split(",")}
        plan = [p for p in plan if p[0] in keep]
    cache_key, caches = None, None
    for index, (kind, impl, shape) in plan:
        elapsed = time.perf_counter() - start
        if elapsed > args.budget_s:
            run["skipped"].append(
                {"index": index, "kind": kind, "impl": impl, "shape": shape, "why": "budget"}
            )
            continue
        point = {"index": index, "kind": kind, "impl": impl, "started_s": elapsed}
        try:
            if kind == "prefill":
                point.update(batch=args.batch, n=shape)
                point.update(prefill_point(model, impl, shape, args.batch))
            else:
                batch, m = shape
                point.update(batch=batch, m=m)
                if cache_key != shape:
                    caches = None
                    gc.collect()
                    caches, cache_key = make_cache(model, batch, m), shape
                point.update(decode_point(model, impl, batch, m, caches))
        except Exception as err:  # noqa: BLE001 - an OOM or a failed kernel is data too
            point["error"] = f"{type(err).__name__}: {str(err)[:400]}"
            traceback.print_exc()
        gc.collect()
        run["points"].append(point)
        run["elapsed_s"] = time.perf_counter() - start
        write_json(args.out, run)
        shown = {k: point.get(k) for k in ("kind", "impl", "n", "batch", "m")}
        t = point.get("device_s")
        print(
            f"{shown} device {t if t is None else f'{t * 1e3:.2f} ms'} "
            f"latency {point.get('latency_s')} compile {point.get('compile_s')} "
            f"err {point.get('error', '')[:120]}",
            flush=True,
        )
    run["elapsed_s"] = time.perf_counter() - start
    write_json(args.out, run)  # the skipped points too
    print(f"done in {run['elapsed_s']:.1f} s; skipped {len(run['skipped'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
