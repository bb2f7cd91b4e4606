"""The report's "split over devices" section: flash attention on cp x tp devices.

Markdown tables over ``perfmodel.parallel.predict_parallel``: one row per n (time on
one device and split, speed-up, efficiency, the communication left unhidden, bytes
sent and memory per device), and one per device count for the scaling curve.

>>> text = split_section("h200", n_values=[65536], cp=2, scheme="ring", h=16)
>>> "| 65,536 |" in text
True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from perfmodel.parallel import ParallelPrediction, crossover_n, predict_parallel
from perfmodel.units import binary, si


def _row(r: ParallelPrediction, first: str) -> str:
    return (
        f"| {first} | {si(r.one_device_s, 's').strip()} | {si(r.time_s, 's').strip()} | "
        f"{r.speedup:.2f}x | {r.efficiency:.0%} | {si(r.comm_s, 's').strip()} | "
        f"{si(r.sent_bytes, 'B').strip()} | {binary(r.memory_bytes).split(' (')[0]} |"
    )


_HEAD = (
    "| {first} | one device | split | speed-up | efficiency | unhidden comm | sent/device "
    "| memory/device |\n|---|---|---|---|---|---|---|---|"
)


def split_table(hw: Any, *, n_values: Sequence[int], cp: int, scheme: str, **kw: Any) -> str:
    """One row per n, on ``cp`` devices (``kw``: predict_parallel's other arguments)."""
    rows = [_row(predict_parallel(n, hw, cp=cp, scheme=scheme, **kw), f"{n:,}") for n in n_values]
    return "\n".join([_HEAD.format(first="n"), *rows])


def scaling_table(hw: Any, *, n: int, devices: Sequence[int], scheme: str, **kw: Any) -> str:
    """One row per device count at fixed n: the strong-scaling curve on paper."""
    rows = []
    for p in devices:
        try:
            rows.append(_row(predict_parallel(n, hw, cp=p, scheme=scheme, **kw), f"{p}"))
        except ValueError as err:  # a split this scheme cannot run: say why
            rows.append(f"| {p} | {err} | | | | | | |")
    return "\n".join([_HEAD.format(first="devices"), *rows])


def split_section(
    hw: Any, *, n_values: Sequence[int], cp: int, scheme: str, tp: int = 1, **kw: Any
) -> str:
    """The report section: the table over n, and where the split starts to win."""
    table = split_table(hw, n_values=n_values, cp=cp, scheme=scheme, tp=tp, **kw)
    cross = crossover_n(hw, cp=cp, scheme=scheme, tp=tp, **kw) if cp > 1 else None
    where = (
        f"The split beats one device from n = {cross:,} (model)."
        if cross
        else "In the range searched (n up to 4M) the split does not beat one device."
    )
    return (
        f"## Split over devices: cp={cp} ({scheme}) x tp={tp}\n\n"
        "Flash attention's forward with the sequence split over cp devices and the heads "
        "over tp (`perfmodel.parallel`; links from the device spec, measured where the "
        f"spec has a measured figure). {where if cp > 1 else ''}\n\n{table}\n"
    )
