"""predict() remembers its recent results: an equal call shares the frozen prediction."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

import perfmodel
from perfmodel.catalog.data import data_dir


def test_an_equal_call_shares_the_result_and_another_does_not() -> None:
    p = perfmodel.predict(n=4096, hw="h200", h=16)
    assert perfmodel.predict(n=4096, hw="h200", h=16) is p
    q = perfmodel.predict(n=4096, hw="h200", h=16, causal=True)
    assert q is not p and q.flash.time_s != p.flash.time_s
    # 1 and 1.0 are different arguments (the second is refused): never the same key
    assert perfmodel.predict(n=4096, hw="h200", h=16, batch=1) is not p


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
    assert perfmodel.predict(n=4096, hw=str(spec), h=16) is first
    text = spec.read_text()
    assert "\nsm_count = 132\n" in text
    spec.write_text(text.replace("\nsm_count = 132\n", "\nsm_count = 66\n", 1))
    os.utime(spec, ns=(1, 1))  # a new time even within the clock's resolution
    second = perfmodel.predict(n=4096, hw=str(spec), h=16)
    assert second is not first and second.hardware.sm_count == 66


def test_an_array_argument_is_computed_each_time() -> None:
    mask = np.ones((8, 8), dtype=bool)
    p = perfmodel.predict(n=1024, hw="h200", block_mask=mask)
    q = perfmodel.predict(n=1024, hw="h200", block_mask=mask)
    assert q is not p and q == p
