"""What the attention kernels share: argument checks, padding, the exp2 constants, the
Triton compiler parameters and the question "is this a Hopper GPU". No perfmodel import:
the kernels stand alone (device facts of a spec file are the harness's,
``kernel_bench.device``).

Everything here is public inside ``pallas_kernels`` (no leading underscore on the
names), so the kernel modules and the benchmark helpers import it without reaching
into each other's private names.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

#: exp(x) = exp2(x * log2(e)): the kernels fold the score scale and log2(e) into one
#: multiply before an exp2, and turn the base-2 log-sum-exp back with ln(2).
LOG2_E = math.log2(math.e)
LN_2 = math.log(2.0)

DTYPES_16BIT = ("float16", "bfloat16")


def is_power_of_two(x: int) -> bool:
    return x > 0 and (x & (x - 1)) == 0


def check_qkv(q, k, v, *, max_head_dim, dtypes) -> None:
    """Shapes ``[batch, seq, heads, head_dim]`` with GQA K/V, head_dim at most
    ``max_head_dim``, one dtype among ``dtypes``.

    Raises ValueError naming the argument and its value.
    """
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise ValueError(f"q, k, v must be [batch, seq, heads, head_dim]: {q.shape=} {k.shape=}")
    b, n, h, d = q.shape
    if k.shape != v.shape:
        raise ValueError(f"k and v must have one shape: {k.shape=} {v.shape=}")
    if k.shape[0] != b or k.shape[3] != d:
        raise ValueError(f"k must match q in batch and head_dim: {q.shape=} {k.shape=}")
    h_kv = k.shape[2]
    if h_kv == 0 or h % h_kv:
        raise ValueError(f"heads {h=} must be a multiple of kv heads {h_kv=}")
    if not 1 <= d <= max_head_dim:
        raise ValueError(f"head_dim {d=} not supported: at most {max_head_dim}")
    if n == 0 or k.shape[1] == 0:
        raise ValueError(f"sequence lengths must be positive: {n=} kv_len={k.shape[1]}")
    check_dtypes("q, k, v", dtypes, q=q, k=k, v=v)


def check_dtypes(what: str, dtypes, **arrays) -> None:
    """Every array's dtype is one of ``dtypes``, and all arrays share it.

    Raises ValueError naming the dtype, or ``what`` and each array's dtype.
    """
    for x in arrays.values():
        if x.dtype.name not in dtypes:
            raise ValueError(f"dtype {x.dtype.name!r} not supported: {dtypes}")
    if len({x.dtype for x in arrays.values()}) > 1:
        given = " ".join(f"{name}.dtype={x.dtype!r}" for name, x in arrays.items())
        raise ValueError(f"{what} must share a dtype: {given}")


def softmax_scale(d: int, sm_scale: float | None) -> float:
    """``1/sqrt(d)`` when None; a non-positive scale is an error."""
    scale = 1.0 / math.sqrt(d) if sm_scale is None else float(sm_scale)
    if not scale > 0:
        raise ValueError(f"sm_scale={sm_scale} must be positive")
    return scale


def pad_seq(x, multiple: int):
    """Zero-pad axis 1 (the sequence) of ``[b, seq, h, d]`` up to a multiple."""
    pad = -x.shape[1] % multiple
    return x if pad == 0 else jnp.pad(x, ((0, 0), (0, pad), (0, 0), (0, 0)))


def triton_compiler_params(num_warps: int, num_stages: int):
    """Triton compiler parameters; the class was ``TritonCompilerParams`` in older jax."""
    from jax.experimental.pallas import triton as pltriton

    cls = getattr(pltriton, "CompilerParams", None) or pltriton.TritonCompilerParams
    return cls(num_warps=num_warps, num_stages=num_stages)


def is_hopper(device=None) -> bool:
    """True on an sm_90 GPU (H100/H200/H800/H20): where the Mosaic GPU kernel runs."""
    device = device or jax.devices()[0]
    if device.platform != "gpu":
        return False
    cc = getattr(device, "compute_capability", None)
    if cc is not None:
        return str(cc).split(".")[0] == "9"
    return any(name in device.device_kind for name in ("H100", "H200", "H800", "H20"))
