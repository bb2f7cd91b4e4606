"""No measured point is faster than the model's floor, in any committed data (issue 21).

Every file of ``specs/measurements`` in the one measurement schema, every point the
model describes, through ``perfmodel validate``'s path (``compare``: the point's own
family, launch and naive compile, its floor the least over the launches it could have
made) and, for the naive side, through ``predict`` at every ``naive=`` choice: the
fastest timing of each point is at or above ``t_lower_s``. Nothing is timed here.
"""

from __future__ import annotations

import functools

import pytest

from perfmodel.catalog.data import data_dir
from perfmodel.errors import PerfmodelError
from perfmodel.prediction import predict
from perfmodel.validation.compare import _shape, algorithm_of, compare, modelled, select
from perfmodel.validation.measured import load_measurements, read_measurement_file
from perfmodel.vocabulary import NaiveCompile

FILES = sorted(data_dir("measurements").glob("*.json"))


def _in_schema(path) -> bool:
    try:
        read_measurement_file(path)
    except PerfmodelError:
        return False
    return True


SCHEMA_FILES = [p for p in FILES if _in_schema(p)]


def test_the_measurement_files_are_in_the_schema():
    # every attention timing file is in the one schema; the others are the Mosaic kernel's
    # call logs and the two-GPU file (specs/measurements/README.md)
    left = {p.name for p in FILES} - {p.name for p in SCHEMA_FILES}
    assert all(n.startswith("h200-mosaic-call") or n.startswith("h200x2-") for n in left), left
    names = {p.name for p in SCHEMA_FILES}
    assert {"h200-backward-2026-11-30.json", "h200-backward-variants-2026-11-30.json"} <= names


@functools.cache
def _pairs(name: str):
    return load_measurements(data_dir("measurements") / name)


@pytest.mark.parametrize("name", [p.name for p in SCHEMA_FILES])
def test_no_point_below_the_floor_through_validate(name):
    rows = compare(select(_pairs(name)))
    below = [(r.label(), r.fastest_s, r.t_lower_s) for r in rows if r.violates_lower_bound]
    assert not below


@pytest.mark.parametrize("name", [p.name for p in SCHEMA_FILES])
def test_no_naive_point_below_the_floor_at_any_naive_choice(name):
    below = []
    for _, p in select(_pairs(name)):
        if not modelled(p) or algorithm_of(p) != "naive":
            continue
        args = _shape(p)
        for naive in NaiveCompile:
            floor = predict(hw="h200", **{**args, "naive": str(naive)}).naive.t_lower_s
            if (p.min_s or p.median_s) < floor:
                below.append((p.implementation, p.n, p.d, p.causal, str(naive)))
    assert not below
