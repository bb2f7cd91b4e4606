"""Every measured point against the model's lower bound ``t_lower_s`` (CPU, needs pydantic).

Reads measurement files as plain JSON (old points and new device-time points alike;
every point of every run, not the newest per configuration) and lists each point whose
fastest time lies below the floor of a public path::

    python -m kernel_bench.floor_check specs/measurements/*.json

Paths: forward points against ``predict(...).flash.t_lower_s`` (fused kernels: ours,
cuDNN, JAX's Mosaic attention; the lowest over the tiles a peer may use) or
``.naive.t_lower_s`` (naive, naive_jit, XLA); decode points (``n = 1`` with a KV
cache) against ``kvcache.decode_step(...).t_lower_s`` and against
``predict(n=1, kv_len=m, ...).flash.t_lower_s``. The fastest time of a point is the
smallest of ``min_s``, ``p10_s``, ``median_s`` and ``device_time_s``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from perfmodel.vocabulary import dtype

FUSED = ("pallas_flash", "cudnn", "mgpu_attention")
UNFUSED = {"naive": "xla", "naive_jit": "minimal", "xla": "minimal"}
PEER_TILES = ((64, 64), (64, 128), (128, 64), (128, 128), (128, 256), (256, 128))


def fastest(p: dict) -> float:
    return min(p[k] for k in ("min_s", "p10_s", "median_s", "device_time_s") if p.get(k))


def _dtype(p: dict) -> str:
    """The point's dtype in the model's names (``bfloat16`` -> ``bf16``)."""
    return str(dtype(p["dtype"], framework_names=True))


def _shape(p: dict) -> dict:
    return dict(
        n=p["n"],
        kv_len=p["kv_len"],
        d=p["d"],
        h=p["h"],
        h_kv=p["h_kv"],
        batch=p["batch"],
        dtype=_dtype(p),
        causal=p["causal"],
    )


def floors(p: dict, hw: str = "h200") -> dict[str, float]:
    """Lower bounds of the public paths that describe this point (path -> seconds)."""
    from perfmodel import predict
    from perfmodel.errors import PerfmodelError

    out = {}
    impl = p["implementation"]
    is_decode = p["n"] == 1 and p["kv_len"] > 1
    if is_decode:
        from perfmodel.analysis.kvcache import decode_step

        step = decode_step(
            hw,
            batch=p["batch"],
            kv_len=p["kv_len"],
            h=p["h"],
            h_kv=p["h_kv"],
            d=p["d"],
            dtype=_dtype(p),
            q_len=1,
            page_tokens=p.get("page_size"),
            splits=p.get("splits") or 1,
        )
        out["decode_step"] = step.t_lower_s
        out["predict.flash"] = predict(hw=hw, **_shape(p)).flash.t_lower_s
        return out
    if impl in UNFUSED:
        out["predict.naive"] = predict(hw=hw, naive=UNFUSED[impl], **_shape(p)).naive.t_lower_s
    elif impl in FUSED:
        tiles = [(p["block_q"], p["block_k"])] if p.get("block_q") else PEER_TILES
        lows = []
        for bq, bk in tiles:
            try:
                lows.append(predict(hw=hw, block_q=bq, block_k=bk, **_shape(p)).flash.t_lower_s)
            except PerfmodelError:
                continue
        if lows:
            out["predict.flash"] = min(lows)
    return out


def check(paths) -> tuple[int, list[dict]]:
    """(points checked, rows of points below a floor)."""
    checked, below = 0, []
    for path in paths:
        data = json.loads(Path(path).read_text())
        if not isinstance(data, dict) or "runs" not in data:
            print(f"{path}: not a measurement file (no runs), skipped")
            continue
        for run in data["runs"]:
            for p in run["points"]:
                # forward and decode only: backward points have no floor here
                if p.get("status") != "ok" or p.get("phase", "forward") != "forward":
                    continue
                try:
                    fl = floors(p)
                except Exception as err:  # noqa: BLE001 - a refused shape is reported
                    below.append(
                        {
                            "file": str(path),
                            "run": run["run_id"],
                            "point": p,
                            "path": "model refused",
                            "error": str(err)[:120],
                        }
                    )
                    continue
                checked += bool(fl)
                t = fastest(p)
                for name, floor in fl.items():
                    if t < floor:
                        below.append(
                            {
                                "file": str(path),
                                "run": run["run_id"],
                                "point": p,
                                "path": name,
                                "floor_s": floor,
                                "fastest_s": t,
                            }
                        )
    return checked, below


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", type=Path)
    args = ap.parse_args(argv)
    checked, below = check(args.files)
    print(
        f"{checked} points checked; {sum('floor_s' in r for r in below)} below a floor, "
        f"{sum('error' in r for r in below)} refused by the model"
    )
    print(
        "| file | run | impl | b | n | kv | h/h_kv | d | causal | dtype | path | fastest µs "
        "| floor µs | fastest/floor |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in below:
        p = r["point"]
        head = (
            f"| {Path(r['file']).name} | {r['run']} | {p['implementation']} | {p['batch']} | "
            f"{p['n']} | {p['kv_len']} | {p['h']}/{p['h_kv']} | {p['d']} | "
            f"{int(p['causal'])} | {p['dtype']} | {r['path']} |"
        )
        if "error" in r:
            print(f"{head} - | - | {r['error']} |")
        else:
            print(
                f"{head} {r['fastest_s'] * 1e6:.1f} | {r['floor_s'] * 1e6:.1f} | "
                f"{r['fastest_s'] / r['floor_s']:.2f} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
