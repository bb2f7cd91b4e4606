"""Data files given by path: each kind, each bad figure, through the API and every command.

A shipped file of each kind (device, calibration, kernel family, model, workload,
measurement, measured ceilings) is edited one figure at a time into a value no result
survives (infinity, NaN, 1e-300 B/s, a launch gap of 1e308 s, a negative or zero
count, ``true`` for a count, ``1`` for a boolean, text for a number, a missing field) or
into a file that is too deep or too large. Each edited file is then read

* by its loader (``load_hardware(path)``, ...): exactly ``PerfmodelError``, one line,
  naming the file and the field;
* by every command that takes that kind by path: exit 2, exactly one stderr line, naming
  the file and the field, no traceback;

each under the time and memory guard of ``contract_guard``. A hypothesis property puts
values drawn from the same classes into any numeric field of a device, calibration or
kernel-family file: the file is refused naming that field, or a prediction on it is
finite.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from contract_guard import guarded
from hypothesis import given, settings
from hypothesis import strategies as st
from test_fuzz_cli import assert_one_line_exit_2, run_cli

import perfmodel
from perfmodel import PerfmodelError
from perfmodel.catalog.ceilings import read_ceilings
from perfmodel.catalog.kernels import load_kernel
from perfmodel.catalog.models import load_model
from perfmodel.catalog.registry import MAX_FILE_BYTES
from perfmodel.catalog.workloads import load_workload
from perfmodel.validation.measured import read_measurement_file

ROOT = Path(__file__).resolve().parents[1]
SPECS = ROOT / "specs"
BASE = {
    "device": SPECS / "devices" / "h200-sxm.toml",
    "calibration": SPECS / "calibration" / "default.toml",
    "kernel": SPECS / "kernels" / "fa3.toml",
    "model": SPECS / "models" / "llama-3.1-8b.toml",
    "workload": SPECS / "workloads" / "contract-review.toml",
    "measurement": SPECS / "measurements" / "h200-2026-11-29.json",
    "ceilings": SPECS / "devices" / "h200-sxm.ceilings.toml",
}
DEEP_TOML = "a = " + "[" * 100_000 + "]" * 100_000 + "\n"
DEEP_JSON = "[" * 100_000 + "]" * 100_000


def set_key(text: str, key: str, value: str) -> str:
    """``key = value`` in place of the first ``key = ...`` line (added on top if none)."""
    new, count = re.subn(rf"(?m)^{re.escape(key)} = .*$", f"{key} = {value}", text, count=1)
    return new if count else f"{key} = {value}\n{text}"


def drop_key(text: str, key: str) -> str:
    new, count = re.subn(rf"(?m)^{re.escape(key)} = .*\n", "", text, count=1)
    assert count == 1, key
    return new


def _measurement(**point: Any) -> Callable[[str], str]:
    """The shipped H200 file's first run, with one point edited (``ceilings`` edits the
    run's ceilings); JSON written by hand where it must hold what json.dumps refuses."""

    def edit(text: str) -> str:
        data = json.loads(text)
        run = data["runs"][0]
        ceilings = point.pop("ceilings", {})
        run["points"] = [{**run["points"][0], **point}]
        run["ceilings"] = {**run["ceilings"], **ceilings}
        out = json.dumps({"schema_version": 1, "runs": [run]})
        return out.replace('"__BIG__"', "1e999")

    return edit


def _toml(key: str, value: str) -> Callable[[str], str]:
    return lambda text: set_key(text, key, value)


#: (kind, id, edit, field the message must name)
EDITS: list[tuple[str, str, Callable[[str], str], str]] = [
    ("device", "bandwidth-inf", _toml("hbm_bandwidth_bytes_per_s", "inf"), "hbm_bandwidth"),
    ("device", "bandwidth-nan", _toml("hbm_bandwidth_bytes_per_s", "nan"), "hbm_bandwidth"),
    ("device", "bandwidth-tiny", _toml("hbm_bandwidth_bytes_per_s", "1e-300"), "hbm_bandwidth"),
    ("device", "bandwidth-text", _toml("hbm_bandwidth_bytes_per_s", '"4.8e12"'), "hbm_bandwidth"),
    ("device", "bandwidth-zero", _toml("hbm_bandwidth_bytes_per_s", "0"), "hbm_bandwidth"),
    ("device", "peak-huge", _toml("bf16", "1e308"), "peak_flops_per_s.bf16"),
    ("device", "peak-negative", _toml("fp16", "-989.4e12"), "peak_flops_per_s.fp16"),
    ("device", "vector-inf", _toml("vector_fp32_flops_per_s", "inf"), "vector_fp32"),
    ("device", "latency-inf", _toml("memory_latency_s", "inf"), "memory_latency_s"),
    ("device", "latency-zero", _toml("memory_latency_s", "0"), "memory_latency_s"),
    ("device", "launch-huge", _toml("launch_overhead_s", "1e308"), "launch_overhead_s"),
    ("device", "launch-negative", _toml("launch_overhead_s", "-4e-6"), "launch_overhead_s"),
    ("device", "sm-count-true", _toml("sm_count", "true"), "sm_count"),
    ("device", "sm-count-zero", _toml("sm_count", "0"), "sm_count"),
    ("device", "sm-count-fraction", _toml("sm_count", "132.5"), "sm_count"),
    ("device", "capacity-negative", _toml("hbm_capacity_bytes", "-1"), "hbm_capacity_bytes"),
    ("device", "sram-huge", _toml("sram_per_sm_bytes", "1e300"), "sram_per_sm_bytes"),
    ("device", "l2-inf", _toml("l2_bandwidth_bytes_per_s", "inf"), "l2_bandwidth"),
    ("device", "mma-fraction-2", _toml("warp_mma_fraction", "2.0"), "warp_mma_fraction"),
    ("device", "link-inf", _toml("nvlink_bytes_per_s", "inf"), "links.nvlink_bytes_per_s"),
    (
        "device",
        "measured-link-zero",
        _toml("all_reduce_bytes_per_s", "0"),
        "links.measured.all_reduce_bytes_per_s",
    ),
    ("device", "node-true", _toml("devices_per_node", "true"), "links.devices_per_node"),
    (
        "device",
        "bandwidth-missing",
        lambda t: drop_key(t, "hbm_bandwidth_bytes_per_s"),
        "hbm_bandwidth",
    ),
    ("device", "deep", lambda t: DEEP_TOML, "nested deeper"),
    ("calibration", "efficiency-inf", _toml("matmul_efficiency", "inf"), "matmul_efficiency"),
    ("calibration", "efficiency-zero", _toml("hbm_efficiency", "0"), "hbm_efficiency"),
    ("calibration", "efficiency-true", _toml("exp_efficiency", "true"), "exp_efficiency"),
    ("calibration", "launch-inf", _toml("launch_overhead_s", "inf"), "launch_overhead_s"),
    ("calibration", "dispatch-huge", _toml("dispatch_overhead_s", "1e308"), "dispatch_overhead"),
    ("calibration", "overlap-nan", _toml("compute_overlap", "nan"), "compute_overlap"),
    ("calibration", "deep", lambda t: DEEP_TOML, "nested deeper"),
    ("kernel", "producer-negative", _toml("producer_warps", "-4"), "producer_warps"),
    ("kernel", "producer-true", _toml("producer_warps", "true"), "producer_warps"),
    ("kernel", "stages-zero", _toml("kv_stages", "0"), "kv_stages"),
    ("kernel", "stages-inf", _toml("kv_stages", "inf"), "kv_stages"),
    ("kernel", "tile-causal-int", _toml("causal", "1"), "tiles.0.causal"),
    ("kernel", "deep", lambda t: DEEP_TOML, "nested deeper"),
    ("model", "layers-true", _toml("layers", "true"), "layers"),
    ("model", "heads-zero", _toml("heads", "0"), "heads"),
    ("model", "tie-int", _toml("tie_embeddings", "0"), "tie_embeddings"),
    ("model", "params-inf", _toml("params", "inf"), "params"),
    ("model", "deep", lambda t: DEEP_TOML, "nested deeper"),
    ("workload", "concurrency-true", _toml("concurrency", "true"), "concurrency"),
    ("workload", "concurrency-inf", _toml("concurrency", "inf"), "concurrency"),
    (
        "workload",
        "quantile-inf",
        lambda t: t.replace("p50 = 32768", "p50 = inf", 1),
        "prompt.quantiles.p50",
    ),
    ("workload", "deep", lambda t: DEEP_TOML, "nested deeper"),
    ("measurement", "median-1e999", _measurement(median_s="__BIG__"), "1e999"),
    ("measurement", "median-huge", _measurement(median_s=1e300), "median_s"),
    ("measurement", "causal-int", _measurement(causal=1), "causal"),
    ("measurement", "h-true", _measurement(h=True), "h"),
    ("measurement", "runs-fraction", _measurement(runs=2.5), "runs"),
    ("measurement", "ceiling-inf", _measurement(ceilings={"clock_hz": 1e300}), "clock_hz"),
    ("measurement", "deep", lambda t: DEEP_JSON, "nested deeper"),
    ("ceilings", "value-inf", _toml("value", "inf"), "ceilings.block_cost_s.value"),
    ("ceilings", "value-nan", _toml("value", "nan"), "ceilings.block_cost_s.value"),
    ("ceilings", "value-zero", _toml("value", "0"), "ceilings.block_cost_s.value"),
    ("ceilings", "value-negative", _toml("value", "-1e-7"), "ceilings.block_cost_s.value"),
    ("ceilings", "value-true", _toml("value", "true"), "ceilings.block_cost_s.value"),
    ("ceilings", "value-text", _toml("value", '"1e-7"'), "ceilings.block_cost_s.value"),
    ("ceilings", "value-missing", lambda t: drop_key(t, "value"), "ceilings.block_cost_s.value"),
    ("ceilings", "clock-inf", _toml("sm_max_hz", "inf"), "clocks.sm_max_hz"),
    ("ceilings", "duration-nan", _toml("duration_s", "nan"), "duration_s"),
    ("ceilings", "sm-count-true", _toml("sm_count", "true"), "sm_count"),
    ("ceilings", "sm-count-zero", _toml("sm_count", "0"), "sm_count"),
    ("ceilings", "interpret-int", _toml("interpret", "0"), "interpret"),
    ("ceilings", "valid-int", _toml("valid", "1"), "tensor_core.0.valid"),
    ("ceilings", "rate-inf", _toml("flops_per_s", "inf"), "tensor_core.0.flops_per_s"),
    ("ceilings", "deep", lambda t: DEEP_TOML, "nested deeper"),
]

#: The loader of each kind, as the API exposes it.
LOADERS: dict[str, Callable[[str], Any]] = {
    "device": perfmodel.load_hardware,
    "calibration": perfmodel.load_calibration,
    "kernel": load_kernel,
    "model": load_model,
    "workload": load_workload,
    "measurement": read_measurement_file,
    "ceilings": read_ceilings,
}
#: Every command that reads each kind by path ({f}: the file, {new}: a fresh path).
COMMANDS: dict[str, list[str]] = {
    "device": [
        "predict --n 1024 --hw {f}",
        "hw show {f}",
        "estimate --model llama-3.1-8b --hw {f}",
        "advise --workload contract-review --hw {f}",
        "diagnose --time-s 1e-3 --n 4096 --hw {f}",
        "report --hw {f} --out {new}",
        f"validate {BASE['measurement']} --hw {{f}}",
    ],
    "calibration": ["predict --n 1024 --hw h200 --calibration {f}"],
    "kernel": ["predict --n 1024 --hw h200 --kernel {f}", "kernels show {f}"],
    "model": [
        "estimate --model {f} --hw h200",
        "advise --workload contract-review --hw h200 --model {f}",
    ],
    "workload": ["advise --workload {f} --hw h200"],
    "measurement": [
        "validate {f}",
        "report --hw h200 --out {new} --measurements {f}",
        "explore --out {new}/page.html --measurements {f}",
    ],
    "ceilings": [],  # read by hw show from the shipped file only: no command takes a path
}


@pytest.fixture(scope="module")
def edited(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """id -> the edited file."""
    folder = tmp_path_factory.mktemp("edited")
    out = {}
    for kind, name, edit, _ in EDITS:
        base = BASE[kind]
        path = folder / f"{kind}-{name}{base.suffix}"
        text = edit(base.read_text())
        assert text != base.read_text(), f"{kind}-{name}: the edit changed nothing"
        path.write_text(text)
        out[f"{kind}-{name}"] = path
    for kind, base in BASE.items():  # a sparse file past the size limit, for each kind
        path = folder / f"{kind}-too-large{base.suffix}"
        with open(path, "wb") as f:
            f.truncate(MAX_FILE_BYTES + 1)
        out[f"{kind}-too-large"] = path
    return out


ALL_EDITS = [(kind, name, field) for kind, name, _, field in EDITS] + [
    (kind, "too-large", "bytes") for kind in BASE
]


def assert_names(message: str, path: Path, field: str) -> None:
    assert "\n" not in message, message
    assert str(path) in message, f"the file is not named: {message}"
    assert field in message, f"{field!r} is not named: {message}"


@pytest.mark.parametrize(
    ("kind", "name", "field"), ALL_EDITS, ids=[f"{k}-{n}" for k, n, _ in ALL_EDITS]
)
def test_loader_refuses(kind: str, name: str, field: str, edited: dict[str, Path]) -> None:
    path = edited[f"{kind}-{name}"]
    with pytest.raises(PerfmodelError) as info:
        guarded(lambda: LOADERS[kind](str(path)))
    assert type(info.value) is PerfmodelError
    assert_names(str(info.value), path, field)


CLI_CASES = [
    (kind, name, field, command) for kind, name, field in ALL_EDITS for command in COMMANDS[kind]
]


@pytest.mark.parametrize(
    ("kind", "name", "field", "command"),
    CLI_CASES,
    ids=[f"{k}-{n}-{c.split()[0]}{i}" for i, (k, n, _, c) in enumerate(CLI_CASES)],
)
def test_command_refuses(
    kind: str, name: str, field: str, command: str, edited: dict[str, Path], tmp_path: Path
) -> None:
    path = edited[f"{kind}-{name}"]
    new = tmp_path / "new"
    argv = [a.replace("{f}", str(path)).replace("{new}", str(new)) for a in command.split()]
    code, _, err = run_cli(argv)
    assert_one_line_exit_2(code, err)
    assert_names(err.strip(), path, field)
    assert not new.exists(), "a refused command left its output behind"


# --- hypothesis: any numeric field, any bad value -------------------------------------------
BAD_TOML = [
    "inf",
    "-inf",
    "nan",
    "1e999",
    "0",
    "-1",
    "0.5",
    "1e-300",
    "1e308",
    "true",
    "false",
    '"1e12"',
    "[]",
    "{}",
    "9223372036854775807",
]


def _numeric_keys(path: Path) -> list[str]:
    """Keys with a number value, outside [sources] (first occurrence of each)."""
    text = path.read_text().split("[sources]")[0]
    return sorted(set(re.findall(r"(?m)^([a-z0-9_]+) = [-+0-9.]", text)))


NUMERIC = {kind: _numeric_keys(BASE[kind]) for kind in ("device", "calibration", "kernel")}


def _predict_with(kind: str, path: Path) -> Any:
    arg = {"device": "hw", "calibration": "calibration", "kernel": "kernel"}[kind]
    kwargs = {"hw": "h200", arg: str(path)}
    return perfmodel.predict(n=4096, h=8, dtype="bf16", **kwargs)


def _finite(value: Any) -> bool:
    if isinstance(value, bool | str | None):
        return True
    if isinstance(value, int | float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list | tuple):
        return all(_finite(v) for v in value)
    return True


@settings(max_examples=80)
@given(data=st.data(), kind=st.sampled_from(sorted(NUMERIC)), value=st.sampled_from(BAD_TOML))
def test_any_numeric_field(data: st.DataObject, kind: str, value: str, tmp_path_factory) -> None:
    key = data.draw(st.sampled_from(NUMERIC[kind]), label="key")
    path = tmp_path_factory.mktemp("h") / f"{kind}.toml"
    path.write_text(set_key(BASE[kind].read_text(), key, value))
    try:
        result = guarded(lambda: _predict_with(kind, path))
    except PerfmodelError as e:
        assert type(e) is PerfmodelError
        message = str(e)
        assert "\n" not in message, message
        if str(path) in message:  # the file refused: it must say which field
            assert key in message, message
        return
    assert _finite(result.model_dump()), f"{key} = {value} gave a non-finite prediction"
