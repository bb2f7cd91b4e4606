"""What XLA compiles for the naive scores step under each mask, on the GPU at hand.

The naive model's "xla" form (``perfmodel.costs.naive``) charges a causal mask one
extra pass over float32 scores (+8 bytes a score), read off the H200's optimised HLO:
the score matmul becomes a cuBLAS call that writes float32, and a second fusion masks
and rounds. This script compiles the same step with the masks a user writes for a
sliding window, packed documents and a block mask (each from iotas or a small array,
as ``jnp.where(mask, s, -inf)``), and prints per mask: the fusions and custom calls of
the optimised HLO with their output shapes, and XLA's own ``bytes accessed``, so the
mask pass can be compared with the causal one. It times nothing.

    python benchmarks/naive_mask_hlo.py --out DIR
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

N, B, H, D = 8192, 1, 16, 128
WINDOW = 1024
DOCS = (3000, 2000, 3192)
BLOCK = 128


def _masks(jnp, jax):
    rows = jax.lax.broadcasted_iota(jnp.int32, (N, N), 0)
    cols = jax.lax.broadcasted_iota(jnp.int32, (N, N), 1)
    doc = jnp.searchsorted(jnp.cumsum(jnp.array(DOCS)), jnp.arange(N), side="right")
    tiles = (jnp.arange(N // BLOCK)[:, None] >= jnp.arange(N // BLOCK)[None, :]) & (
        (jnp.arange(N // BLOCK)[:, None] - jnp.arange(N // BLOCK)[None, :]) < 8
    )
    return {
        "none": None,
        "causal": cols <= rows,
        "window": (cols <= rows) & (cols >= rows - WINDOW),
        "documents": (doc[:, None] == doc[None, :]) & (cols <= rows),
        "block": jnp.repeat(jnp.repeat(tiles, BLOCK, 0), BLOCK, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    import jax
    import jax.numpy as jnp

    args.out.mkdir(parents=True, exist_ok=True)
    q = jax.ShapeDtypeStruct((B, N, H, D), jnp.bfloat16)
    report = {"device": str(jax.devices()[0]), "jax": jax.__version__, "shape": [B, N, H, D]}
    for name in ("none", "causal", "window", "documents", "block"):

        def step(q, k, name=name):
            s = jnp.einsum("bqhd,bkhd->bhqk", q, k, preferred_element_type=jnp.float32) * 0.088
            mask = _masks(jnp, jax)[name]
            if mask is not None:
                s = jnp.where(mask, s, -jnp.inf)
            return s.astype(q.dtype)

        compiled = jax.jit(step).lower(q, q).compile()
        text = compiled.as_text()
        (args.out / f"qk-{name}.hlo.txt").write_text(text)
        entry = text[text.index("ENTRY") :]
        calls = re.findall(r"= (\(.*?\)|\S+) (fusion|custom-call)\(", entry)
        cost = compiled.cost_analysis()
        cost = cost[0] if isinstance(cost, list) else cost
        report[name] = {
            "launches": [f"{kind}:{shape}" for shape, kind in calls],
            "bytes_accessed": float(cost.get("bytes accessed", float("nan"))),
            "bytes_per_score": float(cost.get("bytes accessed", float("nan"))) / (B * H * N * N),
        }
        print(name, report[name])
    (args.out / "naive-mask-hlo.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
