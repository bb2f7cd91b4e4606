"""The held-out protocol on the committed data: figures held with a margin, and no
measured point of any run below the floor, through predict, sweep and decode_step.

The figures (docs/validation/heldout.txt, from the commands there) are what the model
does on points no fit saw; the margins guard them against regressions, they do not
claim the issue's targets (docs/validation/heldout.md says which targets hold).
"""

from pathlib import Path

import numpy as np
import pytest

from perfmodel import sweep
from perfmodel.analysis.kvcache import decode_step
from perfmodel.catalog.data import data_dir
from perfmodel.validation.compare import compare, dtype_name, every_point, family_of
from perfmodel.validation.holdout import Figures, holdout, published_rows
from perfmodel.validation.measured import load_measurements

ROOT = Path(data_dir("measurements"))
FORWARD = [ROOT / "h200-devtime-2026-11-30.json", ROOT / "h200-heldout-2026-11-30.json"]
DECODE = [ROOT / "h200-heldout-decode-2026-11-30.json"]
ALL = sorted(ROOT.glob("h200-2*.json")) + sorted(ROOT.glob("h200-decode-*.json"))
ALL += sorted(ROOT.glob("h200-devtime-*.json")) + sorted(ROOT.glob("h200-heldout-*.json"))
MARGIN = 0.05


def _by_impl(figures):
    return {f.implementation: f for f in figures}


@pytest.mark.skipif(not all(p.exists() for p in FORWARD), reason="no held-out data")
def test_forward_held_out_figures():
    got = _by_impl(holdout(load_measurements(FORWARD), "run=heldout"))
    # (default median |error|, max |error|) of the model with the H200's measured
    # ceilings, the softmax overlap and the per-wave prologue (docs/validation/model-truth.md;
    # these points are development data for that model, not held out from it)
    recorded = {
        # was 0.241, 0.506 with datasheet deratings, then 0.081, 0.422; the max is now the
        # n=3000, h=1, b=1 causal point (-52 %): cuDNN's K/V split, chosen on the decode
        # sets, splits this small prefill grid too
        "cudnn": (0.064, 0.520),
        # was 0.268, 0.751; then 0.231, 0.669: the padded-head-dim, padding-copy and
        # exposed-latency terms halve the median; the max is the n=3000, h=1, b=1 causal
        # point (+89 %: its four copies' launch gaps on a 35 µs call)
        "pallas_flash": (0.114, 0.887),
        "naive_jit": (0.251, 0.569),  # was 0.333, 0.590
        # was 0.171, 0.484: worse, the Mosaic kernel now predicted 19 % slow (signed)
        # with cuDNN's softmax overlap assumed for it (specs/kernels/pallas-mosaic.toml)
        "mgpu_attention": (0.268, 0.437),
    }
    for impl, (med, top) in recorded.items():
        d_med, d_max = Figures._stats(got[impl].default)
        assert d_med <= med + MARGIN and d_max <= top + MARGIN, impl
    for impl in ("cudnn", "pallas_flash"):  # fitted on the other points, held to these
        assert got[impl].fitted_on > 20 and got[impl].fitted


@pytest.mark.skipif(not all(p.exists() for p in DECODE), reason="no held-out decode data")
def test_decode_held_out_figures():
    got = _by_impl(holdout(load_measurements(DECODE), "run=decode-devtime"))
    d_med, d_max = Figures._stats(got["paged_decode"].default)
    assert d_med <= 0.10  # the decode target, on device time, no fit
    # was 0.19: the worst point moves with the per-wave prologue (median 0.056); then
    # 0.305: the worst is now the unsplit launch at b=1, m=16384 (-45 %: 8 programs walk
    # 256 pages each, at two dependent loads a page, block table then page, where the
    # model's Little's-law reach takes the idle latency once; median 0.052)
    assert d_max <= 0.447 + MARGIN


def test_published_tables_are_never_below_the_floor():
    rows = published_rows()
    assert len(rows) >= 100
    assert not [r.label for r in rows if r.measured_s < r.t_lower_s]


@pytest.mark.skipif(not ALL, reason="no committed H200 measurements")
def test_every_point_of_every_run_stays_above_the_floor():
    pairs = every_point(load_measurements(ALL))
    rows = compare(pairs)
    assert len(rows) > 400
    below = [(r.run.run_id, r.label()) for r in rows if r.violates_lower_bound]
    assert below == []
    # the same floors through sweep (one call per family, the points' tiles where known)
    fused = [r for r in rows if family_of(r.point) and r.point.n > 1]
    for family in sorted({family_of(r.point) for r in fused}):
        mine = [r for r in fused if family_of(r.point) == family and r.point.block_q]
        if not mine:
            continue
        p = [r.point for r in mine]
        cols = sweep(
            "h200",
            kernel=family,
            grid=False,
            n=[x.n for x in p],
            kv_len=[x.kv_len for x in p],
            d=[x.d for x in p],
            h=[x.h for x in p],
            h_kv=[x.h_kv for x in p],
            batch=[x.batch for x in p],
            dtype=[dtype_name(x.dtype) for x in p],
            causal=[x.causal for x in p],
            block_q=[x.block_q for x in p],
            block_k=[x.block_k for x in p],
        )
        fastest = np.array([r.fastest_s for r in mine])
        assert np.all(fastest >= cols["flash.t_lower_s"]), family
    # and through decode_step, for every decode point
    for r in rows:
        p = r.point
        if p.n == 1 and family_of(p) in ("pallas-paged", "cudnn"):
            step = decode_step(
                "h200",
                batch=p.batch,
                kv_len=p.kv_len,
                h=p.h,
                h_kv=p.h_kv,
                d=p.d,
                dtype=dtype_name(p.dtype),
                page_tokens=p.page_size,
                splits=p.splits,
                kernel=family_of(p),
            )
            assert r.fastest_s >= step.t_lower_s, r.label()


def test_holdout_json_carries_every_error_of_the_text_table(capsys):
    import json

    from perfmodel.cli import main
    from perfmodel.validation.holdout import report

    path = data_dir("measurements") / "h200-heldout-decode-2026-11-30.json"
    assert main(["validate", str(path), "--holdout", "run=decode-devtime", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    figures = holdout(load_measurements(path), "run=decode-devtime")
    assert [d["implementation"] for d in data["implementations"]] == [
        f.implementation for f in figures
    ]
    for d, f in zip(data["implementations"], figures, strict=True):
        assert (d["tested_on"], d["default_errors"], d["fitted_errors"]) == (
            f.tested_on,
            f.default,
            f.fitted,
        )
    assert report(figures).startswith("held out")  # the text table is the other view
