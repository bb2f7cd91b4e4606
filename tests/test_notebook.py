"""Rich notebook output of predictions, sweeps and estimates, and examples/explore.ipynb
executed from top to bottom (nbclient; skips with the reason where it is not installed)."""

from __future__ import annotations

from pathlib import Path

import pytest

import perfmodel

NOTEBOOK = Path(__file__).resolve().parent.parent / "examples" / "explore.ipynb"


def test_prediction_html_and_markdown_show_the_table():
    p = perfmodel.predict(n=8192, hw="a100")
    html, md = p._repr_html_(), p._repr_markdown_()
    for row in str(p).splitlines()[1:4]:
        label = row.split("  ")[1].strip()
        assert label in html and label in md
    assert "A100 SXM 80GB" in html and "<table>" in html and "speedup" in html


def test_sweep_html_and_markdown():
    r = perfmodel.sweep("h200", n=[1024, 4096], d=[64, 128])
    html, md = r._repr_html_(), r._repr_markdown_()
    assert html.count("<tr>") == 1 + len(r) and "flash.time_s" in html
    assert md.count("\n| ") == 1 + len(r) and "fixed: h=1" in md
    long = perfmodel.sweep("h200", n=list(range(128, 8192, 128)))
    assert long._repr_html_().count("<tr>") == 1 + 2 * long.EDGE + 1  # ends and an ellipsis


def test_estimate_html_and_markdown():
    e = perfmodel.estimate("llama-3.1-8b", "h200", prompt=1024, output=64, batch=4)
    html, md = e._repr_html_(), e._repr_markdown_()
    assert html.count("<table>") == 2 and "time to first token" in html
    assert "| attention |" in md and "Llama-3.1-8B" in md


def test_explore_notebook_runs():
    nbformat = pytest.importorskip("nbformat", reason="pip install -e '.[notebook]'")
    nbclient = pytest.importorskip("nbclient", reason="pip install -e '.[notebook]'")
    pytest.importorskip("ipykernel", reason="pip install -e '.[notebook]'")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert sum("text/html" in o.get("data", {}) for o in outputs) == 3  # predict, sweep, estimate
