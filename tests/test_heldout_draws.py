"""Held-out draws 4 to 12 (H200), 15 and 16 (H100 SXM) (issue 21, items 4 and 5): committed
data, no timing.

Each draw's shapes were drawn by ``kernel_bench/heldout_draw.py`` with its seed (none
equal to a point committed before), the model's predictions committed before its GPU run
and before anyone looked at the shapes, and measured once (docs/validation/heldoutN.md
says from which commit). Nothing was fitted or chosen on a draw before it was scored
(afterwards it is development data). The recorded figures are those of the committed
predictions (``heldout_draw score``); today's model is held to them with a margin, so a
change that makes it worse on these shapes fails here. The issue's targets that held on a
draw are asserted as such; the ones that missed are not claimed.
"""

from __future__ import annotations

from pathlib import Path

import heldout_checks as checks
import pytest

from perfmodel.catalog.data import data_dir

MARGIN = 0.03
#: group -> (points, signed median, median |error|, max |error|), committed predictions
RECORDED = {
    # seed 20261203, predictions 1448e8d (the model at d7a45b7)
    "h200-heldout4-2026-12-02": {
        "cudnn": (12, -0.0395, 0.0568, 0.2568),  # 2 jobs past the run's budget
        "cudnn (decode)": (8, 0.3558, 0.3560, 0.7241),
        "cudnn (train)": (2, -0.2172, 0.2172, 0.3252),  # cuDNN refused 4 of the 6 shapes
        "paged_decode": (8, 0.4934, 0.4934, 1.2008),
        "pallas_flash": (13, -0.0107, 0.1093, 0.2628),  # ours on Triton
        "pallas_flash [pallas-mosaic]": (13, -0.0549, 0.0549, 0.2466),
        "pallas_flash [pallas-mosaic] (train)": (6, -0.0512, 0.0628, 0.2107),
    },
    # seed 20261205, predictions 893c324 (the model of main at cb9693e)
    "h200-heldout5-2026-12-02": {
        "cudnn": (9, 0.0004, 0.0410, 0.1292),  # 5 jobs past the run's 150 s budget
        "cudnn (decode)": (8, -0.3405, 0.3405, 0.4092),
        "cudnn (train)": (5, -0.1036, 0.1036, 0.1423),  # cuDNN refused n = 15837
        "paged_decode": (8, -0.1503, 0.1503, 0.2129),
        "pallas_flash": (10, -0.0271, 0.0590, 0.2526),  # ours on Triton
        "pallas_flash [pallas-mosaic]": (9, -0.0613, 0.0613, 0.2271),
        "pallas_flash [pallas-mosaic] (train)": (6, 0.0182, 0.0784, 0.2884),
    },
    # seed 20261206, predictions af8eedc (the model of main at fa692fb)
    "h200-heldout6-2026-12-03": {
        "cudnn": (14, -0.0014, 0.0475, 0.0962),
        "cudnn (decode)": (8, -0.1764, 0.1764, 0.5420),
        "cudnn (train)": (2, -0.1748, 0.1748, 0.1826),  # cuDNN refused 4 of the 6 shapes
        "paged_decode": (8, -0.1188, 0.1188, 0.1927),
        "pallas_flash": (14, 0.0297, 0.0823, 0.4067),  # ours on Triton
        "pallas_flash [pallas-mosaic]": (14, -0.0517, 0.0703, 0.2153),
        "pallas_flash [pallas-mosaic] (train)": (6, -0.0364, 0.0569, 0.3026),
    },
    # seed 20261207, predictions 24d1e34 (the model of main at 378eaef)
    "h200-heldout7-2026-12-03": {
        "cudnn": (12, -0.0235, 0.0542, 0.2886),  # 4 forward jobs past the budget
        "cudnn (decode)": (8, -0.3719, 0.3719, 0.5505),
        "cudnn (train)": (3, -0.1078, 0.1078, 0.1397),  # cuDNN refused 3 of the 6 shapes
        "paged_decode": (8, -0.1039, 0.1039, 0.1539),
        "pallas_flash": (13, -0.0413, 0.0644, 0.2073),  # ours on Triton
        "pallas_flash [pallas-mosaic]": (13, -0.0456, 0.0478, 0.1698),
        "pallas_flash [pallas-mosaic] (train)": (6, -0.0509, 0.0509, 0.2273),
    },
    # seed 20261208, predictions c1115f7 (the model of main at e52ff70)
    "h200-heldout8-2026-12-03": {
        "cudnn": (14, -0.0455, 0.0612, 0.1925),
        "cudnn (decode)": (8, -0.1568, 0.1568, 0.3782),
        "cudnn (train)": (5, -0.1889, 0.1889, 0.2323),  # cuDNN refused n = 26727
        "paged_decode": (8, -0.0971, 0.1328, 0.2845),
        "pallas_flash": (14, 0.0368, 0.1029, 0.4408),  # ours on Triton
        "pallas_flash [pallas-mosaic]": (14, -0.0817, 0.0817, 0.3884),
        "pallas_flash [pallas-mosaic] (train)": (6, -0.0494, 0.0494, 0.3610),
    },
    # seed 20261209, predictions of the model with the group split and the dispatched
    # causal backward grids (docs/validation/heldout9.md)
    "h200-heldout9-2026-12-03": {
        "cudnn": (14, -0.0342, 0.0383, 0.2295),
        "cudnn (decode)": (8, -0.0507, 0.0507, 0.2226),
        "cudnn (train)": (6, -0.1718, 0.1718, 0.3620),
        "paged_decode": (8, -0.0752, 0.0972, 0.2688),
        "pallas_flash": (14, -0.0923, 0.0923, 0.3040),  # ours on Triton
        "pallas_flash [pallas-mosaic]": (14, -0.1175, 0.1340, 0.2600),
        "pallas_flash [pallas-mosaic] (train)": (6, -0.1037, 0.1037, 0.3818),
    },
    # seed 20261210, predictions 5aa98a2 (the model of main at e3168ab: cuDNN's backward
    # as CUPTI lists it; docs/validation/heldout10.md)
    "h200-heldout10-2026-12-04": {
        "cudnn": (14, 0.0183, 0.0377, 0.1291),
        "cudnn (decode)": (8, -0.0934, 0.0934, 0.3743),
        "cudnn (train)": (3, -0.1526, 0.1526, 0.2279),  # cuDNN refused 3 odd-n shapes
        "paged_decode": (8, -0.0872, 0.1000, 0.1918),
        "pallas_flash": (14, -0.0205, 0.0800, 0.2415),  # ours on Triton
        "pallas_flash [pallas-mosaic]": (14, -0.0061, 0.0385, 0.1231),
        "pallas_flash [pallas-mosaic] (train)": (6, -0.0455, 0.0564, 0.0885),
    },
    # seed 20261211, predictions 53690d5 (the model of main at e63887a: the L2-reduce
    # roof of atomic backwards; docs/validation/heldout11.md)
    "h200-heldout11-2026-12-04": {
        "cudnn": (14, -0.0269, 0.0488, 0.1133),
        "cudnn (decode)": (8, -0.0246, 0.1191, 0.3607),
        "cudnn (train)": (4, -0.1563, 0.1563, 0.2691),  # cuDNN refused 2 odd-n shapes
        "paged_decode": (8, -0.0909, 0.1108, 0.2824),
        "pallas_flash": (14, 0.0118, 0.0977, 0.2608),  # ours on Triton
        "pallas_flash [pallas-mosaic]": (14, -0.0877, 0.1028, 0.4502),
        "pallas_flash [pallas-mosaic] (train)": (6, -0.1215, 0.1215, 0.1847),
    },
    # seed 20261212, predictions e0a089b (the model of main at de6ce37: the dQ kernel at
    # its own tile, narrow key tiles; docs/validation/heldout12.md)
    "h200-heldout12-2026-12-04": {
        "cudnn": (14, -0.0075, 0.0392, 0.3470),
        "cudnn (decode)": (8, -0.0256, 0.0525, 0.3890),
        "cudnn (train)": (3, -0.1738, 0.1738, 0.2755),  # cuDNN refused 3 shapes
        "paged_decode": (8, -0.0582, 0.1198, 0.1931),
        "pallas_flash": (14, -0.0738, 0.1248, 0.4475),  # ours on Triton
        "pallas_flash [pallas-mosaic]": (14, -0.0662, 0.0688, 0.3528),
        "pallas_flash [pallas-mosaic] (train)": (6, -0.0014, 0.0240, 0.1063),
    },
    # H100 SXM, seed 20261215, predictions 35c812e (the model of main at fe8c197: the H100's
    # own partial ceilings, sibling priors, its latencies; docs/validation/heldout15.md)
    "h100-heldout15-2026-12-07": {  # both calls: 70 jobs (-part2: the last 16)
        "cudnn": (14, -0.0300, 0.0485, 0.0849),
        "cudnn (decode)": (8, -0.0430, 0.0638, 0.1626),
        "cudnn (train)": (4, -0.0308, 0.1017, 0.2450),  # cuDNN refused 2 shapes
        "paged_decode": (8, -0.0460, 0.0880, 0.3569),
        "pallas_flash": (14, -0.0188, 0.0746, 0.2560),  # ours on Triton
        "pallas_flash [pallas-mosaic]": (14, -0.0430, 0.1209, 0.3755),
        "pallas_flash [pallas-mosaic] (train)": (6, -0.0022, 0.0221, 0.0697),
    },
    # H100 SXM, seed 20261216, predictions 10ac048 (the model of main at 10ac048: the
    # naive calls' own rates, the blocked layout's two products; docs/validation/heldout16.md);
    # the first draw to time the three-step naive baseline (its GQA shapes)
    "h100-heldout16-2026-12-07": {  # 80 jobs; cuDNN refused two odd-n training shapes
        "cudnn": (14, -0.0355, 0.0419, 0.0773),
        "cudnn (decode)": (8, -0.0021, 0.0932, 0.3077),
        "cudnn (train)": (4, -0.0142, 0.0498, 0.1550),
        "naive": (10, -0.2885, 0.2885, 0.6635),
        "paged_decode": (8, 0.1051, 0.1051, 0.4305),
        "pallas_flash": (14, 0.0091, 0.0419, 0.1148),  # ours on Triton
        "pallas_flash [pallas-mosaic]": (14, -0.0413, 0.1185, 0.4431),
        "pallas_flash [pallas-mosaic] (train)": (6, 0.0111, 0.0530, 0.2708),
    },
}
#: The same draw's datasheet-only predictions (``ceilings="datasheet"``: the H200's
#: measured fractions as the H100's priors), committed with them: issue 21's second
#: target (median <= 12 %, max <= 30 %). No model is run for these.
DATASHEET = {
    "h100-heldout15-2026-12-07": {
        "cudnn": (14, -0.0125, 0.0550, 0.0940),
        "cudnn (decode)": (8, -0.0180, 0.0536, 0.1168),
        "cudnn (train)": (4, -0.0922, 0.0922, 0.2310),
        "paged_decode": (8, -0.0784, 0.0827, 0.1952),
        "pallas_flash": (14, -0.0134, 0.0404, 0.2557),
        "pallas_flash [pallas-mosaic]": (14, -0.0280, 0.1226, 0.4068),  # misses both
        "pallas_flash [pallas-mosaic] (train)": (6, 0.0196, 0.0283, 0.0551),
    },
    "h100-heldout16-2026-12-07": {
        "cudnn": (14, -0.0111, 0.0269, 0.0918),
        "cudnn (decode)": (8, -0.0398, 0.0917, 0.2770),
        "cudnn (train)": (4, -0.0210, 0.0210, 0.2069),
        "naive": (10, -0.2992, 0.2992, 0.7002),  # misses both
        "paged_decode": (8, -0.0242, 0.0500, 0.2454),
        "pallas_flash": (14, 0.0330, 0.0555, 0.1088),
        "pallas_flash [pallas-mosaic]": (14, -0.0098, 0.1090, 0.4334),  # misses the max
        "pallas_flash [pallas-mosaic] (train)": (6, 0.0374, 0.0724, 0.2484),
    },
}
#: The groups whose datasheet-only figures missed the target (12 % median, 30 % max).
DATASHEET_MISSED = {
    "h100-heldout15-2026-12-07": {"pallas_flash [pallas-mosaic]"},
    "h100-heldout16-2026-12-07": {"pallas_flash [pallas-mosaic]", "naive"},
}
#: Groups where today's model is held to its own figures instead, and why they moved
#: (tests/test_heldout3.py's MOVED says why: the 4 µs gap is no longer device time)
MOVED = {
    "h200-heldout4-2026-12-02": {
        "pallas_flash": (13, -0.049, 0.092, 0.236),  # ours on Triton: median 10.9 -> 9.2 %
        "pallas_flash [pallas-mosaic] (train)": (6, -0.088, 0.096, 0.272),  # XLA's kernels
        # was +49 %: the decode structure; then the paged prologue's two dependent loads
        # (docs/model.md): its b = 7, m = 1937, 32:1 call +52 -> +66 % (8 us)
        "paged_decode": (8, 0.049, 0.111, 0.659),
        "cudnn (decode)": (8, -0.295, 0.295, 0.420),  # was +36 %: now too fast
    },
    "h200-heldout5-2026-12-02": {
        # the backward's program edges (docs/model.md, "The backward as its kernels run
        # it"): its d <= 128 points +0.2..1.2 % slower (signed +4.4 -> +5.1 % today; 128
        # development training points -4.4 / 8.8 -> -3.4 / 8.1 %)
        "pallas_flash [pallas-mosaic] (train)": (6, 0.051, 0.101, 0.285),
    },
}
#: issue 21's targets that held on each draw: (group, statistic, bound); the rest missed
#: (each draw's docs/validation/heldoutN.md lists them)
HELD = {
    "h200-heldout4-2026-12-02": (
        ("pallas_flash [pallas-mosaic] (train)", "median", 0.08),  # 6.3 %
        ("pallas_flash", "signed", 0.03),  # -1.1 %
    ),
    "h200-heldout5-2026-12-02": (
        ("cudnn", "median", 0.05),  # 4.1 %
        ("cudnn", "max", 0.15),  # 12.9 %
        ("cudnn", "signed", 0.03),  # +0.0 %
        ("pallas_flash", "signed", 0.03),  # -2.7 %
        ("pallas_flash [pallas-mosaic] (train)", "median", 0.08),  # 7.8 %
        ("pallas_flash [pallas-mosaic] (train)", "signed", 0.03),  # +1.8 %
        ("cudnn (train)", "max", 0.20),  # 14.2 %
    ),
    "h200-heldout6-2026-12-03": (
        ("cudnn", "median", 0.05),  # 4.7 %
        ("cudnn", "max", 0.15),  # 9.6 %
        ("cudnn", "signed", 0.03),  # -0.1 %
        ("pallas_flash [pallas-mosaic] (train)", "median", 0.08),  # 5.7 %
        ("cudnn (train)", "max", 0.20),  # 18.3 %
    ),
    "h200-heldout7-2026-12-03": (
        ("pallas_flash [pallas-mosaic]", "median", 0.05),  # 4.8 %
        ("pallas_flash [pallas-mosaic] (train)", "median", 0.08),  # 5.1 %
        ("cudnn (train)", "max", 0.20),  # 14.0 %
        ("cudnn", "signed", 0.03),  # -2.4 %
    ),
    "h200-heldout8-2026-12-03": (
        ("pallas_flash [pallas-mosaic] (train)", "median", 0.08),  # 4.9 %
    ),
    "h200-heldout9-2026-12-03": (
        ("cudnn", "median", 0.05),  # 3.8 %
        ("cudnn (decode)", "median", 0.08),  # 5.1 %: the fixed cost per kernel
    ),
    "h200-heldout10-2026-12-04": (
        ("cudnn", "median", 0.05),  # 3.8 %
        ("cudnn", "max", 0.15),  # 12.9 %
        ("cudnn", "signed", 0.03),  # +1.8 %
        ("pallas_flash [pallas-mosaic]", "median", 0.05),  # 3.9 %
        ("pallas_flash [pallas-mosaic]", "max", 0.15),  # 12.3 %
        ("pallas_flash [pallas-mosaic]", "signed", 0.03),  # -0.6 %
        ("pallas_flash", "signed", 0.03),  # -2.1 %
        ("pallas_flash [pallas-mosaic] (train)", "median", 0.08),  # 5.6 %
        ("pallas_flash [pallas-mosaic] (train)", "max", 0.20),  # 8.9 %
    ),
    "h200-heldout11-2026-12-04": (
        ("cudnn", "median", 0.05),  # 4.9 %
        ("cudnn", "max", 0.15),  # 11.3 %
        ("cudnn", "signed", 0.03),  # -2.7 %
        ("pallas_flash", "signed", 0.03),  # +1.2 %
        ("pallas_flash [pallas-mosaic] (train)", "max", 0.20),  # 18.5 %
        ("cudnn (decode)", "signed", 0.03),  # -2.5 %
    ),
    "h200-heldout12-2026-12-04": (
        ("cudnn", "median", 0.05),  # 3.9 %
        ("cudnn", "signed", 0.03),  # -0.7 %
        ("cudnn (decode)", "median", 0.08),  # 5.2 %
        ("cudnn (decode)", "signed", 0.03),  # -2.6 %
        ("pallas_flash [pallas-mosaic] (train)", "median", 0.08),  # 2.4 %
        ("pallas_flash [pallas-mosaic] (train)", "max", 0.20),  # 10.6 %
        ("pallas_flash [pallas-mosaic] (train)", "signed", 0.03),  # -0.1 %
    ),
    "h100-heldout15-2026-12-07": (  # both calls (cuDNN's signed -3.001 % misses by a hair)
        ("cudnn", "median", 0.05),  # 4.9 %
        ("cudnn", "max", 0.15),  # 8.5 %
        ("cudnn (decode)", "median", 0.08),  # 6.4 %
        ("pallas_flash", "signed", 0.03),  # -1.9 %
        ("pallas_flash [pallas-mosaic] (train)", "median", 0.08),  # 2.2 %
        ("pallas_flash [pallas-mosaic] (train)", "max", 0.20),  # 7.0 %
        ("pallas_flash [pallas-mosaic] (train)", "signed", 0.03),  # -0.2 %
    ),
    "h100-heldout16-2026-12-07": (  # every forward target of ours on Triton held
        ("cudnn", "median", 0.05),  # 4.2 %
        ("cudnn", "max", 0.15),  # 7.7 %
        ("cudnn (decode)", "signed", 0.03),  # -0.2 %
        ("cudnn (train)", "median", 0.08),  # 5.0 %
        ("cudnn (train)", "max", 0.20),  # 15.5 %
        ("cudnn (train)", "signed", 0.03),  # -1.4 %
        ("pallas_flash", "median", 0.05),  # 4.2 %
        ("pallas_flash", "max", 0.15),  # 11.5 %
        ("pallas_flash", "signed", 0.03),  # +0.9 %
        ("pallas_flash [pallas-mosaic] (train)", "median", 0.08),  # 5.3 %
        ("pallas_flash [pallas-mosaic] (train)", "signed", 0.03),  # +1.1 %
    ),
}


def _files(draw: str, suffix: str = "") -> tuple[Path, list[Path]]:
    """The draw's committed predictions and its measurement files: the first call's and
    those of later calls that timed the jobs it left (``-part2``, ...)."""
    folder = Path(data_dir("measurements"))
    measured = [folder / f"{draw}.json", *sorted(folder.glob(f"{draw}-part*.json"))]
    return folder / "details" / f"{draw}.predictions{suffix}.json", measured


def _present(draw: str) -> bool:
    predictions, measured = _files(draw)
    return predictions.exists() and all(p.exists() for p in measured)


def _cases(table: dict) -> list:
    return [
        pytest.param(draw, *([item] if isinstance(item, str) else item), id=f"{draw}-{item}")
        for draw, items in table.items()
        for item in (sorted(items) if isinstance(items, dict) else items)
        if _present(draw)
    ]


@pytest.mark.parametrize(("draw", "key"), _cases(RECORDED))
def test_the_recorded_figures_are_those_of_the_committed_predictions(draw, key):
    predictions, measured = _files(draw)
    figures = checks.committed(predictions, measured, key)
    assert figures == pytest.approx(RECORDED[draw][key], abs=0.0006)


@pytest.mark.parametrize(("draw", "key"), _cases(RECORDED))
def test_todays_model_is_no_worse_on_the_draw(draw, key):
    points, signed, absolute, top = MOVED.get(draw, {}).get(key, RECORDED[draw][key])
    n, t_signed, t_absolute, t_top = checks.today(_files(draw)[1], key)
    assert n == points
    assert abs(t_signed) <= abs(signed) + MARGIN
    assert t_absolute <= absolute + MARGIN
    assert t_top <= top + MARGIN


@pytest.mark.parametrize(("draw", "key", "statistic", "bound"), _cases(HELD))
def test_the_targets_that_held(draw, key, statistic, bound):
    predictions, measured = _files(draw)
    assert checks.statistic(checks.committed(predictions, measured, key), statistic) <= bound


@pytest.mark.parametrize("draw", [d for d in RECORDED if _present(d)])
def test_no_held_out_point_is_below_the_floor(draw):
    rows, below_today, below_committed = checks.below_floor(*_files(draw))
    assert rows and not below_today
    assert not below_committed


@pytest.mark.parametrize(("draw", "key"), _cases(DATASHEET))
def test_the_datasheet_only_figures(draw, key):
    """Recorded from the datasheet-only predictions; where a group's median and max meet
    the datasheet target (12 %, 30 %) that is asserted, and those that missed
    (``DATASHEET_MISSED``) are not."""
    figures = checks.committed(*_files(draw, "-datasheet"), key)
    assert figures == pytest.approx(DATASHEET[draw][key], abs=0.0006)
    if key not in DATASHEET_MISSED.get(draw, set()):
        assert figures[2] <= 0.12 and figures[3] <= 0.30
