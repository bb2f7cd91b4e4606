"""Every output of ``predict()`` over a fixed grid of shapes, written to JSON or compared.

A refactor of the engine must leave the numbers as they are, except where it fixes a
stated disagreement. This tool writes the full result of 1040 ``predict()`` calls
(kernel families x devices x shapes x modes, chosen to reach splits, GQA packing,
causal masks, decode and paged caches) and of a few sweeps, then compares two such
files and lists every field that differs.

    PYTHONPATH=TREE python tools/predict_snapshot.py write OUT.json
    python tools/predict_snapshot.py compare BEFORE.json AFTER.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import re
import sys
from typing import Any

KERNELS = ("fa2", "fa3", "cudnn", "flash-decoding", "pallas-triton")
DEVICES = ("h200", "h100", "a100", "b200")
#: (n, kv_len, d, h, h_kv, batch, causal): prefill, GQA, decode, short and odd lengths.
SHAPES = (
    (4096, None, 128, 16, None, 1, False),
    (4096, None, 128, 32, 8, 1, True),
    (576, None, 96, 1, None, 1, True),
    (577, None, 96, 1, None, 1, True),
    (1, 8192, 128, 32, 8, 4, False),
    (16, 32768, 64, 8, 1, 1, False),
    (1000, None, 64, 12, None, 3, False),
    (8192, None, 256, 8, 2, 2, True),
    (128, None, 32, 4, None, 8, False),
    (2048, 4096, 128, 16, 4, 1, False),
    (31, None, 128, 2, 1, 1, True),
    (65536, None, 128, 4, None, 1, True),
    (3, 100000, 128, 64, 8, 16, False),
)
MODES = ("forward", "train")


def _cases() -> list[dict[str, Any]]:
    cases = []
    for kernel, hw, shape, mode in itertools.product(KERNELS, DEVICES, SHAPES, MODES):
        n, kv_len, d, h, h_kv, batch, causal = shape
        if mode != "forward" and kv_len is not None:
            continue
        cases.append(
            dict(
                n=n,
                kv_len=kv_len,
                d=d,
                h=h,
                h_kv=h_kv,
                batch=batch,
                causal=causal,
                hw=hw,
                kernel=kernel,
                mode=mode,
            )
        )
    extra = [
        dict(n=4096, hw="h200", h=16, block_q=64, block_k=64),
        dict(n=4096, hw="h200", h=16, warps=8),
        dict(n=1, kv_len=65536, hw="h200", h=32, h_kv=8, splits=4),
        dict(n=1, kv_len=65536, hw="h200", h=32, h_kv=8, page_tokens=16, kernel="pallas-paged"),
        dict(n=4096, hw="h200", h=16, naive="xla"),
        dict(n=4096, hw="h200", h=16, dtype="bf16", mode="backward"),
        dict(n=131072, hw="h200", h=16, dtype="bf16", cp=2),
        dict(n=131072, hw="h200", h=16, dtype="bf16", cp=4, cp_scheme="ulysses"),
        dict(n=65536, hw="h200", h=16, dtype="bf16", tp=2),
        dict(n=65536, hw="h200", h=16, dtype="bf16", cp=2, causal=True),
    ]
    cases += extra
    # pad to a round, stable count with a second dtype on the first shapes
    i = 0
    while len(cases) < 1040:
        case = dict(cases[i])
        case["dtype"] = "bf16" if i % 2 else "fp32"
        cases.append(case)
        i += 1
    return cases[:1040]


SWEEPS = (
    dict(hw="h200", n=[256, 1000, 4096, 16384], d=[64, 128], causal=[False, True]),
    dict(hw="h100", n=[1, 16, 4096], kv_len=[8192], h=[32], h_kv=[8], batch=[1, 8]),
    dict(hw="a100", n=[512, 2048], mode="train", kernel="fa2"),
    dict(hw="h200", n=[576, 577, 578], d=[96], kernel="fa3", causal=[True]),
)


def _plain(value: Any) -> Any:
    """JSON-ready: numbers as repr strings (bit-exact), containers recursively."""
    if hasattr(value, "model_dump"):
        return _plain(value.model_dump())
    if hasattr(value, "__dataclass_fields__"):
        return _plain(vars(value))
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, float):
        return "nan" if math.isnan(value) else repr(value)
    if hasattr(value, "tolist"):
        return _plain(value.tolist())
    return value


def write(path: str) -> None:
    import perfmodel

    out: dict[str, Any] = {"predict": [], "sweep": []}
    for case in _cases():
        try:
            p = perfmodel.predict(**case)
            row = _plain(p.model_dump(exclude={"hardware"}))
        except Exception as e:  # an error is part of the snapshot
            row = {"error": f"{type(e).__name__}: {e}"}
        out["predict"].append({"case": case, "result": row})
    for case in SWEEPS:
        kw = dict(case)
        hw = kw.pop("hw")
        try:
            r = perfmodel.sweep(hw, **kw)
            row = {k: _plain(v) for k, v in sorted(r.items())}
        except Exception as e:
            row = {"error": f"{type(e).__name__}: {e}"}
        out["sweep"].append({"case": case, "result": row})
    with open(path, "w") as f:
        json.dump(out, f)


def _diff(a: Any, b: Any, where: str, found: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                found.append(f"{where}.{k}: only in {'after' if k in b else 'before'}")
            else:
                _diff(a[k], b[k], f"{where}.{k}", found)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _diff(x, y, f"{where}[{i}]", found)
    elif a != b:
        found.append(f"{where}: {str(a)[:80]} -> {str(b)[:80]}")


def compare(before: str, after: str, expected: tuple[str, ...] = (), show: int = 12) -> int:
    """Every differing field; fields matching an ``expected`` pattern (a regular
    expression on the path, e.g. a fixed disagreement) are counted apart."""
    with open(before) as f:
        a = json.load(f)
    with open(after) as f:
        b = json.load(f)
    changed = 0
    counts: dict[str, int] = {}
    for side in ("predict", "sweep"):
        for x, y in zip(a[side], b[side], strict=True):
            found: list[str] = []
            _diff(x["result"], y["result"], "", found)
            for line in found:
                field = re.sub(r"\[\d+\]", "[]", line.split(":")[0])
                counts[field] = counts.get(field, 0) + 1
            found = [f for f in found if not any(re.search(e, f.split(":")[0]) for e in expected)]
            if found:
                changed += 1
                print(f"{side} {x['case']}:")
                for line in found[:show]:
                    print(f"    {line}")
                if len(found) > show:
                    print(f"    ... {len(found) - show} more")
    print("fields changed (cases):")
    for field, count in sorted(counts.items(), key=lambda kv: -kv[1]):
        print(f"  {count:5d}  {field}")
    total = len(a["predict"]) + len(a["sweep"])
    print(f"{changed} of {total} cases differ beyond the expected patterns")
    return 1 if changed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("out")
    c = sub.add_parser("compare")
    c.add_argument("before")
    c.add_argument("after")
    c.add_argument("--expected", action="append", default=[], help="path regex to count apart")
    c.add_argument("--show", type=int, default=12)
    args = parser.parse_args(argv)
    if args.cmd == "write":
        write(args.out)
        return 0
    return compare(args.before, args.after, tuple(args.expected), args.show)


if __name__ == "__main__":
    sys.exit(main())
