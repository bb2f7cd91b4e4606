"""Attention split over P devices: what each device sends, holds and waits for.

Context parallelism splits the sequence (n tokens, n/P per device); tensor
parallelism splits the heads (h/T per device). Bytes are per device and per direction;
times are built from two kinds of term: the single-device flash time of one chunk's
shape (``t_*`` symbols below, evaluated by ``perfmodel.parallel`` with the
single-GPU model of ``perfmodel.costs.flash``) and a collective's time, bytes over
the link bandwidth plus one latency per step (the alpha-beta model of Hockney 1994).

- Ring attention (Liu et al. 2023, §3): P steps; at each of the first P-1 a device
  sends its K/V chunk (``kv_bytes/P``) to the next while it computes on it.
  Overlapped, a step costs ``Max(compute, send)``; not overlapped, their sum.
- All-gather (Llama 3, Grattafiori et al. 2024, §3.3.2): a ring all-gather of K/V,
  P-1 hops of ``kv_bytes/P``, then local attention of n/P queries against n keys.
- Ulysses (Jacobs et al. 2023, §3): all-to-all of Q, K, V before and of O after;
  each device keeps 1/P of its shard and sends the rest. Needs ``h % P == 0``; K/V
  heads are replicated up to lcm(h_kv, P).
- Causal, contiguous split: at every ring step some device holds a chunk wholly
  below its diagonal, so the critical path is ``t_diag + (P-1)·t_chunk`` while the
  average device does half that: the imbalance ``(2P-1)/P``. Zig-zag (chunks i and
  2P-1-i on device i) gives every device half a chunk of work per step (``t_half``).
- Tensor parallelism over heads: no communication inside attention (the O
  projection's all-reduce is the MLP block's cost and is left out here); K/V heads are
  divided when T divides h_kv and replicated (one per device) when h_kv divides T.

Each chunk-by-chunk scheme also pays one merge per chunk (``merge_bytes`` at the HBM
rate, ``t_merge``). Left out: the projections and their collectives; the backward
pass; congestion between collectives that share a link; per-step kernel launch and
host overheads beyond one latency per collective step.
"""

from __future__ import annotations

import sympy as sp

from perfmodel.costs import terms as t
from perfmodel.errors import PerfmodelError
from perfmodel.symbols import F32, b, d, h, h_kv, m, n, s
from perfmodel.vocabulary import BALANCES, SCHEMES

_pos_int = {"integer": True, "positive": True}
#: Devices the sequence is split over (context parallelism), and over heads (tensor).
P = sp.Symbol("P", **_pos_int)
T = sp.Symbol("T", **_pos_int)
#: One direction of one device's link, bytes/s, and the fixed cost of one collective step.
link_bandwidth = sp.Symbol("link_bandwidth", positive=True)
link_latency = sp.Symbol("link_latency", nonnegative=True)
#: K/V heads after Ulysses' replication (lcm(h_kv, P)), a value the caller computes.
h_kv_cp = sp.Symbol("h_kv_cp", **_pos_int)

#: Single-device flash times of the chunk shapes (evaluated by perfmodel.parallel):
t_chunk = sp.Symbol("t_chunk", positive=True)  # n/P queries x n/P keys, no mask
t_diag = sp.Symbol("t_diag", positive=True)  # n/P x n/P, causal (a device's own shard)
t_half = sp.Symbol("t_half", positive=True)  # zig-zag step: n/P x n/(2P) (or the transpose)
t_local = sp.Symbol("t_local", positive=True)  # all-gather: n/P x n; Ulysses: n x n, h/P heads
#: One log-sum-exp merge of two partial results (``merge_bytes`` over HBM).
t_merge = sp.Symbol("t_merge", nonnegative=True)


def _self_attention(expr: sp.Expr) -> sp.Expr:
    """Context parallelism splits self-attention: keys are the same n tokens."""
    return expr.subs(m, n)


# --- bytes per device -----------------------------------------------------------------
def kv_chunk_bytes() -> sp.Expr:
    """One device's K and V shard: what one ring step or one all-gather hop sends."""
    return _self_attention(t.kv_bytes) / P


def sent_bytes(scheme: str) -> sp.Expr:
    """Bytes one device sends over the whole attention, per direction."""
    if scheme == "ring":
        return (P - 1) * kv_chunk_bytes()
    if scheme == "allgather":
        return (P - 1) * kv_chunk_bytes()
    if scheme == "ulysses":
        kv = _self_attention(t.kv_bytes) * h_kv_cp / h_kv
        return (P - 1) / P * (t.q_bytes + kv + t.o_bytes) / P
    raise PerfmodelError(f"unknown scheme={scheme!r}; known: {SCHEMES}")


def merge_bytes() -> sp.Expr:
    """HBM traffic of one merge of partial results: read the f32 running O and the new
    chunk's O (input dtype), write the f32 O; three lse reads/writes."""
    rows = b * h * n / P
    return rows * d * (2 * F32 + s) + 3 * rows * F32


# --- time ------------------------------------------------------------------------------
def hop_time(bytes_: sp.Expr) -> sp.Expr:
    """One collective step: latency plus bytes over the link (alpha-beta)."""
    return link_latency + bytes_ / link_bandwidth


def collective_time(scheme: str) -> sp.Expr:
    """Communication time of the schemes whose transfers do not overlap compute."""
    if scheme == "allgather":  # ring all-gather: P-1 hops of one shard
        return (P - 1) * hop_time(kv_chunk_bytes())
    if scheme == "ulysses":  # two all-to-alls: (Q, K, V) in, O out
        kv = _self_attention(t.kv_bytes) * h_kv_cp / h_kv
        qkv = (P - 1) / P * (t.q_bytes + kv) / P
        o = (P - 1) / P * t.o_bytes / P
        return hop_time(qkv) + hop_time(o)
    raise PerfmodelError(f"{scheme=} has no separate collective (the ring overlaps it)")


def compute_steps(scheme: str, causal: bool, balance: str) -> tuple[sp.Expr, sp.Expr]:
    """(first step, each later step) of the slowest device's chunk-by-chunk compute.

    Ring and causal all-gather walk the P K/V shards one by one; the first is the
    device's own (the causal diagonal).
    """
    if not causal:
        return t_chunk, t_chunk
    if balance == "contiguous":
        return t_diag, t_chunk  # some device holds a whole chunk below its diagonal
    if balance == "zigzag":
        return t_diag, t_half
    raise PerfmodelError(f"unknown balance={balance!r}; known: {BALANCES}")


def ring_time(causal: bool, balance: str, overlap: bool = True) -> sp.Expr:
    """P steps; the first P-1 also send the chunk on (hidden behind compute if overlapped)."""
    first, later = (c + t_merge for c in compute_steps("ring", causal, balance))
    send = hop_time(kv_chunk_bytes())

    def step(c: sp.Expr) -> sp.Expr:
        return sp.Max(c, send) if overlap else c + send

    # steps 0 .. P-2 send; the last step only computes. Valid for P >= 2.
    return step(first) + (P - 2) * step(later) + later


def attention_time(scheme: str, causal: bool, balance: str, overlap: bool = True) -> sp.Expr:
    """Wall time of one context-parallel attention (the slowest device)."""
    if scheme == "ring":
        return ring_time(causal, balance, overlap)
    if scheme == "allgather":
        if not causal:
            return collective_time(scheme) + t_local
        first, later = compute_steps(scheme, causal, balance)
        return collective_time(scheme) + first + (P - 1) * later + P * t_merge
    if scheme == "ulysses":
        return collective_time(scheme) + t_local
    raise PerfmodelError(f"unknown scheme={scheme!r}; known: {SCHEMES}")


def causal_imbalance() -> sp.Expr:
    """Busiest device's causal work over the average's, contiguous split.

    Device i computes i chunks below its diagonal and one diagonal chunk (half a
    chunk): i + 1/2 units; the last does P - 1/2, the average P/2.

    >>> causal_imbalance().subs(P, 8)
    15/8
    """
    return (P - sp.Rational(1, 2)) / (P / 2)


# --- memory per device ----------------------------------------------------------------
def local_shard_bytes() -> sp.Expr:
    """Q, K, V and O of n/P tokens: what every context-parallel device holds anyway."""
    return _self_attention(t.q_bytes + t.kv_bytes + t.o_bytes) / P


def memory_bytes(scheme: str) -> sp.Expr:
    """Peak bytes one device holds for the attention (inputs, outputs, buffers)."""
    partial_o = b * h * (n / P) * d * F32 + t.lse_bytes / P  # f32 partial O and its lse
    if scheme == "ring":  # the chunk being computed on and the one arriving
        return local_shard_bytes() + kv_chunk_bytes() + 2 * partial_o
    if scheme == "allgather":
        return local_shard_bytes() + (P - 1) * kv_chunk_bytes() + 2 * partial_o
    if scheme == "ulysses":  # a second copy of Q, K, V, O as head shards
        kv = _self_attention(t.kv_bytes) * h_kv_cp / h_kv
        return local_shard_bytes() + (t.q_bytes + kv + t.o_bytes) / P + partial_o
    raise PerfmodelError(f"unknown scheme={scheme!r}; known: {SCHEMES}")


def tp_kv_heads() -> sp.Expr:
    """K/V heads per device under tensor parallelism: divided, or one replicated copy."""
    return sp.Max(h_kv / T, 1)


def tp_memory_bytes() -> sp.Expr:
    """Q, O of h/T heads and K, V of ``tp_kv_heads`` heads, whole sequence."""
    q_o = _self_attention(t.q_bytes + t.o_bytes) / T
    kv = _self_attention(t.kv_bytes) * tp_kv_heads() / h_kv
    return q_o + kv + t.lse_bytes.subs(m, n) / T


__all__ = [
    "BALANCES",
    "SCHEMES",
    "P",
    "T",
    "attention_time",
    "causal_imbalance",
    "collective_time",
    "compute_steps",
    "h_kv_cp",
    "hop_time",
    "kv_chunk_bytes",
    "link_bandwidth",
    "link_latency",
    "memory_bytes",
    "merge_bytes",
    "ring_time",
    "s",
    "sent_bytes",
    "t_chunk",
    "t_diag",
    "t_half",
    "t_local",
    "t_merge",
    "tp_kv_heads",
    "tp_memory_bytes",
]
