"""``perfmodel advise``: priority of FlashAttention-2 and PagedAttention for a workload."""

from __future__ import annotations

import argparse
import json


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("advise", help="FlashAttention-2 vs PagedAttention priority for a workload")
    p.add_argument(
        "--workload",
        action="append",
        required=True,
        help="workload name or .toml path, repeatable: {known:workloads}",
    )
    p.add_argument(
        "--hw", required=True, help="device name, alias or spec .toml path (perfmodel hw list)"
    )
    p.add_argument(
        "--model", default=None, help="{known:models}, or a .toml (default: the workload's)"
    )
    p.add_argument(
        "--dtype",
        default=None,
        help="weights and KV dtype: {known:dtypes} (default: the workload's)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from perfmodel.analysis.advise import advice_table, advise

    advices = [advise(w, args.hw, model=args.model, dtype=args.dtype) for w in args.workload]
    if args.json:
        print(json.dumps([a.model_dump(mode="json") for a in advices], indent=2))
    else:
        print(advice_table(advices), end="")
    return 0
