"""The held-out protocol: fit on one part of the data, report the error on the rest.

``SPEC`` selects the held-out (test) points: comma-separated terms that must all hold,
``key=value`` (``|`` between alternatives) or ``key>=value`` (also ``>``, ``<=``, ``<``),
on the measured point's fields (``implementation``, ``family``, ``n``, ``d``, ``h``,
``h_kv``, ``batch``, ``causal``, ``dtype``, ...) or ``run`` (a run-id prefix). Per
implementation, the profile is fitted on its other points (``perfmodel.validation.compare.fit``)
and both the family's datasheet profile (no fit) and the fitted one are held to the test
points. Published tables (``specs/published/*-forward-*.toml``) are test points only:
nothing is fitted to them.

    perfmodel validate specs/measurements/h200-devtime-2026-11-30.json \\
        specs/measurements/h200-heldout-2026-11-30.json --holdout run=heldout

>>> select_test("run=heldout,d>=128")(_Run("heldout-1"), _P(d=256))
True
"""

from __future__ import annotations

import operator
import statistics
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from perfmodel.catalog.data import data_dir
from perfmodel.catalog.kernels import known_kernels
from perfmodel.costs.nominal import nominal_flops
from perfmodel.errors import PerfmodelError
from perfmodel.prediction import predict
from perfmodel.validation.compare import PARAMETERS, Row, compare, family_of, fit, modelled, select
from perfmodel.validation.fitting import relative_error
from perfmodel.validation.measured import Point, Run

_OPS = (
    (">=", operator.ge),
    ("<=", operator.le),
    (">", operator.gt),
    ("<", operator.lt),
    ("=", operator.eq),
)


def _term(text: str) -> Callable[[Run, Point], bool]:
    for sym, fn in _OPS:
        if sym in text:
            key, _, value = text.partition(sym)
            key, value, op = key.strip(), value.strip(), fn
            break
    else:
        raise PerfmodelError(f"holdout term {text!r} must be key=value or key>=value")
    if key == "run":
        return lambda run, p: run.run_id.startswith(tuple(value.split("|")))

    if key != "family" and key not in Point.model_fields:
        known = ", ".join(dict.fromkeys(["run", "family", *Point.model_fields]))
        raise PerfmodelError(
            f"holdout key {key!r} is not a field of a measured point; known: {known}"
        )

    def field(run: Run, p: Point) -> Any:
        return family_of(p) if key == "family" else getattr(p, key)

    def parse(v: str) -> Any:
        if v in ("true", "false"):
            return v == "true"
        try:
            return float(v)
        except ValueError:
            return v

    options = [parse(v) for v in value.split("|")]
    if op is operator.eq:
        return lambda run, p: any(field(run, p) == o for o in options)
    bound = options[0]
    if isinstance(bound, bool) or not isinstance(bound, float) or len(options) > 1:
        raise PerfmodelError(f"holdout term {text!r}: {value!r} must be one number")
    # a point that does not record the field (block_q of a naive point) is not held out
    return lambda run, p: isinstance(v := field(run, p), int | float) and op(v, bound)


def select_test(spec: str) -> Callable[[Run, Point], bool]:
    """The predicate of the held-out points described by ``spec``."""
    terms = [_term(t) for t in spec.split(",") if t.strip()]
    if not terms:
        raise PerfmodelError(f"holdout {spec!r} selects nothing: give key=value terms")
    return lambda run, p: all(t(run, p) for t in terms)


@dataclass
class Figures:
    """One implementation's held-out figures (errors as predicted/measured − 1)."""

    implementation: str
    family: str | None
    fitted_on: int
    tested_on: int
    default: list[float]
    fitted: list[float]

    @staticmethod
    def _stats(errors: list[float]) -> tuple[float | None, float | None]:
        if not errors:
            return None, None
        values = [abs(e) for e in errors]
        return statistics.median(values), max(values)


def holdout(pairs: list[tuple[Run, Point]], spec: str, hw: Any = None) -> list[Figures]:
    """Per implementation: default-profile and fitted-profile errors on the test points."""
    is_test = select_test(spec)
    test = [(r, p) for r, p in pairs if is_test(r, p) and modelled(p)]
    train = select([(r, p) for r, p in pairs if not is_test(r, p) and modelled(p)])
    out = []
    for impl in sorted({p.implementation for _, p in test}):
        mine_test = [(r, p) for r, p in test if p.implementation == impl]
        mine_train = [(r, p) for r, p in train if p.implementation == impl]
        default_rows = compare(mine_test, hw)
        fitted: list[float] = []
        if len(mine_train) > len(PARAMETERS):
            train_rows = compare(mine_train, hw)
            profile, _ = fit(train_rows, f"holdout-{impl}", loo=False)
            fitted = [r.error for r in compare(mine_test, hw, {impl: profile})]
        out.append(
            Figures(
                impl,
                family_of(mine_test[0][1]),
                len(mine_train),
                len(mine_test),
                [r.error for r in default_rows],
                fitted,
            )
        )
    return out


# --- published tables: held to the default profile, never fitted ------------------------
@dataclass(frozen=True)
class Published:
    source: str
    family: str
    label: str
    measured_s: float
    predicted_s: float
    t_lower_s: float

    @property
    def error(self) -> float:
        return relative_error(self.predicted_s, self.measured_s)


def published_rows(pattern: str = "*-forward-*.toml") -> list[Published]:
    """Every published forward row whose implementation is a kernel family we describe,
    against datasheet-only predictions (``ceilings="datasheet"``: the papers' GPUs are not
    the one our ceilings files measured)."""
    rows = []
    families = set(known_kernels())
    for path in sorted(data_dir("published").glob(pattern)):
        table = tomllib.loads(path.read_text())
        for p in table["points"]:
            if p.get("family") not in families or "tflops" not in p:
                continue
            if p.get("causal_source") == "unknown":  # a panel whose mask no source gives
                continue
            shape = {k: p[k] for k in ("batch", "h", "n", "kv_len", "d", "causal")}
            flops = nominal_flops(**shape)  # the published convention
            pred = predict(
                n=p["n"],
                hw=table["device"],
                kv_len=p["kv_len"],
                d=p["d"],
                h=p["h"],
                h_kv=p["h_kv"],
                batch=p["batch"],
                dtype=table["dtype"],
                causal=p["causal"],
                kernel=p["family"],
                ceilings="datasheet",
            ).flash
            label = f"{p['family']} n={p['n']} d={p['d']}{' causal' if p['causal'] else ''}"
            rows.append(
                Published(
                    path.stem,
                    p["family"],
                    label,
                    flops / (p["tflops"] * 1e12),
                    pred.time_s,
                    pred.t_lower_s,
                )
            )
    return rows


def report(figures: Iterable[Figures], published: Iterable[Published] = ()) -> str:
    """The held-out table: per implementation, points fitted on and tested, and errors."""

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{x:.1%}"

    lines = [
        "held out: error = predicted / measured - 1 on points no fit saw",
        f"{'implementation':<16} {'family':<14} {'fit on':>6} {'test':>5} "
        f"{'default med':>11} {'max':>7} {'fitted med':>10} {'max':>7}",
    ]
    for f in figures:
        d_med, d_max = Figures._stats(f.default)
        f_med, f_max = Figures._stats(f.fitted)
        lines.append(
            f"{f.implementation:<16} {f.family or '-':<14} {f.fitted_on:>6} {f.tested_on:>5} "
            f"{pct(d_med):>11} {pct(d_max):>7} {pct(f_med):>10} {pct(f_max):>7}"
        )
    published = list(published)
    for source in sorted({p.source for p in published}):
        for family in sorted({p.family for p in published if p.source == source}):
            errs = [p.error for p in published if p.source == source and p.family == family]
            med, top = Figures._stats(errs)
            below = sum(
                p.measured_s < p.t_lower_s
                for p in published
                if p.source == source and p.family == family
            )
            lines.append(
                f"{'published':<16} {family:<14} {0:>6} {len(errs):>5} {pct(med):>11} "
                f"{pct(top):>7} {'-':>10} {'-':>7}  ({source}; {below} below t_lower)"
            )
    return "\n".join(lines)


def report_json(figures: Iterable[Figures], published: Iterable[Published] = ()) -> dict[str, Any]:
    """The held-out figures as data: per implementation the points fitted on and tested
    and each error (default and fitted profile); per published row its error and floor."""
    return {
        "error": "predicted / measured - 1 on points no fit saw",
        "implementations": [
            {
                "implementation": f.implementation,
                "family": f.family,
                "fitted_on": f.fitted_on,
                "tested_on": f.tested_on,
                "default_errors": f.default,
                "fitted_errors": f.fitted,
            }
            for f in figures
        ],
        "published": [
            {
                "source": p.source,
                "family": p.family,
                "label": p.label,
                "measured_s": p.measured_s,
                "predicted_s": p.predicted_s,
                "t_lower_s": p.t_lower_s,
                "error": p.error,
            }
            for p in published
        ],
    }


@dataclass(frozen=True)
class _Run:  # doctest helper: a run id is all a ``run=`` term reads
    run_id: str


@dataclass(frozen=True)
class _P:  # doctest helper
    d: int


__all__ = [
    "Figures",
    "Published",
    "holdout",
    "published_rows",
    "report",
    "report_json",
    "select_test",
    "Row",
]
