"""The default model against held-out draw 2 (issue 21): committed data, no timing.

``specs/measurements/h200-heldout2-2026-12-01.json`` was drawn by seed and its
predictions committed before the GPU run (65eded4). The model changes of issue 21
(measured ceilings, the softmax overlap as a share of the matmul time, the per-wave
prologue, the backward's floor parallelism, cuDNN's decode packing) were shaped on the
development files only; the held-out summary was looked at once, with the ceilings
and the overlap rule in place (docs/validation/model-truth.md says what changed after).
These figures hold what the model reaches today, with a margin, so a change that makes
it worse fails here; they are not the issue's targets, most of which it misses.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from perfmodel.catalog.data import data_dir
from perfmodel.validation.compare import compare, errors_by_group, every_point, select
from perfmodel.validation.measured import load_measurements

HELDOUT = Path(data_dir("measurements")) / "h200-heldout2-2026-12-01.json"
MARGIN = 0.03
#: ``perfmodel validate``'s group -> (signed median, median |error|) on held-out draw 2.
#: Since the second round of issue 21 (backward families as they run, padded head dims,
#: padding copies, exposed latency, fp16 rate, cuDNN's decode split) this file is
#: development data: its summary had been seen, and cuDNN's decode split was chosen on it
#: and the other decode set. Our training points ran the Triton backward
#: (``Point.backward_family``).
RECORDED = {
    "cudnn": (-0.087, 0.134),
    "pallas_flash": (-0.030, 0.132),  # the Triton family; was -0.209, 0.241
    "pallas_flash [pallas-mosaic]": (-0.069, 0.092),  # was -0.178, 0.178
    "paged_decode": (-0.108, 0.108),  # was +0.066, 0.135: the decode structure (model.md)
    # was -0.193, 0.382: worse, the atomic backward's one program per query head (FA-3's
    # grid) fixes its MQA point (+217 % -> -28 %) and makes the other three faster
    "cudnn (train)": (-0.279, 0.279),
    "pallas_flash [pallas-mosaic] (train)": (-0.081, 0.081),  # was -0.528, 0.528
    # was 1.799: cuDNN splits K/V (cudnn.toml); then +0.142, 0.215: now too fast, the 4 µs
    # launch gap is no longer device time and cuDNN's own fixed cost per kernel is not
    # modelled (docs/model.md, "Per-kernel device time")
    "cudnn (decode)": (-0.282, 0.282),
}

pytestmark = pytest.mark.skipif(not HELDOUT.exists(), reason="no held-out draw 2")


def _rows():
    return compare(select(load_measurements([HELDOUT])))


@pytest.mark.parametrize("key", sorted(RECORDED))
def test_held_out_error_does_not_grow(key):
    errors = np.asarray(errors_by_group(_rows())[key])
    signed, absolute = RECORDED[key]
    assert abs(np.median(errors)) <= abs(signed) + MARGIN
    assert np.median(np.abs(errors)) <= absolute + MARGIN


def test_no_held_out_point_is_below_the_floor():
    rows = compare(every_point(load_measurements([HELDOUT])))
    assert len(rows) >= 60
    assert not [r.point for r in rows if r.measured_s < r.t_lower_s]
