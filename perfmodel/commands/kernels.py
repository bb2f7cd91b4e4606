"""``perfmodel kernels list`` and ``perfmodel kernels show NAME``: the kernel families."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from perfmodel.catalog.hardware import HardwareSpec
    from perfmodel.catalog.kernels import Backward, KernelFamily


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("kernels", help="list or show attention kernel families")
    verbs = p.add_subparsers(dest="verb", required=True, parser_class=type(p))
    listing = verbs.add_parser("list", help="every shipped kernel family")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(func=run_list)
    show = verbs.add_parser("show", help="one family's facts and what it launches")
    show.add_argument("name")
    show.add_argument("--hw", default="h200", help="the device its launches are shown on")
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=run_show)


#: Head dims and dtype of the launches ``kernels show`` lists (one head, n = 4096).
SHOWN_DIMS = (64, 96, 128, 192, 256)
SHOWN_DTYPE = "fp16"


def launches(family: KernelFamily, hw: HardwareSpec) -> list[dict[str, Any]]:
    """What ``family`` launches on ``hw`` at each of :data:`SHOWN_DIMS`, unmasked and
    causal, as ``perfmodel.launch.resolve`` decides it (n = kv_len = 4096, one head, one
    sequence, fp16): tile, warps, K/V stages, shared memory, registers, blocks per SM,
    spills; a launch that cannot run says why."""
    from perfmodel.errors import PerfmodelError
    from perfmodel.launch import resolve
    from perfmodel.vocabulary import bytes_per_element

    rows: list[dict[str, Any]] = []
    for d in SHOWN_DIMS:
        for causal in (False, True):
            row: dict[str, Any] = {"d": d, "causal": causal}
            try:
                at = resolve(
                    family,
                    hw,
                    n=4096,
                    m=4096,
                    d=d,
                    h=1,
                    h_kv=1,
                    b=1,
                    s=bytes_per_element(SHOWN_DTYPE),
                    causal=causal,
                ).point()
            except PerfmodelError as e:
                row["error"] = str(e)
            else:
                row.update(
                    block_q=int(at.block_q),
                    block_k=int(at.block_k),
                    warps=int(at.warps),
                    kv_stages=int(at.kv_stages),
                    smem_bytes=int(at.smem_bytes),
                    registers_per_thread=at.registers_per_thread,
                    blocks_per_sm=int(at.blocks_per_sm),
                    spilled_registers_per_thread=at.spilled_registers_per_thread,
                )
            rows.append(row)
    return rows


def run_list(args: argparse.Namespace) -> int:
    from perfmodel.catalog.kernels import known_kernels, load_kernel

    families = [load_kernel(name) for name in known_kernels()]
    if args.json:
        print(json.dumps([f.model_dump(mode="json") for f in families], indent=2))
        return 0
    print(
        f"{'name':<15} {'algorithm':<9} {'matmul':<6} {'softmax':<10} {'GQA packing':<11} "
        f"{'split-KV':<8} tile at d=128"
    )
    for f in families:
        shown = _tile_at_128(f)
        print(
            f"{f.name:<15} {f.algorithm:<9} {f.matmul:<6} {f.softmax:<10} "
            f"{f.gqa_packing:<11} {f.split_kv:<8} {shown}"
        )
    return 0


def _tile_at_128(family: KernelFamily) -> str:
    """The family's tile at d = 128, unmasked, on sm90 (``launch.default_tiles``)."""
    import numpy as np

    from perfmodel.errors import PerfmodelError
    from perfmodel.launch import default_tiles

    try:
        bq, bk, warps, *_ = default_tiles(
            family,
            np.array([128.0]),
            np.array([0.0]),
            "sm90",
        )
    except PerfmodelError:
        return "-"
    return f"{int(bq[0])}x{int(bk[0])}, {int(warps[0])} warps"


def run_show(args: argparse.Namespace) -> int:
    from perfmodel.catalog.hardware import load_hardware
    from perfmodel.catalog.kernels import load_kernel

    f = load_kernel(args.name)
    spec = load_hardware(args.hw)
    data = f.model_dump(mode="json")
    rows = launches(f, spec)
    if args.json:
        print(json.dumps({**data, "launches": {"hw": spec.name, "points": rows}}, indent=2))
        return 0
    print(f"{f.name}: {f.description}")
    for key, value in data.items():
        if key in ("name", "description", "sources", "tiles", "backward"):
            continue
        source = f.sources.get(key, "")
        flag = " (ASSUMED)" if key in f.assumed else ""
        print(f"  {key:<16} {value!s:<28}{flag} {source}")
    print("  tiles (first match wins):")
    for t in f.tiles:
        where = _conditions(t)
        print(f"    d <= {t.d_max:<4} {t.block_q}x{t.block_k}, {t.warps} warps{where}")
    print(f"    source: {f.sources.get('tiles', '-')}")
    if f.backward is not None:
        _show_backward(f.backward)
    print(f"  launches on {spec.name} (perfmodel.launch.resolve; n=4096, one head, {SHOWN_DTYPE}):")
    for r in rows:
        mask = "causal" if r["causal"] else "dense"
        if "error" in r:
            print(f"    d={r['d']:<4} {mask:<7} {r['error']}")
            continue
        spill = (
            f", {r['spilled_registers_per_thread']:.0f} spilled"
            if r["spilled_registers_per_thread"]
            else ""
        )
        print(
            f"    d={r['d']:<4} {mask:<7} {r['block_q']}x{r['block_k']}, {r['warps']} warps, "
            f"{r['kv_stages']} K/V stages, {r['smem_bytes'] / 1024:.0f} KiB shared, "
            f"{r['registers_per_thread']:.0f} registers/thread, "
            f"{r['blocks_per_sm']} blocks/SM{spill}"
        )
    return 0


def _conditions(tile: Any) -> str:
    """A tile row's conditions as the listing shows them (``, arch=sm90, causal=True``)."""
    pairs = (("arch", tile.arch), ("causal", tile.causal))
    return "".join(f", {k}={v}" for k, v in pairs if v is not None)


def _show_backward(bwd: Backward) -> None:
    """The family's ``[backward]``: its facts with their sources, then its tiles."""
    print("  backward:")
    for key, value in bwd.model_dump(mode="json").items():
        if key in ("sources", "tiles", "assumed") or value is None:
            continue
        flag = " (ASSUMED)" if key in bwd.assumed else ""
        print(f"    {key:<16} {value!s:<14}{flag} {bwd.sources.get(key, '')}")
    print("    tiles (dK/dV kernel; dQ pass; first match wins):")
    for t in bwd.tiles:
        where = _conditions(t)
        dq = f"; dQ {t.dq_block_q}x{t.dq_block_k}" if t.dq_block_q else ""
        print(
            f"      d <= {t.d_max:<4} {t.block_q}x{t.block_k}, {t.warps} warps, "
            f"{t.stages} stages{dq}{where}"
        )
    print(f"      source: {bwd.sources.get('tiles', '-')}")
