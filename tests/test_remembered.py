"""predict() remembers its recent results: an equal call gets an equal prediction,
which shares nothing mutable with the first or with any later one."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

import perfmodel
from perfmodel.catalog.data import data_dir


def test_an_equal_call_gives_an_equal_result_and_another_does_not() -> None:
    p = perfmodel.predict(n=4096, hw="h200", h=16)
    again = perfmodel.predict(n=4096, hw="h200", h=16)
    assert again == p and again is not p
    q = perfmodel.predict(n=4096, hw="h200", h=16, causal=True)
    assert q.flash.time_s != p.flash.time_s


def test_a_remembered_result_shares_no_mutable_part() -> None:
    first = perfmodel.predict(n=3000, hw="h100", h=8, cp=2)
    second = perfmodel.predict(n=3000, hw="h100", h=8, cp=2)
    assert second == first
    kept = {
        "naive roofs": dict(first.naive.roof_times_s),
        "flash effects": dict(first.flash.effects_s),
        "chunks": dict(first.parallel.chunk_times_s),  # type: ignore[union-attr]
    }
    # a caller that edits the dicts of its result (the first's or a later one's) ...
    first.naive.roof_times_s["matmul"] = -1.0
    first.flash.effects_s.clear()
    second.parallel.chunk_times_s["x"] = 0.0  # type: ignore[union-attr]
    third = perfmodel.predict(n=3000, hw="h100", h=8, cp=2)
    # ... changes no other result, nor what the next equal call returns
    assert third.naive.roof_times_s == kept["naive roofs"]
    assert third.flash.effects_s == kept["flash effects"]
    assert third.parallel.chunk_times_s == kept["chunks"]  # type: ignore[union-attr]
    assert second.naive.roof_times_s == kept["naive roofs"]
    assert second.flash.effects_s == kept["flash effects"]
    assert first.parallel.chunk_times_s == kept["chunks"]  # type: ignore[union-attr]


def test_forget_recomputes_the_same_numbers() -> None:
    p = perfmodel.predict(n=2048, hw="a100", h=8)
    perfmodel.predict.forget()  # type: ignore[attr-defined]
    q = perfmodel.predict(n=2048, hw="a100", h=8)
    assert q is not p and q == p


def test_a_device_file_is_read_again_when_it_changes(tmp_path: Path) -> None:
    source = data_dir("devices") / "h200-sxm.toml"
    spec = tmp_path / "mine.toml"
    spec.write_text(source.read_text())
    first = perfmodel.predict(n=4096, hw=str(spec), h=16)
    assert perfmodel.predict(n=4096, hw=str(spec), h=16) == first
    text = spec.read_text()
    assert "\nsm_count = 132\n" in text
    spec.write_text(text.replace("\nsm_count = 132\n", "\nsm_count = 66\n", 1))
    os.utime(spec, ns=(1, 1))  # a new time even within the clock's resolution
    second = perfmodel.predict(n=4096, hw=str(spec), h=16)
    assert second != first and second.hardware.sm_count == 66


def test_an_array_argument_is_computed_each_time() -> None:
    mask = np.ones((8, 8), dtype=bool)
    p = perfmodel.predict(n=1024, hw="h200", block_mask=mask)
    q = perfmodel.predict(n=1024, hw="h200", block_mask=mask)
    assert q is not p and q == p
