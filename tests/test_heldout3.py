"""The default model against held-out draw 3 (issue 21, item 4): committed data, no timing.

``specs/measurements/h200-heldout3-2026-12-02.json``: shapes drawn by
``kernel_bench/heldout_draw.py`` with seed 20261202 (none equal to a committed point),
the model's predictions committed before the GPU run (8b3b4ca, the model at f317184),
measured once (b30c16b). Nothing was fitted or chosen on it. These are the figures
``perfmodel validate`` printed on it, held with a margin so that a change which makes
the model worse on unseen shapes fails here (docs/validation/heldout3.md); they are not
all the issue's targets, and the test says which ones hold.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from perfmodel.catalog.data import data_dir
from perfmodel.validation.compare import (
    compare,
    errors_by_group,
    every_point,
    group_of,
    select,
)
from perfmodel.validation.measured import load_measurements

HELDOUT = Path(data_dir("measurements")) / "h200-heldout3-2026-12-02.json"
PREDICTIONS = (
    Path(data_dir("measurements")) / "details" / "h200-heldout3-2026-12-02.predictions.json"
)
MARGIN = 0.03
#: group -> (points, signed median, median |error|, max |error|) when measured
RECORDED = {
    "cudnn": (14, -0.093, 0.093, 0.193),
    "pallas_flash": (14, -0.039, 0.052, 1.130),  # ours on Triton
    "pallas_flash [pallas-mosaic]": (14, -0.023, 0.040, 0.480),
    "pallas_flash [pallas-mosaic] (train)": (6, -0.050, 0.075, 0.089),
    "cudnn (train)": (2, -0.227, 0.227, 0.366),  # cuDNN refused 4 of the 6 shapes
    "paged_decode": (8, 0.168, 0.203, 1.324),
    "cudnn (decode)": (8, 0.167, 0.194, 0.619),
}

#: Groups where today's model is held to its own figures instead (points, signed, median,
#: max |error|), and why they moved: since issue 21's fourth round the 4 µs launch gap is
#: no longer device time (docs/model.md, "Per-kernel device time"); it had covered fixed
#: costs that are now terms, and two it still misses: cuDNN's own fixed cost per kernel
#: (its decode calls of 6-30 µs) and the XLA kernels of a training step.
MOVED = {
    "cudnn": (14, -0.025, 0.032, 0.239),  # better median; the max is n=1280 d=256 causal
    "cudnn (decode)": (8, -0.322, 0.322, 0.488),  # was +16.7 %: now too fast
    "cudnn (train)": (2, -0.248, 0.248, 0.405),
    "pallas_flash [pallas-mosaic] (train)": (6, -0.082, 0.102, 0.253),
}

pytestmark = pytest.mark.skipif(not HELDOUT.exists(), reason="no held-out draw 3")


def _groups() -> dict[str, np.ndarray]:
    rows = compare(select(load_measurements([HELDOUT])))
    return {k: np.asarray(v) for k, v in errors_by_group(rows).items()}


@pytest.mark.parametrize("key", sorted(RECORDED))
def test_held_out_figures_do_not_grow(key):
    errors = _groups()[key]
    points, signed, absolute, top = MOVED.get(key, RECORDED[key])
    assert len(errors) == points
    assert abs(np.median(errors)) <= abs(signed) + MARGIN
    assert np.median(np.abs(errors)) <= absolute + MARGIN
    assert np.max(np.abs(errors)) <= top + MARGIN


def test_the_targets_that_hold():
    # issue 21's targets, H200 with measured ceilings, held out (the predictions committed
    # before the run): the forward median (<= 5 %) held for our Mosaic kernel, the
    # training step's (<= 8 % median, <= 20 % max) for ours; the signed medians were
    # within +-3 % for our two forwards only. Today's model misses the training median
    # here (10.2 %, MOVED)
    groups = _committed_groups()
    mosaic = groups["pallas_flash [pallas-mosaic]"]
    assert np.median(np.abs(mosaic)) <= 0.05
    train = groups["pallas_flash [pallas-mosaic] (train)"]
    assert np.median(np.abs(train)) <= 0.08 and np.max(np.abs(train)) <= 0.20
    for key in ("pallas_flash", "pallas_flash [pallas-mosaic]"):
        assert abs(np.median(groups[key])) <= 0.04


def test_no_held_out_point_is_below_the_floor():
    rows = compare(every_point(load_measurements([HELDOUT])))
    assert rows and not [r.label() for r in rows if r.violates_lower_bound]


def _committed_groups() -> dict[str, np.ndarray]:
    """Each group's errors with the predictions committed before the run (8b3b4ca)."""
    pred = json.loads(PREDICTIONS.read_text())

    def key(d: dict) -> tuple:
        return tuple(
            d[k] for k in ("implementation", "n", "kv_len", "d", "h", "h_kv", "batch", "dtype")
        ) + (d["causal"], d.get("phase") or "decode", d["family"])

    table = {key(r): r["predicted_time_s"] for r in pred["predictions"]}
    out: dict[str, list[float]] = {}
    for r in compare(select(load_measurements([HELDOUT]))):
        point = {**r.point.model_dump(), "phase": r.point.phase or "decode"}
        out.setdefault(group_of(r.point), []).append(table[key(point)] / r.measured_s - 1)
    return {k: np.asarray(v) for k, v in out.items()}


@pytest.mark.parametrize("key", sorted(RECORDED))
def test_the_recorded_figures_are_those_of_the_committed_predictions(key):
    """The figures above are those of the predictions committed before the run. The
    model has moved since on draw 3 as development data (cuDNN's head dim padded on chip,
    the softmax overlap above d = 128, Triton's d = 256 tile at one block per SM:
    docs/validation/heldout4.md); the test above holds today's model to them."""
    errors = _committed_groups()[key]
    points, signed, absolute, top = RECORDED[key]
    assert len(errors) == points
    assert np.median(errors) == pytest.approx(signed, abs=0.0006)
    assert np.median(np.abs(errors)) == pytest.approx(absolute, abs=0.0006)
    assert np.max(np.abs(errors)) == pytest.approx(top, abs=0.0006)
