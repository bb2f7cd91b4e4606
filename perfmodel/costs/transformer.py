"""The rest of a decoder layer: projections, MLP, norms and elementwise work, as sympy.

Attention itself comes from ``perfmodel.costs`` (naive, flash) and
``perfmodel.costs.decode``; this module holds everything around it, each operator one
:class:`~perfmodel.costs.base.Kernel` (one launch) with its FLOPs and HBM bytes,
written once over these symbols:

* ``rows``: tokens that pass through a layer in one call (``b·n`` in prefill, ``b``
  in a decode step); ``head_rows``: tokens whose logits are computed (the last one
  of each sequence, ``b``, in both);
* ``hidden``, ``inter`` (MLP width), ``vocab``, and the attention shape ``h``, ``h_kv``,
  ``d``; ``s`` bytes per element;
* ``experts`` and ``top_k`` for a mixture-of-experts MLP (1 and 1: dense), and
  ``shared`` experts every token runs besides (DeepSeek-V3: 1 of width 2048).

The layer is the Llama one (Touvron et al. 2023, §2.2; Grattafiori et al. 2024, §3.1):
pre-norm RMSNorm, fused QKV projection with rotary embeddings on q and k, attention,
output projection, residual add; RMSNorm, SwiGLU MLP (gate and up as one matmul,
``silu(g)·u``, down), residual add. Each matmul reads its weight once and its
activations once and writes its output once (a GEMM with the weight streamed from
HBM; tiles re-read through L2, not DRAM). Elementwise operators are one pass each,
as XLA fuses them: the residual add and the next RMSNorm are one kernel (read x and
the branch, write x and the normed copy).

Mixture of experts (Fedus et al. 2022, §2; Jiang et al. 2024 for Mixtral's top-2 of 8):
each token runs ``top_k`` of ``experts`` MLPs, so MLP FLOPs scale by ``top_k``; the
weights read are those of the experts any token picks, ``min(experts, rows·top_k)``
of them (every expert once at large batch, ``top_k`` of them for one token), plus the
router (``hidden × experts``). Shared experts (DeepSeek-MoE, Dai et al. 2024, §3.2) run
on every token: ``shared`` more MLPs of the experts' width, their weights always read.

Multi-head latent attention (``perfmodel.costs.mla``) replaces the fused QKV and output
projections by its own (``dense_layer(mla=True)``).

Left out: biases (none in Llama; Qwen's QKV bias is ``(h + 2h_kv)·d`` values), the
tables of rotary angles (``2·rows·d`` values), writing the new K/V into a cache (one
small copy, counted with the attention models' decode terms), dropout (inference).

>>> from perfmodel.compile import compiled
>>> layer = dense_layer()
>>> f = compiled(sum((k.matmul_flops for k in layer), 0))
>>> f(rows=1, hidden=4096, inter=14336, h=32, h_kv=8, d=128, experts=1, top_k=1, shared=0) / 2
218103808.0
"""

from __future__ import annotations

import functools

import sympy as sp

from perfmodel.costs import terms as t
from perfmodel.costs.base import Kernel
from perfmodel.symbols import (
    d,
    experts,
    h,
    h_kv,
    head_rows,
    hidden,
    inter,
    kv_rank,
    q_rank,
    rows,
    s,
    shared,
    top_k,
    tp,
    v_dim,
    vocab,
)

ZERO = sp.Integer(0)
#: RMSNorm per element: square, accumulate, scale by rsqrt(mean), multiply by the weight.
RMSNORM_FLOPS = 4
#: Rotary embedding per element of q and k: x·cos + rotate(x)·sin.
ROPE_FLOPS = 3
#: SwiGLU per element: silu(g) = g / (1 + exp(-g)) (negate, add, divide), times u.
SWIGLU_FLOPS = 4

q_width = h * d
kv_width = h_kv * d
qkv_width = q_width + 2 * kv_width


def matmul(name: str, m: sp.Expr, k: sp.Expr, n: sp.Expr, weights: sp.Expr | None = None) -> Kernel:
    """``[m, k] @ [k, n]``: ``2·m·k·n`` FLOPs; reads the activations and ``weights``
    (``k·n`` elements unless given), writes ``[m, n]``, each once."""
    w = k * n if weights is None else weights
    return Kernel(
        name=name,
        matmul_flops=2 * m * k * n,
        vector_flops=sp.Integer(0),
        exp_count=sp.Integer(0),
        hbm_bytes=(m * k + w + m * n) * s,
    )


def elementwise(
    name: str, reads: sp.Expr, writes: sp.Expr, flops: sp.Expr, exps: sp.Expr = ZERO
) -> Kernel:
    """One fused pass: ``reads`` and ``writes`` elements of HBM, ``flops`` vector FLOPs."""
    return Kernel(
        name=name,
        matmul_flops=sp.Integer(0),
        vector_flops=flops,
        exp_count=exps,
        hbm_bytes=(reads + writes) * s,
    )


def add_norm(name: str, n_rows: sp.Expr = rows) -> Kernel:
    """Residual add fused with the next RMSNorm: read x and the branch, write both results."""
    return elementwise(
        name,
        reads=2 * n_rows * hidden + hidden,
        writes=2 * n_rows * hidden,
        flops=(RMSNORM_FLOPS + 1) * n_rows * hidden,
    )


def rope() -> Kernel:
    """Rotary embedding on q and k, in place: read and write ``rows·(h + h_kv)·d``."""
    elements = rows * (h + h_kv) * d
    return elementwise("rope", reads=elements, writes=elements, flops=ROPE_FLOPS * elements)


def _mlp_weights() -> tuple[sp.Expr, sp.Expr]:
    """Gate+up and down weight elements read: every expert any token picks, once."""
    touched = sp.Min(experts, rows * top_k) + shared
    return touched * hidden * 2 * inter, touched * inter * hidden


def mlp() -> tuple[Kernel, ...]:
    """SwiGLU MLP (dense: ``experts = top_k = 1``, ``shared = 0``); MoE adds the router
    matmul; each token also runs the ``shared`` experts."""
    gate_up_w, down_w = _mlp_weights()
    routed = rows * (top_k + shared)  # (token, expert) pairs
    kernels = (
        matmul("gate_up", routed, hidden, 2 * inter, weights=gate_up_w),
        elementwise(
            "swiglu",
            reads=2 * routed * inter,
            writes=routed * inter,
            flops=SWIGLU_FLOPS * routed * inter,
            exps=routed * inter,
        ),
        matmul("down", routed, inter, hidden, weights=down_w),
    )
    return kernels


def router() -> Kernel:
    """MoE router: ``hidden × experts`` logits per token (top-k and softmax are tiny)."""
    return matmul("router", rows, hidden, experts)


def mla_projections() -> tuple[tuple[Kernel, ...], tuple[Kernel, ...]]:
    """The layer's projections around attention, over ``rows`` tokens: before it, the
    query bottleneck (``q_a``: hidden → q_rank, ``q_b``: q_rank → h·qk_dim) and the
    latent plus rotary key (``kv_a``: hidden → kv_rank + rope_dim); after it, ``o``
    (h·v_dim → hidden). RMSNorms on the two bottlenecks are one pass each."""
    before = (
        matmul("mla_q_a", rows, hidden, q_rank),
        elementwise("mla_q_norm", rows * q_rank, rows * q_rank, RMSNORM_FLOPS * rows * q_rank),
        matmul("mla_q_b", rows, q_rank, h * t.latent_qk_dim),
        matmul("mla_kv_a", rows, hidden, t.latent_cache_width),
        elementwise("mla_kv_norm", rows * kv_rank, rows * kv_rank, RMSNORM_FLOPS * rows * kv_rank),
    )
    after = (matmul("o_proj", rows, h * v_dim, hidden),)
    return before, after


@functools.cache
def dense_layer(moe: bool = False, mla: bool = False) -> tuple[Kernel, ...]:
    """Every kernel of one layer except attention, in launch order (``mla``: latent
    attention's projections, :func:`mla_projections`, for QKV and o_proj)."""
    mla_before, mla_after = mla_projections()
    before = (
        add_norm("add_norm_attn"),
        *((matmul("qkv", rows, hidden, qkv_width), rope()) if not mla else mla_before),
    )
    after = (
        *((matmul("o_proj", rows, q_width, hidden),) if not mla else mla_after),
        add_norm("add_norm_mlp"),
        *((router(),) if moe else ()),
        *mlp(),
    )
    return before + after


@functools.cache
def once_per_forward() -> tuple[Kernel, ...]:
    """Embedding gather, final RMSNorm and the LM head on the ``head_rows`` last tokens."""
    return (
        elementwise("embed", reads=rows * hidden, writes=rows * hidden, flops=sp.Integer(0)),
        elementwise(
            "final_norm",
            reads=head_rows * hidden + hidden,
            writes=head_rows * hidden,
            flops=RMSNORM_FLOPS * head_rows * hidden,
        ),
        matmul("lm_head", head_rows, hidden, vocab),
    )


def layer_weight_elements(moe: bool = False) -> sp.Expr:
    """Weights of one layer (attention, MLP over all experts, router, two norms)."""
    mlp_w = experts * 3 * hidden * inter
    router_w = hidden * experts if moe else 0
    return hidden * qkv_width + q_width * hidden + mlp_w + router_w + 2 * hidden


def activation_elements() -> sp.Expr:
    """Largest set of activations alive at once in a layer (prefill, the MLP's peak):
    the residual x, the normed copy, gate+up output and the SwiGLU output."""
    return rows * (2 * hidden + 3 * (top_k + shared) * inter)


# --- tensor parallelism (Megatron-LM, Shoeybi et al. 2019, §3) -----------------------
#: QKV and gate/up split by columns, the output projection and down by rows: each
#: device holds ``h/tp`` query heads and ``inter/tp`` MLP columns, and two all-reduces
#: per layer (after the output projection and after down) sum ``rows × hidden`` partials.
ALLREDUCES_PER_LAYER = 2
#: Bytes one device sends over its link in a ring all-reduce of ``rows × hidden``
#: values: ``2·(tp - 1)/tp`` of the buffer (Patarasuk and Yuan 2009; NCCL's "bus bytes").
allreduce_link_bytes = 2 * (tp - 1) / tp * rows * hidden * s
