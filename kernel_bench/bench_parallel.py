"""Context-parallel attention on all local GPUs: link ceilings, then each scheme against
one GPU at the same total n.

    PYTHONPATH=. python3 -m kernel_bench.bench_parallel --out $OUT/parallel.json

Link ceilings: ``lax.ppermute`` (each device sends its buffer to the next), ``all_gather``,
``psum`` (all-reduce) and ``all_to_all`` on buffers of 1 MiB to 1 GiB per device, as
bytes per second per device in one direction (the convention of NCCL's "bus bandwidth":
ppermute sends S bytes; all-gather S(P-1); all-to-all S(P-1)/P; all-reduce 2S(P-1)/P).
The 2026-11-30 run's script counted S(P-1)/P for all-gather; its data file carries the
corrected figures, recomputed from the measured times.

Attention points: one GPU (``flash_attention_forward``) and each scheme of
``context_parallel_attention`` on the mesh of every local GPU, inputs already sharded
(and already in zig-zag order where the scheme balances that way), bf16, d = 128.
Timings are wall time per call of calls queued back to back (``queued_time``): with
several GPUs the kernels of both devices and the transfers between them overlap, so
a sum of kernel durations would not be the elapsed time. Points run in priority order
until ``--budget-s`` is spent, and the JSON is rewritten after every point, so a run
cut short keeps what it measured. Imports jax and the standard library only.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import functools
import os
import sys
import time

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import NamedSharding, PartitionSpec

from perfmodel.atomic import write_json

MIB = 1 << 20
AXIS = "sp"


def _mesh():
    return jax.sharding.Mesh(jax.devices(), (AXIS,))


def _queued(fn, args, *, calls: int, samples: int) -> dict:
    from kernel_bench.timing import queued_time

    return queued_time(fn, [args], samples=samples, calls=calls)


# --- link ceilings -----------------------------------------------------------------
def _collectives(devices: int):
    """name -> (per-device body, bytes sent per device per call as a function of S)."""
    hop = [(i, (i + 1) % devices) for i in range(devices)]
    share = (devices - 1) / devices
    return {
        "ppermute": (lambda x: lax.ppermute(x, AXIS, hop), lambda s: s),
        # each device sends its whole shard to each of the P - 1 others
        "all_gather": (
            lambda x: lax.all_gather(x, AXIS, axis=0, tiled=True),
            lambda s: s * (devices - 1),
        ),
        "all_reduce": (lambda x: lax.psum(x, AXIS), lambda s: 2 * s * share),
        "all_to_all": (
            lambda x: lax.all_to_all(x, AXIS, split_axis=0, concat_axis=0, tiled=True),
            lambda s: s * share,
        ),
    }


def link_ceilings(sizes_mib=(1, 4, 16, 64, 256, 1024)) -> list[dict]:
    """Bytes/s per device of each collective, by message size (S bytes per device)."""
    from pallas_kernels.context_parallel import shard_map_compat

    mesh, devices = _mesh(), len(jax.devices())
    spec = PartitionSpec(AXIS)
    rows = []
    for name, (body, sent) in _collectives(devices).items():
        fn = jax.jit(shard_map_compat(body, mesh=mesh, in_specs=spec, out_specs=spec))
        for mib in sizes_mib:
            per_device = mib * MIB
            x = jax.device_put(
                jnp.ones((devices * per_device // 2,), jnp.bfloat16), NamedSharding(mesh, spec)
            )
            t = _queued(fn, (x,), calls=10 if mib <= 64 else 3, samples=5)
            rows.append(
                dict(
                    collective=name,
                    bytes_per_device=per_device,
                    time_s=t["median"],
                    bytes_sent_per_device=sent(per_device),
                    bandwidth_bytes_per_s=sent(per_device) / t["median"],
                    timing="queued_calls",
                )
            )
            print(f"{name:10s} {mib:5d} MiB  {rows[-1]['bandwidth_bytes_per_s'] / 1e9:7.1f} GB/s")
    return rows


# --- attention -------------------------------------------------------------------------
def _inputs(n, h, h_kv, *, sharding=None, d=128):
    keys = jax.random.split(jax.random.PRNGKey(n + h_kv), 3)
    shapes = [(1, n, h, d), (1, n, h_kv, d), (1, n, h_kv, d)]
    out = [jax.random.normal(k_, s, jnp.bfloat16) for k_, s in zip(keys, shapes, strict=True)]
    return tuple(jax.device_put(x, sharding) if sharding else x for x in out)


def one_gpu(n, h, h_kv, causal, **opts) -> dict:
    from pallas_kernels import flash_attention_forward

    fn = jax.jit(functools.partial(flash_attention_forward, causal=causal, **opts))
    args = _inputs(n, h, h_kv, sharding=jax.devices()[0])
    return _time(fn, args)


def multi_gpu(n, h, h_kv, causal, scheme, balance, **opts) -> dict:
    from pallas_kernels.context_parallel import sharded_attention

    mesh = _mesh()
    fn = sharded_attention(
        mesh=mesh, axis=AXIS, scheme=scheme, causal=causal, balance=balance, **opts
    )
    sharding = NamedSharding(mesh, PartitionSpec(None, AXIS, None, None))
    return _time(fn, _inputs(n, h, h_kv, sharding=sharding))


def _time(fn, args) -> dict:
    t0 = time.perf_counter()
    jax.block_until_ready(fn(*args))  # compile + first call
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    jax.block_until_ready(fn(*args))
    once = time.perf_counter() - t0
    calls = max(1, min(10, int(0.02 / max(once, 1e-6))))
    t = _queued(fn, args, calls=calls, samples=3 if once > 0.05 else 5)
    return dict(
        time_s=t["median"],
        p10_s=t["p10"],
        p90_s=t["p90"],
        samples=t["n"],
        calls_per_sample=calls,
        host_share=t["host_share"],
        timing="queued_calls",
        call_latency_s=once,
        first_call_s=first,
    )


SIZES = (16384, 65536, 32768, 131072)


def plan(devices: int, sizes=SIZES) -> list[dict]:
    """Points in priority order: 16 heads, then GQA (16 query / 2 K/V heads)."""
    points = []
    for h, h_kv in ((16, 16), (16, 2)):
        for n in sizes:
            for causal in (False, True):
                base = dict(n=n, h=h, h_kv=h_kv, d=128, causal=causal, devices=devices)
                points.append({**base, "scheme": "one_gpu", "balance": None})
                for scheme in ("ring", "allgather", "ulysses"):
                    balance = "zigzag" if causal and scheme != "ulysses" else "contiguous"
                    points.append({**base, "scheme": scheme, "balance": balance})
                if causal and h_kv == h:  # the imbalance the zig-zag removes
                    points.append({**base, "scheme": "ring", "balance": "contiguous"})
    return points


def run_point(p: dict, **opts) -> dict:
    if p["scheme"] == "one_gpu":
        return one_gpu(p["n"], p["h"], p["h_kv"], p["causal"], **opts)
    return multi_gpu(p["n"], p["h"], p["h_kv"], p["causal"], p["scheme"], p["balance"], **opts)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-s", type=float, default=150.0, help="stop starting new points")
    ap.add_argument("--skip-links", action="store_true")
    ap.add_argument("--n", type=int, nargs="+", default=list(SIZES), help="total lengths")
    ap.add_argument("--interpret", action="store_true", help="CPU smoke test only")
    args = ap.parse_args(argv)
    start = time.perf_counter()
    devices = len(jax.devices())
    result = dict(
        schema_version=1,
        device_name=jax.devices()[0].device_kind,
        devices=devices,
        jax_version=jax.__version__,
        git_commit=os.environ.get("PERFMODEL_GIT_COMMIT"),
        timestamp=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        command=" ".join(sys.argv),
        xla_flags=os.environ.get("XLA_FLAGS", ""),
        nccl_nvls_enable=os.environ.get("NCCL_NVLS_ENABLE"),
        links=[],
        points=[],
    )
    print(f"{devices} x {result['device_name']}, jax {jax.__version__}", flush=True)
    if not args.skip_links and devices > 1:
        result["links"] = link_ceilings()
        write_json(args.out, result)
    opts = {"interpret": True} if args.interpret else {}
    for p in plan(devices, args.n):
        if p["scheme"] != "one_gpu" and devices < 2:
            continue
        if time.perf_counter() - start > args.budget_s:
            result["stopped"] = f"budget {args.budget_s} s spent before {p}"
            break
        try:
            row = {**p, "status": "ok", **run_point(p, **opts)}
        except Exception as err:  # noqa: BLE001 - record the failure, go on
            row = {**p, "status": "error", "error": f"{type(err).__name__}: {err}"[:500]}
        result["points"].append(row)
        write_json(args.out, result)
        t = row.get("time_s")
        print(
            f"n={p['n']:6d} h={p['h']}/{p['h_kv']} causal={p['causal']!s:5s} "
            f"{p['scheme']:9s} {p['balance'] or '':10s} "
            + (f"{t * 1e3:9.3f} ms" if t else row.get("error", "")),
            flush=True,
        )
    result["elapsed_s"] = time.perf_counter() - start
    write_json(args.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
