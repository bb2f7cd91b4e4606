"""Decode benchmark on a GPU: the paged Pallas kernel against cuDNN and XLA, device time.

Times one decode step (``q_len = 1``) over KV lengths ``m`` of 2K-128K and batch sizes
1-64, GQA 32:8 (Llama-3.1-8B-shaped, d = 128, bf16) and 64:8 (70B-shaped)::

    python -m kernel_bench.bench_decode --out specs/measurements/FILE.json \
        --details specs/measurements/details/FILE.json --git-commit SHA --budget-s 120
    python -m kernel_bench.bench_decode --table specs/measurements/details/FILE.json  # CPU

Implementations per shape: the paged kernel (``paged_decode``: shuffled block table,
page size 64) with the split rule's count, ``jax.nn.dot_product_attention`` with
``implementation="cudnn"`` and ``"xla"`` on contiguous K/V (``cudnn``, ``xla``), and
at a few shapes the paged kernel with other split counts (1, the old one-wave rule,
2 and 4 programs per SM, and 16) to show where the rule sits.

Split rule: ``perfmodel.costs.decode.paged_splits`` (``auto_splits`` with at least
``MIN_PAGES_PER_SPLIT`` pages per chunk) with ``resident_ctas = PROGRAMS_PER_SM x SMs``,
the same count as the kernel's own ``paged_decode.default_splits``. SM count and L2
size come from the device spec file (``--hw-spec``, ``kernel_bench.device.device_spec``:
``tomllib``, since the GPU image has no pydantic). Bytes come from
``perfmodel.costs.decode.launch_model``, nominal FLOPs from ``perfmodel.costs.nominal``.

Timing (``kernel_bench/timing.py``): one jitted function calls the implementation
once on each of ``copies`` input sets, so that the K/V read is not served by L2
(sets together at least 3x L2); ``device_time_s`` is CUPTI kernel time per call
(``copies`` calls per measured function, divided), ``queued_time_s`` the same from
calls queued back to back, ``call_latency_s`` one synchronous call on one set.

``--out`` gets the field names of ``perfmodel.validation.measured`` (``median_s`` = device time);
``--details`` adds the model's bytes and the achieved bandwidth. Both are written
atomically after every point; no point starts after ``--budget-s``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import sympy as sp

from kernel_bench.device import DEVICE_SPEC, device_spec
from kernel_bench.timing import measure_all
from pallas_kernels.paged_decode import (
    MIN_PAGES_PER_SPLIT,
    PROGRAMS_PER_SM,
    default_splits,
    paged_decode_attention,
    query_rows,
)
from perfmodel.atomic import write_json as atomic_write_json
from perfmodel.compile import compiled
from perfmodel.costs import decode, terms
from perfmodel.costs.nominal import nominal_flops
from perfmodel.vocabulary import symbol_values

D = 128
PAGE_SIZE = 64
# (batch, m, h, h_kv): batch 1-64, KV 2K-128K; none is a shape of the 2026-11-29 run
SHAPES = (
    (1, 2048, 32, 8),
    (1, 16384, 32, 8),
    (1, 131072, 32, 8),
    (4, 32768, 32, 8),
    (8, 8192, 32, 8),
    (16, 4096, 32, 8),
    (16, 65536, 32, 8),
    (32, 16384, 32, 8),
    (64, 2048, 32, 8),
    (64, 8192, 32, 8),
    (1, 131072, 64, 8),
    (8, 16384, 64, 8),
)
#: Shapes where other split counts are timed too.
SPLIT_SWEEP = ((1, 16384, 32, 8), (4, 32768, 32, 8), (16, 4096, 32, 8))


#: Kernel family of each implementation (specs/kernels/*.toml).
FAMILY = {"paged_decode": "pallas-paged", "cudnn": "cudnn", "xla": "xla-naive"}


def auto_splits(
    batch: int,
    h_kv: int,
    pages: int,
    sm_count: int,
    programs_per_sm: int = decode.PROGRAMS_PER_SM,
    min_pages: int = decode.MIN_PAGES_PER_SPLIT,
) -> int:
    """Split count from the model's rule, ``perfmodel.costs.decode.paged_splits``, with
    ``programs_per_sm * sm_count`` resident programs and ``ceil(pages / min_pages)``
    chunks at most (sympy only: runs on the GPU image). Its defaults are the model's
    constants; ``variants`` checks the count against the kernel's ``default_splits``."""
    rule = compiled(decode.paged_splits(pages=sp.Integer(pages), min_pages=min_pages))
    values = symbol_values(batch=batch, h_kv=h_kv)
    return int(rule(**values, resident_ctas=programs_per_sm * sm_count))


def model_bytes(*, batch, q_len, h, h_kv, d, m, s, page_size, splits, paged=True) -> float:
    """HBM bytes of one decode step, from the engine's own flash model at a decode launch
    (``perfmodel.costs.decode.launch_model``; sympy only, no pydantic, so it runs on the
    GPU image): K/V of the m valid tokens, q, o and the log-sum-exp, with ``paged`` the
    block-table entries, and with splits > 1 the float32 partials and their combine."""
    model = decode.launch_model(paged=paged, split=splits > 1)
    values = symbol_values(
        batch=batch,
        q_len=q_len,
        h=h,
        h_kv=h_kv,
        d=d,
        kv_len=m,
        page_tokens=page_size,
        splits=splits,
    )
    return float(compiled(model.hbm_bytes)(**values, s=s))


def make_sets(rng, batch, m, h, h_kv, copies, page_size, dtype):
    """``copies`` independent input sets: q, contiguous k/v, their pages, a shuffled table."""
    pages = math.ceil(m / page_size)
    sets = []
    key = jax.random.key(int(rng.integers(2**31)))
    for i in range(copies):  # random data made on the device: host RNG is too slow here
        kq, kk, kv = jax.random.split(jax.random.fold_in(key, i), 3)
        k = jax.random.normal(kk, (batch, m, h_kv, D), dtype)
        v = jax.random.normal(kv, (batch, m, h_kv, D), dtype)
        # Shuffled ids point at other sequences' pages: same bytes, scattered addresses.
        shuffled = rng.permutation(batch * pages).reshape(batch, pages).astype(np.int32)
        sets.append(
            dict(
                q=jax.random.normal(kq, (batch, 1, h, D), dtype),
                k=k,
                v=v,
                k_pages=k.reshape(batch * pages, page_size, h_kv, D),
                v_pages=v.reshape(batch * pages, page_size, h_kv, D),
                table=jnp.asarray(shuffled),
                lengths=jnp.full((batch,), m, jnp.int32),
            )
        )
    return sets


def one_call(impl: str, splits: int | None, num_warps=4, num_stages=2, interpret=False):
    """The implementation on one input set (a dict of arrays)."""
    if impl == "paged_decode":
        return lambda s: paged_decode_attention(
            s["q"],
            s["k_pages"],
            s["v_pages"],
            s["table"],
            s["lengths"],
            splits=splits,
            num_warps=num_warps,
            num_stages=num_stages,
            interpret=interpret,
        )
    return lambda s: jax.nn.dot_product_attention(s["q"], s["k"], s["v"], implementation=impl)


def time_variant(impl, splits, sets, *, interpret=False, with_kernels=False) -> dict:
    """Device time per call over ``len(sets)`` copies in one program; latency on one set;
    ``with_kernels``: also one copy's kernels (``timing.kernel_list``), for details."""
    call = one_call(impl, splits, interpret=interpret)
    many = jax.jit(lambda ss: [call(s) for s in ss])
    single = jax.jit(call)
    fields = measure_all(many, [(sets,)], budget_s=0.15, with_kernels=with_kernels)
    latency = measure_all(single, [(sets[0],)], budget_s=0.05)
    c = len(sets)
    out = {
        "median_s": fields["device_time_s"] / c,
        "device_time_s": fields["device_time_s"] / c,
        "device_time_method": fields["device_time_method"],
        "p10_s": fields["device_p10_s"] / c,
        "p90_s": fields["device_p90_s"] / c,
        "min_s": fields["device_p10_s"] / c,
        "runs": fields["device_samples"],
        "kernels_per_call": (fields["kernels_per_call"] or 0) // c or None,
        "queued_time_s": fields["queued_time_s"] / c,
        "queued_host_share": fields["queued_host_share"],
        "call_latency_s": latency["call_latency_s"],
        "call_latency_p10_s": latency["call_latency_p10_s"],
        "copies": c,
    }
    if with_kernels:  # the kernels of one copy: the first len/c of the program's list
        every = fields["kernel_list"] or []
        out["kernel_list"] = every[: len(every) // c]
    return out


def variants(batch, m, h, h_kv, spec) -> list[tuple[str, int | None, str]]:
    """(implementation, splits, label) to time at one shape."""
    pages = math.ceil(m / PAGE_SIZE)
    sms = spec["sm_count"]
    rule = auto_splits(batch, h_kv, pages, sms)
    assert rule == default_splits(batch, h_kv, pages, sms), "kernel and model rules differ"
    out = [("paged_decode", rule, "rule"), ("cudnn", None, "peer"), ("xla", None, "peer")]
    if (batch, m, h, h_kv) in SPLIT_SWEEP:
        extra = {
            1: "one split",
            auto_splits(batch, h_kv, pages, sms, programs_per_sm=1, min_pages=1): "one wave",
            auto_splits(batch, h_kv, pages, sms, programs_per_sm=2): "2 per SM",
            auto_splits(batch, h_kv, pages, sms, programs_per_sm=4): "4 per SM",
            auto_splits(batch, h_kv, pages, sms, programs_per_sm=16): "16 per SM",
        }
        out += [("paged_decode", k, v) for k, v in sorted(extra.items()) if k != rule]
    return out


def bench_shape(rng, batch, m, h, h_kv, spec, *, interpret=False):
    """Every variant at one shape; yields (point, detail) pairs, errors included."""
    dtype = jnp.bfloat16
    set_values = symbol_values(batch=batch, kv_len=m, h_kv=h_kv, d=D)
    set_bytes = compiled(terms.kv_bytes)(**set_values, s=jnp.dtype(dtype).itemsize)
    copies = max(1, min(8, math.ceil(3 * spec["l2_bytes"] / set_bytes)))
    sets = make_sets(rng, batch, m, h, h_kv, copies, PAGE_SIZE, dtype)
    for impl, splits, label in variants(batch, m, h, h_kv, spec):
        base = dict(
            implementation=impl,
            family=FAMILY[impl],
            n=1,
            kv_len=m,
            d=D,
            h=h,
            h_kv=h_kv,
            batch=batch,
            dtype="bfloat16",
            causal=False,
            time_basis="device",
        )
        if impl == "paged_decode":
            base.update(
                page_size=PAGE_SIZE,
                splits=splits,
                block_q=query_rows(1, h // h_kv),
                block_k=PAGE_SIZE,
                num_warps=4,
                num_stages=2,
            )
        try:
            st = time_variant(impl, splits, sets, interpret=interpret)
        except Exception as e:  # noqa: BLE001 - recorded in the point, the sweep goes on
            err = {**base, "status": "error", "error": f"{type(e).__name__}: {e}"[:800]}
            print(f"{impl:13s} b={batch:3d} m={m:6d} h={h}/{h_kv} {label}: {err['error'][:120]}")
            yield err, {**err, "label": label}
            continue
        nbytes = model_bytes(
            batch=batch,
            q_len=1,
            h=h,
            h_kv=h_kv,
            d=D,
            m=m,
            s=2,
            page_size=PAGE_SIZE,
            splits=splits or 1,
            paged=impl == "paged_decode",
        )
        med = st["median_s"]
        timed = {k: v for k, v in st.items() if k != "copies"}
        flops = nominal_flops(batch=batch, h=h, n=1, kv_len=m, d=D)
        point = {
            **base,
            "status": "ok",
            **timed,
            "tflops": flops / med / 1e12,
            "tokens_per_s": batch / med,
        }
        detail = {
            **point,
            "label": label,
            "copies": st["copies"],
            "model_hbm_bytes": nbytes,
            "achieved_bytes_per_s": nbytes / med,
        }
        print(
            f"{impl:13s} b={batch:3d} m={m:6d} h={h}/{h_kv} splits={splits} ({label}) "
            f"dev {med * 1e6:8.1f} us lat {st['call_latency_s'] * 1e6:8.1f} us "
            f"{nbytes / med / 1e12:5.2f} TB/s [{st['device_time_method'][:5]}]",
            flush=True,
        )
        yield point, detail


def comparison_table(details_path: Path, hw: str = "h200") -> str:
    """Markdown: each measured point against ``perfmodel.analysis.kvcache.decode_step`` (CPU only).

    ``achieved`` is the model's bytes over the measured median; ``floor`` the model's
    bytes at the datasheet bandwidth; ``error`` the model's ``time_s`` (SM occupancy x
    calibrated bandwidth + launches) over the measured median, minus one — the sign
    convention of ``perfmodel validate`` (negative: the kernel is slower than predicted). The XLA
    reference is not the modelled kernel (it materialises K/V repeated per query head
    in float32), so it gets no error, only its bytes-equivalent bandwidth.
    """
    from perfmodel.analysis.kvcache import decode_step  # needs pydantic: not on the GPU image
    from perfmodel.validation.fitting import relative_error

    data = json.loads(Path(details_path).read_text())
    lines = [
        "| impl | table | b | m | page | splits | median µs | model bytes | achieved TB/s "
        "| floor µs | model µs | error |",  # table: block-table kind, or the variant's label
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in data["points"]:
        if p.get("status") != "ok":
            continue
        step = decode_step(
            hw,
            batch=p["batch"],
            kv_len=p["kv_len"],
            h=p["h"],
            h_kv=p["h_kv"],
            d=p["d"],
            dtype="bf16",
            page_tokens=p.get("page_size"),
            splits=p.get("splits") or 1,
        )
        med = p["median_s"]
        lines.append(
            f"| {p['implementation']} | {p.get('table') or p.get('label')} | {p['batch']} | "
            f"{p['kv_len']} | "
            f"{p.get('page_size') or '-'} | {p.get('splits') or '-'} | {med * 1e6:.1f} | "
            f"{step.hbm_bytes / 1e6:.1f} MB | {step.hbm_bytes / med / 1e12:.2f} | "
            f"{step.t_lower_s * 1e6:.1f} | "
            + (
                f"{step.time_s * 1e6:.1f} | {relative_error(step.time_s, med):+.0%} |"
                if p.get("splits")
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
    ap.add_argument("--hw-spec", type=Path, default=DEVICE_SPEC)
    ap.add_argument("--budget-s", type=float, default=120.0)
    ap.add_argument("--quick", action="store_true", help="tiny shapes (CPU smoke run)")
    args = ap.parse_args(argv)
    if args.table:
        print(comparison_table(args.table))
        return 0
    if not (args.out and args.details):
        ap.error("--out and --details are required unless --table is given")
    deadline = time.monotonic() + args.budget_s
    spec = device_spec(args.hw_spec)
    stamp = dt.datetime.now(dt.UTC).replace(microsecond=0)
    if args.quick:
        ceilings = {"matmul_bf16_flops_per_s": 1.0, "copy_bytes_per_s": 1.0}
    else:
        from kernel_bench.probes import copy_bytes_per_s, matmul_flops_per_s

        ceilings = {
            "matmul_bf16_flops_per_s": matmul_flops_per_s(),
            "copy_bytes_per_s": copy_bytes_per_s(1 << 30),
        }
    run = {
        "run_id": f"decode-devtime-{stamp.strftime('%Y%m%dT%H%M%SZ')}",
        "device_name": jax.devices()[0].device_kind,
        "jax_version": jax.__version__,
        "git_commit": args.git_commit,
        "timestamp": stamp.isoformat(),
        "ceilings": {**ceilings, **spec},
        "points": [],
    }
    details = {
        "run_id": run["run_id"],
        "model_bytes": model_bytes.__doc__.strip(),
        "spec": {
            **spec,
            "programs_per_sm": PROGRAMS_PER_SM,
            "min_pages_per_split": MIN_PAGES_PER_SPLIT,
        },
        "points": [],
    }
    print("ceilings:", run["ceilings"], flush=True)
    # The loaded HBM latency this benchmark's split rule depends on is a ceiling, measured
    # by ``python -m pallas_kernels.ceilings`` (section "loaded latency"), not here.
    rng = np.random.default_rng(0)
    shapes = ((2, 256, 4, 2),) if args.quick else SHAPES  # --quick: interpret mode, CPU
    for batch, m, h, h_kv in shapes:
        if time.monotonic() > deadline:
            print(f"budget reached at b={batch} m={m}: remaining shapes not started")
            break
        for point, detail in bench_shape(rng, batch, m, h, h_kv, spec, interpret=args.quick):
            run["points"].append(point)
            details["points"].append(detail)
            atomic_write_json(args.out, {"schema_version": 1, "runs": [run]})
            atomic_write_json(args.details, details)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
