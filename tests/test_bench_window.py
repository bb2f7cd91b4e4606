"""kernel_bench.bench_window's CPU side: the --variant parser and the nopad estimate."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernel_bench.bench import parse_variants
from kernel_bench.bench_window import nopad_prediction

MEASURED = Path(__file__).parent.parent / "specs/measurements/details/h200-window-2026-12-02.json"


def test_parse_variants():
    got = parse_variants(['nopad={"pad_seq": false}', 'b={"block_k": 64, "x": "a=b"}'])
    assert got == {"nopad": {"pad_seq": False}, "b": {"block_k": 64, "x": "a=b"}}
    with pytest.raises(SystemExit, match="NAME=JSON"):
        parse_variants(['{"pad_seq": false}'])


def test_nopad_prediction_takes_off_copies_only_where_n_is_not_whole_tiles():
    rows = {}
    for line in nopad_prediction(MEASURED).splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0].isdigit():
            rows[int(cells[0])] = [float(c) for c in cells[5:9] if c != "nan"]
    assert len(rows) == 13
    ours, _, model, by_bytes = rows[131072]  # 131072 rows: no copies
    assert model == by_bytes == ours
    for n, (ours, *_, model, by_bytes) in rows.items():
        if n != 131072:
            assert model < ours and by_bytes < ours, n
