"""Figures of a whole-model sweep (matplotlib loads here only, never on ``import perfmodel``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from perfmodel.atomic import save_figure


def plot_sweep(rows: list[dict[str, Any]], over: str, path: str | Path) -> None:
    """Two panels, naive against flash: prefill tokens/s against the swept value, and
    latency against throughput (each point one value of the sweep)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for attention, style in (("naive", "o--"), ("flash", "s-")):
        mine = [r for r in rows if r["attention"] == attention]
        fits = [r for r in mine if r["fits"]]
        left.plot(
            [r[over] for r in fits],
            [r["prefill_tokens_per_s"] for r in fits],
            style,
            label=attention,
        )
        lost = [r for r in mine if not r["fits"]]
        if lost:
            left.plot(
                [r[over] for r in lost],
                [r["prefill_tokens_per_s"] for r in lost],
                "x",
                color="red",
                label=f"{attention}: does not fit",
            )
        right.plot(
            [r["throughput_tokens_per_s"] for r in fits],
            [r["latency_s"] for r in fits],
            style,
            label=attention,
        )
        for r in fits:
            right.annotate(
                str(r[over]),
                (r["throughput_tokens_per_s"], r["latency_s"]),
                fontsize=7,
                xytext=(3, 3),
                textcoords="offset points",
            )
    left.set(
        xscale="log",
        xlabel=over,
        ylabel="prefill tokens/s (estimate)",
        title="throughput of prefill",
    )
    right.set(
        xlabel="output tokens/s (whole request)",
        ylabel="end-to-end latency (s)",
        title=f"latency against throughput (labels: {over})",
    )
    for ax in (left, right):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)
