"""Held-out draw 5 (issue 21, items 4 and 5): committed data, no timing.

``specs/measurements/h200-heldout5-2026-12-02.json``: shapes drawn by
``kernel_bench/heldout_draw.py`` with seed 20261205 (none equal to a committed point),
the model's predictions committed before the GPU run (893c324: the model of main at
cb9693e; nobody looked at the shapes before), measured once from main at 893c324
(docs/validation/heldout5.md). Nothing was fitted or chosen on it. The recorded figures
are those of the committed predictions (``heldout_draw score``); today's model is held to
them with a margin, so a change that makes it worse on these shapes fails here. The
issue's targets that held on the draw are asserted as such; the ones that missed are not
claimed.
"""

from __future__ import annotations

from pathlib import Path

import heldout_checks as checks
import pytest

from perfmodel.catalog.data import data_dir

HELDOUT = Path(data_dir("measurements")) / "h200-heldout5-2026-12-02.json"
PREDICTIONS = (
    Path(data_dir("measurements")) / "details" / "h200-heldout5-2026-12-02.predictions.json"
)
MARGIN = 0.03
#: group -> (points, signed median, median |error|, max |error|), committed predictions
RECORDED = {
    "cudnn": (9, 0.0004, 0.0410, 0.1292),  # 5 jobs past the run's 150 s budget
    "cudnn (decode)": (8, -0.3405, 0.3405, 0.4092),
    "cudnn (train)": (5, -0.1036, 0.1036, 0.1423),  # cuDNN refused n = 15837
    "paged_decode": (8, -0.1503, 0.1503, 0.2129),
    "pallas_flash": (10, -0.0271, 0.0590, 0.2526),  # ours on Triton
    "pallas_flash [pallas-mosaic]": (9, -0.0613, 0.0613, 0.2271),
    "pallas_flash [pallas-mosaic] (train)": (6, 0.0182, 0.0784, 0.2884),
}
#: issue 21's targets that held on the draw: (group, statistic, bound); the rest missed
#: (docs/validation/heldout5.md: the forward medians and maxima of our two kernels, both
#: decodes, our training step's max, cuDNN's training median, the other signed medians)
HELD = (
    ("cudnn", "median", 0.05),  # 4.1 %
    ("cudnn", "max", 0.15),  # 12.9 %
    ("cudnn", "signed", 0.03),  # +0.0 %
    ("pallas_flash", "signed", 0.03),  # -2.7 %
    ("pallas_flash [pallas-mosaic] (train)", "median", 0.08),  # 7.8 %
    ("pallas_flash [pallas-mosaic] (train)", "signed", 0.03),  # +1.8 %
    ("cudnn (train)", "max", 0.20),  # 14.2 %
)

pytestmark = pytest.mark.skipif(not HELDOUT.exists(), reason="no held-out draw 5")


@pytest.mark.parametrize("key", sorted(RECORDED))
def test_the_recorded_figures_are_those_of_the_committed_predictions(key):
    assert checks.committed(PREDICTIONS, HELDOUT, key) == pytest.approx(RECORDED[key], abs=0.0006)


@pytest.mark.parametrize("key", sorted(RECORDED))
def test_todays_model_is_no_worse_on_the_draw(key):
    points, signed, absolute, top = RECORDED[key]
    n, t_signed, t_absolute, t_top = checks.today(HELDOUT, key)
    assert n == points
    assert abs(t_signed) <= abs(signed) + MARGIN
    assert t_absolute <= absolute + MARGIN
    assert t_top <= top + MARGIN


@pytest.mark.parametrize(("key", "statistic", "bound"), HELD)
def test_the_targets_that_held(key, statistic, bound):
    assert checks.statistic(checks.committed(PREDICTIONS, HELDOUT, key), statistic) <= bound


def test_no_held_out_point_is_below_the_floor():
    rows, below_today, below_committed = checks.below_floor(PREDICTIONS, HELDOUT)
    assert rows and not below_today
    assert not below_committed
