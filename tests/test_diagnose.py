"""The chapter's diagnosis rules: one case per rule, the model-derived path, the CLI."""

import subprocess
import sys

import pytest

from perfmodel.analysis.diagnose import (
    HBM_HIGH,
    SM_BUSY,
    diagnose,
    diagnose_time,
    utilisation_from_time,
)
from perfmodel.cli import main
from perfmodel.errors import PerfmodelError
from perfmodel.prediction import predict


@pytest.mark.parametrize(
    ("hbm", "sm", "verdict", "helps"),
    [
        (0.92, 0.30, "bandwidth-bound", True),  # near the chapter's 90-100%
        (HBM_HIGH, 0.10, "bandwidth-bound", True),  # the threshold itself counts
        (0.45, 0.85, "compute-bound", False),  # SMs busy, bandwidth not full
        (0.05, 0.45, "compute-bound", False),  # a flash kernel at 45% of the tensor peak
        (0.30, 0.20, "outside attention", False),  # the chapter's "~30% and SMs idle"
        (0.30, SM_BUSY, "compute-bound", False),  # the SM threshold itself counts as busy
        (0.55, 0.30, "inconclusive", None),
    ],
)
def test_each_rule(hbm, sm, verdict, helps):
    result = diagnose(hbm, sm)
    assert (result.verdict, result.flash_helps) == (verdict, helps)
    assert f"{hbm:.0%}" in result.explanation and f"{sm:.0%}" in result.explanation
    assert result.explanation.count(". ") <= 2  # one or two sentences


def test_utilisation_from_time_uses_the_model_counts():
    p = predict(n=4096, hw="h200", h=16)
    hbm, sm = utilisation_from_time(1e-3, 4096, "h200", h=16)
    assert hbm == pytest.approx(p.naive.hbm_bytes / 1e-3 / 4.8e12)
    assert sm == pytest.approx(p.naive.matmul_flops / 1e-3 / p.hardware.peak("fp16"))


def test_model_times_get_the_chapter_verdicts():
    shape = dict(h=16, batch=2)
    # a Hopper-native family: FA-2's mma.sync reaches 0.57 of the H200's peak (measured
    # ceilings), so its own model time reads as SMs waiting (latency-bound, 38 %)
    p = predict(n=8192, hw="h200", kernel="fa3", **shape)
    naive = diagnose_time(p.naive.time_s, 8192, "h200", **shape)
    flash = diagnose_time(p.flash.time_s, 8192, "h200", algorithm="flash", kernel="fa3", **shape)
    assert naive.verdict == "bandwidth-bound" and naive.flash_helps
    assert flash.verdict == "compute-bound" and not flash.flash_helps
    slow = diagnose_time(20 * p.naive.time_s, 8192, "h200", **shape)  # the kernels wait
    assert slow.verdict == "latency-bound"  # the time is attention's own: nothing "outside"


def test_measured_ceilings_replace_the_datasheet():
    p = predict(n=4096, hw="h200", h=16, dtype="bf16", batch=4)
    hbm, sm = utilisation_from_time(
        3e-3,
        4096,
        "h200",
        h=16,
        dtype="bf16",
        batch=4,
        hbm_bytes_per_s=4.1e12,
        matmul_flops_per_s=6.9e14,
    )
    assert hbm == pytest.approx(p.naive.hbm_bytes / 3e-3 / 4.1e12)
    assert sm == pytest.approx(p.naive.matmul_flops / 3e-3 / 6.9e14)


def test_both_low_for_attention_alone_is_latency_bound():
    assert diagnose(0.2, 0.1, attention_only=True).verdict == "latency-bound"


@pytest.mark.parametrize(
    "call",
    [
        lambda: diagnose(-0.1, 0.5),
        lambda: diagnose(0.5, "busy"),
        lambda: diagnose_time(0.0, 4096, "h200"),
        lambda: diagnose_time(1e-3, 4096, "h200", algorithm="paged"),
    ],
)
def test_bad_input(call):
    with pytest.raises(PerfmodelError):
        call()


def test_cli_verdict(capsys):
    assert main(["diagnose", "--hbm-util", "0.9", "--sm-util", "0.2"]) == 0
    out = capsys.readouterr().out
    assert "bandwidth-bound" in out and "helps: yes" in out
    assert main(["diagnose", "--time-s", "5e-3", "--n", "8192", "--hw", "h200", "--h", "16"]) == 0
    assert "verdict:" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv",
    [
        ["diagnose", "--hbm-util", "2", "--sm-util", "0.2"],
        ["diagnose", "--hbm-util", "0.5"],
        ["diagnose", "--time-s", "1e-3", "--n", "4096"],
        ["diagnose", "--time-s", "1e-3", "--n", "4096", "--hw", "h200", "--sm-util", "0.1"],
        ["diagnose", "--hbm-util", "x", "--sm-util", "0.2"],
        ["diagnose", "--time-s", "1e-3", "--n", "4096", "--hw", "h200", "--hbm-bw", "0"],
    ],
)
def test_cli_bad_input_one_line_exit_2(argv):
    proc = subprocess.run(
        [sys.executable, "-m", "perfmodel.cli", *argv], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
