"""Error of today's model on every committed device-time (CUPTI) measurement, by group.

The development check of a model change (issue 21): every ``specs/measurements/*.json``
file, the newest measurement of each configuration (``compare.select``), points whose
time is device time only (older wall-time files left out), grouped as ``perfmodel
validate`` groups them. Prints points, signed median, median |error|, max |error| per
group, and the points whose fastest run is below ``t_lower_s``::

    python tools/dev_errors.py                 # every committed file
    python tools/dev_errors.py --only heldout2,heldout3   # files whose name has one

A backward or training point whose backward ran another family's kernels than its
forward's (``Point.backward_family``: ours on Hopper before the Mosaic backward covered
every head dim ran the Triton backward) is shown in a group of its own, marked
``<... backward>``: the Mosaic backward's figure is then the Mosaic backward's.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from perfmodel.catalog.data import data_dir
from perfmodel.validation.compare import compare, group_of, select
from perfmodel.validation.measured import Point, load_measurements


def device_rows(only: tuple[str, ...] = ()) -> list:
    rows = []
    for path in sorted(Path(data_dir("measurements")).glob("*.json")):
        if only and not any(word in path.name for word in only):
            continue
        try:
            pairs = load_measurements([path])
        except ValueError:  # not a measurement file of the schema
            continue
        rows += [r for r in compare(select(pairs)) if r.timing == "device"]
    return rows


def label_of(p: Point) -> str:
    """``perfmodel validate``'s group (``compare.group_of``), marked with the backward's
    family where the point's backward ran another family's kernels than its forward's."""
    label = group_of(p)
    if p.phase in ("backward", "train") and p.backward_family not in (None, p.family):
        label += f" <{p.backward_family} backward>"
    return label


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="comma-separated parts of file names")
    args = ap.parse_args(argv)
    rows = device_rows(tuple(w for w in args.only.split(",") if w))
    groups: dict[str, list[float]] = {}
    for r in rows:
        groups.setdefault(label_of(r.point), []).append(r.error)
    width = max([42, *map(len, groups)])
    print(f"{'group':{width}s} {'points':>6s} {'signed':>7s} {'median':>7s} {'max':>7s}")
    for name in sorted(groups):
        e = np.asarray(groups[name])
        print(
            f"{name:{width}s} {len(e):6d} {np.median(e):+7.1%} {np.median(np.abs(e)):7.1%} "
            f"{np.max(np.abs(e)):7.1%}"
        )
    below = [r.label() for r in rows if r.violates_lower_bound]
    print(f"{len(rows)} device-time points; below t_lower_s: {len(below)} {below}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
