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

Left out: external fragmentation of the contiguous allocator (it only adds waste),
activations and workspace (``memory_fraction`` of HBM is the budget), prefix sharing.

>>> from perfmodel.catalog.models import load_model
>>> spec = load_model("llama-3.1-8b")
>>> kv_bytes_per_token(spec, "bf16")   # 2 x 32 layers x 8 heads x 128 x 2 B
131072.0
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import sympy as sp
from pydantic import BaseModel, ConfigDict

from perfmodel.arguments import MAX_TOKENS, check, fail
from perfmodel.catalog.hardware import HardwareSpec, load_hardware
from perfmodel.catalog.models import ModelSpec, load_model
from perfmodel.compile import compiled
from perfmodel.costs import decode
from perfmodel.costs import terms as t
from perfmodel.errors import PerfmodelError
from perfmodel.evaluate import KernelRoofs, estimate_time, roof_rates
from perfmodel.symbols import b, layers, m, page
from perfmodel.vocabulary import Roof, bytes_per_element, symbol_values

#: Fraction of HBM a serving engine gives to weights + KV cache (vLLM's default 0.9).
MEMORY_FRACTION = 0.9

# --- symbolic, written once ------------------------------------------------------------
#: K and V of one sequence of m tokens over every layer: 2·layers·h_kv·d·m·s.
seq_kv_bytes = layers * t.kv_bytes.subs(b, 1)
#: What paging allocates for it: whole pages.
paged_seq_kv_bytes = seq_kv_bytes.subs(m, page * sp.ceiling(m / page))
#: Internal fragmentation: the empty slots of the last page (< one page).
paged_waste_bytes = paged_seq_kv_bytes - seq_kv_bytes
#: Extra HBM traffic of a paged decode step over a contiguous one, relative to K/V.
paging_traffic_overhead = (decode.build(paged=True).hbm_bytes - decode.build().hbm_bytes) / (
    t.kv_bytes
)


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


def _values(spec: ModelSpec, dtype: str) -> dict[str, float]:
    return {
        "layers": spec.layers,
        "h_kv": spec.kv_heads,
        "d": spec.head_dim,
        "s": bytes_per_element(dtype),
    }


def kv_bytes_per_token(model: str | ModelSpec, dtype: str) -> float:
    """K and V bytes one token adds to the cache, over all layers."""
    spec = load_model(model)
    return float(compiled(seq_kv_bytes)(m=1, **_values(spec, dtype)))


def kv_cache_bytes(model: str | ModelSpec, dtype: str, tokens, batch=1) -> np.ndarray:
    """``2·layers·h_kv·d·tokens·batch·s``: the cache of ``batch`` sequences of ``tokens``."""
    spec = load_model(model)
    tokens = _positive("tokens", tokens)
    batch = check(batch=batch)["batch"]
    return batch * compiled(seq_kv_bytes)(m=tokens, **_values(spec, dtype))


def _positive(name: str, value) -> np.ndarray:
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
    values = _values(spec, dtype)
    budget = kv_budget_bytes(spec, device, dtype, memory_fraction)
    used = float(np.mean(compiled(seq_kv_bytes)(m=held, **values)))
    reserved = {
        "contiguous": float(compiled(seq_kv_bytes)(m=max_len, **values)),
        "paged": float(np.mean(compiled(paged_seq_kv_bytes)(m=held, page=page_tokens, **values))),
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


def paging_overhead(model: str | ModelSpec, dtype: str, *, tokens, page_tokens: int = 16):
    """Extra decode HBM traffic of paging (block-table reads) as a fraction of K/V bytes."""
    spec = load_model(model)
    values = {**_values(spec, dtype), "h": spec.heads, "q_len": 1, "b": 1}
    tokens = _positive("tokens", tokens)
    return compiled(paging_traffic_overhead)(m=tokens, page=page_tokens, **values)


# --- one decode step: reading the cache ------------------------------------------------
class DecodeStep(BaseModel):
    """Roofline placement of one decode attention step (one layer). SI units."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    hbm_bytes: float
    flops: float
    intensity: float
    work_items: int
    waves: int
    sm_occupancy: float
    t_lower_s: float  #: bytes at full bandwidth (or FLOPs at peak), no occupancy loss
    time_s: float  #: at the reachable bandwidth (occupancy x calibrated efficiency) + launches


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
    splits: int = 1,
) -> DecodeStep:
    """One decode step of attention over a KV cache of ``kv_len`` tokens per sequence.

    >>> step = decode_step("h200", batch=16, kv_len=16384, h=32, h_kv=8, page_tokens=64)
    >>> round(step.hbm_bytes / 1e9, 3), step.work_items, round(step.intensity, 2)
    (1.074, 128, 4.03)
    """
    from perfmodel import roofline
    from perfmodel.catalog.calibration import load_calibration

    device = load_hardware(hw)
    check(
        batch=batch,
        kv_len=kv_len,
        h=h,
        h_kv=h_kv,
        d=d,
        q_len=q_len,
        splits=splits,
        page_tokens=page_tokens,
        dtype=dtype,
    )
    if kv_len is None or h_kv is None:
        raise PerfmodelError(f"kv_len={kv_len!r} and h_kv={h_kv!r} must be positive integers")
    if h % h_kv:
        raise PerfmodelError(f"h={h} is not divisible by h_kv={h_kv}")
    model = decode.build(paged=page_tokens is not None, split=splits > 1)
    api = dict(batch=batch, kv_len=kv_len, h=h, h_kv=h_kv, d=d, q_len=q_len, splits=splits)
    values = symbol_values(**api, page_tokens=page_tokens or 1, dtype=dtype)
    values["resident_ctas"] = device.sm_count
    occupancy = float(compiled(decode.sm_occupancy())(**values))
    calibration = load_calibration("default")
    rates = roof_rates(device, device.peak(dtype))
    t_lower, kernels = 0.0, []
    for i, kernel in enumerate(model.kernels):
        work = {
            Roof.MATMUL: kernel.matmul_flops,
            Roof.VECTOR: kernel.vector_flops,
            Roof.HBM: kernel.hbm_bytes,
        }
        times = roofline.roof_times(
            {r: float(compiled(v)(**values)) for r, v in work.items()}, rates
        )
        t_lower += float(roofline.lower_bound(times))
        # Idle SMs cannot pull HBM bandwidth: every roof of the attention kernel is
        # stretched by the occupancy (the reduction is a small full-grid kernel).
        share = occupancy if i == 0 else 1.0
        reachable = {r: t / share for r, t in times.items()}
        kernels.append(KernelRoofs(kernel.name, times, reachable, 0.0, times))
    launch = calibration.launch_overhead_s
    time = float(
        estimate_time(kernels, calibration, device.launch_overhead_s if launch is None else launch)
    )
    hbm, flops = (float(compiled(e)(**values)) for e in (model.hbm_bytes, model.flops))
    return DecodeStep(
        hbm_bytes=hbm,
        flops=flops,
        intensity=flops / hbm,
        work_items=int(compiled(decode.work_items())(**values)),
        waves=int(compiled(decode.waves())(**values)),
        sm_occupancy=occupancy,
        t_lower_s=t_lower,
        time_s=time,
    )
