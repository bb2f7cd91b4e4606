"""The flash-attention entry point: one function, two Pallas backends.

``flash_attention(q, k, v, causal=..., backend=...)`` computes
``softmax(sm_scale * q k^T) v`` without materialising the scores. Layout is
``[batch, seq, heads, head_dim]`` for q, k and v; k and v may have fewer heads
(grouped-query attention: ``heads`` a multiple of ``kv_heads``).

Backends:

========  ==========================================  ===========================
name      kernel                                      runs on
========  ==========================================  ===========================
triton    FlashAttention-2 (``flash_triton``)         any GPU; CPU (interpret)
mosaic    FlashAttention-3 style (``flash_mosaic``):  Hopper (sm_90) only
          TMA pipeline, wgmma, warp specialisation
========  ==========================================  ===========================

``backend="auto"`` picks ``mosaic`` on a Hopper GPU when ``flash_mosaic`` supports
the call and ``AUTO_PREFERS_MOSAIC`` says it was measured faster there, and ``triton``
everywhere else (and always with ``interpret=True``). A forced backend that cannot run
the call raises ValueError naming the limit.

``flash_attention_forward`` returns ``(O, lse)``: the residuals a backward pass needs
(lse is the natural-log log-sum-exp, float32 ``[batch, heads, n]``).

>>> import jax.numpy as jnp
>>> q = jnp.ones((1, 40, 2, 16), jnp.float32)
>>> flash_attention(q, q, q, interpret=True, block_q=16, block_k=16).shape
(1, 40, 2, 16)
"""

from __future__ import annotations

from pallas_kernels import flash_mosaic
from pallas_kernels.flash_triton import BlockSizes, triton_flash_attention

BACKENDS = ("auto", "triton", "mosaic")

__all__ = [
    "BACKENDS",
    "BlockSizes",
    "choose_backend",
    "flash_attention",
    "flash_attention_forward",
]


def AUTO_PREFERS_MOSAIC(q_shape, kv_shape, causal: bool) -> bool:  # noqa: N802 - a table
    """Where "auto" sends a Mosaic-supported call to Mosaic, from the H200 runs
    (specs/measurements/h200-mosaic-call*.json, TFLOP/s at 16384 tokens):

    ======================  =======================  ==============================
    shape                   Mosaic vs Triton          auto
    ======================  =======================  ==============================
    d=128                   1.2-1.4x (all measured)   mosaic
    d=256                   1.3-1.9x                  mosaic
    d=64, non-causal        1.1x (n=1024, 4096)       mosaic
    d=64, causal, n < 4096  0.92x (n=1024: 244/264)   triton
    d=64, causal, n >= 4096 1.16x (387/334)           mosaic
    ======================  =======================  ==============================

    (Triton's figures are from call 1, Mosaic's from call 2, each beside cuDNN in its run.)
    """
    d, n = q_shape[-1], q_shape[1]
    return not (d == 64 and causal and n < 4096)


def choose_backend(
    q, k, v, *, causal: bool, backend: str = "auto", interpret: bool = False, options=()
):
    """The backend that will run this call; raises ValueError if a forced one cannot.

    ``options``: the tuning knobs' names; "auto" given a knob only Triton has
    (``block_q``, ``num_warps``) picks Triton, where the knob means something.
    """
    if backend not in BACKENDS:
        raise ValueError(f"{backend=} unknown; choose one of {BACKENDS}")
    triton_only = set(options) - set(flash_mosaic.MosaicConfig.__dataclass_fields__)
    if backend == "triton" or (backend == "auto" and triton_only):
        return "triton"
    reason = flash_mosaic.unsupported_reason(q, k, v, causal=causal, interpret=interpret)
    if backend == "mosaic":
        if reason:
            raise ValueError(f"backend='mosaic' cannot run this call: {reason}")
        return "mosaic"
    if reason is None and AUTO_PREFERS_MOSAIC(q.shape, k.shape, causal):
        return "mosaic"
    return "triton"


def flash_attention_forward(
    q,
    k,
    v,
    *,
    causal: bool = False,
    sm_scale: float | None = None,
    backend: str = "auto",
    interpret: bool = False,
    **options,
):
    """``(O, lse)``: the forward pass and the residual a backward pass needs.

    ``options`` are the chosen backend's tuning knobs: triton takes ``block_q``,
    ``block_k``, ``num_warps``, ``num_stages``; mosaic takes the fields of
    ``flash_mosaic.MosaicConfig`` (``block_k``, ``num_stages``, ``overlap``,
    ``ping_pong``, ``persistent``). An unknown knob is a TypeError.
    """
    chosen = choose_backend(
        q, k, v, causal=causal, backend=backend, interpret=interpret, options=options
    )
    if chosen == "mosaic":
        return flash_mosaic.mosaic_flash_attention(
            q, k, v, causal=causal, sm_scale=sm_scale, return_lse=True, **options
        )
    return triton_flash_attention(
        q, k, v, causal=causal, sm_scale=sm_scale, return_lse=True, interpret=interpret, **options
    )


def flash_attention(
    q,
    k,
    v,
    *,
    causal: bool = False,
    sm_scale: float | None = None,
    backend: str = "auto",
    return_lse: bool = False,
    interpret: bool = False,
    **options,
):
    """Attention ``softmax(sm_scale * q k^T) v`` without materialising the scores.

    Args:
      q: ``[batch, n, heads, head_dim]``; k, v: ``[batch, kv_len, kv_heads, head_dim]``.
      causal: query i sees keys ``j <= i`` (top-left aligned, as ``jax.nn``).
      sm_scale: score scale, ``1/sqrt(head_dim)`` when None.
      backend: ``"auto"``, ``"triton"`` or ``"mosaic"`` (module docstring).
      return_lse: also return the log-sum-exp, float32 ``[batch, heads, n]``.
      interpret: run in the Pallas interpreter (Triton backend; works on CPU).
      options: the backend's tuning knobs (``flash_attention_forward``).

    Returns:
      O with q's shape and dtype, and the log-sum-exp if ``return_lse``. ``jax.grad``
      works through both outputs: dQ, dK, dV come from the Pallas backward kernels.
    """
    # Differentiable: a jax.custom_vjp whose forward is flash_attention_forward and whose
    # backward runs the Pallas backward kernels (pallas_kernels/flash_backward.py).
    from pallas_kernels.flash_backward import flash_attention_vjp

    return flash_attention_vjp(
        q,
        k,
        v,
        causal=causal,
        sm_scale=sm_scale,
        return_lse=return_lse,
        interpret=interpret,
        backend=backend,
        **options,
    )
