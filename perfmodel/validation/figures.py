"""Validation figures: parity (predicted vs measured) and time vs n. matplotlib loads lazily."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from perfmodel.atomic import save_figure
from perfmodel.validation.compare import Row

_COLOURS = {
    "pallas_flash": "tab:blue",
    "cudnn": "tab:green",
    "xla": "tab:orange",
    "naive": "tab:red",
    "naive_jit": "tab:purple",
    "mgpu_attention": "tab:cyan",
    "paged_decode": "tab:brown",
    "contiguous_decode": "tab:olive",
}


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def parity_plot(rows: Sequence[Row], path: Path, loo: dict[str, list[float]] | None = None) -> Path:
    """Predicted against measured time, log-log, one colour per implementation: the
    datasheet model (default profile) and, when given, each point's leave-one-out
    prediction from the implementation's fitted profile."""
    plt = _pyplot()
    panels = [("datasheet roofs, default profile", {id(r): r.predicted_s for r in rows})]
    if loo:
        by_impl: dict[str, list[Row]] = {}
        for r in rows:
            by_impl.setdefault(r.point.implementation, []).append(r)
        fitted = {
            id(r): r.measured_s * (1 + e)
            for impl, errs in loo.items()
            for r, e in zip(by_impl[impl], errs, strict=True)
        }
        panels.append(("fitted profile, leave-one-out", fitted))
    fig, axes = plt.subplots(1, len(panels), figsize=(6.0 * len(panels), 5.8), squeeze=False)
    values = [v for _, pred in panels for v in pred.values()] + [r.measured_s for r in rows]
    lo, hi = min(values) / 1.5, max(values) * 1.5
    for ax, (title, predicted) in zip(axes[0], panels, strict=True):
        ax.plot([lo, hi], [lo, hi], "k-", lw=1, label="predicted = measured")
        for band in (0.85, 1.15):
            ax.plot([lo, hi], [lo * band, hi * band], "k:", lw=0.8)
        for impl in sorted({r.point.implementation for r in rows}):
            mine = [r for r in rows if r.point.implementation == impl and id(r) in predicted]
            ax.scatter(
                [r.measured_s for r in mine],
                [predicted[id(r)] for r in mine],
                s=18,
                color=_COLOURS.get(impl),
                label=impl,
                alpha=0.8,
            )
        ax.set(
            xscale="log",
            yscale="log",
            xlim=(lo, hi),
            ylim=(lo, hi),
            xlabel="measured time (s)",
            ylabel="predicted time (s)",
            title=f"{title} (dotted: ±15%)",
        )
        ax.legend(loc="upper left", fontsize=8)
        ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)
    return path


def time_vs_n_plot(rows: Sequence[Row], path: Path, label: str = "model") -> Path:
    """Measured points over predicted lines, one panel per (d, causal, heads)."""
    plt = _pyplot()
    panels = sorted({(r.point.d, r.point.causal, r.point.h) for r in rows})
    cols = min(3, len(panels))
    nrows = -(-len(panels) // cols)
    fig, grid = plt.subplots(nrows, cols, figsize=(4.6 * cols, 3.9 * nrows), squeeze=False)
    axes = [list(grid.ravel())]
    for ax in axes[0][len(panels) :]:
        ax.set_visible(False)
    for ax, (d, causal, h) in zip(axes[0], panels, strict=False):
        for impl in sorted({r.point.implementation for r in rows}):
            mine = sorted(
                (
                    r
                    for r in rows
                    if r.point.implementation == impl
                    and (r.point.d, r.point.causal, r.point.h) == (d, causal, h)
                ),
                key=lambda r: r.point.n,
            )
            if not mine:
                continue
            n = [r.point.n for r in mine]
            colour = _COLOURS.get(impl)
            ax.plot(n, [r.predicted_s * 1e3 for r in mine], "-", color=colour, lw=1)
            ax.plot(n, [r.measured_s * 1e3 for r in mine], "o", color=colour, ms=4, label=impl)
        ax.set(
            xscale="log",
            yscale="log",
            xlabel="sequence length n (tokens)",
            ylabel="time per call (ms)",
            title=f"d={d}, h={h}{', causal' if causal else ''} (lines: {label})",
        )
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)
    return path
