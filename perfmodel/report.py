"""The chapter's method as one call: sweep n, conclude, refute the misconceptions, plot.

One varying dimension (n, self-attention) with everything else fixed; naive and
flash side by side; conclusions in the chapter's form, with X solved from the model
(:func:`perfmodel.asymptotics.crossover_n`). Every number in ``report.md`` is read
from ``predict`` or from the same ``evaluate`` columns that ``sweep`` returns.

>>> c = conclusions("h200")
>>> c.throughput_gain == predict(n=4096, hw="h200").speedup - 1
True
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from perfmodel.asymptotics import (
    Asymptote,
    Shape,
    along_n,
    asymptotic_speedup,
    crossover_n,
    naive_oom_n,
)
from perfmodel.atomic import write_text
from perfmodel.diagnose import diagnose, utilisation_from_time
from perfmodel.errors import PerfmodelError
from perfmodel.evaluate import (
    _compiled_model,
    _kernel_roofs,
    _rates,
    _with_parallelism,
    shape_values,
)
from perfmodel.hardware import HardwareSpec, load_hardware
from perfmodel.prediction import predict
from perfmodel.units import binary, si

#: The chapter's reference length for "at n=4096 throughput is +Y%".
N_REFERENCE = 4096
#: Lengths of the misconception-2 table.
N_GROWTH = (1024, 4096, 16384, 65536)
KERNEL_LABELS = {"qk": "naive: S = QKᵀ", "softmax": "naive: P = softmax(S)",
                 "pv": "naive: O = PV", "flash": "flash: fused kernel"}  # fmt: skip


def kernel_roof_times(hw: Any, n: int, shape: Shape | None = None) -> dict[str, dict[str, float]]:
    """Seconds on each roof for each kernel of both algorithms (roofline, no derating).

    Compute roofs are stretched where the grid leaves SMs idle, as ``t_lower_s`` does:
    the sum over an algorithm's kernels of each kernel's largest roof is its t_lower_s.
    """
    spec, shape = load_hardware(hw), shape or Shape()
    predict(n=n, hw=spec, **shape.kwargs(n))  # checks the shape
    values = shape_values(spec, n=n, m=n, **shape.symbol_values(n))
    rates = _rates(spec, spec.peak(shape.dtype))
    out = {}
    for algo in ("naive", "flash"):
        fn, names = _compiled_model(algo, shape.causal, spec.l2_bytes is not None)
        raw = dict(zip(names, fn(**values), strict=True))
        for kernel in dict.fromkeys(name.split(":")[0] for name in names if ":" in name):
            times, _ = _with_parallelism(
                _kernel_roofs(raw, kernel, rates), raw[f"{kernel}:work_items"], spec
            )  # compute roofs stretched by SMs that get no block (as in t_lower_s)
            out[KERNEL_LABELS.get(kernel, f"{algo}: {kernel}")] = {
                r: float(t) for r, t in times.items()
            }
    return out


# --- measured points ---------------------------------------------------------------------
@dataclass(frozen=True)
class MeasuredPoint:
    """One measured point beside the model's numbers for the same shape."""

    implementation: str
    algorithm: str
    n: int
    batch: int
    status: str
    median_s: float | None
    tokens_per_s: float | None
    tflops: float | None
    peak_memory_bytes: int | None
    predicted_s: float
    model_flops: float
    model_intensity: float
    model_footprint_bytes: float
    hbm_util: float | None = None  #: model HBM bytes / measured time / run's copy rate
    sm_util: float | None = None  #: model matmul FLOPs / measured time / run's matmul rate
    verdict: str | None = None  #: perfmodel.diagnose's verdict on those


def match_measurements(paths: Sequence[str | Path], hw: Any, shape: Shape) -> list[MeasuredPoint]:
    """Points of the files with this shape's d, h, h_kv, dtype and causality (any batch).

    Per (implementation, n, batch) the fastest 'ok' point is kept (a tuning run times
    several tiles), or else the last failed one. The model is evaluated at the point's
    own batch and tiles. The model is linear in batch (up to launches and idle SMs), so
    tokens/s and TFLOP/s of a point at another batch compare with the curves.
    """
    from perfmodel.measured import load_measurements
    from perfmodel.validate import ALGORITHM_OF, dtype_name

    spec = load_hardware(hw)
    h_kv = shape.h if shape.h_kv is None else shape.h_kv
    want = (shape.d, shape.h, h_kv, shape.dtype, shape.causal)
    best: dict[tuple[str, int, int], Any] = {}
    for run, p in load_measurements(list(paths)):
        if p.implementation not in ALGORITHM_OF or p.kv_len != p.n:
            continue
        if (p.d, p.h, p.h_kv, dtype_name(p.dtype), p.causal) != want:
            continue
        key = (p.implementation, p.n, p.batch)
        old = best.get(key, (None, None))[1]
        if old is None or (p.status == "ok" and (old.status != "ok" or p.median_s < old.median_s)):
            best[key] = (run, p)
    return [_measured_point(spec, shape, run, p) for run, p in best.values()]


def _measured_point(spec: HardwareSpec, shape: Shape, run: Any, p: Any) -> MeasuredPoint:
    from perfmodel.validate import ALGORITHM_OF

    algo = ALGORITHM_OF[p.implementation]
    at = replace(shape, batch=p.batch, tokens=None, block_q=p.block_q or shape.block_q,
                 block_k=p.block_k or shape.block_k)  # fmt: skip
    model = getattr(predict(n=p.n, hw=spec, **at.kwargs(p.n)), algo)
    hbm = sm = verdict = None
    if p.status == "ok":
        ceil = run.ceilings  # the rates measured in the same run, where they apply
        peak = ceil.matmul_bf16_flops_per_s if at.dtype == "bf16" else None
        hbm, sm = utilisation_from_time(p.median_s, p.n, spec, algorithm=algo,
                                        hbm_bytes_per_s=ceil.copy_bytes_per_s,
                                        matmul_flops_per_s=peak, **at.kwargs(p.n))  # fmt: skip
        verdict = diagnose(min(hbm, 1.5), min(sm, 1.5), attention_only=True).verdict
    return MeasuredPoint(
        implementation=p.implementation, algorithm=algo, n=p.n, batch=p.batch,
        status=p.status, median_s=p.median_s, tokens_per_s=p.tokens_per_s,
        tflops=p.tflops, peak_memory_bytes=p.peak_memory_bytes,
        predicted_s=model.time_s, model_flops=model.flops,
        model_intensity=model.intensity,
        model_footprint_bytes=_footprint(spec, p.n, at, algo),
        hbm_util=hbm, sm_util=sm, verdict=verdict,
    )  # fmt: skip


def _footprint(spec: HardwareSpec, n: int, shape: Shape, algo: str) -> float:
    return float(along_n(spec, [n], shape)[f"{algo}.footprint_bytes"][0])


# --- conclusions ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Conclusions:
    """The chapter's headline numbers for one device and one fixed shape."""

    hardware: str
    shape: Shape
    threshold: float
    n_max: int  #: the top of the sweep: "beyond X" means for every n in [X, n_max]
    x_estimate: int | None  #: sustained crossover on the estimate (time_s)
    x_lower: int | None  #: sustained crossover on the roofline bound (t_lower_s)
    x_first: int | None  #: first n at which the estimate reaches the threshold
    n_reference: int
    speedup: float  #: naive/flash time_s at n_reference
    throughput_gain: float  #: flash tokens/s over naive tokens/s, minus 1
    memory_saving: float  #: 1 - flash footprint / naive footprint (Q, K, V, O included)
    sp_bytes: float  #: S + P at n_reference
    asymptote: Asymptote
    asymptote_lower: Asymptote
    n_oom: int | None

    def headline(self) -> str:
        p = f"{(self.threshold - 1) * 100:.0f}%"
        tail = (f"at n={self.n_reference:,} throughput is {self.throughput_gain:+.0%} and "
                f"attention memory −{self.memory_saving:.1%}")  # fmt: skip
        if self.x_estimate is None:
            return (f"The model never has flash {p} faster at every n up to {self.n_max:,}; "
                    f"{tail}.")  # fmt: skip
        if self.x_estimate == 1:
            return (f"Gains are significant at every n (flash at least {p} faster from n = 1 "
                    f"to {self.n_max:,}); {tail}.")  # fmt: skip
        return (f"Gains become significant beyond n ≈ {self.x_estimate:,} (flash at least "
                f"{p} faster at every n from there to {self.n_max:,}); {tail}.")  # fmt: skip


def conclusions(
    hw: Any, shape: Shape | None = None, *, threshold: float = 1.5,
    n_reference: int = N_REFERENCE, n_max: int = max(N_GROWTH) * 2,
) -> Conclusions:  # fmt: skip
    """X, Y, Z and the n→∞ limit, from the model."""
    spec, shape = load_hardware(hw), shape or Shape()
    ref = predict(n=n_reference, hw=spec, **shape.kwargs(n_reference))
    cols = along_n(spec, [n_reference], shape)
    saving = 1 - cols["flash.footprint_bytes"][0] / cols["naive.footprint_bytes"][0]
    cross = functools.partial(crossover_n, spec, threshold, shape=shape, n_max=n_max)
    return Conclusions(
        hardware=spec.name, shape=shape, threshold=threshold, n_max=n_max,
        x_estimate=cross(sustained=True),
        x_lower=cross(metric="t_lower_s", sustained=True),
        x_first=cross(),
        n_reference=n_reference, speedup=ref.speedup, throughput_gain=ref.speedup - 1,
        memory_saving=float(saving), sp_bytes=ref.naive.extra_memory_bytes,
        asymptote=asymptotic_speedup(spec, shape=shape),
        asymptote_lower=asymptotic_speedup(spec, metric="t_lower_s", shape=shape),
        n_oom=naive_oom_n(spec, shape),
    )  # fmt: skip


# --- markdown -------------------------------------------------------------------------------
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
        )  # fmt: skip
    )
    amdahl = ", ".join(f"{f:.0%} of the step → {1 / ((1 - f) + f / c.speedup):.2f}×"
                       for f in (0.2, 0.5, 0.8))  # fmt: skip
    alt = "fp32" if shape.dtype != "fp32" and spec.peak_flops_per_s.fp32 else None
    alt_line = ""
    if alt:
        alt_shape, tiles = replace(shape, dtype=alt), ""
        try:
            a = predict(n=c.n_reference, hw=spec, **alt_shape.kwargs(c.n_reference))
        except PerfmodelError:  # wider elements: halve the tiles so that they fit in SRAM
            alt_shape = replace(alt_shape, block_q=shape.block_q // 2, block_k=shape.block_k // 2)
            tiles = f", tiles {alt_shape.block_q}×{alt_shape.block_k} to fit SRAM"
            a = predict(n=c.n_reference, hw=spec, **alt_shape.kwargs(c.n_reference))
        alt_line = (
            f" Change the dtype to {alt} ({si(spec.peak(alt), 'FLOP/s')} without "
            f"tensor cores, ridge {a.ridge_point:.0f} FLOP/B{tiles}): naive's intensity "
            f"{a.naive.intensity:.0f} FLOP/B is now above the ridge, naive is "
            f"{a.naive.bound}-bound ({a.naive.binding_roof}), and flash is only "
            f"{a.speedup:.2f}× faster."
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
    head = ("| n | naive time | flash time | speedup | naive tok/s | flash tok/s | naive HBM | "
            "flash HBM | naive memory | flash memory | naive bound | flash bound |\n"
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")  # fmt: skip
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


def _measured_section(points: Sequence[MeasuredPoint]) -> str:
    if not points:
        return ("## Measured beside predicted\n\nNo measured point has this configuration's "
                "d, h, dtype and causality.\n")  # fmt: skip
    rows = []
    for p in sorted(points, key=lambda p: (p.n, p.algorithm, p.implementation)):
        if p.status != "ok" or p.median_s is None:
            rows.append(f"| {p.n:,} | {p.batch} | {p.implementation} ({p.algorithm}) | "
                        f"{p.status} | {_us(p.predicted_s)} | | | | | |")  # fmt: skip
            continue
        mem = si(p.peak_memory_bytes, "B") if p.peak_memory_bytes is not None else "n/a"
        rows.append(
            f"| {p.n:,} | {p.batch} | {p.implementation} ({p.algorithm}) | {_us(p.median_s)} | "
            f"{_us(p.predicted_s)} | {p.median_s / p.predicted_s:.2f} | "
            f"{si(p.tflops * 1e12 if p.tflops else None, 'FLOP/s')} | {mem} | "
            f"{si(p.model_footprint_bytes, 'B')} | {p.hbm_util:.0%} / {p.sm_util:.0%}: "
            f"{p.verdict} |"
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


def _measured_pairs(points: Sequence[MeasuredPoint]) -> list[tuple[MeasuredPoint, MeasuredPoint]]:
    """(naive, pallas_flash) pairs timed at the same n and batch, by n."""
    ok = {(p.implementation, p.n, p.batch): p for p in points if p.median_s is not None}
    return sorted(
        (
            (nv, ok[("pallas_flash", n, b)])
            for (impl, n, b), nv in ok.items()
            if impl == "naive" and ("pallas_flash", n, b) in ok
        ),
        key=lambda q: q[0].n,
    )


def measured_headline(points: Sequence[MeasuredPoint], c: Conclusions) -> str | None:
    """The chapter's sentence from measured naive / pallas_flash pairs, or None without pairs."""
    pairs = _measured_pairs(points)
    if not pairs:
        return None
    speed = [(nv.n, nv.median_s / fl.median_s) for nv, fl in pairs]  # type: ignore[operator]
    p = f"{(c.threshold - 1) * 100:.0f}%"
    below = [n for n, r in speed if r < c.threshold]
    after = [n for n, _ in speed if not below or n > max(below)]
    if not after:
        head = f"Measured: flash is not {p} faster at the largest measured n"
    elif not below:
        head = (f"Measured: flash is at least {p} faster at every measured n "
                f"({speed[0][0]:,} … {speed[-1][0]:,})")  # fmt: skip
    else:
        head = f"Measured: gains are significant from n = {after[0]:,} (flash at least {p} faster)"
    ref = [(nv, fl) for nv, fl in pairs if nv.n == c.n_reference]
    if ref:
        nv, fl = ref[0]
        gain = nv.median_s / fl.median_s - 1  # type: ignore[operator]
        head += f"; at n={c.n_reference:,} throughput is {gain:+.0%}"
        if nv.peak_memory_bytes and fl.peak_memory_bytes:
            head += f" and peak memory −{1 - fl.peak_memory_bytes / nv.peak_memory_bytes:.1%}"
    return head + " (naive against pallas_flash, median times)."


def _measured_speedups(points: Sequence[MeasuredPoint]) -> str:
    rows = []
    for nv, fl in _measured_pairs(points):
        mem = ""
        if nv.peak_memory_bytes and fl.peak_memory_bytes:
            mem = f"−{1 - fl.peak_memory_bytes / nv.peak_memory_bytes:.1%}"
        ratio = nv.median_s / fl.median_s  # type: ignore[operator]
        rows.append(f"| {nv.n:,} | {nv.batch} | {ratio:.2f}× | "
                    f"{nv.predicted_s / fl.predicted_s:.2f}× | {mem} |")  # fmt: skip
    if not rows:
        return ""
    return (
        "Measured speedup (naive / pallas_flash median) beside the model's:\n\n"
        "| n | batch | measured | model | measured peak memory |\n|---:|---:|---:|---:|---:|\n"
        + "\n".join(rows)
        + "\n"
    )


def _crossover_words(x: int | None, n_max: int) -> str:
    if x is None:
        return f"not at every n up to {n_max:,}"
    return f"from n = {x:,} on (up to {n_max:,})"


def _conclusion_bullets(spec: HardwareSpec, c: Conclusions, ref: Any) -> str:
    p = f"{(c.threshold - 1) * 100:.0f}%"
    hbm = si(spec.hbm_capacity_bytes, "B")
    oom = ("does not exceed the device's HBM in range" if c.n_oom is None else
           f"exceeds the {hbm} of HBM from n = {c.n_oom:,}")  # fmt: skip
    first = "never" if c.x_first is None else f"first at n = {c.x_first:,}"
    one = replace(c.shape, h=1, h_kv=None, batch=1, tokens=None)
    per_head = predict(n=c.n_reference, hw=spec, **one.kwargs(c.n_reference)).naive
    per_head_bytes = per_head.extra_memory_bytes
    return f"""- X is solved from the model: the smallest n from which the estimated speedup stays
  ≥ {c.threshold:g}× (flash at least {p} faster) at every integer n up to {c.n_max:,}
  (`perfmodel.asymptotics.crossover_n(..., sustained=True)`). The estimate reaches
  {c.threshold:g}× {first}; on the roofline bound alone (no launch overheads, no derating)
  flash is {p} faster {_crossover_words(c.x_lower, c.n_max)}.
- At n={c.n_reference:,}: naive {_us(ref.naive.time_s)}, flash {_us(ref.flash.time_s)}
  ({c.speedup:.2f}×); S+P = {si(c.sp_bytes, "B")} ({int(c.sp_bytes):,} B) that flash never
  writes ({binary(per_head_bytes)} per sequence and head, the chapter's figure). Memory counts
  Q, K, V, O plus what each algorithm keeps.
- The speedup's symbolic n→∞ limit is **{c.asymptote.value:.2f}×** (roofline bound
  {c.asymptote_lower.value:.2f}×).
- Naive attention's footprint {oom}; flash's stays linear in n.
"""


def render_markdown(
    hw: Any, shape: Shape, ns: np.ndarray, c: Conclusions, figures: dict[str, Path],
    measured: Sequence[MeasuredPoint] | None, command: str,
) -> str:  # fmt: skip
    spec = load_hardware(hw)
    ref = predict(n=c.n_reference, hw=spec, **shape.kwargs(c.n_reference))
    figs = "\n\n".join(f"![{name}]({path.name})" for name, path in figures.items())
    meas = "" if measured is None else _measured_section(measured)
    line = measured_headline(measured, c) if measured else None
    measured_line = "" if line is None else f"\n**{line}**\n"
    causal = "causal" if shape.causal else "non-causal"
    return f"""# {spec.name}: naive vs flash attention, the chapter's method

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
## The sweep (model)

{_sweep_table(spec, shape, ns)}

⚠: the naive footprint exceeds the device's HBM. Memory = Q, K, V, O plus what each
algorithm keeps (S and P for naive, the float32 log-sum-exp for flash).

{meas}
## Figures

{figs}
"""


def write_report(
    hw: Any, out: str | Path, *, shape: Shape | None = None,
    measurements: Sequence[str | Path] = (), n_values: Sequence[int] | None = None,
    threshold: float = 1.5, command: str | None = None,
) -> Path:  # fmt: skip
    """Write report.md and the five figures into ``out``; return the report's path."""
    from perfmodel import plots

    spec, shape = load_hardware(hw), shape or Shape()
    ns = np.asarray(n_values or plots.DEFAULT_N, dtype=float)
    measured = match_measurements(measurements, spec, shape) if measurements else None
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    figures = {}
    for name, fn in plots.FIGURES.items():
        kwargs: dict[str, Any] = {"shape": shape}
        if name == "time_breakdown":
            kwargs["n"] = N_REFERENCE
        else:
            kwargs["measured"] = measured
            if name != "memory":
                kwargs["n_values"] = [int(n) for n in ns]
        if name == "speedup":
            kwargs["threshold"] = threshold
        figures[name] = fn(spec, out / f"{name}.png", **kwargs)
    c = conclusions(spec, shape, threshold=threshold, n_max=int(ns[-1]))
    command = command or f"perfmodel report --hw {hw} --out {out}"
    text = render_markdown(spec, shape, ns, c, figures, measured, command)
    path = out / "report.md"
    write_text(path, text)
    return path
