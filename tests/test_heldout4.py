"""Held-out draw 4 (issue 21, items 4 and 5): committed data, no timing.

``specs/measurements/h200-heldout4-2026-12-02.json``: shapes drawn by
``kernel_bench/heldout_draw.py`` with seed 20261203 (none equal to a committed point),
the model's predictions committed before the GPU run (1448e8d: the model at d7a45b7 with
the Mosaic forward's sequence padding "none", as the kernel ran), measured once
(docs/validation/heldout4.md). The recorded figures are those of the committed
predictions (``heldout_draw score``); today's model is held to them with a margin, so a
change that makes it worse on these shapes fails here. The issue's targets that held
on the draw are asserted as such; the ones that missed are not claimed.
"""

from __future__ import annotations

from pathlib import Path

import heldout_checks as checks
import pytest

from perfmodel.catalog.data import data_dir

HELDOUT = Path(data_dir("measurements")) / "h200-heldout4-2026-12-02.json"
PREDICTIONS = (
    Path(data_dir("measurements")) / "details" / "h200-heldout4-2026-12-02.predictions.json"
)
MARGIN = 0.03
#: group -> (points, signed median, median |error|, max |error|), committed predictions
RECORDED = {
    "cudnn": (12, -0.0395, 0.0568, 0.2568),  # 2 jobs past the run's budget
    "cudnn (decode)": (8, 0.3558, 0.3560, 0.7241),
    "cudnn (train)": (2, -0.2172, 0.2172, 0.3252),  # cuDNN refused 4 of the 6 shapes
    "paged_decode": (8, 0.4934, 0.4934, 1.2008),
    "pallas_flash": (13, -0.0107, 0.1093, 0.2628),  # ours on Triton
    "pallas_flash [pallas-mosaic]": (13, -0.0549, 0.0549, 0.2466),
    "pallas_flash [pallas-mosaic] (train)": (6, -0.0512, 0.0628, 0.2107),
}
#: issue 21's targets that held on the draw: (group, statistic, bound); the rest missed
#: (docs/validation/heldout4.md: every forward median and max, both decodes, the signed
#: medians but ours on Triton's, the training-step max and cuDNN's training step)
HELD = (
    ("pallas_flash [pallas-mosaic] (train)", "median", 0.08),  # 6.3 %
    ("pallas_flash", "signed", 0.03),  # -1.1 %
)

#: Groups where today's model is held to its own figures instead, and why they moved
#: (tests/test_heldout3.py's MOVED says why: the 4 µs gap is no longer device time).
MOVED = {
    "pallas_flash": (13, -0.049, 0.092, 0.236),  # ours on Triton: median 10.9 -> 9.2 %
    "pallas_flash [pallas-mosaic] (train)": (6, -0.088, 0.096, 0.272),  # XLA's kernels
    "paged_decode": (8, -0.032, 0.094, 0.516),  # was +49 %: the decode structure
    "cudnn (decode)": (8, -0.295, 0.295, 0.420),  # was +36 %: now too fast
}

pytestmark = pytest.mark.skipif(not HELDOUT.exists(), reason="no held-out draw 4")


@pytest.mark.parametrize("key", sorted(RECORDED))
def test_the_recorded_figures_are_those_of_the_committed_predictions(key):
    assert checks.committed(PREDICTIONS, HELDOUT, key) == pytest.approx(RECORDED[key], abs=0.0006)


@pytest.mark.parametrize("key", sorted(RECORDED))
def test_todays_model_is_no_worse_on_the_draw(key):
    points, signed, absolute, top = MOVED.get(key, RECORDED[key])
    _, t_signed, t_absolute, t_top = checks.today(HELDOUT, key)
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
