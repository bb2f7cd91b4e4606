"""A decision table: how much FlashAttention-2 and PagedAttention matter to a service.

A workload (``specs/workloads/*.toml``, read by :mod:`perfmodel.catalog.workloads`) gives
prompt and response length quantiles, the concurrency the service wants, its model and
dtype. Two questions, each answered with computed reasons:

* **FlashAttention-2** pays where attention is a large share of prefill. Prefill comes
  from the whole-model estimate (:func:`perfmodel.analysis.estimate.estimate`: every
  operator of every layer, attention naive or flash, causal, the model's heads), at
  batch 1. Also: naive attention's S+P scratch.
* **PagedAttention** pays where contiguous allocation wastes KV memory and so caps how
  many sequences run at once (:func:`perfmodel.analysis.kvcache.allocations`). A sequence in
  flight holds its prompt plus the response so far; the model averages over every
  decode step of each quantile's request (prompt + response/2 on average).

Thresholds are constants below; the reasons quote the numbers they were applied to.

>>> advice = advise("contract-review", "h200")
>>> advice.flash.priority, advice.paged.priority
('high', 'low')
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from perfmodel.analysis.kvcache import Allocation, allocations, kv_budget_bytes, paging_overhead
from perfmodel.catalog.hardware import HardwareSpec, load_hardware
from perfmodel.catalog.models import ModelSpec, load_model
from perfmodel.catalog.workloads import Workload, load_workload
from perfmodel.errors import PerfmodelError
from perfmodel.units import si

Priority = Literal["high", "medium", "low"]
#: FlashAttention-2: prefill time saved at the median prompt for "high" / "medium".
FLASH_HIGH, FLASH_MEDIUM = 0.20, 0.05
#: PagedAttention: share of concurrency lost without paging for "high" / "medium".
PAGED_HIGH, PAGED_MEDIUM = 0.50, 0.20
#: Page size assumed for PagedAttention (vLLM's default block size).
PAGE_TOKENS = 16
_frozen = ConfigDict(frozen=True, extra="forbid")


class Recommendation(BaseModel):
    model_config = _frozen

    technique: str
    priority: Priority
    reasons: tuple[str, ...]
    numbers: dict[str, float]


class Advice(BaseModel):
    """Both recommendations for one workload on one device, with the numbers behind them."""

    model_config = _frozen

    workload: str
    model: str
    hardware: str
    dtype: str
    prompt_tokens: dict[str, int]
    held_tokens: dict[str, float]
    flash: Recommendation
    paged: Recommendation
    kv: dict[str, Allocation]


def _pct(x: float) -> str:
    return f"{x:.1%}" if abs(x) >= 0.01 else f"{x:.2%}"


# --- FlashAttention-2 -------------------------------------------------------------------
def prefill_breakdown(
    spec: ModelSpec, hw: HardwareSpec, dtype: str, prompt: list[int]
) -> dict[str, Any]:
    """Per prompt length: attention (naive, flash) and the rest of prefill, in seconds,
    from the whole-model estimate (:func:`perfmodel.analysis.estimate.estimate`, batch 1)."""
    from perfmodel.analysis.estimate import estimate

    cols: dict[str, list[float]] = {k: [] for k in ("naive", "flash", "rest", "scratch")}
    for n in prompt:
        kw: dict[str, Any] = dict(prompt=int(n), output=1, batch=1, dtype=dtype, check_memory=False)
        naive = estimate(spec, hw, attention="naive", **kw)
        flash = estimate(spec, hw, attention="flash", **kw)
        cols["naive"].append(naive.prefill.attention_s)
        cols["flash"].append(flash.prefill.attention_s)
        cols["rest"].append(flash.ttft_s - flash.prefill.attention_s)  # the same with either
        cols["scratch"].append(naive.memory.attention_scratch_bytes)
    naive_s, flash_s, rest = (np.asarray(cols[k]) for k in ("naive", "flash", "rest"))
    return {
        "naive_attention_s": naive_s,
        "flash_attention_s": flash_s,
        "rest_s": rest,
        "share_naive": naive_s / (naive_s + rest),
        "share_flash": flash_s / (flash_s + rest),
        "saved": 1.0 - (flash_s + rest) / (naive_s + rest),
        "naive_scratch_bytes": np.asarray(cols["scratch"]),
    }


def _flash_advice(
    spec: ModelSpec, hw: HardwareSpec, wl: Workload, dtype: str, budget: float
) -> Recommendation:
    prompt = wl.tokens("prompt")
    keys = list(prompt)
    p = prefill_breakdown(spec, hw, dtype, list(prompt.values()))
    mid = keys.index("p50") if "p50" in keys else len(keys) // 2
    top = len(keys) - 1
    reasons = []
    shown = (mid,) if prompt[keys[top]] == prompt[keys[mid]] else (mid, top)
    for i in shown:
        reasons.append(
            f"{keys[i]} prompt {prompt[keys[i]]} tok: attention {p['share_naive'][i]:.1%} of "
            f"prefill naive -> {p['share_flash'][i]:.1%} with flash; prefill "
            f"{p['saved'][i]:.1%} faster"
        )
    scratch = float(p["naive_scratch_bytes"][top])
    reasons.append(
        f"naive S+P scratch per layer at {keys[top]}: {si(scratch, 'B')} "
        f"({_pct(scratch / budget)} of the {si(budget, 'B')} KV budget)"
    )
    saved = float(p["saved"][mid])
    if saved >= FLASH_HIGH or scratch > budget:
        priority: Priority = "high"
    elif saved >= FLASH_MEDIUM:
        priority = "medium"
    else:
        priority = "low"
    numbers = {
        "prefill_saved_p50": saved,
        "attention_share_naive_p50": float(p["share_naive"][mid]),
        "attention_share_flash_p50": float(p["share_flash"][mid]),
        f"prefill_saved_{keys[top]}": float(p["saved"][top]),
        f"naive_scratch_bytes_{keys[top]}": scratch,
    }
    return Recommendation(
        technique="FlashAttention-2", priority=priority, reasons=tuple(reasons), numbers=numbers
    )


# --- PagedAttention ---------------------------------------------------------------------
def _paged_advice(
    spec: ModelSpec, wl: Workload, dtype: str, kv: dict[str, Allocation], held: Any
) -> Recommendation:
    contig, paged = kv["contiguous"], kv["paged"]
    lost = 1.0 - contig.max_concurrency / max(paged.max_concurrency, 1)
    overhead = float(np.mean(paging_overhead(spec, dtype, tokens=held, page_tokens=PAGE_TOKENS)))
    reasons: tuple[str, ...] = (
        f"contiguous reserves {wl.max_len_tokens} tok/seq; sequences hold "
        f"{np.mean(held):.0f} on average: {contig.waste_fraction:.1%} of KV memory wasted",
        f"paged ({PAGE_TOKENS}-token pages) wastes {_pct(paged.waste_fraction)}",
        f"sequences that fit: {contig.max_concurrency} contiguous vs {paged.max_concurrency} "
        f"paged ({lost:.0%} lost without paging); target {wl.concurrency}",
        f"paging costs +{overhead:.2%} decode HBM traffic (block-table reads)",
    )
    if paged.max_concurrency < wl.concurrency:
        reasons += (
            f"neither scheme reaches {wl.concurrency} sequences: that needs more "
            "memory or a smaller max_len, not paging",
        )
    if lost >= PAGED_HIGH or contig.max_concurrency < wl.concurrency <= paged.max_concurrency:
        priority: Priority = "high"
    elif lost >= PAGED_MEDIUM:
        priority = "medium"
    else:
        priority = "low"
    numbers = {
        "waste_contiguous": contig.waste_fraction,
        "waste_paged": paged.waste_fraction,
        "concurrency_contiguous": float(contig.max_concurrency),
        "concurrency_paged": float(paged.max_concurrency),
        "concurrency_lost": lost,
        "paging_traffic_overhead": overhead,
    }
    return Recommendation(
        technique="PagedAttention", priority=priority, reasons=reasons, numbers=numbers
    )


def advise(
    workload: str | Path | Workload,
    hw: str | Path | HardwareSpec,
    *,
    model: str | ModelSpec | None = None,
    dtype: str | None = None,
) -> Advice:
    """Priority of FlashAttention-2 and PagedAttention for ``workload`` on ``hw``."""
    wl = load_workload(workload)
    spec = load_model(wl.model if model is None else model)
    device = load_hardware(hw)
    dtype = wl.dtype if dtype is None else dtype
    budget = kv_budget_bytes(spec, device, dtype)
    held = wl.held_tokens()
    longest = max(wl.total_tokens().values())
    if longest > spec.max_context_tokens:
        raise PerfmodelError(
            f"workload {wl.name!r} needs {longest} tokens; {spec.name} "
            f"handles max_context_tokens={spec.max_context_tokens}"
        )
    life = wl.life_tokens()
    kv = allocations(
        spec, device, dtype=dtype, tokens=life, max_len=wl.max_len_tokens, page_tokens=PAGE_TOKENS
    )
    return Advice(
        workload=wl.name,
        model=spec.name,
        hardware=device.name,
        dtype=dtype,
        prompt_tokens=wl.tokens("prompt"),
        held_tokens=held,
        flash=_flash_advice(spec, device, wl, dtype, budget),
        paged=_paged_advice(spec, wl, dtype, kv, life),
        kv=kv,
    )


def advice_table(advices: list[Advice]) -> str:
    """The decision table: one row per (workload, technique), reasons one per line."""
    head = f"{'workload':<24} {'technique':<17} {'priority':<8}  reasons"
    lines = [head, "-" * 100]
    for a in advices:
        lines.append(f"{a.workload} ({a.model}, {a.hardware}, {a.dtype})")
        for rec in (a.flash, a.paged):
            for i, reason in enumerate(rec.reasons):
                left = f"{'':<24} {rec.technique:<17} {rec.priority:<8}" if i == 0 else " " * 51
                lines.append(f"{left}  {reason}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
