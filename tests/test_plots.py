"""Figures are made headless, are real PNGs, and ``import perfmodel`` skips matplotlib."""

import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from perfmodel.report import figures as plots
from perfmodel.report.measured import ModelledPoint
from perfmodel.shape import Shape
from perfmodel.validation.measured import Point

SMALL_N = [256, 1024, 4096]
ROOT = Path(__file__).resolve().parents[1]


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", data[16:24])


def assert_real_png(path: Path) -> None:
    width, height = png_size(path)
    assert width >= 600 and height >= 400
    assert path.stat().st_size > 20_000  # axes, lines and text, not an empty canvas


def test_import_perfmodel_loads_neither_matplotlib_nor_jax():
    code = (
        "import sys, perfmodel, perfmodel.report.figures, perfmodel.report.build, "
        "perfmodel.analysis.diagnose; "
        "bad = [m for m in ('matplotlib', 'jax') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("name", [k for k in plots.FIGURES if k != "time_breakdown"])
def test_sweep_figures(name, tmp_path):
    path = plots.FIGURES[name]("h200", tmp_path / f"{name}.png", n_values=SMALL_N)
    assert path == tmp_path / f"{name}.png"
    assert_real_png(path)


def test_time_breakdown(tmp_path):
    path = plots.time_breakdown_chart("h200", tmp_path / "t.png", n=2048, shape=Shape(h=4))
    assert_real_png(path)


def fake_point(impl: str, algo: str, n: int, t: float) -> ModelledPoint:
    point = Point(
        implementation=impl,
        n=n,
        kv_len=n,
        d=128,
        h=1,
        h_kv=1,
        batch=1,
        dtype="float16",
        causal=False,
        status="ok",
        median_s=t,
        tokens_per_s=n / t,
        tflops=4 * n * n * 128 / t / 1e12,
        peak_memory_bytes=10**8,
    )
    return ModelledPoint(
        point=point,
        algorithm=algo,
        predicted_s=t,
        model_flops=4 * n * n * 128,
        model_intensity=100.0,
        model_footprint_bytes=10**8,
    )


def test_measured_points_are_drawn(tmp_path):
    pts = [
        fake_point("naive", "naive", 1024, 3e-5),
        fake_point("pallas_flash", "flash", 1024, 1e-5),
    ]
    for name in ("roofline", "throughput", "speedup", "memory"):
        fn = plots.FIGURES[name]
        bare = fn("h200", tmp_path / f"{name}-bare.png", n_values=SMALL_N)
        with_m = fn("h200", tmp_path / f"{name}-m.png", n_values=SMALL_N, measured=pts)
        assert_real_png(with_m)
        assert bare.read_bytes() != with_m.read_bytes()


def test_devices_without_exp_or_l2_roofs(tmp_path):
    path = plots.roofline_chart(
        "tpu-v5e", tmp_path / "r.png", shape=Shape(dtype="bf16"), n_values=SMALL_N
    )
    assert_real_png(path)


@pytest.mark.parametrize("script", ["plot_speedup.py", "exercise_memory_pressure.py"])
def test_example_runs_headless(script, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "MPLBACKEND")}
    argv = [sys.executable, str(ROOT / "examples" / script), str(tmp_path / "s.png")]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert_real_png(tmp_path / "s.png")


def test_memory_pressure_numbers():
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from exercise_memory_pressure import pressures
    finally:
        sys.path.pop(0)
    p = pressures(8192)
    assert p["sp_one_head"] == 2 * 8192 * 8192 * 2  # the chapter's 268 MB
    assert p["kv_cache"] == 2 * 32 * 8 * 128 * 8192 * 2  # 2·layers·kv_heads·d·n·bytes
