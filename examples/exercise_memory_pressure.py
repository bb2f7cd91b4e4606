"""Chapter exercise (3.1.8): S+P at n=8192 against the KV cache — two kinds of memory pressure.

S and P (naive attention's n×n score and probability matrices) are *transient*: they
live while one layer's attention runs, grow as n², and FlashAttention removes them.
The KV cache is *persistent*: every layer's K and V for every token of every sequence,
kept across decode steps; it grows as layers × kv_heads × d × n × batch and no
attention kernel removes it (PagedAttention manages its fragmentation instead).

The model configuration comes from ``specs/models/llama-3.1-8b.toml`` (Llama-3.1-8B:
32 layers, 32 query heads, 8 KV heads, head_dim 128; source: its Hugging Face
config.json, as the file states). Every number is computed by perfmodel.

    python examples/exercise_memory_pressure.py [OUT.png]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from perfmodel.analysis.kvcache import kv_budget_bytes, kv_cache_bytes
from perfmodel.catalog.hardware import load_hardware
from perfmodel.catalog.models import load_model
from perfmodel.prediction import predict
from perfmodel.units import binary, si

HW, MODEL, DTYPE = "h200", "llama-3.1-8b", "fp16"
N_VALUES = (1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)


def pressures(n: int, batch: int = 1) -> dict[str, float]:
    """Bytes of S+P (one head; one layer's heads) and of the whole KV cache at n."""
    spec = load_model(MODEL)
    one_head = predict(n=n, hw=HW, d=spec.head_dim, dtype=DTYPE, batch=batch)
    layer = predict(
        n=n, hw=HW, d=spec.head_dim, h=spec.heads, h_kv=spec.kv_heads, dtype=DTYPE, batch=batch
    )
    return {
        "sp_one_head": one_head.naive.extra_memory_bytes,
        "sp_one_layer": layer.naive.extra_memory_bytes,
        "flash_one_layer": layer.flash.extra_memory_bytes,
        "kv_cache": float(kv_cache_bytes(spec, DTYPE, n, batch=batch)),
    }


def table() -> str:
    spec, hw = load_model(MODEL), load_hardware(HW)
    p = pressures(8192)
    budget = kv_budget_bytes(spec, hw, DTYPE)
    lines = [
        f"{spec.name} on {hw.name}, {DTYPE}, n = 8192, batch 1",
        f"  S+P, one head (the chapter's figure):   {binary(p['sp_one_head'])}",
        f"  S+P, all {spec.heads} heads of one layer:      {binary(p['sp_one_layer'])}"
        "  transient, per layer, ∝ n²",
        f"  flash instead (log-sum-exp, one layer): {binary(p['flash_one_layer'])}",
        f"  KV cache, {spec.layers} layers × {spec.kv_heads} KV heads:   {binary(p['kv_cache'])}"
        "  persistent, ∝ n·batch",
        f"  KV-cache budget after weights ({si(spec.weight_bytes(DTYPE), 'B')}): "
        f"{si(budget, 'B')} → {int(budget // p['kv_cache'])} sequences of 8192 tokens",
        "",
        f"{'n':>8} {'S+P one layer':>15} {'KV cache b=1':>14} {'KV cache b=32':>14}",
    ]
    for n in N_VALUES:
        q = pressures(n)
        lines.append(
            f"{n:>8} {si(q['sp_one_layer'], 'B'):>15} {si(q['kv_cache'], 'B'):>14} "
            f"{si(32 * q['kv_cache'], 'B'):>14}"
        )
    return "\n".join(lines)


def main(out: str | Path = "memory_pressure.png") -> Path:
    from matplotlib.figure import Figure

    spec, hw = load_model(MODEL), load_hardware(HW)
    rows = [pressures(n) for n in N_VALUES]
    fig = Figure(figsize=(9, 5.2), dpi=120, layout="constrained")
    ax = fig.subplots()
    ns = np.asarray(N_VALUES)
    ax.plot(
        ns,
        [r["sp_one_layer"] for r in rows],
        "o-",
        color="tab:red",
        label=f"S+P of one layer ({spec.heads} heads), naive: transient, ∝ n²",
    )
    ax.plot(
        ns,
        [r["flash_one_layer"] for r in rows],
        "s-",
        color="tab:blue",
        label="flash's log-sum-exp of one layer: what replaces S+P",
    )
    for batch, style in ((1, "^-"), (32, "v--")):
        ax.plot(
            ns,
            [batch * r["kv_cache"] for r in rows],
            style,
            color="tab:green",
            label=f"KV cache, {spec.layers} layers, batch {batch}: persistent, ∝ n·batch",
        )
    cap = hw.hbm_capacity_bytes
    ax.axhline(cap, color="k", label=f"{hw.name} HBM {si(cap, 'B')}")
    ax.axvline(8192, color="gray", ls=":", lw=1)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(ns)
    ax.set_xticklabels([f"{n // 1024}K" for n in ns])
    ax.set_xlabel("sequence length n (tokens)")
    ax.set_ylabel("bytes")
    ax.set_title(f"Two kinds of memory pressure: {spec.name}, {DTYPE}, {hw.name}")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    path = Path(out)
    fig.savefig(path)
    print(table())
    print(path)
    return path


if __name__ == "__main__":
    main(*sys.argv[1:2])
