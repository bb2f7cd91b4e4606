"""The validation loop on synthetic data with a known answer, and on the committed H200 data."""

import json
from pathlib import Path

import pytest

from perfmodel import Calibration, predict
from perfmodel.catalog.data import data_dir
from perfmodel.cli import main
from perfmodel.validation.compare import NAIVE_OF, validate
from perfmodel.validation.measured import load_measurements, merge_write

TRUE = {
    "matmul_efficiency": 0.6,
    "hbm_efficiency": 0.7,
    "l2_efficiency": 0.7,
    "launch_overhead_s": 1e-5,
}
SHAPES = [
    (n, d, c) for n in (1024, 2048, 4096, 8192, 16384) for d in (64, 128) for c in (False, True)
]


def _point(impl, n, d, causal, seconds, block=128):
    batch = max(1, 16384 // n)
    return {
        "implementation": impl,
        "n": n,
        "kv_len": n,
        "d": d,
        "h": 16,
        "h_kv": 16,
        "batch": batch,
        "dtype": "bfloat16",
        "causal": causal,
        "block_q": block if impl == "pallas_flash" else None,
        "block_k": block if impl == "pallas_flash" else None,
        "status": "ok",
        "median_s": seconds,
        "p10_s": seconds,
        "p90_s": seconds,
        "min_s": seconds,
        "runs": 20,
    }


def _run(points, run_id="r1"):
    return {
        "run_id": run_id,
        "device_name": "NVIDIA H200",
        "jax_version": "test",
        "git_commit": "0" * 40,
        "timestamp": "2026-11-29T00:00:00Z",
        "ceilings": {"matmul_bf16_flops_per_s": 7.7e14, "copy_bytes_per_s": 4.3e12},
        "points": points,
    }


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    """Measurements the model would produce under known efficiencies: a fit must find them."""
    path = tmp_path_factory.mktemp("m") / "synthetic.json"
    points = []
    for impl, algorithm in (("pallas_flash", "flash"), ("naive", "naive")):
        profile = Calibration(name="true", algorithm=algorithm, **TRUE)
        for n, d, c in SHAPES:
            kw = dict(
                n=n,
                d=d,
                h=16,
                batch=max(1, 16384 // n),
                dtype="bf16",
                causal=c,
                naive=NAIVE_OF.get(impl, "minimal"),
            )
            if algorithm == "flash":  # our kernel's family, at the tile the point records
                kw.update(kernel="pallas-triton", block_q=128, block_k=128)
            t = getattr(predict(hw="h200", calibration=profile, **kw), algorithm).time_s
            points.append(_point(impl, n, d, c, t))
    merge_write(path, _run(points))
    return path


def test_fit_recovers_known_parameters(synthetic):
    rows, summary = validate(synthetic, fit_profiles=True)
    assert len(rows) == 2 * len(SHAPES)
    flash, naive = summary["pallas_flash"], summary["naive"]
    assert flash.calibration.matmul_efficiency == pytest.approx(0.6, abs=0.0125)
    assert flash.calibration.launch_overhead_s == pytest.approx(1e-5, abs=2e-6)
    assert naive.calibration.hbm_efficiency == pytest.approx(0.7, abs=0.0125)
    for s in summary.values():
        assert s.loo_median_abs_error < 0.01
        assert not s.violations


def test_uncalibrated_errors_are_reported_not_hidden(synthetic):
    _, summary = validate(synthetic)
    # the default profile differs from the true one, so errors are visibly non-zero
    assert summary["pallas_flash"].median_abs_error > 0.05
    assert summary["pallas_flash"].worst[0].error != 0


def test_a_point_below_the_floor_is_a_violation(tmp_path):
    floor = predict(n=4096, hw="h200", h=16, batch=4, dtype="bf16").flash.t_lower_s
    path = tmp_path / "fast.json"
    merge_write(path, _run([_point("pallas_flash", 4096, 128, False, floor * 0.9)]))
    _, summary = validate(path)
    assert len(summary["pallas_flash"].violations) == 1
    assert main(["validate", str(path)]) == 1  # the CLI fails loudly too


def test_cli_validate_fit_plot_and_save(synthetic, tmp_path, capsys):
    assert (
        main(
            [
                "validate",
                str(synthetic),
                "--save-calibration",
                str(tmp_path),
                "--plot",
                str(tmp_path),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "pallas_flash" in out and "fit h200-pallas_flash" in out
    saved = tmp_path / "h200-pallas_flash.toml"
    assert predict(n=4096, hw="h200", calibration=str(saved)).flash.calibration == (
        "h200-pallas_flash"
    )
    for png in ("parity.png", "time_vs_n.png"):
        assert (tmp_path / png).stat().st_size > 10_000


def test_validate_json(synthetic, capsys):
    assert main(["validate", str(synthetic), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["summary"]["naive"]["points"] == len(SHAPES)


def test_bad_file_is_one_line_error(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["validate", str(bad)]) == 2


# --- the committed H200 measurements ----------------------------------------------
COMMITTED = sorted(Path(data_dir("measurements")).glob("h200-2*.json"))


@pytest.mark.skipif(not COMMITTED, reason="no committed H200 measurements")
def test_committed_data_never_beats_the_floor():
    _, summary = validate(COMMITTED)  # every run, tuning runs included
    assert {impl: [r.label() for r in s.violations] for impl, s in summary.items()} == {
        impl: [] for impl in summary
    }


@pytest.mark.skipif(not COMMITTED, reason="no committed H200 measurements")
def test_committed_data_leave_one_out_error():
    ours = [
        (r, p)
        for r, p in load_measurements(COMMITTED)
        if p.implementation in ("pallas_flash", "naive")
    ]
    _, summary = validate(ours, fit_profiles=True, run_prefix="sweep")
    for impl in ("pallas_flash", "naive"):
        assert summary[impl].count >= 20, impl
        assert summary[impl].loo_median_abs_error < 0.10, impl


DECODE = sorted(Path(data_dir("measurements")).glob("h200-decode-*.json"))


@pytest.mark.skipif(not DECODE, reason="no committed H200 decode measurements")
def test_committed_decode_points_run_through_the_loop():
    rows, summary = validate(DECODE)
    assert summary["paged_decode"].count >= 4
    assert not summary["paged_decode"].violations
    # the model's time is optimistic here (docs/decode.md says why): errors are negative
    assert all(r.error < 0 for r in rows)


WINDOW = sorted(Path(data_dir("measurements"), "details").glob("h200-*window-2*.json"))


@pytest.mark.skipif(not WINDOW, reason="no committed H200 sliding-window measurements")
def test_committed_window_points_are_predicted_with_their_window():
    """kernel_bench/bench_window.py's files read in the one schema: each point's window
    is the shape's, its nominal FLOPs are its visible pairs' (what the benchmark's
    TFLOP/s divides by), and validate predicts it as predict(window=...) does, at its
    family and phase, which is not the dense prediction; the fit runs on them."""
    from kernel_bench.bench_window import visible_pairs
    from perfmodel.validation.compare import family_as_run

    pairs = load_measurements(WINDOW)
    assert pairs and all(p.window is not None for _, p in pairs)
    rows, summary = validate(WINDOW)
    assert rows and all(" window" in label for label in summary)
    for r in rows:
        p = r.point
        assert p.shape().window == p.window
        left, right = p.window
        assert p.nominal_flops() == 4 * p.d * p.batch * p.h * visible_pairs(p.n, left, right)
        kw = dict(d=p.d, h=p.h, h_kv=p.h_kv, batch=p.batch, causal=p.causal, mode=p.phase)
        kw.update(block_q=p.block_q, block_k=p.block_k)  # the tile it ran, where recorded
        kernel = family_as_run(  # as it ran
            p.family, p.backward_family, p.sequence_padding, p.group_split
        )
        kw.update(dtype={"float16": "fp16", "bfloat16": "bf16"}[p.dtype], kernel=kernel)
        assert r.predicted_s == predict(p.n, "h200", window=p.window, **kw).flash.time_s
        assert r.predicted_s < predict(p.n, "h200", **kw).flash.time_s
    _, fitted = validate(WINDOW, fit_profiles=True)
    assert fitted["pallas_flash [pallas-mosaic] window"].loo_errors


def test_a_window_point_is_its_own_configuration(tmp_path):
    """The same shape timed with and without a window: two configurations, neither
    superseding the other."""
    seconds = 1e-3
    dense = _point("pallas_flash", 4096, 128, True, seconds, block=None)
    local = {**dense, "window": [511, 0], "median_s": seconds / 4}
    path = tmp_path / "w.json"
    merge_write(path, _run([dense, local]))
    rows, _ = validate(path)
    assert sorted(str(r.point.window) for r in rows) == ["(511, 0)", "None"]
