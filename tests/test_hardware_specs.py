"""Checks over every shipped hardware spec under ``specs/devices``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from perfmodel.catalog.data import data_dir
from perfmodel.catalog.hardware import HardwareSpec, known_names, load_hardware, registry
from perfmodel.catalog.registry import CEILINGS_SUFFIX
from perfmodel.errors import PerfmodelError

SPEC_FILES = sorted(
    p for p in data_dir("devices").glob("*.toml") if not p.name.endswith(CEILINGS_SUFFIX)
)

EXPECTED_NAMES = {
    "A100 SXM 40GB",
    "A100 SXM 80GB",
    "A100 PCIe 80GB",
    "H100 SXM",
    "H100 PCIe",
    "H200 SXM",
    "L4",
    "L40S",
    "A10",
    "RTX 4090",
    "B200",
    "MI300X",
    "TPU v4",
    "TPU v5e",
    "TPU v5p",
    "TPU v6e",
}

REQUIRED_ALIASES = {"a100": "A100 SXM 80GB", "h100": "H100 SXM", "h200": "H200 SXM"}

# A small spec that validates; tests below break it one way at a time.
MINIMAL_SPEC = """\
name = "Test Accelerator"
vendor = "Test"
kind = "gpu"
vector_fp32_flops_per_s = 1e12
hbm_capacity_bytes = 1_000_000_000
hbm_bandwidth_bytes_per_s = 1e12
sm_count = 4
sram_per_sm_bytes = 65_536
launch_overhead_s = 4e-6

[peak_flops_per_s]
bf16 = 1e13

[sources]
peak_flops_per_s = "test"
vector_fp32_flops_per_s = "test"
hbm_capacity_bytes = "test"
hbm_bandwidth_bytes_per_s = "test"
sm_count = "test"
sram_per_sm_bytes = "test"
launch_overhead_s = "test"
"""


def _specs() -> list[HardwareSpec]:
    return [load_hardware(path) for path in SPEC_FILES]


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_spec_files_are_shipped() -> None:
    assert len(SPEC_FILES) >= len(EXPECTED_NAMES)


@pytest.mark.parametrize("path", SPEC_FILES, ids=lambda p: p.name)
def test_spec_file_validates(path: Path) -> None:
    spec = load_hardware(path)
    assert isinstance(spec, HardwareSpec)
    # Loading by path and by name gives the same figures.
    assert load_hardware(spec.name) == spec


@pytest.mark.parametrize("path", SPEC_FILES, ids=lambda p: p.name)
def test_file_name_is_lower_case_with_dashes(path: Path) -> None:
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*\.toml", path.name)


def test_every_listed_device_is_present_by_name() -> None:
    missing = EXPECTED_NAMES - set(known_names())
    assert not missing, f"no spec named {sorted(missing)}"


@pytest.mark.parametrize(("alias", "name"), sorted(REQUIRED_ALIASES.items()))
def test_required_alias_resolves(alias: str, name: str) -> None:
    assert load_hardware(alias).name == name
    assert load_hardware(alias.upper()).name == name


def test_aliases_do_not_collide() -> None:
    owner: dict[str, str] = {}
    for spec in _specs():
        for key in {spec.name.lower(), *(a.lower() for a in spec.aliases)}:
            assert key not in owner, f"{key!r} names both {owner[key]!r} and {spec.name!r}"
            owner[key] = spec.name
    assert set(owner) == set(registry())


@pytest.mark.parametrize("path", SPEC_FILES, ids=lambda p: p.name)
def test_bf16_ridge_point_is_positive(path: Path) -> None:
    assert load_hardware(path).ridge_point("bf16") > 0


@pytest.mark.parametrize("path", SPEC_FILES, ids=lambda p: p.name)
def test_bf16_at_least_tf32(path: Path) -> None:
    peaks = load_hardware(path).peak_flops_per_s
    if peaks.bf16 is not None and peaks.tf32 is not None:
        assert peaks.bf16 >= peaks.tf32


@pytest.mark.parametrize("path", SPEC_FILES, ids=lambda p: p.name)
def test_figures_are_plausible(path: Path) -> None:
    spec = load_hardware(path)
    assert all(text.strip() for text in spec.sources.values())
    # Dense matrix peaks lie between 1 TFLOP/s and 100 PFLOP/s; bandwidths between 100 GB/s
    # and 100 TB/s: catches a dropped or doubled exponent.
    for value in spec.peak_flops_per_s.model_dump(exclude_none=True).values():
        assert 1e12 <= value <= 1e17
    assert 1e11 <= spec.hbm_bandwidth_bytes_per_s <= 1e14
    assert spec.vector_fp32_flops_per_s <= max(
        spec.peak_flops_per_s.model_dump(exclude_none=True).values()
    )
    if spec.kind == "tpu":
        assert spec.l2_bytes is None
        assert spec.peak_flops_per_s.fp32 is None


def test_unknown_name_lists_known_names() -> None:
    with pytest.raises(PerfmodelError) as excinfo:
        load_hardware("no-such-accelerator")
    message = str(excinfo.value)
    assert "no-such-accelerator" in message
    for name in known_names():
        assert name in message


def test_minimal_spec_loads(tmp_path: Path) -> None:
    spec = load_hardware(_write(tmp_path, "minimal.toml", MINIMAL_SPEC))
    assert spec.name == "Test Accelerator"
    assert spec.ridge_point("bf16") == pytest.approx(10.0)


def test_misspelled_key_names_the_file(tmp_path: Path) -> None:
    text = MINIMAL_SPEC.replace("sram_per_sm_bytes = 65_536", "sram_per_sm_byte = 65_536")
    path = _write(tmp_path, "typo.toml", text)
    with pytest.raises(PerfmodelError) as excinfo:
        load_hardware(path)
    assert str(path) in str(excinfo.value)


def test_misspelled_key_in_a_shipped_spec_names_the_file(tmp_path: Path) -> None:
    original = (data_dir("devices") / "h100-sxm.toml").read_text()
    text = original.replace(
        "hbm_bandwidth_bytes_per_s = 3.35e12", "hbm_bandwith_bytes_per_s = 3.35e12"
    )
    assert text != original
    path = _write(tmp_path, "h100-typo.toml", text)
    with pytest.raises(PerfmodelError) as excinfo:
        load_hardware(path)
    assert str(path) in str(excinfo.value)


def test_figure_without_source_raises(tmp_path: Path) -> None:
    text = MINIMAL_SPEC.replace('sm_count = "test"\n', "")
    path = _write(tmp_path, "unsourced.toml", text)
    with pytest.raises(PerfmodelError, match="sm_count") as excinfo:
        load_hardware(path)
    assert str(path) in str(excinfo.value)


def test_optional_figure_without_source_raises(tmp_path: Path) -> None:
    text = MINIMAL_SPEC.replace(
        "launch_overhead_s = 4e-6\n", "launch_overhead_s = 4e-6\nl2_bytes = 1024\n"
    )
    with pytest.raises(PerfmodelError, match="l2_bytes"):
        load_hardware(_write(tmp_path, "unsourced-l2.toml", text))


def test_peak_sourced_per_dtype(tmp_path: Path) -> None:
    per_dtype = MINIMAL_SPEC.replace(
        'peak_flops_per_s = "test"', '"peak_flops_per_s.bf16" = "test"'
    )
    assert load_hardware(_write(tmp_path, "per-dtype.toml", per_dtype)).peak("bf16") == 1e13
    unsourced = per_dtype.replace("bf16 = 1e13", "bf16 = 1e13\nfp8 = 2e13")
    with pytest.raises(PerfmodelError, match="fp8"):
        load_hardware(_write(tmp_path, "per-dtype-fp8.toml", unsourced))
