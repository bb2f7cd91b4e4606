"""What ``predict`` returns, and how it prints: naive next to flash, as text or markdown."""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, field_serializer

from perfmodel.catalog.hardware import HardwareSpec
from perfmodel.parallel import ParallelPrediction
from perfmodel.shape import Shape
from perfmodel.units import binary, si

#: Built by ``construct`` (our own numbers, not validated): the schema is built when a
#: result is first validated or dumped, not when the module loads.
_frozen = ConfigDict(frozen=True, extra="forbid", defer_build=True)
_Model = TypeVar("_Model", bound=BaseModel)


def construct(cls: type[_Model], values: Mapping[str, Any]) -> _Model:
    """``cls.model_construct(**values)`` for values we computed ourselves, every field
    given: no validation, and none of ``model_construct``'s per-field alias and default
    lookups (a third of one ``predict()`` otherwise). A missing field is a KeyError;
    keys that are not fields are left out, as ``model_construct`` leaves them."""
    return adopt(cls, {name: values[name] for name in cls.model_fields})


def adopt(cls: type[_Model], fields: dict[str, Any]) -> _Model:
    """:func:`construct` of ``fields``, a new dict of every field of ``cls`` and nothing
    else, which the model takes as its own (not copied)."""
    model = _new(cls)
    _set(model, "__dict__", fields)
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = frozenset(cls.model_fields)
    _set(model, "__pydantic_fields_set__", set(names))
    _set(model, "__pydantic_extra__", None)
    _set(model, "__pydantic_private__", None)
    return model


_new = object.__new__
_set = object.__setattr__
#: Each model's field names (every one is set by :func:`adopt`).
_FIELD_NAMES: dict[type, frozenset[str]] = {}


class AlgorithmPrediction(BaseModel):
    """One algorithm's roofline placement. SI units: FLOPs, bytes, seconds."""

    model_config = _frozen

    flops: float
    matmul_flops: float
    vector_flops: float
    exp_count: float
    hbm_bytes: float
    hbm_bytes_no_cache: float
    l2_bytes: float | None
    #: bytes sent to L2 as reductions done there (an atomic dQ's adds), not in l2_bytes
    l2_reduce_bytes: float | None
    intensity: float
    t_compute_s: float
    t_memory_s: float
    t_lower_s: float
    time_s: float
    bound: Literal["compute", "memory"]
    binding_roof: str
    roof_times_s: dict[str, float]
    extra_memory_bytes: float
    footprint_bytes: float  #: Q, K, V, O plus extra_memory_bytes
    fits_memory: bool  #: footprint_bytes <= the device's HBM capacity
    sram_bytes: float
    register_bytes: float
    attainable_flops_per_s: float
    calibration: str
    #: One synchronous call as a user's script sees it (``time_s`` is device time);
    #: None where the kernel's framework has no measured call latency.
    call_latency_s: float | None = None
    #: The launch whose roofs give the floor (``t_lower_s``, ``t_compute_s``,
    #: ``t_memory_s``, ``roof_times_s``, ``bound``, ``attainable_flops_per_s``): query heads
    #: per tile and K/V splits of the best launch the kernel family could make.
    floor_pack: int = 1
    floor_splits: int = 1
    #: What each effect adds to the floor, by name (``perfmodel.evaluate.EFFECT_NAMES``):
    #: ``time_s`` is ``t_lower_s`` plus these, up to rounding.
    effects_s: dict[str, float] = {}


#: An AlgorithmPrediction's fields that are one number or label each: one sweep column
#: per side (``roof_times_s`` and ``effects_s`` become a column per roof and per effect).
SIDE_FIELDS: tuple[str, ...] = tuple(
    f
    for f in AlgorithmPrediction.model_fields
    if f not in ("roof_times_s", "effects_s", "calibration")
)


class Prediction(BaseModel):
    """Naive against flash attention for one shape on one device."""

    model_config = _frozen

    config: Shape  #: the shape costed, resolved: kv_len, h_kv, tiles, warps, splits, pack
    hardware: HardwareSpec
    ridge_point: float
    naive: AlgorithmPrediction
    flash: AlgorithmPrediction
    #: Flash split over cp x tp devices (``predict(cp=..., tp=...)``), else None.
    parallel: ParallelPrediction | None = None

    @field_serializer("config")
    def _resolved(self, config: Shape) -> dict[str, Any]:
        """A resolved shape has no sweep rule: ``tokens`` is left out."""
        return {k: v for k, v in vars(config).items() if k != "tokens"}

    @property
    def speedup(self) -> float:
        """naive.time_s / flash.time_s."""
        return self.naive.time_s / self.flash.time_s

    def __str__(self) -> str:
        return prediction_table(self)

    def _repr_markdown_(self) -> str:
        return prediction_markdown(self)

    def _repr_html_(self) -> str:
        """The same table as :func:`prediction_markdown`, for notebooks."""
        notes = [_speedup_line(self), *_parallel_lines(self)]
        return html_table(_title(self), ("", "naive", "flash"), _rows(self), notes)


def _rows(p: Prediction) -> list[tuple[str, str, str]]:
    def both(fn: Callable[[AlgorithmPrediction], str]) -> tuple[str, str]:
        return fn(p.naive), fn(p.flash)

    def t(name: str) -> Callable[[AlgorithmPrediction], str]:
        return lambda a: si(getattr(a, name), "s")

    rows = [
        ("FLOPs", *both(lambda a: si(a.flops, "FLOP"))),
        (
            "  matmul / softmax",
            *both(lambda a: f"{si(a.matmul_flops, '').strip()} / {si(a.vector_flops, '').strip()}"),
        ),
        ("  exponentials", *both(lambda a: si(a.exp_count, ""))),
        ("HBM bytes", *both(lambda a: si(a.hbm_bytes, "B"))),
        ("L2->SM bytes", *both(lambda a: si(a.l2_bytes, "B"))),
        ("intensity (FLOP/B)", *both(lambda a: f"{a.intensity:.1f}")),
        ("ridge point (FLOP/B)", f"{p.ridge_point:.1f}", f"{p.ridge_point:.1f}"),
        ("bound (roof)", *both(lambda a: f"{a.bound} ({a.binding_roof})")),
        ("t_compute", *both(t("t_compute_s"))),
        ("t_memory", *both(t("t_memory_s"))),
        ("t_lower", *both(t("t_lower_s"))),
        ("time (estimate)", *both(lambda a: si(a.time_s, "s") + _fits(a, p))),
        ("attainable matmul rate", *both(lambda a: si(a.attainable_flops_per_s, "FLOP/s"))),
        ("extra memory", *both(lambda a: binary(a.extra_memory_bytes))),
    ]
    return [(k, v.strip(), w.strip()) for k, v, w in rows]


def _fits(a: AlgorithmPrediction, p: Prediction) -> str:
    """Nothing, or that an algorithm's tensors overflow the device's memory."""
    if a.fits_memory:
        return ""
    need, have = si(a.footprint_bytes, "B"), si(p.hardware.hbm_capacity_bytes, "B")
    return f" (does not fit: needs {need} of {have})"


def _title(p: Prediction) -> str:
    c = p.config
    kv = "" if c.kv_len == c.n else f" kv_len={c.kv_len}"
    gqa = "" if c.h_kv == c.h else f" h_kv={c.h_kv}"
    return (
        f"{p.hardware.name}: n={c.n}{kv} d={c.d} h={c.h}{gqa} batch={c.batch} {c.dtype}"
        f"{_mask_words(c)}; flash as {c.kernel}: tiles {c.block_q}x{c.block_k}"
        f"{f', {c.splits} K/V splits' if (c.splits or 1) > 1 else ''}"
        f"{f', {c.pack} heads per tile' if (c.pack or 1) > 1 else ''}"
        f"{'' if c.mode == 'forward' else f', {c.mode}'}"
    )


def _mask_words(c: Shape) -> str:
    """`` causal``, `` causal window=(4095, 0)``, `` documents of 1024``... (masks' names)."""
    from perfmodel.costs.masks import Mask
    from perfmodel.vocabulary import WindowAlign

    seg = c.segments
    align: dict[str, Any] = {"align": WindowAlign(c.window_align)} if c.window_align else {}
    words = Mask(
        causal=c.causal,
        window=c.window or (None, None),
        segments=seg if isinstance(seg, tuple) else None,
        doc_length=seg if isinstance(seg, int) else None,
        **align,
    ).describe()
    words = "" if words == "dense" else words
    if c.block_mask:
        words = f"{words} {c.block_mask}".strip()
    return f" {words}" if words else ""


def _speedup_line(p: Prediction) -> str:
    memory = p.flash.extra_memory_bytes / p.naive.extra_memory_bytes - 1  # flash against naive
    return (
        f"speedup (naive time / flash time, estimate): {p.speedup:.2f}x; "
        f"{_times_fewer(p.naive.hbm_bytes, p.flash.hbm_bytes)} HBM bytes, "
        f"attention memory {memory:+.1%}"
        + ("; naive does not fit in memory" if not p.naive.fits_memory else "")
    )


def _times_fewer(naive: float, flash: float) -> str:
    """``16.0x fewer`` when flash moves fewer bytes, ``1.2x more`` when it moves more."""
    return f"{naive / flash:.1f}x fewer" if naive >= flash else f"{flash / naive:.1f}x more"


def prediction_table(p: Prediction) -> str:
    rows = [("", "naive", "flash"), *_rows(p)]
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    lines = [_title(p)] + [f"  {a:<{w0}}  {b:>{w1}}  {c}" for a, b, c in rows]
    return "\n".join([*lines, _speedup_line(p), *_parallel_lines(p)])


def _parallel_lines(p: Prediction) -> list[str]:
    """The split, when asked for: flash over cp x tp devices against one device."""
    r = p.parallel
    if r is None:
        return []
    how = f"cp={r.devices} {r.scheme}" + (f" ({r.balance})" if r.causal else "")
    return [
        f"split {how} x tp={r.tp}: flash {si(r.time_s, 's').strip()} against "
        f"{si(r.one_device_s, 's').strip()} on one device, speed-up {r.speedup:.2f}x "
        f"(efficiency {r.efficiency:.0%}); communication {si(r.comm_s, 's').strip()} not "
        f"hidden, {si(r.sent_bytes, 'B').strip()} sent per device at "
        f"{si(r.link_bytes_per_s, 'B/s').strip()}; {binary(r.memory_bytes)} per device"
    ]


def prediction_markdown(p: Prediction) -> str:
    body = "\n".join(f"| {a} | {b} | {c} |" for a, b, c in _rows(p))
    split = "".join(f"\n{line}\n" for line in _parallel_lines(p))
    return (
        f"**{_title(p)}**\n\n| | naive | flash |\n|---|---:|---:|\n{body}\n\n{_speedup_line(p)}\n"
        + split
    )


def html_table(
    title: str, header: Sequence[str], rows: Sequence[Sequence[str]], notes: Sequence[str] = ()
) -> str:
    """A titled HTML table of text cells (first column left, the rest right), then notes;
    every cell escaped. Notebook ``_repr_html_`` of predictions, sweeps and estimates."""
    esc = html.escape

    def row(cells: Sequence[str], tag: str) -> str:
        return (
            "<tr>"
            + "".join(
                f'<{tag} style="text-align:{"left" if i == 0 else "right"}">{esc(str(c))}</{tag}>'
                for i, c in enumerate(cells)
            )
            + "</tr>"
        )

    body = "".join(row(r, "td") for r in rows)
    tail = "".join(f"<p>{esc(n)}</p>" for n in notes)
    return f"<p><b>{esc(title)}</b></p><table>{row(header, 'th')}{body}</table>{tail}"


def text_table(
    title: str, header: Sequence[str], rows: Sequence[Sequence[str]], notes: Sequence[str] = ()
) -> str:
    """The plain-text twin of :func:`html_table`, for ``print``: columns padded to their
    widest cell (first column left, the rest right)."""
    table = [[str(c) for c in header], *([str(c) for c in r] for r in rows)]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]

    def row(cells: Sequence[str]) -> str:
        first, *rest = (
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )
        return "  " + "  ".join([first, *rest]).rstrip()

    return "\n".join([title, *map(row, table), *notes])


def markdown_table(
    title: str, header: Sequence[str], rows: Sequence[Sequence[str]], notes: Sequence[str] = ()
) -> str:
    """The markdown twin of :func:`html_table` (pipes in cells escaped)."""

    def row(cells: Sequence[str]) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"

    align = "|" + "|".join([":---", *["---:"] * (len(header) - 1)]) + "|"
    lines = [f"**{title}**", "", row(header), align, *map(row, rows), ""]
    return "\n".join([*lines, *(f"{n}\n" for n in notes)])
