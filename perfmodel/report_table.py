"""Text and markdown tables of a Prediction: naive next to flash."""

from __future__ import annotations

from typing import TYPE_CHECKING

from perfmodel.units import binary, si

if TYPE_CHECKING:
    from perfmodel.prediction import AlgorithmPrediction, Prediction


def _rows(p: Prediction) -> list[tuple[str, str, str]]:
    def both(fn) -> tuple[str, str]:
        return fn(p.naive), fn(p.flash)

    def t(name: str):
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
        ("time (estimate)", *both(t("time_s"))),
        ("attainable matmul rate", *both(lambda a: si(a.attainable_flops_per_s, "FLOP/s"))),
        ("extra memory", *both(lambda a: binary(a.extra_memory_bytes))),
    ]
    return [(k, v.strip(), w.strip()) for k, v, w in rows]


def _title(p: Prediction) -> str:
    c = p.config
    kv = "" if c.kv_len == c.n else f" kv_len={c.kv_len}"
    gqa = "" if c.h_kv == c.h else f" h_kv={c.h_kv}"
    return (
        f"{p.hardware.name}: n={c.n}{kv} d={c.d} h={c.h}{gqa} batch={c.batch} {c.dtype}"
        f"{' causal' if c.causal else ''} tiles {c.block_q}x{c.block_k}"
    )


def _speedup_line(p: Prediction) -> str:
    saved = 1 - p.flash.extra_memory_bytes / p.naive.extra_memory_bytes
    return (
        f"speedup (naive time / flash time, estimate): {p.speedup:.2f}x; "
        f"{p.naive.hbm_bytes / p.flash.hbm_bytes:.1f}x fewer HBM bytes, "
        f"attention memory -{saved:.1%}"
    )


def prediction_table(p: Prediction) -> str:
    rows = [("", "naive", "flash"), *_rows(p)]
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    lines = [_title(p)] + [f"  {a:<{w0}}  {b:>{w1}}  {c}" for a, b, c in rows]
    return "\n".join([*lines, _speedup_line(p)])


def prediction_markdown(p: Prediction) -> str:
    body = "\n".join(f"| {a} | {b} | {c} |" for a, b, c in _rows(p))
    return (
        f"**{_title(p)}**\n\n| | naive | flash |\n|---|---:|---:|\n{body}\n\n{_speedup_line(p)}\n"
    )


def algorithm_summary(a: AlgorithmPrediction) -> str:
    return f"{si(a.time_s, 's')} ({a.bound}-bound on {a.binding_roof})"
