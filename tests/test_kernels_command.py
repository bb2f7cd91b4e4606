"""``perfmodel kernels show``: the family's launches, as ``perfmodel.launch`` decides them."""

from __future__ import annotations

import json

import pytest

from perfmodel.catalog.hardware import load_hardware
from perfmodel.catalog.kernels import load_kernel
from perfmodel.cli import main
from perfmodel.launch import resolve_point


def test_show_prints_the_launch_that_predict_evaluates(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kernels", "show", "fa3", "--hw", "h200", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["launches"]
    assert shown["hw"] == load_hardware("h200").name
    row = next(r for r in shown["points"] if r["d"] == 128 and not r["causal"])
    sizes = dict(n=4096, m=4096, d=128, h=1, h_kv=1, b=1, s=2)  # what kernels show uses
    at = resolve_point(load_kernel("fa3"), load_hardware("h200"), **sizes, causal=False)
    assert (row["block_q"], row["block_k"], row["warps"]) == (at.block_q, at.block_k, at.warps)
    assert row["smem_bytes"] == at.smem_bytes and row["blocks_per_sm"] == at.blocks_per_sm
    assert row["kv_stages"] == at.kv_stages


def test_a_launch_that_does_not_fit_says_why(capsys: pytest.CaptureFixture[str]) -> None:
    # fa3's d=256 tiles are sized for Hopper's shared memory: an A100 has less
    assert main(["kernels", "show", "fa3", "--hw", "a100", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["launches"]["points"]
    assert any("shared memory" in r.get("error", "") for r in rows)
    assert main(["kernels", "show", "fa3", "--hw", "a100"]) == 0
    text = capsys.readouterr().out
    assert "launches on" in text and "shared memory" in text


def test_list_shows_the_launch_modules_tile(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kernels", "list"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("fa3 "))
    tile = load_kernel("fa3").tile_for(128, causal=False, arch="sm90")
    assert f"{tile.block_q}x{tile.block_k}, {tile.warps} warps" in line
