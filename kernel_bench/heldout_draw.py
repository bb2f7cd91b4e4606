"""A seeded random draw of held-out attention shapes: predictions first, then the GPU.

Issue 21, item 4: shapes chosen not to match anything committed, measured for our
kernels and cuDNN in one run, with perfmodel's predictions committed before it::

    python -m kernel_bench.heldout_draw predict --out PRED.json        # CPU, perfmodel
    git add PRED.json && git commit                                     # the evidence
    python -m kernel_bench.heldout_draw measure --predictions PRED.json \\
        --out MEAS.json --details DETAILS.json --budget-s 200          # GPU, jax only
    python -m kernel_bench.heldout_draw score --predictions PRED.json --measured MEAS.json

**The draw** (``draw``, seed ``SEED``): for each mode a list of shapes, each field drawn
independently with Python's ``random.Random(SEED)``:

* GQA: ``h_kv`` from {1, 2, 4, 8, 16} and a group from {1, 2, 3, 4, 6, 8}, or MQA
  (``h_kv = 1``, h from {8, 12, 16, 32}) one time in five; ``h <= 64``;
* head dim from {64, 96, 128, 256} (decode: {64, 128, 256}, powers of two for the
  paged kernel);
* n log-uniform in 512..32768, an arbitrary integer (odd or not) two times in three,
  else a multiple of 256; batch 1..8; causal or not; fp16 or bf16;
* cross attention (``kv_len`` drawn like n, non-causal) one time in four;
* batch, then heads, halved until the forward's nominal FLOPs are under a cap (a point
  takes milliseconds, not seconds); decode: one new token against ``kv_len`` cached.

A drawn shape equal to any committed point (``specs/measurements/*.json``) is drawn
again. **Jobs**: forward: ours on each backend that exists (``pallas_flash`` with
``backend="triton"`` and ``"mosaic"``) and cuDNN; training step (forward and backward
of ``jax.vjp`` in one jitted call, the gradient of <O, dO>): ours (``backend="auto"``:
the family it chose is recorded) and cuDNN; decode: our paged kernel (64-token pages,
shuffled page table, its default splits) and cuDNN over a contiguous cache.

``predict`` writes today's model's ``time_s`` and ``t_lower_s`` for every job
(``perfmodel.predict`` at the job's family and mode; ours in training mode under both
families, since the routing decides on the GPU). ``measure`` reads the jobs from that
file, so the measured shapes are the predicted ones, and writes one measurement file in
the schema of ``perfmodel.validation.measured`` (``perfmodel validate`` reads it), and
a details file with each point's launch configuration. It imports no pydantic.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import random
import sys
import time
from pathlib import Path

SEED = 20261201
N_FORWARD, N_TRAIN, N_DECODE = 14, 6, 8
#: Nominal forward FLOPs caps (4·b·h·n·kv_len·d, halved when causal).
FORWARD_FLOPS_CAP, TRAIN_FLOPS_CAP = 2.0e12, 0.8e12
DECODE_KV_BYTES_CAP = 2.0e9
PAGE_SIZE = 64
GROUPS = (1, 2, 3, 4, 6, 8)
KV_HEADS = (1, 2, 4, 8, 16)
MQA_HEADS = (8, 12, 16, 32)
#: Family of each forward backend (specs/kernels/*.toml).
BACKEND_FAMILY = {"triton": "pallas-triton", "mosaic": "pallas-mosaic"}
MEASUREMENTS = Path(__file__).resolve().parents[1] / "specs" / "measurements"


# ---------------------------------------------------------------- the draw


def _log_uniform_int(rng: random.Random, lo: int, hi: int) -> int:
    return int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))


def _heads(rng: random.Random) -> tuple[int, int]:
    if rng.random() < 0.2:
        return rng.choice(MQA_HEADS), 1
    while True:
        h_kv, group = rng.choice(KV_HEADS), rng.choice(GROUPS)
        if h_kv * group <= 64:
            return h_kv * group, h_kv


def _length(rng: random.Random) -> int:
    n = _log_uniform_int(rng, 512, 32768)
    return n if rng.random() < 2 / 3 else max(512, n // 256 * 256)


def _flops(s: dict) -> float:
    full = 4.0 * s["batch"] * s["h"] * s["n"] * s["kv_len"] * s["d"]
    return full / 2 if s["causal"] else full


def _shrink(s: dict, fits) -> dict:
    """Halve batch, then the heads (keeping the group), until ``fits(s)``."""
    while not fits(s):
        if s["batch"] > 1:
            s["batch"] = max(1, s["batch"] // 2)
        elif s["h_kv"] > 1:
            s["h_kv"] //= 2
            s["h"] //= 2
        elif s["h"] > 1:
            s["h"] = max(1, s["h"] // 2)
        else:
            s["n"] = max(512, s["n"] // 2)
    return s


def _prefill_shape(rng: random.Random, cap: float) -> dict:
    h, h_kv = _heads(rng)
    n = _length(rng)
    cross = rng.random() < 0.25
    kv_len = _length(rng) if cross else n
    causal = False if cross else rng.random() < 0.5
    s = {
        "n": n,
        "kv_len": kv_len,
        "d": rng.choice((64, 96, 128, 256)),
        "h": h,
        "h_kv": h_kv,
        "batch": rng.randint(1, 8),
        "dtype": rng.choice(("float16", "bfloat16")),
        "causal": causal,
    }
    return _shrink(s, lambda s: _flops(s) <= cap)


def _decode_shape(rng: random.Random) -> dict:
    h, h_kv = _heads(rng)
    s = {
        "n": 1,
        "kv_len": _log_uniform_int(rng, 512, 32768),
        "d": rng.choice((64, 128, 256)),
        "h": h,
        "h_kv": h_kv,
        "batch": rng.randint(1, 8),
        "dtype": rng.choice(("float16", "bfloat16")),
        "causal": False,
    }
    kv_bytes = lambda s: 2 * 2 * s["batch"] * s["kv_len"] * s["h_kv"] * s["d"]  # noqa: E731
    return _shrink(s, lambda s: kv_bytes(s) <= DECODE_KV_BYTES_CAP)


def shape_key(p: dict) -> tuple:
    return tuple(p[k] for k in ("n", "kv_len", "d", "h", "h_kv", "batch", "dtype", "causal"))


def committed_keys(folder: Path = MEASUREMENTS) -> set[tuple]:
    """The shape of every point of every committed measurement file (plain JSON)."""
    keys = set()
    for path in sorted(folder.glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        for run in data.get("runs", []) if isinstance(data, dict) else []:
            for p in run.get("points", []):
                try:
                    keys.add(shape_key({**p, "kv_len": p.get("kv_len", p.get("n"))}))
                except KeyError:
                    continue
    return keys


def draw(seed: int = SEED, taken: set[tuple] | None = None) -> dict[str, list[dict]]:
    """``{"forward": [...], "train": [...], "decode": [...]}``: shapes none of which is
    in ``taken`` (default: every committed point) nor repeated."""
    rng = random.Random(seed)
    seen = set(committed_keys() if taken is None else taken)
    out: dict[str, list[dict]] = {}
    makers = {
        "forward": (N_FORWARD, lambda: _prefill_shape(rng, FORWARD_FLOPS_CAP)),
        "train": (N_TRAIN, lambda: _prefill_shape(rng, TRAIN_FLOPS_CAP)),
        "decode": (N_DECODE, lambda: _decode_shape(rng)),
    }
    for mode, (count, make) in makers.items():
        shapes = []
        while len(shapes) < count:
            s = make()
            if shape_key(s) not in seen:
                seen.add(shape_key(s))
                shapes.append(s)
        out[mode] = shapes
    return out


#: The three-step naive baseline (``pallas_kernels.naive``) is timed on a draw's forward
#: shapes from draw 16 on (``naive_jobs``), where its S and P fit this many bytes each.
NAIVE_FROM_SEED = 20261216
NAIVE_SCORE_BYTES_CAP = 4e9


def _naive_fits(s: dict) -> bool:
    return 2 * s["batch"] * s["h"] * s["n"] * s["kv_len"] <= NAIVE_SCORE_BYTES_CAP  # 16-bit S


def jobs(shapes: dict[str, list[dict]], naive: bool = False) -> list[dict]:
    """One job per (implementation, backend, mode, shape), the modes interleaved so that a
    run cut short by its budget still has points of each; ``naive``: the three-step naive
    baseline too, on the forward shapes whose S fits ``NAIVE_SCORE_BYTES_CAP``."""
    per_mode = {
        "forward": [("pallas_flash", "triton"), ("pallas_flash", "mosaic"), ("cudnn", None)],
        "train": [("pallas_flash", "auto"), ("cudnn", None)],
        "decode": [("paged_decode", None), ("cudnn", None)],
    }
    if naive:
        per_mode["forward"].append(("naive", None))
    queues = {
        mode: [
            {"implementation": impl, "backend": backend, "phase": mode, "shape": s}
            for s in shapes[mode]
            for impl, backend in per_mode[mode]
            if impl != "naive" or _naive_fits(s)
        ]
        for mode in shapes
    }
    out = []
    while any(queues.values()):
        for mode in ("forward", "train", "decode"):
            take = 3 if mode == "forward" else 2
            out += queues[mode][:take]
            queues[mode] = queues[mode][take:]
    return out


def job_families(job: dict) -> list[str]:
    """The kernel families a job may run as: ours under ``auto`` could be either."""
    impl, backend = job["implementation"], job["backend"]
    if impl == "naive":
        return ["xla-naive"]
    if impl == "pallas_flash":
        return list(BACKEND_FAMILY.values()) if backend == "auto" else [BACKEND_FAMILY[backend]]
    return ["pallas-paged" if impl == "paged_decode" else "cudnn"]


# ---------------------------------------------------------------- predictions (CPU)


def predictions(
    seed: int = SEED,
    hw: str = "h200",
    shapes: dict[str, list[dict]] | None = None,
    ceilings: str = "measured",
) -> dict:
    """Today's model for every job (perfmodel.predict on ``hw``, the job's family and mode)
    of the draw of ``seed``, or of ``shapes`` (a committed predictions file's: its draw
    again under today's model; a new draw would avoid the shapes measured since)."""
    from perfmodel import __version__, predict
    from perfmodel.shape import Shape
    from perfmodel.validation.compare import NAIVE_OF

    shapes = draw(seed) if shapes is None else shapes
    rows = []
    for job in jobs(shapes, naive=seed >= NAIVE_FROM_SEED):
        s = job["shape"]
        for family in job_families(job):
            naive = job["implementation"] == "naive"
            shape = Shape(
                n=s["n"], kv_len=s["kv_len"], d=s["d"], h=s["h"], h_kv=s["h_kv"],
                batch=s["batch"], dtype={"float16": "fp16", "bfloat16": "bf16"}[s["dtype"]],
                causal=s["causal"], kernel=None if naive else family,
            )  # fmt: skip
            mode = "train" if job["phase"] == "train" else "forward"
            extra = {"page_tokens": PAGE_SIZE} if family == "pallas-paged" else {}
            if naive:  # what perfmodel validate compares the three-step baseline with
                extra["naive"] = NAIVE_OF["naive"]
            both = predict(hw=hw, **shape.kwargs(), mode=mode, ceilings=ceilings, **extra)
            pred = both.naive if naive else both.flash
            rows.append(
                {
                    **{k: job[k] for k in ("implementation", "backend", "phase")},
                    **s,
                    "family": family,
                    "predicted_time_s": float(pred.time_s),
                    "predicted_t_lower_s": float(pred.t_lower_s),
                }
            )
    return {
        "what": "perfmodel predictions for the held-out draw of kernel_bench/heldout_draw.py, "
        "committed before the GPU run",
        "seed": seed,
        "perfmodel_version": __version__,
        # the model's code: PERFMODEL_GIT_COMMIT names it when run from an export of a commit
        "git_commit": os.environ.get("PERFMODEL_GIT_COMMIT") or _git_commit(),
        "hw": hw,
        "ceilings": ceilings,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "shapes": shapes,
        "predictions": rows,
    }


def _git_commit() -> str:
    import subprocess

    try:
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except Exception:  # noqa: BLE001
        return "unknown"


# ---------------------------------------------------------------- measurement (GPU)


def _prefill_fn(impl: str, backend: str | None, causal: bool, train: bool):
    import jax

    from kernel_bench.bench import impl_fn

    f = impl_fn(impl, causal=causal, cfg=None, backend=backend or "triton")
    if not train:
        return f
    return jax.jit(lambda q, k, v, do: jax.vjp(f, q, k, v)[1](do))


def _decode_sets(s: dict, copies: int, seed: int) -> list[dict]:
    """Input sets of a decode shape: contiguous K/V (cuDNN) and the same tokens in
    64-token pages behind a shuffled table (ours); ``kv_len`` need not fill a page."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    b, m, h, h_kv, d = (s[x] for x in ("batch", "kv_len", "h", "h_kv", "d"))
    dtype = getattr(jnp, s["dtype"])
    pages = -(-m // PAGE_SIZE)
    rng = np.random.default_rng(seed)
    out = []
    for i in range(copies):
        kq, kk, kv = jax.random.split(jax.random.fold_in(jax.random.key(seed), i), 3)
        k = jax.random.normal(kk, (b, pages * PAGE_SIZE, h_kv, d), dtype)
        v = jax.random.normal(kv, (b, pages * PAGE_SIZE, h_kv, d), dtype)
        table = rng.permutation(b * pages).reshape(b, pages).astype(np.int32)
        pool = lambda x: x.reshape(b * pages, PAGE_SIZE, h_kv, d)  # noqa: E731
        order = jnp.asarray(np.argsort(table.reshape(-1)))
        out.append(
            {
                "q": jax.random.normal(kq, (b, 1, h, d), dtype),
                "k": k[:, :m],
                "v": v[:, :m],
                "k_pages": pool(k)[order],  # page table[i, j] holds tokens j of sequence i
                "v_pages": pool(v)[order],
                "table": jnp.asarray(table),
                "lengths": jnp.full((b,), m, jnp.int32),
            }
        )
    return out


def _time_decode(job: dict, point: dict) -> dict:
    from kernel_bench.bench_decode import time_variant

    s = job["shape"]
    set_bytes = 2 * 2 * s["batch"] * s["kv_len"] * s["h_kv"] * s["d"]
    copies = max(1, min(8, math.ceil(3 * 62914560 / set_bytes)))
    sets = _decode_sets(s, copies, seed=len(point["implementation"]) + s["kv_len"])
    impl = job["implementation"]
    timed = time_variant(impl, None, sets, with_kernels=True)
    detail = {"copies": timed.pop("copies"), "kernel_list": timed.pop("kernel_list")}
    if impl == "paged_decode":  # splits: the kernel's default (details only: the
        # point leaves them to the model's rule, as the committed predictions did)
        import jax

        from pallas_kernels.paged_decode import default_splits

        sms = int(getattr(jax.devices()[0], "core_count", 0) or 132)
        pages = -(-s["kv_len"] // PAGE_SIZE)
        detail["splits"] = default_splits(s["batch"], s["h_kv"], pages, sms)
        point["page_size"] = PAGE_SIZE
    from perfmodel.costs.nominal import nominal_flops

    flops = nominal_flops(batch=s["batch"], h=s["h"], n=1, kv_len=s["kv_len"], d=s["d"])
    med = timed["median_s"]
    point.update(timed, status="ok", tflops=flops / med / 1e12, tokens_per_s=s["batch"] / med)
    return detail


def _time_prefill(job: dict, point: dict) -> dict:
    import jax

    from kernel_bench.bench import make_inputs, timed_fields
    from kernel_bench.timing import measure_all
    from perfmodel.costs.nominal import nominal_flops

    s = job["shape"]
    train = job["phase"] == "train"
    b, n, m, h, h_kv, d = (s[x] for x in ("batch", "n", "kv_len", "h", "h_kv", "d"))
    dtype = getattr(jax.numpy, s["dtype"])
    sets = make_inputs(jax.random.key(len(job["implementation"]) + n), b, n, m, h, h_kv, d, dtype)
    detail = {}
    if job["implementation"] == "pallas_flash":
        from pallas_kernels.flash_attention import choose_backend

        chosen = choose_backend(*sets[0], causal=s["causal"], backend=job["backend"])
        point["family"] = BACKEND_FAMILY[chosen]
        detail["backend"] = chosen
    if train:
        keys = jax.random.split(jax.random.key(7), len(sets))
        sets = [
            (*qkv, jax.random.normal(kk, qkv[0].shape, dtype))
            for qkv, kk in zip(sets, keys, strict=True)
        ]
    fn = _prefill_fn(job["implementation"], job["backend"], s["causal"], train)
    jax.block_until_ready(fn(*sets[0]))  # compiles, untimed
    timed = measure_all(fn, sets, budget_s=0.12, with_kernels=True)
    detail["kernel_list"] = timed.pop("kernel_list")
    flops = nominal_flops(batch=b, h=h, n=n, kv_len=m, d=d, causal=s["causal"],
                          mode="train" if train else "forward")  # fmt: skip
    point.update(timed_fields(timed, flops=flops, tokens=b * n), status="ok")
    return detail


def measure(
    pred_path: Path,
    out: Path,
    details: Path,
    budget_s: float,
    run_name: str = "heldout2",
    from_job: int = 1,
) -> int:
    """Time the jobs of a predictions file from job ``from_job`` (1-based: a later call
    finishes what an earlier one's budget left) until the budget is spent."""
    import jax

    from kernel_bench.bench import RunWriter, empty_point, git_commit, record_failure

    pred = json.loads(pred_path.read_text())
    todo = jobs(pred["shapes"], naive=pred.get("seed", SEED) >= NAIVE_FROM_SEED)
    deadline = time.monotonic() + budget_s
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    run = {
        "run_id": f"{run_name}-{stamp}",
        "device_name": jax.devices()[0].device_kind,
        "jax_version": jax.__version__,
        "git_commit": git_commit(),
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()),
        "ceilings": run_ceilings(),
        "points": [],
    }
    writer = RunWriter(out, run)
    writer.flush()
    log = []
    for i, job in enumerate(todo):
        if i + 1 < from_job:
            continue
        if time.monotonic() > deadline:
            print(f"budget reached: {len(todo) - i} of {len(todo)} jobs not started", flush=True)
            break
        s = job["shape"]
        point = empty_point(job["implementation"], s)
        point.update(phase=job["phase"], family=job_families(job)[0])
        t0 = time.perf_counter()
        detail = {}
        try:
            if job["phase"] == "decode":
                point.pop("phase")
                detail = _time_decode(job, point)
            else:
                detail = _time_prefill(job, point)
        except Exception as err:  # noqa: BLE001 - a failed job is a point with its error
            record_failure(point, err)
        finally:
            gc.collect()
        writer.add(point)
        log.append({**point, **detail, "backend": detail.get("backend", job["backend"]),
                    "seconds": round(time.perf_counter() - t0, 2)})  # fmt: skip
        _write_json(details, {"predictions": str(pred_path.name), "points": log})
        what = (
            f"{point['median_s'] * 1e6:10.1f} us {point.get('tflops') or 0:6.1f} TF/s"
            if point["status"] == "ok"
            else f"{point['status']}: {str(point['error'])[:100]}"
        )
        print(
            f"[{i + 1:3d}/{len(todo)}] {job['phase']:7s} {job['implementation']:12s} "
            f"{point['family']:13s} b={s['batch']} n={s['n']} m={s['kv_len']} h={s['h']}/"
            f"{s['h_kv']} d={s['d']} c={int(s['causal'])} {s['dtype'][:4]}  {what}",
            flush=True,
        )
    return 0


def run_ceilings() -> dict:
    """The run's ``ceilings`` (the schema's field): the GEMM, copy and L2 rates of the
    ceilings file measured earlier in the same GPU call (``HELDOUT_CEILINGS``), else
    measured now by ``kernel_bench.probes``."""
    import tomllib

    path = os.environ.get("HELDOUT_CEILINGS")
    if path and Path(path).exists():
        c = tomllib.loads(Path(path).read_text()).get("ceilings", {})
        names = {
            "matmul_bf16_flops_per_s": "gemm_bf16_flops_per_s",
            "copy_bytes_per_s": "hbm_copy_bytes_per_s",
            "l2_read_bytes_per_s": "l2_read_bytes_per_s",
            "launch_overhead_s": "launch_latency_s",
        }
        out = {ours: c[theirs]["value"] for ours, theirs in names.items() if theirs in c}
        if "matmul_bf16_flops_per_s" in out and "copy_bytes_per_s" in out:
            print(f"run ceilings from {path}: {out}", flush=True)
            return out
    from kernel_bench.probes import measure_ceilings

    return measure_ceilings()


def prediction_key(row: dict) -> tuple:
    """A prediction's (or a measured point's, as a dict) job and family."""
    fields = ("implementation", "n", "kv_len", "d", "h", "h_kv", "batch", "dtype", "causal")
    return (*(row[k] for k in fields), row.get("phase") or "decode", row["family"])


def scored(pred_path: Path, measured: Path | list[Path]) -> dict[str, list[tuple]]:
    """Per ``perfmodel validate`` group, (committed prediction / measured - 1, fastest run,
    committed t_lower_s, the point) of every ok point: the held-out figures, from the predictions
    committed before the run (no model is run). ``measured``: one file or the files of
    several calls that timed the draw's jobs (``measure --from-job``)."""
    from perfmodel.validation.compare import group_of, modelled
    from perfmodel.validation.measured import load_measurements

    table = {prediction_key(r): r for r in json.loads(pred_path.read_text())["predictions"]}
    out: dict[str, list[tuple[float, float, float]]] = {}
    paths = [measured] if isinstance(measured, Path) else list(measured)
    for _, point in load_measurements(paths):
        if not modelled(point):
            continue
        row = table[prediction_key({**point.model_dump(), "phase": point.phase})]
        m = float(point.median_s)
        fastest = float(point.min_s or m)
        out.setdefault(group_of(point), []).append(
            (row["predicted_time_s"] / m - 1, fastest, row["predicted_t_lower_s"], point)
        )
    return out


def score(pred_path: Path, measured: Path | list[Path]) -> str:
    """The table of :func:`scored`: points, signed median, median and max |error|, and
    points whose fastest run is below the committed ``t_lower_s``."""
    from perfmodel.validation.compare import error_figures

    lines = [f"{'group':42s} {'points':>6s} {'signed':>7s} {'median':>7s} {'max':>7s} below"]
    for group, rows in sorted(scored(pred_path, measured).items()):
        points, signed, absolute, top = error_figures(r[0] for r in rows)
        below = sum(fastest < floor for _, fastest, floor, _ in rows)
        lines.append(
            f"{group:42s} {points:6d} {signed:+7.1%} {absolute:7.1%} {top:7.1%} {below:5d}"
        )
    return "\n".join(lines)


def point_errors(pred_path: Path, measured: Path | list[Path]) -> str:
    """Every scored point, one line each, by group and error: where a group's misses are."""
    lines = []
    for group, rows in sorted(scored(pred_path, measured).items()):
        for error, _, _, p in sorted(rows, key=lambda r: r[0]):
            shape = (
                f"b={p.batch} n={p.n} m={p.kv_len} h={p.h}/{p.h_kv} d={p.d} "
                f"c={int(p.causal)} {p.dtype}"
            )
            kernels = p.kernels_per_call if p.kernels_per_call is not None else "-"
            lines.append(
                f"{group:38s} {error:+7.1%}  {shape:48s} {float(p.median_s) * 1e6:9.1f} us"
                f"  kernels {kernels}"
            )
    return "\n".join(lines)


def _write_json(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="verb", required=True)
    p = sub.add_parser("predict", help="CPU: draw the shapes and write today's predictions")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--seed", type=int, default=SEED)
    p.add_argument("--hw", default="h200", help="the device predicted (a specs/devices name)")
    p.add_argument(
        "--shapes-of", type=Path, default=None,
        help="a committed predictions file: predict its shapes (and seed) with today's model",
    )  # fmt: skip
    p.add_argument("--ceilings", choices=("measured", "datasheet"), default="measured")
    m = sub.add_parser("measure", help="GPU: time every job of a predictions file")
    m.add_argument("--predictions", type=Path, required=True)
    m.add_argument("--out", type=Path, required=True)
    m.add_argument("--details", type=Path, required=True)
    m.add_argument("--budget-s", type=float, default=200.0)
    m.add_argument("--run-name", default="heldout2", help="the run_id's prefix")
    m.add_argument("--from-job", type=int, default=1, help="the first job to time (1-based)")
    sc = sub.add_parser("score", help="CPU: the committed predictions against a measurement")
    sc.add_argument("--predictions", type=Path, required=True)
    sc.add_argument("--measured", type=Path, nargs="+", required=True)
    sc.add_argument("--points", action="store_true", help="also every point's error")
    args = ap.parse_args(argv)
    if args.verb == "score":
        print(score(args.predictions, args.measured))
        if args.points:
            print()
            print(point_errors(args.predictions, args.measured))
        return 0
    if args.verb == "predict":
        seed, shapes = args.seed, None
        if args.shapes_of is not None:
            old = json.loads(args.shapes_of.read_text())
            seed, shapes = old["seed"], old["shapes"]
        _write_json(args.out, predictions(seed, args.hw, shapes, args.ceilings))
        print(f"wrote {args.out}")
        return 0
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    return measure(
        args.predictions, args.out, args.details, args.budget_s, args.run_name, args.from_job
    )


if __name__ == "__main__":
    sys.exit(main())
