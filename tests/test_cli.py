"""The command line: tables, JSON, and one-line errors with exit code 2."""

import json
import subprocess
import sys

import pytest

from perfmodel.cli import main


def test_predict_table(capsys):
    assert main(["predict", "--n", "8192", "--hw", "a100"]) == 0
    out = capsys.readouterr().out
    assert "A100 SXM 80GB" in out and "268,435,456" in out and "speedup" in out


def test_predict_json(capsys):
    assert main(["predict", "--n", "2048", "--hw", "h100", "--causal", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["config"]["causal"] is True and data["speedup"] > 0


@pytest.mark.parametrize(
    ("argv", "kwargs"),
    [
        (["--window", "4095", "--causal"], dict(window=4095, causal=True)),
        (["--window", "512,256"], dict(window=(512, 256))),
        (["--segments", "1024"], dict(segments=1024)),
        (["--segments", "3072,1024"], dict(segments=[3072, 1024])),
    ],
)
def test_predict_masks_as_the_api(capsys, argv, kwargs):
    from perfmodel import predict

    assert main(["predict", "--n", "4096", "--hw", "h200", "--h", "8", "--json", *argv]) == 0
    out = json.loads(capsys.readouterr().out)
    p = predict(n=4096, hw="h200", h=8, **kwargs)
    assert out["flash"]["time_s"] == p.flash.time_s != predict(n=4096, hw="h200", h=8).flash.time_s
    assert out["config"]["window"] == (None if p.config.window is None else list(p.config.window))


def test_hw_list_and_show(capsys):
    assert main(["hw", "list"]) == 0
    assert "H200 SXM" in capsys.readouterr().out
    assert main(["hw", "show", "h200"]) == 0
    assert "hbm_bandwidth_bytes_per_s" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv",
    [
        ["predict", "--n", "0", "--hw", "a100"],
        ["predict", "--n", "1024", "--hw", "nope"],
        ["predict", "--n", "1024", "--hw", "a100", "--h", "6", "--h-kv", "4"],
        ["predict", "--n", "abc", "--hw", "a100"],
        ["hw", "show", "nope"],
    ],
)
def test_errors_are_one_line_exit_2(argv):
    proc = subprocess.run(
        [sys.executable, "-m", "perfmodel.cli", *argv], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_cli_errors_name_the_option_as_typed(capsys):
    """From the command line a message names --kernel, --n, --window-align as typed
    (errors.spell); from Python the same messages keep the API's spelling."""
    import inspect

    from perfmodel import predict
    from perfmodel.errors import PerfmodelError

    cases = [
        (["--calibration", "h200-cudnn", "--kernel", "fa2"], "pass --kernel cudnn"),
        (["--kernel", "xla-naive"], "--kernel xla-naive is a naive family; --kernel names"),
        (["--n", "0"], "--n 0 must be a positive integer"),
        (["--window", "3", "--window-align", "x"], "--window-align x must be one of"),
        (["--window", "8,2", "--causal"], "--window 8,2: a causal mask has no right window"),
        (["--segments", "10,20"], "--segments 10,20 sum to 30, not --n 64"),
        (["--n", "63", "--cp", "2"], "--n 63 is not divisible by 2 (contiguous split, --cp 2)"),
    ]
    for extra, message in cases:
        argv = ["predict", "--n", "64", "--hw", "h200", *extra]
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert message in err and "kernel='" not in err and err.count("\n") == 1, err
    assert main(["predict", "--n", "64", "--hw", "tpu-v6e"]) == 2
    assert "--kernel (not given) on TPU v6e" in capsys.readouterr().err
    with pytest.raises(PerfmodelError, match="pass kernel='cudnn'"):
        predict(n=64, hw="h200", calibration="h200-cudnn", kernel="fa2")
    with pytest.raises(PerfmodelError, match="n=0 must be"):
        predict(n=0, hw="h200")
    with pytest.raises(PerfmodelError, match=r"window=\(8, 2\): a causal mask"):
        predict(n=64, hw="h200", window=(8, 2), causal=True)
    contiguous = r"n=63 is not divisible by 2 \(contiguous split, cp=2\)"
    with pytest.raises(PerfmodelError, match=contiguous):
        predict(n=63, hw="h200", cp=2)
    # the help's defaults are predict()'s, read from the one definition
    defaults = inspect.signature(predict).parameters
    from perfmodel.cli import build_parser

    args = build_parser().parse_args(["predict", "--n", "64", "--hw", "h200"])
    for name in ("d", "h", "batch"):
        assert getattr(args, name) == defaults[name].default
    with pytest.raises(SystemExit):
        main(["predict", "--help"])
    shown = capsys.readouterr().out
    for name, text in (("d", "head dimension"), ("h", "query heads"), ("batch", "sequences")):
        assert f"{text} (default: {defaults[name].default})" in shown
    assert f"(default {defaults['dtype'].default}," in " ".join(shown.split())
