"""The report's figures (roofline, throughput, memory, speedup, time breakdown), from the
model (and measured points where given).

matplotlib is imported inside each function and figures are drawn on a plain
``Figure`` with the Agg canvas, so ``import perfmodel`` never loads matplotlib and
nothing needs a display. Every function takes a device, a fixed :class:`Shape`
(everything but n) and the n values, writes one PNG and returns its path.

Measured points are :class:`perfmodel.report.measured.ModelledPoint`: the measured
``point`` with the model's numbers for its shape.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np

from perfmodel.analysis.asymptotics import (
    along_n,
    asymptotic_speedup,
    crossover_n,
    naive_oom_n,
)
from perfmodel.atomic import save_figure
from perfmodel.catalog.hardware import load_hardware
from perfmodel.report.measured import measured_pairs
from perfmodel.roofline import attainable_flops_per_s
from perfmodel.shape import Shape
from perfmodel.units import si
from perfmodel.vocabulary import ALGORITHM_OF, ROOFS, Algorithm

#: n from 128 to 128K tokens, powers of two.
DEFAULT_N = tuple(2**k for k in range(7, 18))
COLORS = {"naive": "tab:red", "flash": "tab:blue"}
#: Marker per measured implementation (the model's algorithm in brackets in legends).
MARKERS = {"naive": "o", "xla": "v", "pallas_flash": "s", "cudnn": "D"}


def _figure(ncols: int = 1, width: float = 8.0) -> tuple[Any, Any]:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, 5.2), dpi=120, layout="constrained")
    axes = fig.subplots(1, ncols)
    return fig, axes


def _save(fig: Any, path: str | Path) -> Path:
    path = Path(path)
    save_figure(fig, path)
    return path


def _along_n(
    hw: Any, shape: Shape | None, n_values: Sequence[int]
) -> tuple[Any, Shape, np.ndarray, dict[str, np.ndarray]]:
    """The device, the shape (default ``Shape()``), n as floats and the model's columns
    along n (``asymptotics.along_n``): what every chart against n starts from."""
    spec, shape = load_hardware(hw), shape or Shape()
    ns = np.asarray(n_values, dtype=float)
    return spec, shape, ns, along_n(spec, ns, shape)


def _config_label(spec: Any, shape: Shape) -> str:
    return f"{spec.name}, {shape.label()}"


def _n_label(n: float) -> str:
    n = int(n)
    return f"{n // 1024}K" if n >= 1024 and n % 1024 == 0 else str(n)


def _n_axis(ax: Any, ns: np.ndarray) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(ns)
    ax.set_xticklabels([_n_label(x) for x in ns], rotation=45 if len(ns) > 8 else 0)
    ax.set_xlabel("sequence length n (tokens)")
    ax.grid(True, which="major", alpha=0.3)


def _measured(ax: Any, points: Sequence[Any] | None, y: Any, label_suffix: str = "") -> None:
    """Scatter measured points, one series per implementation; ``y(point)`` or None to skip."""
    by_impl: dict[str, list[tuple[float, float]]] = {}
    for p in (q.point for q in points or ()):
        value = y(p)
        if p.status == "ok" and value is not None:
            by_impl.setdefault(p.implementation, []).append((p.n, value))
    _scatter_measured(ax, by_impl, label_suffix)


def _scatter_measured(ax: Any, by_impl: dict[str, list[tuple[float, float]]], suffix: str) -> None:
    """One hollow-marker series per implementation, coloured by the algorithm it runs."""
    for impl, xy in sorted(by_impl.items()):
        xs, ys = zip(*sorted(xy), strict=True)
        algo = ALGORITHM_OF.get(impl, Algorithm.NAIVE)
        ax.scatter(
            xs,
            ys,
            marker=MARKERS.get(impl, "x"),
            s=46,
            facecolors="none",
            edgecolors=COLORS[str(algo)],
            linewidths=1.6,
            zorder=5,
            label=f"measured: {impl}{suffix}",
        )


# --- 1. the roofline chart ----------------------------------------------------------------
def roofline_chart(
    hw: Any,
    path: str | Path,
    *,
    shape: Shape | None = None,
    n_values: Sequence[int] = DEFAULT_N,
    measured: Sequence[Any] | None = None,
) -> Path:
    """Compute and bandwidth roofs, the ridge point, naive and flash points for each n."""
    spec, shape, ns, cols = _along_n(hw, shape, n_values)
    fig, ax = _figure(width=9.0)
    peak, bw = spec.peak(shape.dtype), spec.hbm_bandwidth_bytes_per_s
    ridge = spec.ridge_point(shape.dtype)
    lo = min(cols["naive.intensity"].min(), ridge) / 4
    hi = max(cols["flash.intensity"].max(), ridge) * 4
    x = np.geomspace(lo, hi, 200)
    ax.plot(
        x,
        attainable_flops_per_s(x, peak, bw),
        color="k",
        lw=2,
        label=f"roofline: HBM {si(bw, 'B/s')} slope, {shape.dtype} matmul peak "
        f"{si(peak, 'FLOP/s')}",
    )
    if spec.l2_bandwidth_bytes_per_s:
        l2 = spec.l2_bandwidth_bytes_per_s
        ax.plot(
            x,
            attainable_flops_per_s(x, peak, l2),
            color="gray",
            ls="--",
            label=f"L2 slope {si(l2, 'B/s')} (per L2 byte)",
        )
    big = -1  # the largest n: the FLOP-per-exp and FLOP-per-vector ratios at large n
    per_exp = cols["flash.flops"][big] / cols["flash.exp_count"][big]
    if spec.exp_per_s:
        ax.axhline(
            spec.exp_per_s * per_exp,
            color="tab:purple",
            ls=":",
            lw=1.8,
            label=f"exp roof: {si(spec.exp_per_s, 'exp/s')} × {per_exp:.0f} FLOP per exp",
        )
    per_vec = cols["flash.flops"][big] / cols["flash.vector_flops"][big]
    ax.axhline(
        spec.vector_fp32_flops_per_s * per_vec,
        color="tab:olive",
        ls="-.",
        lw=1.4,
        label=f"vector roof: {si(spec.vector_fp32_flops_per_s, 'FLOP/s')} fp32 × "
        f"{per_vec:.0f} FLOP per vector FLOP",
    )
    ax.axvline(ridge, color="k", ls=":", lw=1)
    ax.annotate(
        f"ridge point\n{ridge:.0f} FLOP/B",
        (ridge, 0.03),
        xytext=(4, 0),
        xycoords=("data", "axes fraction"),
        textcoords="offset points",
        fontsize=9,
    )
    for algo, marker in (("naive", "o"), ("flash", "s")):
        xs, ys = cols[f"{algo}.intensity"], cols[f"{algo}.flops"] / cols[f"{algo}.time_s"]
        ax.plot(
            xs,
            ys,
            marker=marker,
            color=COLORS[algo],
            ls="-",
            lw=0.8,
            label=f"{algo} (model estimate), n = {_n_label(ns[0])} … {_n_label(ns[-1])}",
        )
        for i in _label_indices(xs, ys):
            ax.annotate(
                _n_label(ns[i]),
                (xs[i], ys[i]),
                xytext=(5, -12 if algo == "naive" else 6),
                textcoords="offset points",
                fontsize=8,
                color=COLORS[algo],
            )
    _measured_roofline(ax, measured)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per HBM byte)")
    ax.set_ylabel("attained FLOP/s (attention FLOPs / time)")
    ax.set_title(f"Roofline: naive vs flash attention\n{_config_label(spec, shape)}")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7.5, loc="lower right")
    return _save(fig, path)


def _label_indices(xs: np.ndarray, ys: np.ndarray, gap: float = 0.12) -> list[int]:
    """Points to label with their n: skip one within ``gap`` decades of a labelled one."""
    keep: list[int] = []
    for i in range(len(xs)):
        if all(max(abs(np.log10(xs[i] / xs[j])), abs(np.log10(ys[i] / ys[j]))) > gap for j in keep):
            keep.append(i)
    return keep


def _measured_roofline(ax: Any, measured: Sequence[Any] | None) -> None:
    by_impl: dict[str, list[tuple[float, float]]] = {}
    for q in measured or ():
        if q.point.status == "ok":
            by_impl.setdefault(q.point.implementation, []).append(
                (q.model_intensity, q.model_flops / q.point.median_s)
            )
    _scatter_measured(ax, by_impl, " (model FLOPs and bytes / measured time)")


# --- 2. throughput ---------------------------------------------------------------------------
def throughput_chart(
    hw: Any,
    path: str | Path,
    *,
    shape: Shape | None = None,
    n_values: Sequence[int] = DEFAULT_N,
    measured: Sequence[Any] | None = None,
) -> Path:
    """Tokens/s and TFLOP/s against n, naive against flash (model estimate, measured)."""
    spec, shape, ns, cols = _along_n(hw, shape, n_values)
    fig, (ax_tok, ax_fl) = _figure(ncols=2, width=12.0)
    for algo in ("naive", "flash"):
        t = cols[f"{algo}.time_s"]
        ax_tok.plot(
            ns,
            cols["batch"] * ns / t,
            marker="o",
            color=COLORS[algo],
            label=f"{algo} (model estimate)",
        )
        ax_fl.plot(
            ns,
            cols[f"{algo}.matmul_flops"] / t / 1e12,
            marker="o",
            color=COLORS[algo],
            label=f"{algo} (model estimate)",
        )
    ax_fl.axhline(
        spec.peak(shape.dtype) / 1e12, color="k", ls="--", lw=1, label=f"{shape.dtype} matmul peak"
    )
    _measured(ax_tok, measured, lambda p: p.tokens_per_s)
    _measured(ax_fl, measured, lambda p: p.tflops)
    for ax in (ax_tok, ax_fl):
        _n_axis(ax, ns)
    ax_tok.legend(fontsize=8)
    ax_fl.legend(fontsize=8, ncol=2, loc="upper left")  # in the headroom above the peak
    ax_tok.set_yscale("log")
    ax_fl.set_ylim(0, spec.peak(shape.dtype) / 1e12 * 1.4)
    ax_tok.set_ylabel("throughput (query tokens/s, whole batch)")
    ax_tok.set_title("Tokens per second")
    ax_fl.set_ylabel("TFLOP/s (4·b·h·n²·d matmul FLOPs / time)")
    ax_fl.set_title("Matmul TFLOP/s")
    fig.suptitle(f"Attention throughput against n: {_config_label(spec, shape)}")
    return _save(fig, path)


# --- 3. memory -----------------------------------------------------------------------------
def memory_chart(
    hw: Any,
    path: str | Path,
    *,
    shape: Shape | None = None,
    n_values: Sequence[int] | None = None,
    measured: Sequence[Any] | None = None,
) -> Path:
    """S+P against the flash footprint, with the HBM capacity and where naive runs out."""
    spec, shape = load_hardware(hw), shape or Shape()
    n_oom = naive_oom_n(spec, shape)
    if n_values is None:
        top = int(2 ** np.ceil(np.log2(n_oom or max(DEFAULT_N))))
        n_values = [2**k for k in range(7, int(np.log2(top)) + 2)]
    spec, shape, ns, cols = _along_n(spec, shape, n_values)
    fig, ax = _figure(width=9.0)
    for algo, column, style, label in (
        ("naive", "footprint_bytes", dict(marker="o"), "naive footprint: Q, K, V, O + S + P"),
        ("naive", "extra_memory_bytes", dict(ls="--"), "S + P alone (2·b·h·n²·s)"),
        ("flash", "footprint_bytes", dict(marker="s"), "flash footprint: Q, K, V, O + log-sum-exp"),
    ):
        ax.plot(ns, cols[f"{algo}.{column}"], color=COLORS[algo], label=label, **style)
    cap = spec.hbm_capacity_bytes
    ax.axhline(cap, color="k", lw=1.5, label=f"HBM capacity {si(cap, 'B')}")
    if n_oom is not None:
        ax.axvline(n_oom, color=COLORS["naive"], ls=":", lw=1.2)
        ax.annotate(
            f"naive runs out of HBM\nat n = {n_oom:,}",
            (n_oom, cap),
            xytext=(-120, 18),
            textcoords="offset points",
            fontsize=9,
            color=COLORS["naive"],
            arrowprops=dict(arrowstyle="->", color=COLORS["naive"]),
        )
    ax.fill_between(
        ns,
        cap,
        max(cap, cols["naive.footprint_bytes"].max()) * 2,
        color="gray",
        alpha=0.12,
        label="beyond the device's HBM",
    )
    _measured(ax, measured, lambda p: p.peak_memory_bytes or None, " (peak memory)")
    _n_axis(ax, ns)
    ax.set_yscale("log")
    ax.set_ylabel("attention memory (bytes)")
    ax.set_title(f"Attention memory against n\n{_config_label(spec, shape)}")
    ax.legend(fontsize=8, loc="upper left")
    return _save(fig, path)


# --- 4. speedup ---------------------------------------------------------------------------
def speedup_chart(
    hw: Any,
    path: str | Path,
    *,
    shape: Shape | None = None,
    n_values: Sequence[int] = DEFAULT_N,
    measured: Sequence[Any] | None = None,
    threshold: float = 1.5,
) -> Path:
    """naive/flash time against n, the symbolic n→∞ limits, the crossover n."""
    spec, shape, ns, cols = _along_n(hw, shape, n_values)
    fig, ax = _figure(width=9.0)
    styles = {
        "time_s": ("-", "estimate", "derated roofs + launch overheads"),
        "t_lower_s": ("--", "roofline bound", "no derating, no launches"),
    }
    for metric, (ls, name, what) in styles.items():
        ratio = cols[f"naive.{metric}"] / cols[f"flash.{metric}"]
        line = ax.plot(ns, ratio, marker="o", ls=ls, label=f"model {name} ({what})")[0]
        lim = asymptotic_speedup(spec, metric=metric, shape=shape).value
        ax.axhline(
            lim,
            color=line.get_color(),
            ls=":",
            lw=1.4,
            label=f"symbolic n→∞ limit, {name}: {lim:.2f}×",
        )
        x = crossover_n(
            spec, threshold, metric=metric, shape=shape, sustained=True, n_max=int(ns[-1])
        )
        if x is None:
            where = f"not at every n up to {_n_label(ns[-1])}"
        else:
            where = f"at every n ≥ {x:,}" + ("" if x >= ns[0] else " (left of this axis)")
        if x is not None and ns[0] <= x <= ns[-1]:
            ax.axvline(x, color=line.get_color(), ls="-.", lw=1)
        ax.plot([], [], " ", label=f"{name} ≥ {threshold:g}× {where}")
    ax.axhline(1.0, color="k", lw=0.8)
    _measured_speedup(ax, measured)
    _n_axis(ax, ns)
    ax.set_ylim(bottom=0)
    ax.set_ylabel("speedup: naive time / flash time (×)")
    ax.set_title(f"Flash speedup against n\n{_config_label(spec, shape)}")
    ax.legend(fontsize=8, loc="best")
    return _save(fig, path)


def _measured_speedup(ax: Any, measured: Sequence[Any] | None) -> None:
    """Measured naive / pallas_flash at equal shapes."""
    pairs = [
        (nv.point.n, cast(float, nv.point.median_s) / cast(float, fl.point.median_s))  # timed
        for nv, fl in measured_pairs(measured or ())
    ]
    if pairs:
        xs, ys = zip(*pairs, strict=True)
        ax.plot(xs, ys, "k*", ms=10, label="measured: naive / pallas_flash median time")


# --- 5. time breakdown by roof -----------------------------------------------------------
def time_breakdown_chart(
    hw: Any, path: str | Path, *, n: int = 4096, shape: Shape | None = None
) -> Path:
    """Each kernel's time on each roof for one n; the largest bar is the kernel's bound."""
    from perfmodel.report.breakdown import kernel_roof_times

    spec, shape = load_hardware(hw), shape or Shape()
    table = kernel_roof_times(spec, n, shape)
    roofs = [r for r in ROOFS if any(r in times for times in table.values())]
    fig, ax = _figure(width=10.0)
    labels = list(table)
    height = 0.8 / len(roofs)
    for j, roof in enumerate(roofs):
        ys = np.arange(len(labels)) + (j - (len(roofs) - 1) / 2) * height
        ws = [table[k].get(roof, 0.0) * 1e6 for k in labels]
        ax.barh(ys, ws, height=height, label=f"{roof} roof")
    for i, k in enumerate(labels):
        bound = max(table[k].values())
        ax.plot([bound * 1e6] * 2, [i - 0.45, i + 0.45], color="k", lw=2)
        ax.annotate(
            si(bound, "s"),
            (bound * 1e6, i + 0.3),
            xytext=(4, 0),
            textcoords="offset points",
            fontsize=8,
        )
    longest = max(max(times.values()) for times in table.values())
    ax.set_xlim(0, longest * 1e6 * 1.18)
    totals = {
        a: sum(max(v.values()) for k, v in table.items() if k.startswith(a))
        for a in ("naive", "flash")
    }
    ax.text(
        0.99,
        0.97,
        "roofline bound (sum of kernel bounds):\n"
        + "\n".join(f"{a}: {si(t, 's')}" for a, t in totals.items()),
        transform=ax.transAxes,
        ha="right",
        va="top",
        fontsize=9,
        bbox=dict(fc="white", ec="0.7"),
    )
    ax.set_yticks(np.arange(len(labels)))
    ax.set_yticklabels(labels)
    ax.invert_yaxis()
    ax.set_xlabel("time on each roof, µs (roofline bound: no derating, no launch overhead)")
    ax.set_title(
        f"Time by roof per kernel, n = {n:,}, batch {shape.batch_at(n)} "
        "(black tick: the kernel's bound)\n"
        f"{_config_label(spec, shape)}"
    )
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(True, axis="x", alpha=0.3)
    return _save(fig, path)


# --- 6. training ---------------------------------------------------------------------------
def training_chart(
    hw: Any,
    path: str | Path,
    *,
    shape: Shape | None = None,
    n_values: Sequence[int] = DEFAULT_N,
) -> Path:
    """One training step of one attention layer (forward + backward), naive against flash:
    time against n, and the memory the step keeps besides Q, K, V, O (model estimates).

    Flash's backward is FlashAttention-2's (``perfmodel.costs.backward``, dQ by atomics).
    """
    from perfmodel.prediction import sweep

    spec, shape = load_hardware(hw), shape or Shape()
    ns = np.asarray(n_values, dtype=np.int64)
    kwargs = {**shape.kwargs(1), "batch": shape.batch_at(ns)}
    cols = {m: sweep(spec, n=ns, mode=m, grid=False, **kwargs) for m in ("forward", "train")}
    fig, (ax_t, ax_m) = _figure(ncols=2, width=12.0)
    for algo in ("naive", "flash"):
        for ax, mode, column, unit, style, label in (
            (ax_t, "train", "time_s", 1e3, dict(marker="o"), f"{algo}: forward + backward"),
            (ax_t, "forward", "time_s", 1e3, dict(ls=":"), f"{algo}: forward only"),
            (ax_m, "train", "extra_memory_bytes", 1, dict(marker="o"), algo),
        ):
            ys = cols[mode][f"{algo}.{column}"] * unit
            ax.plot(ns, ys, color=COLORS[algo], label=label, **style)
    saved = (
        1 - cols["train"]["flash.extra_memory_bytes"] / cols["train"]["naive.extra_memory_bytes"]
    )
    i = int(np.argmin(np.abs(ns - 4096)))
    ax_m.annotate(
        f"{saved[i]:.1%} saved at n = {_n_label(ns[i])}",
        (ns[i], cols["train"]["flash.extra_memory_bytes"][i]),
        xytext=(10, 30),
        textcoords="offset points",
        fontsize=9,
        arrowprops=dict(arrowstyle="->"),
    )
    for ax in (ax_t, ax_m):
        _n_axis(ax, ns)
        ax.set_yscale("log")
        ax.legend(fontsize=8, loc="upper left")
    ax_t.set_ylabel("time per training step (ms, model estimate)")
    ax_t.set_title("Forward + backward of one attention layer")
    ax_m.set_ylabel("memory kept besides Q, K, V, O (bytes)")
    ax_m.set_title("naive: P and one n×n gradient; flash: LSE, D, fp32 dQ")
    fig.suptitle(f"Training view: {_config_label(spec, shape)}")
    return _save(fig, path)


#: Figure name -> function, in the report's order.
FIGURES: dict[str, Callable[..., Path]] = {
    "roofline": roofline_chart,
    "throughput": throughput_chart,
    "memory": memory_chart,
    "speedup": speedup_chart,
    "time_breakdown": time_breakdown_chart,
    "training": training_chart,
}
