"""The kernels XLA runs for ``jax.nn.dot_product_attention(implementation="xla")`` (GPU).

Issue 21, item 3: XLA's decode and prefill passes as XLA compiles them. For a few
prefill and decode shapes (the committed ``xla`` points' family: GQA 32:8 decode over
batch 1-16, MHA prefill, causal or not), each call's CUPTI kernel list (name, median
seconds), its optimised HLO's fusion and custom-call names, and the device time, as
data for the model's naive-XLA structure::

    PYTHONPATH=. python -m kernel_bench.xla_kernels --out $OUT/xla-kernels.json

jax only (no perfmodel, no pydantic). Written atomically after every shape.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

#: (label, b, n, m, h, h_kv, d, causal): decode at the committed points' GQA and a batch
#: sweep (b = 1 against b > 1: whether K/V are copied to a batch-major layout first), and
#: prefill at two lengths.
SHAPES = (
    ("decode", 1, 1, 16384, 32, 8, 128, False),
    ("decode", 2, 1, 16384, 32, 8, 128, False),
    ("decode", 4, 1, 16384, 32, 8, 128, False),
    ("decode", 16, 1, 4096, 32, 8, 128, False),
    ("decode", 4, 1, 16384, 32, 32, 128, False),
    ("prefill", 4, 4096, 4096, 16, 16, 128, False),
    ("prefill", 4, 4096, 4096, 16, 16, 128, True),
    ("prefill", 1, 4096, 4096, 16, 16, 128, False),
    ("prefill", 2, 16384, 16384, 8, 8, 64, False),
)


def _hlo_ops(compiled_text: str) -> list[str]:
    """The optimised HLO entry's fusions and custom calls, in order (names only)."""
    entry = compiled_text[compiled_text.find("ENTRY") :]
    out = []
    for line in entry.splitlines():
        m = re.search(r"=\s*\S+\s+(fusion|custom-call|copy|transpose)\(", line)
        if m:
            kind = re.search(r"kind=(\w+)", line)
            target = re.search(r'custom_call_target="([^"]+)"', line)
            out.append(
                m.group(1)
                + (f":{kind.group(1)}" if kind else "")
                + (f":{target.group(1)}" if target else "")
            )
    return out


def main(argv=None) -> int:
    import jax
    import jax.numpy as jnp

    from kernel_bench import timing

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    rows = []
    for label, b, n, m, h, h_kv, d, causal in SHAPES:
        kq, kk, kv = jax.random.split(jax.random.key(0), 3)
        q = jax.random.normal(kq, (b, n, h, d), jnp.bfloat16)
        k = jax.random.normal(kk, (b, m, h_kv, d), jnp.bfloat16)
        v = jax.random.normal(kv, (b, m, h_kv, d), jnp.bfloat16)
        fn = jax.jit(
            lambda q, k, v, c=causal: jax.nn.dot_product_attention(
                q, k, v, is_causal=c, implementation="xla"
            )
        )
        row = {"label": label, "b": b, "n": n, "m": m, "h": h, "h_kv": h_kv, "d": d,
               "causal": causal, "dtype": "bfloat16"}  # fmt: skip
        try:
            row["hlo_ops"] = _hlo_ops(fn.lower(q, k, v).compile().as_text())
            t = timing.measure_all(fn, [(q, k, v)], with_kernels=True)
            row.update(
                device_time_s=t["device_time_s"], method=t["device_time_method"],
                kernels=t["kernels_per_call"], kernel_list=t["kernel_list"],
            )  # fmt: skip
        except Exception as err:  # noqa: BLE001 - a failed shape is a row with its error
            row["error"] = f"{type(err).__name__}: {err}"[:300]
        rows.append(row)
        print(
            f"{label:7s} b={b} n={n} m={m} h={h}/{h_kv} d={d} c={int(causal)}: "
            f"{row.get('device_time_s', 0) * 1e6:9.1f} us, {row.get('kernels')} kernels; "
            f"{', '.join(str(x[0])[:40] for x in row.get('kernel_list') or [])[:300]}",
            flush=True,
        )
        out = {
            "what": __doc__.splitlines()[0],
            "device": jax.devices()[0].device_kind,
            "jax_version": jax.__version__,
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "rows": rows,
        }
        tmp = args.out.with_name(f".{args.out.name}.tmp{os.getpid()}")
        tmp.write_text(json.dumps(out, indent=1))
        os.replace(tmp, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
