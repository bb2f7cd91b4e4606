"""KV-cache memory: contiguous against paged allocation, and how many sequences fit.

A sequence of m tokens keeps ``2·layers·h_kv·d·m·s`` bytes of K and V (K and V, per
layer, per KV head, per token). Two ways to hold it:

* **contiguous**: each sequence reserves room for the longest it may become
  (``max_len`` tokens) when it is admitted; the gap to its real length is waste.
* **paged** (PagedAttention, Kwon et al. 2023): memory comes in pages of ``page``
  tokens, taken as the sequence grows; only the last page is partly empty, so the waste
  is below one page per sequence. The price is a block table (int32 page ids) that
  the kernel reads: ``4·ceil(m/page)`` bytes per (sequence, KV head) on top of
  ``2·m·d·s`` bytes of K/V, a fraction ``2/(page·d·s)`` of the traffic.

Sliding-window layers (Gemma 2's local layers, Mistral 7B v0.1's every layer;
``ModelSpec.sliding_window``): a local layer keeps only the last ``sliding_window``
tokens of a sequence (the keys its next query can see), so its cache stops growing
there: ``min(m, window)`` tokens, and paged, the pages those tokens span (a window that
does not start on a page boundary spans one page more). :func:`layer_groups` gives the
model's layer kinds; every function here sums over them.

Left out: external fragmentation of the contiguous allocator (it only adds waste),
activations and workspace (``memory_fraction`` of HBM is the budget), prefix sharing.

>>> from perfmodel.catalog.models import load_model
>>> spec = load_model("llama-3.1-8b")
>>> kv_bytes_per_token(spec, "bf16")   # 2 x 32 layers x 8 heads x 128 x 2 B
131072.0
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import sympy as sp
from pydantic import BaseModel, ConfigDict

from perfmodel.arguments import MAX_TOKENS, check, fail
from perfmodel.catalog.hardware import HardwareSpec, load_hardware
from perfmodel.catalog.models import ModelSpec, load_model
from perfmodel.compile import compiled
from perfmodel.costs import decode, mla
from perfmodel.costs import terms as t
from perfmodel.errors import PerfmodelError
from perfmodel.symbols import b, h_kv, layers, m, page
from perfmodel.vocabulary import symbol_values

#: Fraction of HBM a serving engine gives to weights + KV cache (vLLM's default 0.9).
MEMORY_FRACTION = 0.9

# --- symbolic, written once ------------------------------------------------------------
#: K and V of one sequence of m tokens over every layer: 2·layers·h_kv·d·m·s.
seq_kv_bytes = layers * t.kv_bytes.subs(b, 1)
#: What paging allocates for it: whole pages.
paged_seq_kv_bytes = seq_kv_bytes.subs(m, page * sp.ceiling(m / page))
#: Internal fragmentation: the empty slots of the last page (< one page).
paged_waste_bytes = paged_seq_kv_bytes - seq_kv_bytes
#: The block-table bytes a paged decode step reads (the engine's model at a decode launch,
#: ``costs.decode.launch_model``: one int32 page id a page, per sequence and K/V head).
block_table_bytes = sp.simplify(
    decode.launch_model(paged=True).hbm_bytes - decode.launch_model().hbm_bytes
)
#: Extra HBM traffic of a paged decode step over a contiguous one, relative to K/V.
paging_traffic_overhead = block_table_bytes / t.kv_bytes
#: Multi-head latent attention (``perfmodel.costs.mla``): one latent and one rotary key a
#: token a layer, shared by every head; its pages hold those, its block table one entry a
#: page per sequence (the one K/V "head" of the absorbed kernel).
mla_seq_kv_bytes = layers * mla.cache_bytes.subs(b, 1)
mla_paged_seq_kv_bytes = mla_seq_kv_bytes.subs(m, page * sp.ceiling(m / page))
mla_paging_traffic_overhead = block_table_bytes.subs({b: 1, h_kv: 1}) / mla.cache_bytes.subs(b, 1)


def layer_groups(spec: ModelSpec) -> list[tuple[int | None, int]]:
    """(left window or None, layers) for each kind of attention layer ``spec`` has, in
    the order they first appear (``ModelSpec.layer_windows``: the left window is
    ``sliding_window - 1`` keys before the query, None for global attention)."""
    windows = spec.layer_windows()
    return [(w, windows.count(w)) for w in dict.fromkeys(windows)]


def kept_tokens(m: Any, window: int | None) -> Any:
    """Tokens a layer keeps of a sequence of ``m``: all (global), or the last
    ``window + 1`` (a local layer of left window ``window``: what its next query sees)."""
    return m if window is None else sp.Min(m, window + 1)


def _kept_pages(window: int | None) -> sp.Expr:
    """Pages of ``page`` tokens the kept tokens span: the cache's last ``window + 1``
    tokens start at ``m - window - 1``, on a page boundary or not."""
    whole = sp.ceiling(m / page)
    if window is None:
        return whole
    start = m - (window + 1)
    span = sp.floor((m - 1) / page) - sp.floor(start / page) + 1
    return sp.Piecewise((whole, m <= window + 1), (span, True))


@functools.cache
def _cache_of(mla_cache: bool, groups: tuple[tuple[int | None, int], ...], paged: bool) -> sp.Expr:
    per_layer = (mla_seq_kv_bytes if mla_cache else seq_kv_bytes).subs(layers, 1)
    total = sp.Integer(0)
    for window, count in groups:
        held = page * _kept_pages(window) if paged else kept_tokens(m, window)
        total += count * per_layer.subs(m, held)
    return total


def _cache(spec: ModelSpec, paged: bool = False) -> sp.Expr:
    """The bytes of one sequence's cache over every layer, for ``spec``'s attention (its
    local layers keep their window's tokens, :func:`kept_tokens`)."""
    groups = layer_groups(spec)
    if groups == [(None, spec.layers)]:  # one kind of layer: the closed forms above
        if spec.mla is not None:
            return mla_paged_seq_kv_bytes if paged else mla_seq_kv_bytes
        return paged_seq_kv_bytes if paged else seq_kv_bytes
    return _cache_of(spec.mla is not None, tuple(groups), paged)


class Allocation(BaseModel):
    """One allocation scheme for one model, device and length distribution. SI units."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    scheme: Literal["contiguous", "paged"]
    page_tokens: int | None
    bytes_per_token: float
    kv_budget_bytes: float  #: HBM left for the KV cache after the weights
    used_bytes_per_seq: float  #: mean bytes of K/V the sequences hold
    reserved_bytes_per_seq: float  #: mean bytes the scheme sets aside for them
    waste_fraction: float  #: 1 - used / reserved
    max_concurrency: int  #: sequences that fit at once


def _values(spec: ModelSpec, dtype: str, **api: Any) -> dict[str, Any]:
    """The cache's symbol values for ``spec`` at ``dtype``, plus API-named ones
    (``kv_len``, ``page_tokens``, ``batch``...), through ``vocabulary.symbol_values``."""
    latent = {}
    if spec.mla is not None:
        latent = dict(kv_rank=spec.mla.kv_lora_rank, rope_dim=spec.mla.qk_rope_head_dim)
    return symbol_values(
        layers=spec.layers, h_kv=spec.kv_heads, d=spec.head_dim, dtype=dtype, **latent, **api
    )


def kv_bytes_per_token(model: str | ModelSpec, dtype: str) -> float:
    """K and V bytes one token adds to the cache, over all layers (MLA: its latent and
    rotary key, ``layers·(kv_rank + rope_dim)·s``); with sliding-window layers, the first
    token's (past its window a local layer adds none: :func:`kv_cache_bytes`)."""
    spec = load_model(model)
    return float(compiled(_cache(spec))(**_values(spec, dtype, kv_len=1)))


def kv_cache_bytes(
    model: str | ModelSpec,
    dtype: str,
    tokens: Any,
    batch: Any = 1,
    page_tokens: int | None = None,
) -> np.ndarray:
    """``2·layers·h_kv·d·tokens·batch·s``: the cache of ``batch`` sequences of ``tokens``
    (a local layer: its window's tokens); with ``page_tokens``, the whole pages they take."""
    spec = load_model(model)
    tokens = _positive("tokens", tokens)
    batch = check(batch=batch, page_tokens=page_tokens)["batch"]
    paged = {} if page_tokens is None else {"page_tokens": page_tokens}
    expr = _cache(spec, paged=page_tokens is not None)
    cache: np.ndarray = batch * compiled(expr)(**_values(spec, dtype, kv_len=tokens, **paged))
    return cache


def _positive(name: str, value: Any) -> np.ndarray:
    """Token counts (samples of a distribution): positive finite numbers, not booleans,
    at most ``MAX_TOKENS``."""
    try:
        raw = np.asarray(value)
        arr = raw.astype(float)
    except (TypeError, ValueError, OverflowError):
        raise fail(name, value, "must be positive numbers") from None
    bad = ~(np.isfinite(arr) & (arr > 0) & (arr <= MAX_TOKENS))
    if arr.size == 0 or raw.dtype.kind not in "iuf" or np.any(bad):
        shown = arr[bad].flat[0].item() if np.any(bad) and raw.dtype.kind in "iuf" else value
        raise fail(name, shown, f"must be positive numbers up to {MAX_TOKENS:,}")
    return arr


def kv_budget_bytes(
    spec: ModelSpec, hw: HardwareSpec, dtype: str, memory_fraction: float = MEMORY_FRACTION
) -> float:
    """HBM left for the KV cache: ``memory_fraction`` of capacity minus the weights."""
    memory_fraction = check(memory_fraction=memory_fraction)["memory_fraction"]
    budget = hw.hbm_capacity_bytes * memory_fraction - spec.weight_bytes(dtype)
    if budget <= 0:
        raise PerfmodelError(
            f"{spec.name} weights ({spec.weight_bytes(dtype) / 1e9:.1f} GB in {dtype}) do not "
            f"fit in memory_fraction={memory_fraction:g} of {hw.name}'s "
            f"{hw.hbm_capacity_bytes / 1e9:.0f} GB"
        )
    return budget


def allocations(
    model: str | ModelSpec,
    hw: str | HardwareSpec,
    *,
    dtype: str,
    tokens: Sequence[float] | np.ndarray,
    max_len: int,
    page_tokens: int = 16,
    memory_fraction: float = MEMORY_FRACTION,
) -> dict[str, Allocation]:
    """Contiguous and paged allocation of sequences holding ``tokens`` (samples, equal weight).

    Contiguous reserves ``max_len`` tokens per sequence; paged reserves whole pages of
    ``page_tokens``. Concurrency is the KV budget over the mean reservation.
    """
    spec, device = load_model(model), load_hardware(hw)
    held = _positive("tokens", tokens)
    checked = check(max_len=max_len, page_tokens=page_tokens, memory_fraction=memory_fraction)
    max_len, page_tokens = checked["max_len"], checked["page_tokens"]
    if page_tokens is None:
        raise PerfmodelError("page_tokens=None must be a positive integer (tokens per KV page)")
    if np.any(held > max_len):
        raise PerfmodelError(f"tokens={held.max():g} exceeds max_len={max_len}")
    held_values = _values(spec, dtype, kv_len=held, page_tokens=page_tokens)
    budget = kv_budget_bytes(spec, device, dtype, memory_fraction)
    used = float(np.mean(compiled(_cache(spec))(**held_values)))
    reserved = {
        "contiguous": float(compiled(_cache(spec))(**_values(spec, dtype, kv_len=max_len))),
        "paged": float(np.mean(compiled(_cache(spec, paged=True))(**held_values))),
    }
    per_token = kv_bytes_per_token(spec, dtype)
    return {
        scheme: Allocation(
            scheme=scheme,  # type: ignore[arg-type]
            page_tokens=page_tokens if scheme == "paged" else None,
            bytes_per_token=per_token,
            kv_budget_bytes=budget,
            used_bytes_per_seq=used,
            reserved_bytes_per_seq=r,
            waste_fraction=1.0 - used / r,
            max_concurrency=int(budget // r),
        )
        for scheme, r in reserved.items()
    }


def paging_overhead(
    model: str | ModelSpec, dtype: str, *, tokens: Any, page_tokens: int = 16
) -> Any:
    """Extra decode HBM traffic of paging (block-table reads) as a fraction of K/V bytes."""
    spec = load_model(model)
    values = _values(spec, dtype, h=spec.heads, q_len=1, batch=1, page_tokens=page_tokens)
    tokens = _positive("tokens", tokens)
    overhead = paging_traffic_overhead if spec.mla is None else mla_paging_traffic_overhead
    return compiled(overhead)(**values, **symbol_values(kv_len=tokens))


# --- one decode step: reading the cache ------------------------------------------------
class DecodeStep(BaseModel):
    """Roofline placement of one decode attention step (one layer). SI units."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kernel: str  #: the kernel family whose launch this is (``specs/kernels``)
    splits: int  #: K/V chunks per (sequence, KV group): the family's rule unless given
    pack: int  #: query heads sharing one tile (one K/V read per group when > 1)
    hbm_bytes: float
    flops: float
    intensity: float
    work_items: int  #: thread blocks of the attention kernel
    waves: int  #: rounds of them, with the SM's resident blocks
    sm_occupancy: float  #: share of SMs with a block
    t_lower_s: float  #: bytes at full bandwidth (or FLOPs at peak), best packing, no idle SM
    time_s: float  #: device time: the same model as ``perfmodel.predict`` (it is predict's)
    call_latency_s: float | None  #: one synchronous call, where the framework has a figure


def decode_step(
    hw: str | HardwareSpec,
    *,
    batch: int,
    kv_len: int,
    h: int,
    h_kv: int,
    d: int = 128,
    dtype: str = "bf16",
    q_len: int = 1,
    page_tokens: int | None = None,
    splits: int | None = None,
    kernel: str | None = None,
    calibration: Any = None,
) -> DecodeStep:
    """One decode step: ``predict(n=q_len, kv_len=...)`` with a decode kernel family —
    ours (``pallas-paged``) for a paged cache, flash-decoding otherwise — whose split
    rule picks ``splits`` unless given.

    >>> step = decode_step("h200", batch=16, kv_len=16384, h=32, h_kv=8, page_tokens=64)
    >>> round(step.hbm_bytes / 1e9, 3), step.work_items, step.pack, round(step.intensity, 2)
    (1.078, 1024, 4, 4.08)
    """
    from perfmodel.prediction import predict

    device = load_hardware(hw)
    check(
        batch=batch,
        kv_len=kv_len,
        h=h,
        h_kv=h_kv,
        d=d,
        q_len=q_len,
        page_tokens=page_tokens,
        dtype=dtype,
        **({} if splits is None else {"splits": splits}),
    )
    if kv_len is None or h_kv is None:
        raise PerfmodelError(f"kv_len={kv_len!r} and h_kv={h_kv!r} must be positive integers")
    family = kernel or ("pallas-paged" if page_tokens is not None else "flash-decoding")
    p = predict(
        n=q_len,
        hw=device,
        kv_len=kv_len,
        h=h,
        h_kv=h_kv,
        d=d,
        batch=batch,
        dtype=dtype,
        kernel=family,
        splits=splits,
        page_tokens=page_tokens,
        calibration=calibration,
    )
    c, f = p.config, p.flash
    assert c.block_q is not None and c.splits is not None and c.pack is not None  # resolved
    work_items = batch * (h // c.pack) * math.ceil(q_len * c.pack / c.block_q) * c.splits
    return DecodeStep(
        kernel=c.kernel,
        splits=c.splits,
        pack=c.pack,
        hbm_bytes=f.hbm_bytes,
        flops=f.flops,
        intensity=f.intensity,
        work_items=work_items,
        waves=math.ceil(work_items / device.sm_count),
        sm_occupancy=min(1.0, work_items / device.sm_count),
        t_lower_s=f.t_lower_s,
        time_s=f.time_s,
        call_latency_s=f.call_latency_s,
    )
