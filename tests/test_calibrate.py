"""``perfmodel calibrate``: the ceilings script in a child process, its file checked and
shown; bad arguments are one line and exit 2 before any work."""

from __future__ import annotations

import pytest

from perfmodel.catalog.ceilings import read_ceilings
from perfmodel.cli import main

pytest.importorskip("jax")


def test_a_dry_run_writes_a_file_the_loader_reads(tmp_path, capfd):
    out = tmp_path / "sub" / "cpu.ceilings.toml"
    args = ["calibrate", "--out", str(out), "--interpret", "--sections", "launch"]
    assert main(args) == 0
    c = read_ceilings(out)
    assert c.interpret and c.value("launch_latency_s") > 0 and c.grid
    shown = capfd.readouterr().out
    assert f"wrote {out}" in shown and "launch_latency_s" in shown


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--device", "nope"], "unknown hardware 'nope'"),
        (["--budget-s", "0"], "--budget-s=0.0 must be a positive number"),
        (["--sections", "nope", "--interpret"], "failed (exit 2)"),
    ],
)
def test_bad_arguments_are_one_line(tmp_path, capfd, extra, message):
    assert main(["calibrate", "--out", str(tmp_path / "c.toml"), *extra]) == 2
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) >= 1 and message in err[-1] and "Traceback" not in "".join(err)
