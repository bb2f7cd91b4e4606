"""The FlashAttention-3 paper's FP8 rows (specs/published/fa3-h100-forward-fp8.toml): data
the model is held to and never fitted on."""

import tomllib

from perfmodel.catalog.data import data_dir
from perfmodel.catalog.kernels import load_kernel
from perfmodel.validation.holdout import published_rows

FILE = data_dir("published") / "fa3-h100-forward-fp8.toml"


def test_fp8_table_is_the_papers_convention():
    table = tomllib.loads(FILE.read_text())
    assert (table["device"], table["dtype"]) == ("h100-sxm", "fp8")
    for p in table["points"]:
        assert p["batch"] * p["n"] == 16384 and p["h"] * p["d"] == 2048
        assert p["sources"] and p["causal_source"] in {"inferred", "unknown"}
    fa3 = [p["tflops"] for p in table["points"] if p["family"] == "fa3"]
    # the abstract's "close to 1.2 PFLOPs/s": FA-3 at head dim 256, n = 16k, no mask
    assert max(fa3) == 1171


def test_fp8_rows_are_predicted_and_never_below_the_floor():
    rows = published_rows("*-forward-fp8.toml")
    # Triton is no family of ours; the head-dim-128 panel's mask is unknown: skipped
    assert {r.family for r in rows} == {"fa3", "cudnn"}
    assert len(rows) == 40
    assert not [r.label for r in rows if r.measured_s < r.t_lower_s]


def test_families_that_run_fp8_say_what_stays_wider():
    fa3, cudnn = load_kernel("fa3").fp8, load_kernel("cudnn").fp8
    assert (fa3.p, fa3.accumulator, fa3.softmax, fa3.output) == ("e4m3", "fp32", "fp32", "bf16")
    assert cudnn.output == "e4m3" and cudnn.amax and cudnn.backward
    assert load_kernel("fa2").fp8 is None  # FlashAttention-2 has no FP8 kernel
