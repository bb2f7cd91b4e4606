"""The measured-data schema, its loader and its atomic merge-writer."""

from __future__ import annotations

import json

import pytest

from perfmodel.errors import PerfmodelError
from perfmodel.validation.measured import (
    Ceilings,
    MeasurementFile,
    Point,
    Run,
    load_measurements,
    merge_write,
    read_measurement_file,
)


def point(**over) -> dict:
    base = {
        "implementation": "pallas_flash",
        "n": 4096,
        "kv_len": 4096,
        "d": 128,
        "h": 16,
        "h_kv": 16,
        "batch": 4,
        "dtype": "bfloat16",
        "causal": False,
        "block_q": 128,
        "block_k": 64,
        "num_warps": 8,
        "num_stages": 3,
        "status": "ok",
        "error": None,
        "median_s": 2e-3,
        "p10_s": 1.9e-3,
        "p90_s": 2.1e-3,
        "min_s": 1.8e-3,
        "runs": 20,
        "tflops": 275.0,
        "tokens_per_s": 8.2e6,
        "peak_memory_bytes": 3 << 20,
    }
    return {**base, **over}


def run(run_id="sweep-1", points=None) -> dict:
    return {
        "run_id": run_id,
        "device_name": "NVIDIA H200",
        "jax_version": "0.11.2",
        "git_commit": "abc",
        "timestamp": "2026-11-29T12:00:00+00:00",
        "ceilings": {
            "matmul_bf16_flops_per_s": 7.7e14,
            "copy_bytes_per_s": 4.3e12,
            "l2_read_bytes_per_s": None,
            "launch_overhead_s": 1e-5,
            "l2_bytes": 60 << 20,
            "sm_count": 132,
            "clock_hz": 1.98e9,
        },
        "points": points if points is not None else [point()],
    }


def test_round_trip(tmp_path):
    path = tmp_path / "m.json"
    merged = merge_write(path, run())
    assert MeasurementFile.model_validate_json(path.read_text()) == merged
    pairs = load_measurements(path)
    assert len(pairs) == 1
    r, p = pairs[0]
    assert isinstance(r, Run) and isinstance(p, Point)
    assert r.ceilings.sm_count == 132 and p.tflops == 275.0
    assert p.nominal_flops() == 4.0 * 4 * 16 * 4096 * 4096 * 128


def test_merge_appends_and_keeps_old_runs(tmp_path):
    path = tmp_path / "m.json"
    merge_write(path, run("a"))
    merge_write(path, Run.model_validate(run("b", [point(causal=True), point(n=512)])))
    f = read_measurement_file(path)
    assert [r.run_id for r in f.runs] == ["a", "b"]
    assert len(load_measurements([path, path])) == 6


def test_failed_merge_leaves_file_untouched(tmp_path):
    path = tmp_path / "m.json"
    merge_write(path, run("a"))
    before = path.read_bytes()
    with pytest.raises(PerfmodelError, match="duplicate run_id"):
        merge_write(path, run("a"))
    with pytest.raises(PerfmodelError, match="not added"):
        merge_write(path, run("c", [point(implementation="flash")]))
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["m.json"]  # no temp file left


def test_invalid_file_gives_clear_error(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"schema_version": 1, "runs": [run(points=[point(tflops="x")])]}))
    with pytest.raises(PerfmodelError, match=r"bad\.json.*invalid(.|\n)*tflops"):
        read_measurement_file(path)
    path.write_text("{not json")
    with pytest.raises(PerfmodelError, match="not valid JSON"):
        load_measurements(path)
    with pytest.raises(PerfmodelError, match="does not exist"):
        load_measurements(tmp_path / "missing.json")


@pytest.mark.parametrize(
    ("over", "match"),
    [
        ({"status": "oom", "median_s": None}, "needs an error"),
        ({"median_s": None}, "needs median_s"),
        ({"h": 16, "h_kv": 3}, "multiple of h_kv"),
        ({"colour": "red"}, "colour"),
        ({"n": 0}, "n"),
    ],
)
def test_point_validation(over, match):
    with pytest.raises(ValueError, match=match):
        Point.model_validate(point(**over))


def test_oom_point_and_frozen_models():
    p = Point.model_validate(
        point(
            implementation="naive",
            status="oom",
            median_s=None,
            tflops=None,
            error="RESOURCE_EXHAUSTED",
        )
    )
    assert p.status == "oom"
    with pytest.raises(ValueError):
        p.n = 3  # type: ignore[misc]
    assert Ceilings(matmul_bf16_flops_per_s=7.7e14, copy_bytes_per_s=4.3e12).sm_count is None


def test_bench_writer_output_validates(tmp_path):
    # the GPU benchmark writes plain JSON without pydantic: it must match this schema
    from kernel_bench.bench import RunWriter

    path = tmp_path / "bench.json"
    merge_write(path, run("old"))
    writer = RunWriter(path, run("new", points=[]))
    writer.add(point())
    writer.add(
        point(
            implementation="naive",
            status="oom",
            error="RESOURCE_EXHAUSTED",
            median_s=None,
            tflops=None,
        )
    )
    f = read_measurement_file(path)
    assert [r.run_id for r in f.runs] == ["old", "new"]
    assert [p.status for p in f.runs[1].points] == ["ok", "oom"]


def test_bench_table_uses_latest_sweep_point(tmp_path):
    from kernel_bench.bench import markdown_table

    path = tmp_path / "t.json"
    merge_write(path, run("sweep-1", [point(), point(implementation="cudnn", tflops=550.0)]))
    merge_write(path, run("sweep-2", [point(tflops=440.0)]))
    merge_write(path, run("tune-3", [point(tflops=999.0)]))
    table = markdown_table(path)
    row = next(line for line in table.splitlines() if line.startswith("| bfloat16 | 128"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[5:] == ["440", "-", "550", "-", "0.80", "1,2"]
    assert "999" not in table
