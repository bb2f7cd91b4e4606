"""Bad command lines, table-driven: each gets one line on stderr, exit 2, no traceback.

Every case runs the CLI in-process (``perfmodel.cli.main``) under a wall-clock guard and
an address-space limit (``contract_guard.limits``); the ones that could grow without
bound also run as ``python -m perfmodel.cli`` in a subprocess that sets its own limit
first (no ``preexec_fn``: a fork of a threaded process), so a missing size guard fails
the test instead of the machine. Data files of every kind (device, calibration, kernel
family, model, workload, measurement) are edited one figure at a time and given by
path to every command that reads that kind; the one stderr line must name the file and
the field. Files of every kind of wrongness are built once per session:
not UTF-8, empty, truncated, a folder, the wrong kind of file, a schema violation, NaN
and negative times. Unwritable outputs are paths *under a regular file*, which no user,
root included, can create.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from contract_guard import TooSlow, limits
from hypothesis import given, settings
from hypothesis import strategies as st

import perfmodel
import perfmodel.cli
from perfmodel.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
SPECS = ROOT / "specs"
MEASURED = SPECS / "measurements" / "h200-2026-11-29.json"
#: Wall-clock guard per in-process case: a bad input must be refused before long work.
LIMIT_S = 20
#: Address-space limit for the subprocess cases (bytes): imports need ~1 GB of it.
MEMORY_LIMIT = 2 * 2**30


# --- bad files, built once --------------------------------------------------------------
def _one_run(**point_changes: object) -> dict:
    """The first run of the shipped H200 file with one point, edited."""
    data = json.loads(MEASURED.read_text())
    run = data["runs"][0]
    run["points"] = [{**run["points"][0], **point_changes}]
    return {"schema_version": 1, "runs": [run]}


@pytest.fixture(scope="session")
def bad(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Name -> path of each bad file or folder."""
    d = tmp_path_factory.mktemp("bad")
    device = (SPECS / "devices" / "h200-sxm.toml").read_text()
    measured = MEASURED.read_text()
    files: dict[str, bytes | str] = {
        "latin1.toml": device.replace("H200 SXM", "H200 SXM é").encode("latin-1"),
        "binary.json": b"\xff\xfe\x00\x80\x81 not text",
        "binary.toml": b"\xff\xfe\x00\x80\x81 not text",
        "empty.toml": "",
        "empty.json": "",
        "truncated.toml": device[: len(device) // 2].rsplit("\n", 1)[0] + "\nname = ",
        "truncated.json": measured[: len(measured) // 3],
        "device-as-calibration.toml": device,
        "calibration-as-device.toml": (SPECS / "calibration" / "default.toml").read_text(),
        "list.json": "[1, 2, 3]",
        "wrong-schema.json": json.dumps({"schema_version": 1, "runs": [{"run_id": "x"}]}),
        "nan-time.json": json.dumps(_one_run(median_s=float("nan"))),
        "negative-time.json": json.dumps(_one_run(median_s=-1.0)),
        "zero-h.json": json.dumps(_one_run(h=0)),
        "ok.json": json.dumps(_one_run()),
        "regular-file": "a file, so nothing can be created under it\n",
        "calibration-bad-value.toml": 'name = "x"\nmatmul_efficiency = 1.5\n',
        "workload-wrong.toml": 'name = "w"\nmodel = 3\n',
    }
    for name, content in files.items():
        path = d / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    (d / "folder").mkdir()
    (d / "folder.toml").mkdir()
    (d / "folder.json").mkdir()
    out = {name: str(d / name) for name in [*files, "folder", "folder.toml", "folder.json"]}
    out["missing.json"] = str(d / "missing.json")
    out["missing.toml"] = str(d / "missing.toml")
    out["under-file"] = str(d / "regular-file" / "sub")
    return out


# --- the cases ----------------------------------------------------------------------------
# Each case: (id, command line). "{name}" stands for the path of bad file ``name``,
# "{new}" for a fresh path (a refused command must not create it), $HUGE for 10^300.
PREDICT = "predict --n 1024 --hw a100"
REPORT = "report --hw h200 --out {new}"
CASES: list[tuple[str, str]] = [
    # global
    ("no-command", ""),
    ("unknown-command", "frobnicate"),
    ("unknown-option", f"{PREDICT} --bogus"),
    # predict: numbers
    ("predict-n-zero", "predict --n 0 --hw a100"),
    ("predict-window-text", "predict --n 4096 --hw h200 --window abc"),
    ("predict-window-zero", "predict --n 4096 --hw h200 --window 0"),
    ("predict-window-three", "predict --n 4096 --hw h200 --window 1,2,3"),
    ("predict-window-right-causal", "predict --n 4096 --hw h200 --window 64,64 --causal"),
    ("predict-segments-short", "predict --n 4096 --hw h200 --segments 100,200"),
    ("predict-segments-empty", "predict --n 4096 --hw h200 --segments ,"),
    ("predict-n-negative", "predict --n -4096 --hw a100"),
    ("predict-n-text", "predict --n abc --hw a100"),
    ("predict-n-float", "predict --n 1e3 --hw a100"),
    ("predict-n-huge", "predict --n '$HUGE' --hw a100"),
    ("predict-n-2^64", "predict --n 18446744073709551616 --hw a100"),
    ("predict-d-zero", f"{PREDICT} --d 0"),
    ("predict-d-huge", f"{PREDICT} --d '$HUGE'"),
    ("predict-h-negative", f"{PREDICT} --h -1"),
    ("predict-h-kv-divides", f"{PREDICT} --h 6 --h-kv 4"),
    ("predict-h-kv-zero", f"{PREDICT} --h-kv 0"),
    ("predict-batch-huge", f"{PREDICT} --batch '$HUGE'"),
    ("predict-batch-zero", f"{PREDICT} --batch 0"),
    ("predict-kv-len-zero", f"{PREDICT} --kv-len 0"),
    ("predict-kv-len-causal", f"{PREDICT} --kv-len 512 --causal"),
    ("predict-block-q-odd", f"{PREDICT} --block-q 100"),
    ("predict-block-q-zero", f"{PREDICT} --block-q 0"),
    ("predict-block-k-huge", f"{PREDICT} --block-k 1180591620717411303424"),
    ("predict-tile-sram", f"{PREDICT} --block-q 1024 --block-k 1024"),
    # predict: names
    ("predict-dtype-unknown", f"{PREDICT} --dtype fp64"),
    ("predict-dtype-empty", f"{PREDICT} --dtype ''"),
    ("predict-dtype-device-lacks", "predict --n 1024 --hw tpu-v4 --dtype fp8 --kernel fa2"),
    ("predict-hw-unknown", "predict --n 1024 --hw nope"),
    ("predict-hw-empty", "predict --n 1024 --hw ''"),
    ("predict-calibration-unknown", f"{PREDICT} --calibration nope"),
    ("predict-calibration-other-device", f"{PREDICT} --calibration h200-pallas_flash"),
    ("predict-mode-unknown", f"{PREDICT} --mode sideways"),
    ("predict-cp-zero", f"{PREDICT} --cp 0"),
    ("predict-cp-scheme-unknown", f"{PREDICT} --cp 2 --cp-scheme nope"),
    ("predict-tp-not-dividing", f"{PREDICT} --tp 3 --h 4"),
    # predict: files
    ("predict-hw-folder", "predict --n 1024 --hw '{folder}'"),
    ("predict-hw-folder.toml", "predict --n 1024 --hw '{folder.toml}'"),
    ("predict-hw-missing", "predict --n 1024 --hw '{missing.toml}'"),
    ("predict-hw-latin1", "predict --n 1024 --hw '{latin1.toml}'"),
    ("predict-hw-binary", "predict --n 1024 --hw '{binary.toml}'"),
    ("predict-hw-empty-file", "predict --n 1024 --hw '{empty.toml}'"),
    ("predict-hw-truncated", "predict --n 1024 --hw '{truncated.toml}'"),
    ("predict-hw-wrong-kind", "predict --n 1024 --hw '{calibration-as-device.toml}'"),
    ("predict-calibration-folder", f"{PREDICT} --calibration '{{folder.toml}}'"),
    ("predict-calibration-missing", f"{PREDICT} --calibration '{{missing.toml}}'"),
    ("predict-calibration-binary", f"{PREDICT} --calibration '{{binary.toml}}'"),
    ("predict-calibration-latin1", f"{PREDICT} --calibration '{{latin1.toml}}'"),
    ("predict-calibration-empty", f"{PREDICT} --calibration '{{empty.toml}}'"),
    ("predict-calibration-wrong-kind", f"{PREDICT} --calibration '{{device-as-calibration.toml}}'"),
    ("predict-calibration-bad-value", f"{PREDICT} --calibration '{{calibration-bad-value.toml}}'"),
    # hw
    ("hw-no-verb", "hw"),
    ("hw-show-unknown", "hw show nope"),
    ("hw-show-folder", "hw show '{folder}'"),
    ("hw-show-binary", "hw show '{binary.toml}'"),
    ("hw-show-latin1", "hw show '{latin1.toml}'"),
    ("hw-show-truncated", "hw show '{truncated.toml}'"),
    # validate
    ("validate-folder", "validate '{folder}'"),
    ("validate-folder.json", "validate '{folder.json}'"),
    ("validate-missing", "validate '{missing.json}'"),
    ("validate-binary", "validate '{binary.json}'"),
    ("validate-empty", "validate '{empty.json}'"),
    ("validate-truncated", "validate '{truncated.json}'"),
    ("validate-list", "validate '{list.json}'"),
    ("validate-toml-given", "validate '{device-as-calibration.toml}'"),
    ("validate-wrong-schema", "validate '{wrong-schema.json}'"),
    ("validate-nan-time", "validate '{nan-time.json}'"),
    ("validate-negative-time", "validate '{negative-time.json}'"),
    ("validate-zero-h", "validate '{zero-h.json}'"),
    ("validate-hw-unknown", "validate '{ok.json}' --hw nope"),
    ("validate-runs-none-match", "validate '{ok.json}' --runs nothing"),
    ("validate-save-under-file", "validate '$MEASURED' --save-calibration '{under-file}'"),
    ("validate-save-to-file", "validate '$MEASURED' --save-calibration '{regular-file}'"),
    ("validate-plot-under-file", "validate '$MEASURED' --plot '{under-file}'"),
    # report
    ("report-out-file", "report --hw h200 --out '{regular-file}'"),
    ("report-out-under-file", "report --hw h200 --out '{under-file}'"),
    ("report-hw-unknown", "report --hw nope --out '{new}'"),
    ("report-n-zero", f"{REPORT} --n 0"),
    ("report-n-huge", f"{REPORT} --n '$HUGE'"),
    ("report-d-zero", f"{REPORT} --d 0"),
    ("report-dtype-unknown", f"{REPORT} --dtype fp64"),
    ("report-threshold-one", f"{REPORT} --threshold 1"),
    ("report-threshold-nan", f"{REPORT} --threshold nan"),
    ("report-threshold-inf", f"{REPORT} --threshold inf"),
    ("report-measurements-binary", f"{REPORT} --measurements '{{binary.json}}'"),
    ("report-measurements-folder", f"{REPORT} --measurements '{{folder}}'"),
    ("report-measurements-schema", f"{REPORT} --measurements '{{wrong-schema.json}}'"),
    ("report-cp-zero", f"{REPORT} --cp 0"),
    ("report-cp-scheme-unknown", f"{REPORT} --cp 2 --cp-scheme bogus"),
    # estimate
    ("estimate-prompt-zero", "estimate --model llama-3.1-8b --hw h200 --prompt 0"),
    ("estimate-prompt-huge", "estimate --model llama-3.1-8b --hw h200 --prompt 1000000000000"),
    ("estimate-model-unknown", "estimate --model nope --hw h200"),
    ("estimate-sweep-text", "estimate --model llama-3.1-8b --hw h200 --sweep prompt=abc"),
    (
        "estimate-plot-under-file",
        "estimate --model llama-3.1-8b --hw h200 --sweep prompt=512 --plot '{under-file}'",
    ),
    ("estimate-dtype-unknown", "estimate --model llama-3.1-8b --hw h200 --dtype fp64"),
    # diagnose
    ("diagnose-nothing", "diagnose"),
    ("diagnose-hbm-over-1", "diagnose --hbm-util 1.5 --sm-util 0.3"),
    ("diagnose-hbm-negative", "diagnose --hbm-util -0.1 --sm-util 0.3"),
    ("diagnose-hbm-nan", "diagnose --hbm-util nan --sm-util 0.3"),
    ("diagnose-sm-inf", "diagnose --hbm-util 0.5 --sm-util inf"),
    ("diagnose-sm-text", "diagnose --hbm-util 0.5 --sm-util high"),
    ("diagnose-both-ways", "diagnose --hbm-util 0.5 --sm-util 0.3 --time-s 1e-3"),
    ("diagnose-time-alone", "diagnose --time-s 1e-3"),
    ("diagnose-time-zero", "diagnose --time-s 0 --n 4096 --hw h200"),
    ("diagnose-time-negative", "diagnose --time-s -1 --n 4096 --hw h200"),
    ("diagnose-time-nan", "diagnose --time-s nan --n 4096 --hw h200"),
    ("diagnose-time-inf", "diagnose --time-s inf --n 4096 --hw h200"),
    ("diagnose-time-below-floor", "diagnose --time-s 1e-9 --n 4096 --hw h200"),
    ("diagnose-n-zero", "diagnose --time-s 1e-3 --n 0 --hw h200"),
    ("diagnose-hw-unknown", "diagnose --time-s 1e-3 --n 4096 --hw nope"),
    ("diagnose-hbm-bw-zero", "diagnose --time-s 1e-3 --n 4096 --hw h200 --hbm-bw 0"),
    ("diagnose-peak-nan", "diagnose --time-s 1e-3 --n 4096 --hw h200 --matmul-peak nan"),
    ("diagnose-dtype-unknown", "diagnose --time-s 1e-3 --n 4096 --hw h200 --dtype fp64"),
    # a shape option at predict's default is still given, and the utilisation form reads none
    ("diagnose-utilisation-with-default-d", "diagnose --hbm-util 0.5 --sm-util 0.3 --d 128"),
    ("diagnose-utilisation-with-dtype", "diagnose --hbm-util 0.5 --sm-util 0.3 --dtype fp16"),
    # advise
    ("advise-workload-unknown", "advise --workload nope --hw h200"),
    ("advise-workload-folder", "advise --workload '{folder.toml}' --hw h200"),
    ("advise-workload-binary", "advise --workload '{binary.toml}' --hw h200"),
    ("advise-workload-empty", "advise --workload '{empty.toml}' --hw h200"),
    ("advise-workload-wrong", "advise --workload '{workload-wrong.toml}' --hw h200"),
    ("advise-workload-is-device", "advise --workload '{device-as-calibration.toml}' --hw h200"),
    ("advise-hw-unknown", "advise --workload contract-review --hw nope"),
    ("advise-model-unknown", "advise --workload contract-review --hw h200 --model nope"),
    ("advise-dtype-unknown", "advise --workload contract-review --hw h200 --dtype fp64"),
    (
        "advise-weights-do-not-fit",
        "advise --workload contract-review --hw l4 --model llama-3.1-70b",
    ),
    # issue 23: the newer surfaces
    (
        "estimate-sweep-kernel-unknown",
        "estimate --model llama-3.1-8b --hw h200 --sweep prompt=512 --kernel bogus",
    ),
    (
        "estimate-sweep-attention-ignored",
        "estimate --model llama-3.1-8b --hw h200 --sweep prompt=512 --attention bogus",
    ),
    (
        "estimate-sweep-attention-given",
        "estimate --model llama-3.1-8b --hw h200 --sweep prompt=512 --attention naive",
    ),
    (
        "estimate-plot-unknown-suffix",
        "estimate --model llama-3.1-8b --hw h200 --sweep prompt=512,1024 --plot '{new}.xyz'",
    ),
    (
        "estimate-plot-folder",
        "estimate --model llama-3.1-8b --hw h200 --sweep prompt=512,1024 --plot '{folder}'",
    ),
    (
        "estimate-plot-proc",
        "estimate --model llama-3.1-8b --hw h200 --sweep prompt=512,1024 --plot /proc/x.png",
    ),
    ("estimate-attention-list", "estimate --model llama-3.1-8b --hw h200 --attention ''"),
    ("estimate-tp-not-dividing", "estimate --model llama-3.1-70b --hw h200 --tp 3"),
    ("estimate-70b-one-h200", "estimate --model llama-3.1-70b --hw h200"),
    ("estimate-kv-unknown", "estimate --model llama-3.1-8b --hw h200 --kv ring"),
    ("estimate-context-zero", "estimate --model llama-3.1-8b --hw h200 --context 0"),
    ("validate-holdout-text-bound", "validate '$MEASURED' --holdout 'd>=abc'"),
    ("validate-holdout-two-bounds", "validate '$MEASURED' --holdout 'd>=64|128'"),
    ("validate-holdout-unknown-key", "validate '$MEASURED' --holdout 'bogus=1'"),
    ("validate-holdout-empty", "validate '$MEASURED' --holdout ','"),
    ("validate-plot-proc", "validate '$MEASURED' --plot /proc/nope"),
    ("validate-save-proc", "validate '$MEASURED' --save-calibration /proc/nope"),
    ("report-out-proc", "report --hw h200 --out /proc/r"),
    ("explore-out-proc", "explore --out /proc/x.html"),
    ("explore-out-trailing-slash", "explore --out '{regular-file}/'"),
    ("explore-out-folder", "explore --out '{folder}'"),
    ("explore-out-under-file", "explore --out '{under-file}'"),
    ("explore-measurements-missing", "explore --out '{new}' --measurements '{missing.json}'"),
    ("explore-measurements-binary", "explore --out '{new}' --measurements '{binary.json}'"),
    ("predict-dtype-tpu-fp16", "predict --n 1024 --hw tpu-v6e --dtype fp16 --kernel fa2"),
    ("predict-tpu-default-kernel", "predict --n 1024 --hw tpu-v5e"),
    ("predict-mosaic-on-tpu", "predict --n 1024 --hw tpu-v5e --kernel pallas-mosaic"),
    ("predict-mosaic-on-ampere", "predict --n 1024 --hw a100 --kernel pallas-mosaic"),
    ("predict-hw-close-match", "predict --n 1024 --hw h20"),
    # options the chosen form does not read: refused, not ignored
    ("diagnose-util-with-n", "diagnose --hbm-util 0.5 --sm-util 0.3 --n 4096"),
    ("diagnose-util-with-hw", "diagnose --hbm-util 0.5 --sm-util 0.3 --hw bogus"),
    ("diagnose-time-attention-only", "diagnose --time-s 1e-3 --n 4096 --hw h200 --attention-only"),
    ("explore-host-without-serve", "explore --out {new}/x.html --host 0.0.0.0"),
    ("explore-port-without-serve", "explore --out {new}/x.html --port 9000"),
    ("explore-serve-host-unknown", "explore --out {new}/x.html --serve --host 'no such host!'"),
    ("calibrate-profiles-without-sweep", "calibrate --out {new}.toml --profiles {new}"),
    ("calibrate-sections-empty", "calibrate --out {new}.toml --sections ,"),
    ("report-out-empty", "report --hw h200 --out ''"),
    ("validate-holdout-with-fit", "validate $MEASURED --holdout run=heldout --fit"),
    ("validate-holdout-with-runs", "validate $MEASURED --holdout run=heldout --runs sweep"),
    ("validate-published-without-holdout", "validate $MEASURED --published"),
    ("validate-runs-empty", "validate $MEASURED --runs ,"),
    ("kernels-show-unknown", "kernels show fa-2"),
    ("kernels-no-verb", "kernels"),
    ("calibrate-out-folder", "calibrate --out '{regular-file}/'"),
    ("calibrate-out-proc", "calibrate --out /proc/h200.ceilings.toml"),
    ("calibrate-out-suffix", "calibrate --out '{new}.json'"),
    ("calibrate-budget-inf", "calibrate --out '{new}.toml' --budget-s inf"),
    ("calibrate-budget-nan", "calibrate --out '{new}.toml' --budget-s nan"),
    ("calibrate-device-unknown", "calibrate --out '{new}.toml' --device nope"),
    ("calibrate-sweep-proc", "calibrate --out '{new}.toml' --sweep /proc/s.json"),
    ("diagnose-algorithm-unknown", "diagnose --hbm-util 0.5 --sm-util 0.3 --algorithm xla"),
]

#: Cases that can allocate without bound: run in a subprocess under MEMORY_LIMIT.
MEMORY_CASES: list[tuple[str, str]] = [
    ("report-n-1e12", "report --hw h200 --out '{new}' --n 1000000000000"),
    ("report-n-1e8", "report --hw h200 --out '{new}' --n 100000000"),
    ("report-n-1e8-tokens", "report --hw h200 --out '{new}' --n 100000000 --tokens 1"),
]


def _argv(command: str, bad: dict[str, str], new: Path) -> list[str]:
    """The command line as argv, with bad-file names, {new} and $HUGE filled in."""
    names = {**bad, "new": str(new)}
    subst = {"$HUGE": str(10**300), "$MEASURED": str(MEASURED)}
    out = []
    for arg in shlex.split(command):
        if arg.startswith("{") and arg.endswith("}"):
            arg = names[arg[1:-1]]
        arg = arg.replace("{new}", str(new))
        out.append(subst.get(arg, arg))
    return out


def run_cli(argv: list[str], limit_s: float = LIMIT_S) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``perfmodel ARGV`` in this process, under a time
    and a memory limit (``contract_guard.limits``).

    An exception escaping ``main`` would be a traceback for a user: it is reported as
    exit code -1 with the exception on the stderr text, so the assertion shows it.
    """
    out, err = io.StringIO(), io.StringIO()
    try:
        with limits(limit_s), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as e:  # argparse
                code = e.code if isinstance(e.code, int) else 1
    except TooSlow as e:
        return -2, out.getvalue(), f"{err.getvalue()}TIMEOUT: {e}"
    except BaseException as e:  # noqa: BLE001 - a traceback for a user, shown in the report
        return -1, out.getvalue(), f"{err.getvalue()}Traceback: {type(e).__name__}: {e}"
    return code, out.getvalue(), err.getvalue()


def assert_one_line_exit_2(code: int, err: str) -> None:
    lines = err.strip().splitlines()
    assert "Traceback" not in err and "TIMEOUT" not in err, err
    assert code == 2, f"exit {code}: {err}"
    assert len(lines) == 1, f"{len(lines)} lines on stderr:\n{err}"
    assert lines[0].startswith("perfmodel"), lines[0]


@pytest.mark.parametrize("command", [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_command_line(command: str, bad: dict[str, str], tmp_path: Path) -> None:
    code, _, err = run_cli(_argv(command, bad, tmp_path / "new"))
    assert_one_line_exit_2(code, err)
    assert not (tmp_path / "new").exists(), "a refused command left a folder behind"


#: ``python -m perfmodel.cli`` that lowers its own address-space limit first.
_LIMITED = (
    "import resource, runpy, sys; "
    "resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit})); "
    "sys.argv[0] = 'perfmodel'; runpy.run_module('perfmodel.cli', run_name='__main__')"
)


@pytest.mark.filterwarnings("error")  # a fork of this threaded process warns: an error here
@pytest.mark.parametrize("command", [c[1] for c in MEMORY_CASES], ids=[c[0] for c in MEMORY_CASES])
def test_huge_sizes_refused_under_memory_limit(
    command: str, bad: dict[str, str], tmp_path: Path
) -> None:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    code = _LIMITED.format(limit=MEMORY_LIMIT)
    proc = subprocess.run(
        [sys.executable, "-c", code, *_argv(command, bad, tmp_path / "new")],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert_one_line_exit_2(proc.returncode, proc.stderr)
    assert not (tmp_path / "new").exists(), "a refused report left a folder behind"


# --- what the bad cases must leave behind: nothing ----------------------------------------
def test_refused_report_leaves_no_folder(bad: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "report"
    code, _, err = run_cli(["report", "--hw", "nope", "--out", str(out)])
    assert_one_line_exit_2(code, err)
    assert not out.exists()


@pytest.mark.parametrize(
    "command",
    [
        "report --hw h200 --out {new} --n 1024 4096",
        f"validate '{MEASURED}' --plot {{new}}",
        "estimate --model llama-3.1-8b --hw h200 --sweep prompt=512,1024 --plot {new}/e.png",
    ],
    ids=["report", "validate-plot", "estimate-plot"],
)
def test_missing_matplotlib_names_the_extra(command: str, monkeypatch, tmp_path: Path) -> None:
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib fails
    code, _, err = run_cli(_argv(command, {}, tmp_path / "new"))
    assert_one_line_exit_2(code, err)
    assert "perfmodel[plot]" in err
    assert not (tmp_path / "new").exists(), "left a folder behind"


# --- small things a user trips on -------------------------------------------------------
def test_version() -> None:
    code, out, err = run_cli(["--version"])
    assert code == 0 and out.strip() == f"perfmodel {perfmodel.__version__}", (out, err)


@pytest.mark.parametrize(
    "argv",
    [
        ["hw", "list", "--json"],
        ["hw", "show", "h200", "--json"],
        ["predict", "--n", "4096", "--hw", "h200", "--json"],
        ["diagnose", "--hbm-util", "0.9", "--sm-util", "0.3", "--json"],
        ["diagnose", "--time-s", "1e-3", "--n", "4096", "--hw", "h200", "--json"],
        ["advise", "--workload", "contract-review", "--hw", "h200", "--json"],
    ],
    ids=lambda argv: "-".join(a for a in argv if not a.startswith("-") and a[0].isalpha())[:40],
)
def test_json_everywhere(argv: list[str]) -> None:
    code, out, err = run_cli(argv)
    assert code == 0, err
    json.loads(out)


def test_naive_out_of_memory_said_next_to_the_time() -> None:
    code, out, err = run_cli(["predict", "--n", "262144", "--hw", "a100"])
    assert code == 0, err
    line = next(li for li in out.splitlines() if "time (estimate)" in li)
    assert "does not fit" in line, line
    code, out, _ = run_cli(["predict", "--n", "262144", "--hw", "a100", "--json"])
    data = json.loads(out)
    assert data["naive"]["fits_memory"] is False and data["flash"]["fits_memory"] is True


def test_written_files_have_the_mode_open_gives(tmp_path: Path) -> None:
    from perfmodel.atomic import write_text

    write_text(tmp_path / "atomic.md", "x")
    (tmp_path / "plain.md").write_text("x")
    modes = {p.name: p.stat().st_mode & 0o777 for p in tmp_path.iterdir()}
    assert modes["atomic.md"] == modes["plain.md"], modes


# --- issue 23: what a first-time user reads ----------------------------------------------
def test_no_command_lists_the_commands() -> None:
    code, out, err = run_cli([])
    assert_one_line_exit_2(code, err)
    for name in perfmodel.cli.COMMANDS:
        assert name in out, out


def test_top_level_help_is_for_users() -> None:
    code, out, _ = run_cli(["--help"])
    assert code == 0
    assert "dispatcher" not in out and "perfmodel.commands" not in out, out
    assert "perfmodel predict --n 4096 --hw h200" in out


@pytest.mark.parametrize(
    ("command", "shown"),
    [
        ("predict", ["(default: 128)", "(default: 1)", "fp16", "bf16", "fa2", "fa3", "default"]),
        ("predict", ["h200-pallas_flash", "H200 SXM", "TPU v6e"]),
        ("estimate", ["Llama-3.1-8B", "(default: 2048)", "(default: 16)", "(default: bf16)"]),
        ("diagnose", ["(default: 128)", "(default: fp16)", "fp8"]),
        ("advise", ["contract-review", "Llama-3.1-70B"]),
        ("report", ["(default: 1.5)", "ring (default)", "(default: 128)"]),
    ],
)
def test_help_shows_defaults_and_choices(command: str, shown: list[str]) -> None:
    code, out, _ = run_cli([command, "--help"])
    assert code == 0
    flat = "".join(out.split())  # argparse wraps lines, at spaces and hyphens
    for text in shown:
        assert "".join(text.split()) in flat, f"{text!r} not in {command} --help"


def test_unknown_device_names_close_matches_and_the_list() -> None:
    code, _, err = run_cli(["predict", "--n", "1024", "--hw", "h20"])
    assert_one_line_exit_2(code, err)
    assert "did you mean 'H200 SXM'" in err and "perfmodel hw list" in err, err
    assert "aliases:" not in err and len(err) < 400, err


def test_hw_list_columns_line_up() -> None:
    code, out, _ = run_cli(["hw", "list"])
    assert code == 0
    lines = out.splitlines()
    ends = {len(line.rstrip()) for line in lines}  # right-aligned figures: one right edge
    starts = {line.index("TB/s" if "TB/s" in line else "GB/s") for line in lines[1:]}
    assert len(lines) > 10 and len(ends) == 1 and len(starts) == 1, out


def test_hw_show_units_as_the_sources_state_them() -> None:
    code, out, _ = run_cli(["hw", "show", "h200"])
    assert code == 0
    sram = next(line for line in out.splitlines() if "sram_per_sm_bytes" in line)
    assert "228 KiB" in sram and "228 KB" in sram, sram  # the source says 228 KB (KiB)
    assert "141 GB" in out  # HBM capacity: a decimal figure, shown as one
    assert "{" not in out, "links printed as a raw dict"
    assert "links.nvlink_bytes_per_s" in out and "450 GB/s" in out


def test_predict_on_a_tpu_takes_its_own_dtype() -> None:
    code, out, err = run_cli(["predict", "--n", "1024", "--hw", "tpu-v6e", "--kernel", "fa2"])
    assert code == 0, err
    assert "bf16" in out.splitlines()[0], out


def test_predict_on_a_tpu_names_a_kernel_to_give() -> None:
    """No family models a TPU kernel: the default is refused, saying what to give."""
    code, _, err = run_cli(["predict", "--n", "1024", "--hw", "tpu-v6e"])
    assert_one_line_exit_2(code, err)
    kernel = re.search(r"e\.g\. --kernel ([\w-]+)", err)  # the option as typed
    assert kernel and "no kernel family models a TPU kernel" in err, err
    argv = ["predict", "--n", "1024", "--hw", "tpu-v6e", "--kernel", kernel.group(1)]
    assert run_cli(argv)[0] == 0


def test_diagnose_of_a_flash_run_does_not_recommend_flash() -> None:
    argv = ["diagnose", "--hbm-util", "0.9", "--sm-util", "0.3", "--algorithm", "flash"]
    code, out, _ = run_cli(argv)
    assert code == 0
    assert "flash attention helps" not in out and "already" in out, out


def test_holdout_on_a_field_some_points_lack() -> None:
    code, out, err = run_cli(["validate", str(MEASURED), "--holdout", "block_q>=64"])
    assert code == 0, err
    assert "pallas_flash" in out


def test_out_of_memory_names_a_split_that_is_accepted() -> None:
    code, _, err = run_cli(["estimate", "--model", "llama-3.1-70b", "--hw", "h200"])
    assert_one_line_exit_2(code, err)
    tp = re.search(r"try tp=(\d+)", err)
    assert tp, err
    argv = ["estimate", "--model", "llama-3.1-70b", "--hw", "h200", "--tp", tp.group(1)]
    code, _, err = run_cli(argv)
    assert code == 0, err


@settings(max_examples=40)
@given(
    option=st.sampled_from(["--n", "--d", "--h", "--batch", "--kv-len", "--cp", "--tp"]),
    value=st.one_of(
        st.sampled_from(["0", "-1", "1e3", "nan", "inf", "", "0x10", "1_000", str(10**30)]),
        st.text(max_size=8),
        st.integers(min_value=-(2**70), max_value=2**70).map(str),
    ),
)
def test_predict_any_option_value(option: str, value: str) -> None:
    """Any text for an integer option: a prediction (exit 0), or exit 2 in one line."""
    argv = ["predict", "--n", "1024", "--hw", "h200", "--h", "8", option, value]
    code, out, err = run_cli(argv)
    if code == 0:
        assert err == "" and "nan" not in out and "inf " not in out, out
    else:
        assert_one_line_exit_2(code, err)


#: Numeric options of the other quick commands, each with a valid command line around it.
OPTIONS = (
    [
        ("estimate --model llama-3.1-8b --hw h200", opt)
        for opt in ("--prompt", "--output", "--batch", "--page-tokens", "--context", "--tp")
    ]
    + [
        ("diagnose --time-s 1e-3 --n 4096 --hw h200", opt)
        for opt in ("--time-s", "--n", "--hbm-bw", "--matmul-peak", "--d", "--h", "--batch")
    ]
    + [("diagnose --hbm-util 0.5 --sm-util 0.3", opt) for opt in ("--hbm-util", "--sm-util")]
)


@settings(max_examples=60)
@given(
    where=st.sampled_from(OPTIONS),
    value=st.one_of(
        st.sampled_from(["0", "-1", "0.5", "1e3", "nan", "inf", "-inf", "", "1e999", "1_0"]),
        st.text(max_size=8),
        st.integers(min_value=-(2**70), max_value=2**70).map(str),
        st.floats().map(repr),
    ),
)
def test_other_commands_any_option_value(where: tuple[str, str], value: str) -> None:
    """Any text for a numeric option of estimate or diagnose: exit 0 with finite output,
    or exit 2 in one line."""
    command, option = where
    code, out, err = run_cli([*shlex.split(command), option, value])
    if code == 0:
        assert err == "" and " nan" not in out and " inf" not in out, out
    else:
        assert_one_line_exit_2(code, err)


def test_odd_n_under_tensor_parallelism_accepted() -> None:
    """tp alone splits heads, not the sequence: an odd n is valid (no zig-zag halves)."""
    argv = ["predict", "--n", "7", "--hw", "h200", "--h", "8", "--tp", "2", "--causal"]
    code, out, err = run_cli(argv)
    assert code == 0, err
    assert "split cp=1 ring (contiguous) x tp=2" in out, out


# --- every option of every command, read from the parser ----------------------------------
#: A valid, quick command line per command (hw and kernels take names: their options are
#: the --json flag only); every option below is tried on it.
BASE = {
    "predict": "predict --n 1024 --hw h200",
    "estimate": "estimate --model llama-3.1-8b --hw h200",
    "validate": "validate $MEASURED",
    "calibrate": "calibrate --out {new}.toml --interpret",
    "report": "report --hw h200 --out {new}",
    "explore": "explore --out {new}/x.html --hw h200 --dtype bf16 --d 128 --heads 1:1 --batch 1",
    "diagnose": "diagnose --hbm-util 0.5 --sm-util 0.3",
    "advise": "advise --workload contract-review --hw h200",
}


def _value_options() -> list[tuple[str, str, Any]]:
    """(command, option, its type) of every option that takes a value."""
    out = []
    for command, sub in main_parser_commands().items():
        for action in sub._actions:
            if (
                action.option_strings
                and action.nargs != 0
                and "--help" not in action.option_strings
            ):
                out.append((command, action.option_strings[-1], action.type))
    return out


def main_parser_commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


#: Values no option accepts: empty text for every option; for a number, also these.
NUMBER_VALUES = ("nan", "inf", "-1", "abc", "1e999")
OPTION_CASES = [
    (command, option, value)
    for command, option, kind in _value_options()
    for value in ("", *(NUMBER_VALUES if kind in (int, float) else ()))
]


def test_every_command_has_a_base_line() -> None:
    with_options = {c for c, _, _ in _value_options()}
    assert with_options == set(BASE), with_options ^ set(BASE)


@pytest.mark.parametrize(
    ("command", "option", "value"),
    OPTION_CASES,
    ids=[f"{c}{o}={v or 'empty'}" for c, o, v in OPTION_CASES],
)
def test_every_option_refuses_what_no_option_accepts(
    command: str, option: str, value: str, tmp_path: Path
) -> None:
    """Every option of every command (read from the parser, so a new one is covered):
    an empty value, and a non-finite, negative, non-numeric or overflowing number, exit 2
    in one line before any work, leaving nothing behind."""
    argv = _argv(BASE[command], {}, tmp_path / "new") + [option, value]
    code, _, err = run_cli(argv)
    assert_one_line_exit_2(code, err)
    assert not any(tmp_path.iterdir()), "a refused command wrote something"
