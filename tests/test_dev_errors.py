"""``tools/dev_errors.py``'s groups: a backward that ran another family's kernels is kept
apart from the family's own backward (committed data, no timing)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _tool():
    spec = importlib.util.spec_from_file_location("dev_errors", ROOT / "tools/dev_errors.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_fallback_backward_is_its_own_group():
    tool = _tool()
    rows = tool.device_rows(("h200-mosaic-backward-2026-12-02",))
    labels = {tool.label_of(r.point) for r in rows}
    own = "pallas_flash [pallas-mosaic] (backward)"
    fallback = own + " <pallas-triton backward>"
    assert own in labels and fallback in labels
    for r in rows:
        p, label = r.point, tool.label_of(r.point)
        ran_triton = p.backward_family == "pallas-triton"
        assert label.endswith("<pallas-triton backward>") == ran_triton, label
