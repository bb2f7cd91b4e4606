"""The flash-attention entry point: one function, two Pallas forward backends, one backward.

``flash_attention(q, k, v, causal=..., backend=...)`` computes
``softmax(sm_scale * q k^T) v`` without materialising the scores. Layout is
``[batch, seq, heads, head_dim]`` for q, k and v; k and v may have fewer heads
(grouped-query attention: ``heads`` a multiple of ``kv_heads``). Any head dim up to 256
runs: each backend pads one it does not run natively (``native_head_dim`` of its module).

Backends (one module each, holding its ``Config``, ``heuristic_config`` and
``supported`` beside the kernel):

========  ==========================================  ===========================
name      kernel                                      runs on
========  ==========================================  ===========================
triton    FlashAttention-2 (``flash_triton``)         any GPU; CPU (interpret)
mosaic    FlashAttention-3 style (``flash_mosaic``):  Hopper (sm_90) only
          TMA pipeline, wgmma, warp specialisation
========  ==========================================  ===========================

``backend="auto"`` picks ``mosaic`` on a Hopper GPU when ``flash_mosaic.supported``
accepts the call, unless the routing table (``routing.toml``: data, each row with the
committed measurements it stands on) names a shape where Triton measured faster; and
``triton`` everywhere else (always with ``interpret=True``).
A forced backend that cannot run the call raises ValueError naming the limit.

``jax.grad`` through ``flash_attention`` runs, whichever backend ran the forward, the
Mosaic GPU backward (``flash_mosaic_backward``) on a Hopper GPU where it supports the
call, else the Triton backward kernels (``flash_backward``): ``choose_backward``.

``flash_attention_forward`` returns ``(O, lse)``: the residuals a backward pass needs
(lse is the natural-log log-sum-exp, float32 ``[batch, heads, n]``).

>>> import jax, jax.numpy as jnp
>>> q = jnp.ones((1, 40, 2, 16), jnp.float32)
>>> flash_attention(q, q, q, interpret=True, block_q=16, block_k=16).shape
(1, 40, 2, 16)
>>> loss = lambda q: flash_attention(q, q, q, causal=True, interpret=True).sum()
>>> jax.grad(loss)(q).shape
(1, 40, 2, 16)
"""

from __future__ import annotations

import dataclasses
import functools
import tomllib
from pathlib import Path

import jax

from pallas_kernels import flash_backward, flash_mosaic, flash_mosaic_backward, flash_triton
from pallas_kernels._common import softmax_scale, window_bounds

BACKENDS = ("auto", "triton", "mosaic")
#: Where "auto" sends a call both backends run (data, from measurements).
ROUTING_FILE = Path(__file__).with_name("routing.toml")

__all__ = [
    "BACKENDS",
    "choose_backend",
    "flash_attention",
    "flash_attention_forward",
    "routing_table",
]


@functools.cache
def routing_table() -> dict:
    """``routing.toml``: ``default`` backend and the ``route`` rows that override it."""
    return tomllib.loads(ROUTING_FILE.read_text())


def routed_backend(q_shape, kv_shape, causal: bool) -> str:
    """The backend the routing table names for a call both backends run: the first row
    whose head dim bucket, mask and sequence range hold, else the table's default."""
    del kv_shape  # no row depends on it yet
    d = flash_mosaic.native_head_dim(q_shape[-1])
    n = q_shape[1]
    table = routing_table()
    for row in table.get("route", ()):
        if (
            row["head_dim_min"] <= d <= row["head_dim_max"]
            and row["causal"] == bool(causal)
            and row.get("n_min", 0) <= n < row.get("n_below", float("inf"))
        ):
            return row["backend"]
    return table["default"]


def choose_backend(
    q, k, v, *, causal: bool, backend: str = "auto", interpret: bool = False, options=()
):
    """The backend that will run this call; raises ValueError if a forced one cannot.

    ``options``: the tuning knobs' names; "auto" given a knob only Triton has
    (``block_q``, ``num_warps``) picks Triton, where the knob means something.
    """
    if backend not in BACKENDS:
        raise ValueError(f"{backend=} unknown; choose one of {BACKENDS}")
    triton_only = set(options) - set(flash_mosaic.Config.__dataclass_fields__)
    if backend == "triton" or (backend == "auto" and triton_only):
        return "triton"
    reason = flash_mosaic.supported(q, k, v, causal=causal, interpret=interpret)
    if backend == "mosaic":
        if reason:
            raise ValueError(f"backend='mosaic' cannot run this call: {reason}")
        return "mosaic"
    if reason is None:
        return routed_backend(q.shape, k.shape, causal)
    return "triton"


def flash_attention_forward(
    q,
    k,
    v,
    *,
    causal: bool = False,
    window=None,
    sm_scale: float | None = None,
    backend: str = "auto",
    interpret: bool = False,
    **options,
):
    """``(O, lse)``: the forward pass and the residual a backward pass needs.

    ``window``: a sliding window as ``flash_attention`` takes it.

    ``options`` are the chosen backend's tuning knobs: the fields of its module's
    ``Config`` (triton: ``block_q``, ``block_k``, ``num_warps``, ``num_stages``; mosaic:
    ``block_k``, ``num_stages``, ``overlap``, ``persistent``). An unknown knob is a
    TypeError.
    """
    chosen = choose_backend(
        q, k, v, causal=causal, backend=backend, interpret=interpret, options=options
    )
    if chosen == "mosaic":
        return flash_mosaic.mosaic_flash_attention(
            q, k, v, causal=causal, window=window, sm_scale=sm_scale, return_lse=True, **options
        )
    return flash_triton.triton_flash_attention(
        q,
        k,
        v,
        causal=causal,
        window=window,
        sm_scale=sm_scale,
        return_lse=True,
        interpret=interpret,
        **options,
    )


# --- jax.custom_vjp ----------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class _Static:
    """The non-differentiable arguments of one call (hashable: jit and custom_vjp key)."""

    causal: bool
    #: the checked sliding window ``(left, right)`` (``_common.window_bounds``), or None
    window: tuple | None
    sm_scale: float
    interpret: bool
    backward: flash_backward.Config
    forward_options: tuple  # (name, value) pairs for ``flash_attention_forward``


def _forward(static: _Static, q, k, v):
    return flash_attention_forward(
        q,
        k,
        v,
        causal=static.causal,
        window=static.window,
        sm_scale=static.sm_scale,
        interpret=static.interpret,
        **dict(static.forward_options),
    )


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _attention(static: _Static, q, k, v):
    return _forward(static, q, k, v)


def _attention_fwd(static: _Static, q, k, v):
    o, lse = _forward(static, q, k, v)
    return (o, lse), (q, k, v, o, lse)


def choose_backward(q, k, v, *, causal: bool, interpret: bool = False, backward=None) -> str:
    """The backward that ``jax.grad`` runs: ``"mosaic"`` (``flash_mosaic_backward``) on a
    Hopper GPU when it supports the call and ``backward`` is None, its default
    (``flash_backward.heuristic_config``) or a ``flash_mosaic_backward.Config``; else
    ``"triton"`` (``flash_backward``)."""
    if isinstance(backward, flash_mosaic_backward.Config):
        return "mosaic"
    if backward is not None and backward != flash_backward.heuristic_config(q.shape[-1]):
        return "triton"  # a Triton backward launch chosen by the caller
    reason = flash_mosaic_backward.supported(q, k, v, causal=causal, interpret=interpret)
    return "triton" if reason else "mosaic"


def _attention_bwd(static: _Static, residuals, cotangents):
    q, k, v, o, lse = residuals
    do, dlse = cotangents
    chosen = choose_backward(
        q, k, v, causal=static.causal, interpret=static.interpret, backward=static.backward
    )
    if chosen == "mosaic":
        config = static.backward
        return flash_mosaic_backward.mosaic_attention_backward(
            q,
            k,
            v,
            o,
            lse,
            do,
            dlse,
            causal=static.causal,
            window=static.window,
            sm_scale=static.sm_scale,
            config=config if isinstance(config, flash_mosaic_backward.Config) else None,
        )
    return flash_backward.flash_attention_backward(
        q,
        k,
        v,
        o,
        lse,
        do.astype(q.dtype),
        dlse,
        causal=static.causal,
        window=static.window,
        sm_scale=static.sm_scale,
        config=static.backward,
        interpret=static.interpret,
    )


_attention.defvjp(_attention_fwd, _attention_bwd)


def flash_attention(
    q,
    k,
    v,
    *,
    causal: bool = False,
    window=None,
    sm_scale: float | None = None,
    backend: str = "auto",
    return_lse: bool = False,
    interpret: bool = False,
    backward: flash_backward.Config | None = None,
    **options,
):
    """Attention ``softmax(sm_scale * q k^T) v`` without materialising the scores.

    Args:
      q: ``[batch, n, heads, head_dim]``; k, v: ``[batch, kv_len, kv_heads, head_dim]``.
      causal: query i sees keys ``j <= i`` (top-left aligned, as ``jax.nn``).
      window: a sliding (local) window, as ``jax.nn.dot_product_attention``'s
        ``local_window_size``: ``(left, right)`` keys, query i seeing keys ``i - left <=
        j <= i + right`` (a side None: unbounded), or one int W, ``(W, 0)`` when causal
        and ``(W, W)`` otherwise. Tiles wholly outside it are never loaded, forward and
        backward. A window <= 0, a negative side or a right side with ``causal`` is a
        ValueError naming the value.
      sm_scale: score scale, ``1/sqrt(head_dim)`` when None.
      backend: ``"auto"``, ``"triton"`` or ``"mosaic"`` (module docstring).
      return_lse: also return the log-sum-exp, float32 ``[batch, heads, n]``.
      interpret: run in the Pallas interpreter (Triton backend; works on CPU).
      backward: the backward kernels' ``flash_backward.Config`` (default:
        ``flash_backward.heuristic_config(head_dim)``).
      options: the forward backend's tuning knobs (``flash_attention_forward``).

    Returns:
      O with q's shape and dtype, and the log-sum-exp if ``return_lse``. ``jax.grad``
      works through both outputs (the lse cotangent flows into dS).
    """
    d = q.shape[-1]
    static = _Static(
        causal=bool(causal),
        window=window_bounds(window, causal),
        sm_scale=softmax_scale(d, sm_scale),
        interpret=bool(interpret),
        backward=backward or flash_backward.heuristic_config(d),
        forward_options=tuple(sorted({**options, "backend": backend}.items())),
    )
    o, lse = _attention(static, q, k, v)
    return (o, lse) if return_lse else o
