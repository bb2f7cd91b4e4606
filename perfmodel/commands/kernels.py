"""``perfmodel kernels list`` and ``perfmodel kernels show NAME``: the kernel families."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from perfmodel.catalog.kernels import Backward


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("kernels", help="list or show attention kernel families")
    verbs = p.add_subparsers(dest="verb", required=True, parser_class=type(p))
    listing = verbs.add_parser("list", help="every shipped kernel family")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(func=run_list)
    show = verbs.add_parser("show", help="one family's facts and their sources")
    show.add_argument("name")
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=run_show)


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
        tile = next((t for t in f.tiles if t.matches(128, False, "sm90")), None)
        shown = f"{tile.block_q}x{tile.block_k}, {tile.warps} warps" if tile else "-"
        print(
            f"{f.name:<15} {f.algorithm:<9} {f.matmul:<6} {f.softmax:<10} "
            f"{f.gqa_packing:<11} {f.split_kv:<8} {shown}"
        )
    return 0


def run_show(args: argparse.Namespace) -> int:
    from perfmodel.catalog.kernels import load_kernel

    f = load_kernel(args.name)
    data = f.model_dump(mode="json")
    if args.json:
        print(json.dumps(data, indent=2))
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
        where = "".join(
            f", {k}={v}" for k, v in (("arch", t.arch), ("causal", t.causal)) if v is not None
        )
        print(f"    d <= {t.d_max:<4} {t.block_q}x{t.block_k}, {t.warps} warps{where}")
    print(f"    source: {f.sources.get('tiles', '-')}")
    if f.backward is not None:
        _show_backward(f.backward)
    return 0


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
        where = "".join(
            f", {k}={v}" for k, v in (("arch", t.arch), ("causal", t.causal)) if v is not None
        )
        dq = f"; dQ {t.dq_block_q}x{t.dq_block_k}" if t.dq_block_q else ""
        print(
            f"      d <= {t.d_max:<4} {t.block_q}x{t.block_k}, {t.warps} warps, "
            f"{t.stages} stages{dq}{where}"
        )
    print(f"      source: {bwd.sources.get('tiles', '-')}")
