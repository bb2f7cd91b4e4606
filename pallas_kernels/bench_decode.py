"""Decode benchmark on a GPU: the paged Pallas kernel against the contiguous reference.

Times one decode step (``q_len = 1``) of a Llama-3.1-8B-shaped layer (h = 32 query
heads, h_kv = 8, d = 128, bf16) over a few KV lengths ``m`` and batch sizes::

    python -m pallas_kernels.bench_decode --out specs/measurements/h200-decode-DATE.json \
        --details specs/measurements/details/h200-decode-DATE.json --git-commit SHA
    python -m pallas_kernels.bench_decode --table specs/measurements/details/FILE.json  # CPU

Variants per shape: the paged kernel with a shuffled block table and the split count
the occupancy rule picks (``paged_decode``); the same kernel with ``splits = 1`` and
with an identity block table (pages in order: the cost of the indirection); and the
contiguous plain-JAX reference compiled by XLA (``contiguous_decode``). Each point:
warm-up (compiles), then ``--samples`` synchronised samples; a sample runs one jitted
function that calls the kernel once on each of ``copies`` input sets (sets rotate so
that the K/V read is not served by the 50 MB L2), divided by ``copies``.

``--out`` gets the field names of ``perfmodel.measured`` (``Run``/``Point``, plain
``json``: the GPU image has no pydantic). ``--details`` gets what that schema has no
field for: page size, splits, table kind, the model's bytes and the achieved
bandwidth. Both are written atomically.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import statistics
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from pallas_kernels._ceilings import median_time
from pallas_kernels.paged_decode import (
    contiguous_decode_reference,
    paged_decode_attention,
    query_rows,
)
from perfmodel.atomic import write_json as atomic_write_json

H, H_KV, D = 32, 8, 128
SHAPES = ((1, 8192), (1, 32768), (4, 8192), (16, 2048), (16, 16384), (64, 4096))
PAGE_SIZE = 64
L2_BYTES = 50 * 2**20
SM_COUNT = 132


def auto_splits(batch: int, h_kv: int, pages: int, sm_count: int = SM_COUNT) -> int:
    """Flash-decoding split rule: the most KV chunks with batch·h_kv·splits in one wave.

    The same rule as ``perfmodel.costs.decode.auto_splits``.
    """
    return max(1, min(pages, sm_count // (batch * h_kv)))


def model_bytes(*, batch, q_len, h, h_kv, d, m, s, page_size, splits) -> float:
    """HBM bytes of one paged decode step, from ``perfmodel.costs.decode`` itself (sympy
    only, no pydantic, so it runs on the GPU image): K/V of the m valid tokens, q and o,
    the block-table entries, and with splits > 1 the float32 partials and their merge."""
    from perfmodel.compile import compiled
    from perfmodel.costs import decode

    model = decode.build(paged=True, split=splits > 1)
    return float(compiled(model.hbm_bytes)(b=batch, q_len=q_len, h=h, h_kv=h_kv, d=d, m=m,
                                           s=s, page=page_size, splits=splits))  # fmt: skip


def sample_times(fn, args, samples: int) -> list[float]:
    """Seconds per kernel call: warm-up, then ``samples`` synchronised samples."""
    jax.block_until_ready(fn(*args))  # compile
    return median_time(fn, [args], samples=samples)


def stats(times: list[float], copies: int) -> dict:
    per_call = sorted(t / copies for t in times)
    q = statistics.quantiles(per_call, n=10)
    return {
        "median_s": statistics.median(per_call),
        "p10_s": q[0],
        "p90_s": q[-1],
        "min_s": per_call[0],
        "runs": len(per_call),
    }


def make_sets(rng, batch, m, copies, page_size, dtype):
    """``copies`` independent (q, k, v, k_pages, v_pages, table, identity, lengths) sets."""
    pages = math.ceil(m / page_size)
    sets = []
    key = jax.random.key(int(rng.integers(2**31)))
    for i in range(copies):  # random data made on the device: host RNG is too slow here
        kq, kk, kv = jax.random.split(jax.random.fold_in(key, i), 3)
        q = jax.random.normal(kq, (batch, 1, H, D), dtype)
        k = jax.random.normal(kk, (batch, m, H_KV, D), dtype)
        v = jax.random.normal(kv, (batch, m, H_KV, D), dtype)
        k_pages = k.reshape(batch * pages, page_size, H_KV, D)
        v_pages = v.reshape(batch * pages, page_size, H_KV, D)
        shuffled = rng.permutation(batch * pages).reshape(batch, pages).astype(np.int32)
        identity = np.arange(batch * pages, dtype=np.int32).reshape(batch, pages)
        # Shuffled ids point at other sequences' pages: same bytes, scattered addresses.
        lengths = np.full((batch,), m, np.int32)
        sets.append(
            dict(
                q=q,
                k=k,
                v=v,
                k_pages=k_pages,
                v_pages=v_pages,
                shuffled=jnp.asarray(shuffled),
                identity=jnp.asarray(identity),
                lengths=jnp.asarray(lengths),
            )
        )
    return sets


def paged_fn(splits, table_key, num_warps, num_stages, interpret=False):
    def one(s):
        return paged_decode_attention(
            s["q"],
            s["k_pages"],
            s["v_pages"],
            s[table_key],
            s["lengths"],
            splits=splits,
            num_warps=num_warps,
            num_stages=num_stages,
            interpret=interpret,
        )

    return jax.jit(lambda sets: [one(s) for s in sets])


def reference_fn():
    return jax.jit(
        lambda sets: [
            contiguous_decode_reference(s["q"], s["k"], s["v"], s["lengths"]) for s in sets
        ]
    )


def measure_ceilings() -> dict:
    """Copy bandwidth (read + write) and bf16 matmul rate, measured in this process."""
    x = jnp.ones((2**28,), jnp.bfloat16)  # 512 MiB
    copy = jax.jit(lambda a: a * 2)
    t = statistics.median(sample_times(copy, (x,), 10))
    a = jnp.ones((8192, 8192), jnp.bfloat16)
    mm = jax.jit(lambda a, b: a @ b)
    tm = statistics.median(sample_times(mm, (a, a), 10))
    return {
        "matmul_bf16_flops_per_s": 2 * 8192**3 / tm,
        "copy_bytes_per_s": 2 * x.size * 2 / t,
        "sm_count": SM_COUNT,
        "l2_bytes": L2_BYTES,
    }


def bench_shape(rng, batch, m, page_size, samples, num_warps=4, num_stages=2, interpret=False):
    """Every variant at one shape; yields (point, detail, primary) triples.

    ``primary`` marks the two points that go to the schema file: the paged kernel as
    it would run (shuffled table, the split rule's count) and the contiguous reference.
    """
    dtype = jnp.bfloat16
    set_bytes = 2 * batch * m * H_KV * D * 2
    copies = max(1, min(4, math.ceil(3 * L2_BYTES / set_bytes)))
    sets = make_sets(rng, batch, m, copies, page_size, dtype)
    pages = math.ceil(m / page_size)
    best = auto_splits(batch, H_KV, pages)
    variants = [("paged_decode", best, "shuffled"), ("paged_decode", best, "identity")]
    if best != 1:
        variants.append(("paged_decode", 1, "shuffled"))
    variants.append(("contiguous_decode", None, "contiguous"))
    for impl, splits, table in variants:
        fn = (
            reference_fn()
            if splits is None
            else paged_fn(splits, table, num_warps, num_stages, interpret)
        )
        primary = splits is None or (table == "shuffled" and splits == best)
        base = dict(
            implementation=impl,
            n=1,
            kv_len=m,
            d=D,
            h=H,
            h_kv=H_KV,
            batch=batch,
            dtype="bfloat16",
            causal=False,
        )
        try:
            st = stats(sample_times(fn, (sets,), samples), copies)
        except Exception as e:  # noqa: BLE001 - recorded in the point, the sweep goes on
            err = {**base, "status": "error", "error": f"{type(e).__name__}: {e}"[:500]}
            yield err, {**err, "splits": splits, "table": table, "page_size": page_size}, primary
            continue
        nbytes = model_bytes(
            batch=batch,
            q_len=1,
            h=H,
            h_kv=H_KV,
            d=D,
            m=m,
            s=2,
            page_size=page_size,
            splits=splits or 1,
        )
        if splits is None:
            nbytes -= batch * H_KV * pages * 4  # no block table
        point = {
            **base,
            "status": "ok",
            **st,
            "tflops": 4 * batch * H * m * D / st["median_s"] / 1e12,
            "tokens_per_s": batch / st["median_s"],
        }
        if splits is not None:
            point.update(
                block_q=query_rows(1, H // H_KV),
                block_k=page_size,
                num_warps=num_warps,
                num_stages=num_stages,
            )
        detail = {
            **point,
            "page_size": page_size if splits else None,
            "splits": splits,
            "table": table,
            "copies": copies,
            "model_hbm_bytes": nbytes,
            "achieved_bytes_per_s": nbytes / st["median_s"],
        }
        yield point, detail, primary
        print(
            f"{impl:18s} {table:10s} b={batch:3d} m={m:6d} splits={splits} "
            f"median={st['median_s'] * 1e6:9.1f} us  "
            f"{nbytes / st['median_s'] / 1e12:6.2f} TB/s",
            flush=True,
        )


def comparison_table(details_path: Path, hw: str = "h200") -> str:
    """Markdown: each measured point against ``perfmodel.kvcache.decode_step`` (CPU only).

    ``achieved`` is the model's bytes over the measured median; ``floor`` the model's
    bytes at the datasheet bandwidth; ``error`` the model's ``time_s`` (SM occupancy x
    calibrated bandwidth + launches) over the measured median, minus one — the sign
    convention of ``perfmodel validate`` (negative: the kernel is slower than predicted). The XLA
    reference is not the modelled kernel (it materialises K/V repeated per query head
    in float32), so it gets no error, only its bytes-equivalent bandwidth.
    """
    from perfmodel.kvcache import decode_step  # needs pydantic: not on the GPU image

    data = json.loads(Path(details_path).read_text())
    lines = [
        "| impl | table | b | m | page | splits | median µs | model bytes | achieved TB/s "
        "| floor µs | model µs | error |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in data["points"]:
        if p.get("status") != "ok":
            continue
        step = decode_step(hw, batch=p["batch"], kv_len=p["kv_len"], h=p["h"], h_kv=p["h_kv"],
                           d=p["d"], dtype="bf16", page_tokens=p["page_size"],
                           splits=p["splits"] or 1)  # fmt: skip
        med = p["median_s"]
        lines.append(
            f"| {p['implementation']} | {p['table']} | {p['batch']} | {p['kv_len']} | "
            f"{p['page_size'] or '-'} | {p['splits'] or '-'} | {med * 1e6:.1f} | "
            f"{step.hbm_bytes / 1e6:.1f} MB | {step.hbm_bytes / med / 1e12:.2f} | "
            f"{step.t_lower_s * 1e6:.1f} | "
            + (
                f"{step.time_s * 1e6:.1f} | {step.time_s / med - 1:+.0%} |"
                if p["splits"]
                else "- | - |"
            )
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", type=Path, help="print a details file against the model (CPU)")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--details", type=Path)
    ap.add_argument("--git-commit", default="unknown")
    ap.add_argument("--samples", type=int, default=25)
    ap.add_argument("--quick", action="store_true", help="tiny shapes (CPU smoke run)")
    args = ap.parse_args(argv)
    if args.table:
        print(comparison_table(args.table))
        return 0
    if not (args.out and args.details):
        ap.error("--out and --details are required unless --table is given")
    stamp = dt.datetime.now(dt.UTC).replace(microsecond=0)
    run = {
        "run_id": f"decode-{stamp.strftime('%Y%m%dT%H%M%SZ')}",
        "device_name": jax.devices()[0].device_kind,
        "jax_version": jax.__version__,
        "git_commit": args.git_commit,
        "timestamp": stamp.isoformat(),
        "ceilings": measure_ceilings()
        if not args.quick
        else {"matmul_bf16_flops_per_s": 1.0, "copy_bytes_per_s": 1.0},
        "points": [],
    }
    details = {"run_id": run["run_id"], "model_bytes": model_bytes.__doc__.strip(), "points": []}
    print("ceilings:", run["ceilings"], flush=True)
    rng = np.random.default_rng(0)
    shapes = ((2, 256),) if args.quick else SHAPES  # --quick: interpret mode, CPU
    jobs = [(b, m, PAGE_SIZE) for b, m in shapes]
    if not args.quick:
        jobs.append((16, 16384, 16))  # page size 16, the vLLM default
    for batch, m, page_size in jobs:
        for point, detail, primary in bench_shape(
            rng, batch, m, page_size, args.samples, interpret=args.quick
        ):
            if primary and page_size == PAGE_SIZE:
                run["points"].append(point)
            details["points"].append(detail)
            atomic_write_json(args.out, {"schema_version": 1, "runs": [run]})
            atomic_write_json(args.details, details)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
