"""``perfmodel hw list`` and ``perfmodel hw show NAME``: the shipped device specs."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from perfmodel.catalog.ceilings import Ceilings
    from perfmodel.catalog.hardware import HardwareSpec

from perfmodel.units import si


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("hw", help="list or show hardware specs")
    verbs = p.add_subparsers(dest="verb", required=True, parser_class=type(p))
    listing = verbs.add_parser("list", help="every shipped device")
    listing.add_argument("--json", action="store_true", help="every spec, machine-readable")
    listing.set_defaults(func=run_list)
    show = verbs.add_parser("show", help="one device's figures and their sources")
    show.add_argument("name")
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=run_show)


def run_list(args: argparse.Namespace) -> int:
    from perfmodel.catalog.hardware import known_names, load_hardware

    if args.json:
        dumped = [load_hardware(name).model_dump(mode="json") for name in known_names()]
        print(json.dumps(dumped, indent=2))
        return 0
    specs = [load_hardware(name) for name in known_names()]
    rows = [
        (
            spec.name,
            ", ".join(spec.aliases),
            si(spec.peak_flops_per_s.bf16, "FLOP/s") if spec.peak_flops_per_s.bf16 else "-",
            si(spec.hbm_bandwidth_bytes_per_s, "B/s"),
            f"{spec.ridge_point('bf16'):.0f}" if spec.peak_flops_per_s.bf16 else "-",
        )
        for spec in specs
    ]
    header = ("name", "aliases", "bf16", "HBM BW", "ridge")
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
    for row in (header, *rows):  # names and aliases left, figures right, as wide as needed
        cells = [
            c.ljust(w) if i < 2 else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        print("  ".join(cells).rstrip())
    return 0


def run_show(args: argparse.Namespace) -> int:
    from perfmodel.catalog.hardware import load_hardware

    spec = load_hardware(args.name)
    if args.json:
        print(json.dumps(spec.model_dump(mode="json"), indent=2))
        return 0
    data = spec.model_dump(exclude={"sources", "notes"})
    peaks = data.pop("peak_flops_per_s")
    print(f"{spec.name} ({spec.vendor} {spec.kind}); aliases: {', '.join(spec.aliases)}")
    for dtype, value in peaks.items():
        if value is not None:
            src = spec.sources.get(
                f"peak_flops_per_s.{dtype}", spec.sources.get("peak_flops_per_s")
            )
            print(f"  {'peak_flops_per_s.' + dtype:<38} {si(value, 'FLOP/s'):>14}   [{src}]")
    links = data.pop("links", None) or {}
    measured = links.pop("measured", {}) or {}
    rows = [(k, v) for k, v in data.items() if k not in {"name", "aliases", "vendor", "kind"}]
    rows += [(f"links.{k}", v) for k, v in links.items()]
    rows += [(f"links.measured.{k}", v) for k, v in measured.items()]
    for key, value in rows:
        if value is not None:
            source = spec.sources.get(key)
            print(f"  {key:<38} {_show(key, value):>14}" + (f"   [{source}]" if source else ""))
    if spec.notes:
        print(f"  notes: {spec.notes}")
    from perfmodel.catalog.ceilings import load_ceilings

    measured = load_ceilings(spec)
    if measured is not None:
        print_measured(measured, spec, title="measured ceilings")
    return 0


def print_measured(c: Ceilings, spec: HardwareSpec, *, title: str) -> None:
    """Measured ceilings (``perfmodel.catalog.ceilings``) beside the datasheet's figures."""
    from perfmodel.catalog.ceilings import beside_datasheet

    print(f"{title} ({c.date}, jax {c.jax_version}, {c.device_kind}; `{c.command}`):")
    print(f"  {'':<32} {'measured':>14} {'datasheet':>14} {'ratio':>6}")
    for name, m, sheet in beside_datasheet(c, spec):
        ratio = f"{m.value / sheet:6.2f}" if sheet else ""
        shown = _show(name, sheet) if sheet else ""
        print(f"  {name:<32} {_show(name, m.value):>14} {shown:>14} {ratio}   [{m.size}]")
    _print_naive_calls(c)


def _print_naive_calls(c: Ceilings) -> None:
    """The naive baseline's XLA calls ([[xla_naive]]) as the model reads them: each
    kernel's rate over the HBM copy rate, by the variable it goes by."""
    from perfmodel.catalog.ceilings import xla_naive_ratios

    ratios = xla_naive_ratios(c)
    if not ratios:
        return
    print("  naive kernels' XLA calls, rate over the HBM copy rate (naive='xla'):")
    for kernel, variable, table in ratios:
        cells = ", ".join(f"{x}: {r:.2f}" for x, r in table)
        print(f"    {kernel:<8} by {variable}  {cells}")


def _show(key: str, value: object) -> str:
    """A figure in readable units, read off the unit suffix of its name. Sizes that are
    a whole number of KiB, MiB or GiB (SRAM, caches: how their sources state them) show
    in those binary units; the rest in SI units (HBM capacity: 141 GB)."""
    if key.endswith("_bytes") and isinstance(value, int) and not key.startswith("hbm_"):
        for power, unit in ((3, "GiB"), (2, "MiB"), (1, "KiB")):
            if value >= 1024**power and value % 1024**power == 0:
                return f"{value // 1024**power} {unit}"
    for suffix, unit in (
        ("_flops_per_s", "FLOP/s"),
        ("_bytes_per_s", "B/s"),
        ("_per_s", "/s"),
        ("_bytes", "B"),
        ("_s", "s"),
    ):
        if key.endswith(suffix) and isinstance(value, int | float):
            return si(float(value), unit)
    return str(value)
