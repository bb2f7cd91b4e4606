"""Second look on the GPU: flash tile configs per n against cuDNN, and naive's HLO.

1. Times our kernel at d=128 bf16, n >= 4096, with two tile configurations each, and
   cuDNN in the same run (a ``recheck-`` run appended to ``--out``), because the
   short-list autotune of the sweep tuned at n=8192 only.
2. Writes the optimised HLO of the naive steps (causal and not; a short and a long
   softmax row) to ``--hlo``, to read what XLA does with S and P.

    python -m kernel_bench.recheck --out FILE --hlo FILE
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

CONFIGS = {  # (d, causal) -> tile configurations to time
    (128, False): [(128, 128, 8, 3), (128, 64, 4, 2)],
    (128, True): [(128, 128, 8, 3), (128, 64, 4, 3)],
}
NS = (4096, 8192, 16384, 32768)
_CFG = ("block_q", "block_k", "num_warps", "num_stages")


def time_configs(out: Path, samples: int) -> None:
    from kernel_bench.bench import RunWriter, new_run, shape_of, time_point

    writer = RunWriter(out, new_run("recheck"))
    for (d, causal), configs in CONFIGS.items():
        for n in NS:
            shape = shape_of(n, d, causal)
            cud = time_point("cudnn", shape, samples=samples)
            writer.add(cud)
            for values in configs:
                p = time_point(
                    "pallas_flash", shape, cfg=dict(zip(_CFG, values, strict=True)), samples=samples
                )
                writer.add(p)
                ratio = p["tflops"] / cud["tflops"] if p["tflops"] and cud["tflops"] else math.nan
                ours, theirs = p["tflops"] or 0, cud["tflops"] or 0
                print(
                    f"d={d} causal={causal} n={n} {values}: ours {ours:.0f} "
                    f"cuDNN {theirs:.0f} TFLOP/s, ratio {ratio:.2f}",
                    flush=True,
                )


ONE_HEAD_NS = (1024, 2048, 4096, 8192, 16384, 32768)


def time_one_head(out: Path, samples: int) -> None:
    """One head and batch 1 at d=128 (the README's worked numbers; here bf16): naive, ours and
    cuDNN, to check what the model says about a grid of n/128 blocks on 132 SMs."""
    from kernel_bench.bench import RunWriter, new_run, shape_of, time_point

    writer = RunWriter(out, new_run("onehead"))
    for n in ONE_HEAD_NS:
        shape = shape_of(n, 128, False, heads=1, tokens=1)
        row = {}
        for impl in ("naive", "pallas_flash", "cudnn"):
            cfg = dict(zip(_CFG, (128, 128, 8, 3), strict=True)) if impl == "pallas_flash" else None
            p = time_point(impl, shape, cfg=cfg, samples=samples)
            writer.add(p)
            row[impl] = p["median_s"]
        cells = "  ".join(f"{k} {v * 1e6:8.1f} us" if v else f"{k} -" for k, v in row.items())
        print(f"one head n={n}: {cells}", flush=True)


def dump_hlo(path: Path) -> None:
    import jax
    import jax.numpy as jnp

    from pallas_kernels.naive import scores_step, softmax_step

    parts = []
    for n, b, causal in ((8192, 2, False), (8192, 2, True), (16384, 1, False)):
        q = jax.ShapeDtypeStruct((b, n, 16, 128), jnp.bfloat16)
        s = jax.ShapeDtypeStruct((b, 16, n, n), jnp.bfloat16)
        qk = jax.jit(lambda q, k, c=causal: scores_step(q, k, causal=c, sm_scale=0.088))
        for name, fn, args in (("qk", qk, (q, q)), ("softmax", softmax_step, (s,))):
            text = fn.lower(*args).compile().as_text()
            parts.append(f"==== {name} n={n} b={b} causal={causal}\n{text}\n")
    path.write_text("".join(parts))


def table(path: Path) -> str:
    """Markdown: each recheck run's configurations against cuDNN timed beside them."""
    import json

    lines = []
    for run in json.loads(path.read_text())["runs"]:
        if not run["run_id"].startswith("recheck"):
            continue
        lines += [
            f"Run `{run['run_id']}` (jax {run['jax_version']}, commit "
            f"`{run['git_commit'][:12]}`), TFLOP/s, d=128 bf16, batch·n = 16384, h = 16:",
            "",
            "| causal | n | cuDNN | ours 128×128 w8 s3 | ratio | ours 128×64 w4 | ratio |",
            "|---|---|---|---|---|---|---|",
        ]
        points = run["points"]
        for causal in (False, True):
            for n in NS:
                here = [p for p in points if p["n"] == n and p["causal"] == causal]
                cud = next(p["tflops"] for p in here if p["implementation"] == "cudnn")
                ours = sorted(
                    (p for p in here if p["implementation"] == "pallas_flash"),
                    key=lambda p: -p["block_k"],
                )
                cells = " | ".join(f"{p['tflops']:.0f} | {p['tflops'] / cud:.2f}" for p in ours)
                lines.append(f"| {'yes' if causal else 'no'} | {n} | {cud:.0f} | {cells} |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--hlo", type=Path)
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--table", action="store_true", help="print the table of --out and exit")
    ap.add_argument("--one-head", action="store_true", help="time the one-head series only")
    args = ap.parse_args(argv)
    if args.table:
        print(table(args.out))
        return 0
    if args.one_head:
        time_one_head(args.out, args.samples)
        return 0
    dump_hlo(args.hlo)
    time_configs(args.out, args.samples)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
