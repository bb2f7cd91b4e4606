"""The report: its numbers are predict/sweep's, X is the solved crossover, the CLI fails cleanly."""

import json
import subprocess
import sys

import numpy as np
import pytest

from perfmodel.analysis.asymptotics import asymptotic_speedup, crossover_n
from perfmodel.catalog.data import data_dir
from perfmodel.cli import main
from perfmodel.prediction import predict, sweep
from perfmodel.report.breakdown import kernel_roof_times
from perfmodel.report.build import write_report
from perfmodel.report.conclusions import conclusions
from perfmodel.report.measured import match_measurements, measured_headline
from perfmodel.shape import Shape
from perfmodel.units import si
from perfmodel.validation.measured import MeasurementFile

SHAPE = Shape(h=16, dtype="bf16", tokens=16384)
SMALL_N = [256, 1024, 4096]


def test_conclusions_match_predict():
    c = conclusions("h200", SHAPE, n_max=8192)
    p = predict(n=4096, hw="h200", h=16, dtype="bf16", batch=4)
    assert c.throughput_gain == pytest.approx(p.speedup - 1, rel=1e-12)
    io = 4 * 4 * 16 * 4096 * 128 * 2  # Q, K, V, O
    flash, naive = io + p.flash.extra_memory_bytes, io + p.naive.extra_memory_bytes
    assert c.memory_saving == pytest.approx(1 - flash / naive, rel=1e-12)
    assert c.sp_bytes == p.naive.extra_memory_bytes
    assert c.asymptote.value == asymptotic_speedup("h200", shape=SHAPE).value
    assert c.x_estimate == crossover_n("h200", 1.5, shape=SHAPE, sustained=True, n_max=8192)


def test_x_is_where_the_predicted_speedup_reaches_the_threshold():
    # The chapter's configuration (one head, batch 1): flash's grid fills the GPU only
    # at long n, so the predicted speedup rises there and X is well defined.
    chapter = Shape(h=1, dtype="fp16")
    # (the n -> oo limit is 1.61x on the H200 with its measured ceilings: 1.3 is reached)
    c = conclusions("h200", chapter, threshold=1.3, n_max=65536)
    x = c.x_estimate
    ns = np.arange(x - 1, 65537)
    r = sweep("h200", n=ns, h=1, dtype="fp16", grid=False)
    assert r["speedup"][0] < 1.3 and np.all(r["speedup"][1:] >= 1.3)
    assert f"beyond n ≈ {x:,}" in c.headline() and "flash at least 30% faster" in c.headline()


def test_kernel_breakdown_sums_to_t_lower():
    table = kernel_roof_times("h200", 4096, Shape(h=4))
    p = predict(n=4096, hw="h200", h=4)
    for algo in ("naive", "flash"):
        bound = sum(max(t.values()) for k, t in table.items() if k.startswith(algo))
        assert bound == pytest.approx(getattr(p, algo).t_lower_s, rel=1e-9)


def measurement_file(path, points):
    run = dict(
        run_id="r1",
        device_name="NVIDIA H200",
        jax_version="0.10.2",
        git_commit="x",
        timestamp="2026-11-29T12:00:00Z",
        ceilings=dict(matmul_bf16_flops_per_s=7.7e14, copy_bytes_per_s=4.3e12),
        points=points,
    )
    path.write_text(json.dumps(MeasurementFile(runs=[run]).model_dump(mode="json")))
    return path


def point(impl, n, median_s, d=128, batch=4, **extra):
    return dict(
        implementation=impl,
        n=n,
        kv_len=n,
        d=d,
        h=16,
        h_kv=16,
        batch=batch,
        dtype="bfloat16",
        causal=False,
        status="ok",
        median_s=median_s,
        tokens_per_s=batch * n / median_s,
        peak_memory_bytes=10**9,
        **extra,
    )


def test_report_files_and_numbers(tmp_path):
    data = measurement_file(
        tmp_path / "m.json",
        [
            point("naive", 4096, 3.0e-3),
            point("pallas_flash", 4096, 1.2e-3),
            point("pallas_flash", 4096, 1.0e-3, block_q=128, block_k=64),  # faster tile: kept
            point("pallas_flash", 4096, 9e-4, d=64),  # another d: left out
        ],
    )
    report = write_report(
        "h200", tmp_path / "out", shape=SHAPE, measurements=[data], n_values=SMALL_N
    )
    text = report.read_text()
    for name in ("roofline", "throughput", "memory", "speedup", "time_breakdown"):
        png = tmp_path / "out" / f"{name}.png"
        assert png.stat().st_size > 20_000 and f"({name}.png)" in text
    c = conclusions("h200", SHAPE, n_max=4096)
    assert c.headline() in text
    p = predict(n=1024, hw="h200", h=16, dtype="bf16", batch=16)
    row = f"| 1,024 | {si(p.naive.time_s, 's')} | {si(p.flash.time_s, 's')} | {p.speedup:.2f}× |"
    assert row in text
    assert "| 4,096 | 4 | 3.00× |" in text  # measured naive / pallas_flash: 3.0 ms / 1.0 ms
    assert "Measured beside predicted" in text
    assert "| 4,096 | 4 | pallas_flash (flash) | 1 ms |" in text


def test_measurement_matching_keeps_the_fastest_point(tmp_path):
    data = measurement_file(
        tmp_path / "m.json",
        [
            point("pallas_flash", 2048, 2e-3),
            point("pallas_flash", 2048, 1e-3, batch=4),
            point("cudnn", 2048, 5e-4, d=64),
        ],
    )
    pts = match_measurements([data], "h200", SHAPE)
    assert [(p.point.implementation, p.point.median_s) for p in pts] == [("pallas_flash", 1e-3)]
    model = predict(n=2048, hw="h200", h=16, dtype="bf16", batch=4).flash
    assert pts[0].predicted_s == model.time_s


def test_cli_report(tmp_path, capsys):
    out = tmp_path / "r"
    argv = [
        "report",
        "--hw",
        "h200",
        "--out",
        str(out),
        "--h",
        "16",
        "--dtype",
        "bf16",
        "--tokens",
        "16384",
        "--n",
        "512",
        "2048",
    ]
    assert main(argv) == 0
    assert capsys.readouterr().out.strip().endswith("report.md")
    assert "h=16" in (out / "report.md").read_text()


@pytest.mark.parametrize(
    "argv",
    [
        ["report", "--hw", "nope", "--out", "OUT"],
        ["report", "--hw", "h200", "--out", "OUT", "--d", "0"],
        ["report", "--hw", "h200", "--out", "OUT", "--dtype", "fp7"],
        ["report", "--hw", "h200", "--out", "OUT", "--threshold", "0.9"],
        ["report", "--hw", "h200", "--out", "OUT", "--measurements", "missing.json"],
        ["report", "--hw", "h200"],
    ],
)
def test_cli_bad_input_one_line_exit_2(argv, tmp_path):
    argv = [str(tmp_path / "o") if a == "OUT" else a for a in argv]
    proc = subprocess.run(
        [sys.executable, "-m", "perfmodel.cli", *argv], cwd=tmp_path, capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_measured_headline(tmp_path):
    data = measurement_file(
        tmp_path / "m.json",
        [
            point("naive", 1024, 1.0e-3, batch=16),
            point("pallas_flash", 1024, 0.9e-3, batch=16),
            point("naive", 4096, 3.0e-3),
            point("pallas_flash", 4096, 1.0e-3),
        ],
    )
    pts = match_measurements([data], "h200", SHAPE)
    line = measured_headline(pts, conclusions("h200", SHAPE, n_max=4096))
    assert line.startswith("Measured: gains are significant from n = 4,096")
    assert "throughput is +200% and peak memory −0.0%" in line


def test_report_takes_its_configuration_from_the_measurements(tmp_path):
    data = sorted(data_dir("measurements").glob("h200-2*.json"))
    if not data:
        pytest.skip("no committed H200 measurements")
    assert (
        main(["report", "--hw", "h200", "--measurements", str(data[0]), "--out", str(tmp_path)])
        == 0
    )
    text = (tmp_path / "report.md").read_text()
    assert "h=16, batch=max(1, 16384//n), bf16" in text
    assert "No measured point has this configuration" not in text
