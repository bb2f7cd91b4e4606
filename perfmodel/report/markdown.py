"""report.md's text: conclusions, the three misconceptions, the sweep table and the
measured points, every number read from ``predict`` or the ``sweep`` columns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import numpy as np

from perfmodel.analysis.asymptotics import along_n, window_gain
from perfmodel.catalog.hardware import HardwareSpec, load_hardware
from perfmodel.errors import PerfmodelError
from perfmodel.prediction import predict
from perfmodel.report.conclusions import N_GROWTH, Conclusions
from perfmodel.report.measured import ModelledPoint, measured_headline, measured_pairs
from perfmodel.shape import Shape
from perfmodel.units import binary, si


def _us(t: float) -> str:
    return si(t, "s")


def _misconceptions(spec: HardwareSpec, shape: Shape, c: Conclusions, ns: np.ndarray) -> str:
    ref = predict(n=c.n_reference, hw=spec, **shape.kwargs(c.n_reference))
    nv, fl = ref.naive, ref.flash
    grow = along_n(spec, list(N_GROWTH), shape)
    cols = along_n(spec, ns, shape)
    peak_i = int(np.argmax(cols["speedup"]))
    rows = "\n".join(
        f"| {int(n):,} | {int(bt)} | {_us(a)} | {_us(b)} | {_us(a - b)} | {a / b:.2f}× |"
        for n, bt, a, b in zip(
            grow["n"], grow["batch"], grow["naive.time_s"], grow["flash.time_s"], strict=True
        )
    )
    amdahl = ", ".join(
        f"{f:.0%} of the step → {1 / ((1 - f) + f / c.speedup):.2f}×" for f in (0.2, 0.5, 0.8)
    )
    alt = "fp32" if shape.dtype != "fp32" and spec.peak_flops_per_s.fp32 else None
    alt_line = ""
    if alt:
        alt_shape, tiles = replace(shape, dtype=alt), ""
        try:
            a = predict(n=c.n_reference, hw=spec, **alt_shape.kwargs(c.n_reference))
        except PerfmodelError:  # wider elements: halve the tiles so that they fit in SRAM
            bq, bk = cast(int, shape.block_q), cast(int, shape.block_k)  # the report's tiles
            alt_shape = replace(alt_shape, block_q=bq // 2, block_k=bk // 2)
            tiles = f", tiles {alt_shape.block_q}×{alt_shape.block_k} to fit SRAM"
            a = predict(n=c.n_reference, hw=spec, **alt_shape.kwargs(c.n_reference))
        side = "above" if a.naive.intensity >= a.ridge_point else "still below"
        gain = (
            f"flash is only {a.speedup:.2f}× faster"
            if a.speedup >= 1
            else f"flash is slower ({a.speedup:.2f}× naive's speed)"
        )
        alt_line = (
            f" Change the dtype to {alt} ({si(spec.peak(alt), 'FLOP/s')} without "
            f"tensor cores, ridge {a.ridge_point:.0f} FLOP/B{tiles}): naive's intensity "
            f"{a.naive.intensity:.0f} FLOP/B is now {side} the ridge, naive is "
            f"{a.naive.bound}-bound ({a.naive.binding_roof}), and {gain}."
        )
    return f"""## The three misconceptions, with this configuration's numbers

**1. "FlashAttention is a faster algorithm."** It does the same arithmetic and moves
fewer bytes. At n={c.n_reference:,}: matmul FLOPs naive {si(nv.matmul_flops, "FLOP")}
vs flash {si(fl.matmul_flops, "FLOP")} (identical); all FLOPs {si(nv.flops, "FLOP")} vs
{si(fl.flops, "FLOP")} (flash adds the online-softmax rescaling). HBM traffic
{si(nv.hbm_bytes, "B")} vs {si(fl.hbm_bytes, "B")}, {nv.hbm_bytes / fl.hbm_bytes:.1f}× fewer
bytes, so the arithmetic intensity rises from {nv.intensity:.0f} to {fl.intensity:.0f}
FLOP/B against a ridge point of {ref.ridge_point:.0f} FLOP/B: naive is {nv.bound}-bound
({nv.binding_roof}), flash is {fl.bound}-bound ({fl.binding_roof}).

**2. "The speedup grows without bound with n."** The relative gain saturates; the
absolute time keeps growing (as b·n²):

| n | batch | naive | flash | time saved | speedup |
|---:|---:|---:|---:|---:|---:|
{rows}

Over n = {int(ns[0]):,}…{int(ns[-1]):,} the estimated speedup peaks at
{cols["speedup"][peak_i]:.2f}× (n = {int(ns[peak_i]):,}) and tends to the symbolic n→∞
limit **{c.asymptote.value:.2f}×** (roofline bound: {c.asymptote_lower.value:.2f}×): each naive
kernel ends up on its {"/".join(sorted(set(c.asymptote.naive_roofs)))} roof, flash on its
{"/".join(sorted(set(c.asymptote.flash_roofs)))} roof, and both times are b·n² times a constant.
The limit is (R_roof = the roof's rate, derated by the default calibration):

`{c.asymptote.expr}`

**3. "Flash always doubles inference speed."** Only attention's HBM traffic is
removed, so the gain is the ratio of naive's byte-bound time to flash's compute-bound
time — {c.speedup:.2f}× here at n={c.n_reference:,}, tending to {c.asymptote.value:.2f}× for
large n, a constant set by bytes per element, head dimension and the device's FLOP/byte
ratio, not 2× — and it applies to attention's share of the step only. If attention is
{amdahl}.{alt_line} Use `perfmodel diagnose` on a profile first: flash helps only when
attention is bandwidth-bound.
"""


def _sweep_table(spec: HardwareSpec, shape: Shape, ns: np.ndarray) -> str:
    cols = along_n(spec, ns, shape)
    head = (
        "| n | naive time | flash time | speedup | naive tok/s | flash tok/s | naive HBM | "
        "flash HBM | naive memory | flash memory | naive bound | flash bound |\n"
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"
    )
    rows = []
    for i, n in enumerate(cols["n"]):

        def g(k: str, i: int = i) -> Any:
            return cols[k][i]

        oom = " ⚠" if g("naive.footprint_bytes") > spec.hbm_capacity_bytes else ""
        rows.append(
            f"| {int(n):,} | {_us(g('naive.time_s'))} | {_us(g('flash.time_s'))} | "
            f"{g('speedup'):.2f}× | {si(g('batch') * n / g('naive.time_s'), '')} | "
            f"{si(g('batch') * n / g('flash.time_s'), '')} | {si(g('naive.hbm_bytes'), 'B')} | "
            f"{si(g('flash.hbm_bytes'), 'B')} | {si(g('naive.footprint_bytes'), 'B')}{oom} | "
            f"{si(g('flash.footprint_bytes'), 'B')} | {g('naive.binding_roof')} | "
            f"{g('flash.binding_roof')} |"
        )
    return "\n".join([head, *rows])


def _measured_section(points: Sequence[ModelledPoint]) -> str:
    if not points:
        return (
            "## Measured beside predicted\n\nNo measured point has this configuration's "
            "d, h, dtype and causality.\n"
        )
    rows = []
    for q in sorted(points, key=lambda q: (q.point.n, q.algorithm, q.point.implementation)):
        p = q.point
        if p.status != "ok" or p.median_s is None:
            rows.append(
                f"| {p.n:,} | {p.batch} | {p.implementation} ({q.algorithm}) | "
                f"{p.status} | {_us(q.predicted_s)} | | | | | |"
            )
            continue
        mem = si(p.peak_memory_bytes, "B") if p.peak_memory_bytes is not None else "n/a"
        rows.append(
            f"| {p.n:,} | {p.batch} | {p.implementation} ({q.algorithm}) | {_us(p.median_s)} | "
            f"{_us(q.predicted_s)} | {p.median_s / q.predicted_s:.2f} | "
            f"{si(p.tflops * 1e12 if p.tflops else None, 'FLOP/s')} | {mem} | "
            f"{si(q.model_footprint_bytes, 'B')} | {q.hbm_util:.0%} / {q.sm_util:.0%}: "
            f"{q.verdict} |"
        )
    speed = _measured_speedups(points)
    return (
        "## Measured beside predicted\n\n"
        "Each point's model numbers are for its own shape (batch and tiles included). Ratio = "
        "measured / model estimate. Diagnosis: HBM / SM utilisation implied by the model's "
        "bytes and matmul FLOPs over the measured time, against the copy and bf16 matmul "
        "rates measured in the same run, and `perfmodel diagnose`'s verdict on them.\n\n"
        "| n | batch | implementation (model) | measured | model | ratio | measured TFLOP/s | "
        "measured peak memory | model footprint | diagnosis |\n"
        "|---:|---:|---|---:|---:|---:|---:|---:|---:|---|\n" + "\n".join(rows) + "\n\n" + speed
    )


def _measured_speedups(points: Sequence[ModelledPoint]) -> str:
    rows = []
    for nv, fl in measured_pairs(points):
        naive, flash = nv.point, fl.point
        mem = ""
        if naive.peak_memory_bytes and flash.peak_memory_bytes:
            mem = f"−{1 - flash.peak_memory_bytes / naive.peak_memory_bytes:.1%}"
        ratio = naive.median_s / flash.median_s  # type: ignore[operator]
        rows.append(
            f"| {naive.n:,} | {naive.batch} | {ratio:.2f}× | "
            f"{nv.predicted_s / fl.predicted_s:.2f}× | {mem} |"
        )
    if not rows:
        return ""
    return (
        "Measured speedup (naive / pallas_flash median) beside the model's:\n\n"
        "| n | batch | measured | model | measured peak memory |\n|---:|---:|---:|---:|---:|\n"
        + "\n".join(rows)
        + "\n"
    )


#: The sliding window of the report's local-attention section (Mistral 7B v0.1's 4096
#: keys, a query included; Gemma 2's local layers): ``window`` keys before the query.
REPORT_WINDOW = 4095


def _window_section(spec: HardwareSpec, shape: Shape, c: Conclusions) -> str:
    """Under a sliding window the gain keeps growing with n (no saturation)."""
    g = window_gain(spec, REPORT_WINDOW, shape=shape, n_values=N_GROWTH, threshold=c.threshold)
    rows = "\n".join(
        f"| {n:,} | {dense:.2f}× | {w:.2f}× |"
        for n, dense, w in zip(g.n, g.dense_speedup, g.speedup, strict=True)
    )
    x = "never in range" if g.crossover is None else f"n = {g.crossover:,}"
    dense_x = "never in range" if g.dense_crossover is None else f"n = {g.dense_crossover:,}"
    return f"""## Under a sliding window the gain does not saturate

With local attention (window={REPORT_WINDOW}: each query sees itself and the
{REPORT_WINDOW:,} keys before it{"" if shape.causal else " and after it"}), flash visits
only the tiles inside the band (`perfmodel.costs.masks`): its work is linear in n, while
naive attention, written as a mask over the full n×n scores, still moves n² bytes. So
the speedup grows without bound, about **{g.per_token * 1000:.3f}× per 1,000 tokens** for
large n (`perfmodel.analysis.asymptotics.window_gain`: naive's time per n² over flash's
per n), where without the window it tends to {g.dense_limit:.2f}×:

| n | speedup, no window | speedup, window {REPORT_WINDOW} |
|---:|---:|---:|
{rows}

The estimate first reaches {c.threshold:g}× at {dense_x} without the window and at {x}
with it (scanned up to n = {max(g.n):,}; up to n = {REPORT_WINDOW + 1:,} the window changes
nothing).
"""


def _crossover_words(x: int | None, n_max: int) -> str:
    if x is None:
        return f"not at every n up to {n_max:,}"
    return f"from n = {x:,} on (up to {n_max:,})"


def _conclusion_bullets(spec: HardwareSpec, c: Conclusions, ref: Any) -> str:
    p = f"{(c.threshold - 1) * 100:.0f}%"
    hbm = si(spec.hbm_capacity_bytes, "B")
    oom = (
        "does not exceed the device's HBM in range"
        if c.n_oom is None
        else f"exceeds the {hbm} of HBM from n = {c.n_oom:,}"
    )
    first = "never" if c.x_first is None else f"first at n = {c.x_first:,}"
    one = replace(c.shape, h=1, h_kv=None, batch=1, tokens=None)
    per_head = predict(n=c.n_reference, hw=spec, **one.kwargs(c.n_reference)).naive
    per_head_bytes = per_head.extra_memory_bytes
    return f"""- X is solved from the model: the smallest n from which the estimated speedup stays
  ≥ {c.threshold:g}× (flash at least {p} faster) at every integer n up to {c.n_max:,}
  (`perfmodel.analysis.asymptotics.crossover_n(..., sustained=True)`). The estimate reaches
  {c.threshold:g}× {first}; on the roofline bound alone (no launch overheads, no derating)
  flash is {p} faster {_crossover_words(c.x_lower, c.n_max)}.
- At n={c.n_reference:,}: naive {_us(ref.naive.time_s)}, flash {_us(ref.flash.time_s)}
  ({c.speedup:.2f}×); S+P = {si(c.sp_bytes, "B")} ({int(c.sp_bytes):,} B) that flash never
  writes ({binary(per_head_bytes)} per sequence and head). Memory counts
  Q, K, V, O plus what each algorithm keeps.
- The speedup's symbolic n→∞ limit is **{c.asymptote.value:.2f}×** (roofline bound
  {c.asymptote_lower.value:.2f}×).
- Naive attention's footprint {oom}; flash's stays linear in n.
"""


def render_markdown(
    hw: Any,
    shape: Shape,
    ns: np.ndarray,
    c: Conclusions,
    figures: dict[str, Path],
    measured: Sequence[ModelledPoint] | None,
    command: str,
) -> str:
    spec = load_hardware(hw)
    ref = predict(n=c.n_reference, hw=spec, **shape.kwargs(c.n_reference))
    figs = "\n\n".join(f"![{name}]({path.name})" for name, path in figures.items())
    meas = "" if measured is None else _measured_section(measured)
    line = measured_headline(measured, c) if measured else None
    measured_line = "" if line is None else f"\n**{line}**\n"
    causal = "causal" if shape.causal else "non-causal"
    return f"""# {spec.name}: naive vs flash attention, n swept

Generated by `{command}`. One varying dimension, the sequence length n
(self-attention, n = {int(ns[0]):,} … {int(ns[-1]):,}); everything else fixed:
{shape.label()}, {causal}, flash tiles
{shape.block_q}×{shape.block_k}. "Estimate" is the model's `time_s` (roofs derated by the
default calibration, plus one launch overhead per kernel); "roofline bound" is `t_lower_s`.

## Conclusions

**{c.headline()}**
{measured_line}

{_conclusion_bullets(spec, c, ref)}
{_misconceptions(spec, shape, c, ns)}
{_window_section(spec, shape, c)}
## The sweep (model)

{_sweep_table(spec, shape, ns)}

⚠: the naive footprint exceeds the device's HBM. Memory = Q, K, V, O plus what each
algorithm keeps (S and P for naive, the float32 log-sum-exp for flash).

{meas}
## Figures

{figs}
"""
