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
import numpy as np

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


def window_bounds(window, causal: bool) -> tuple[int | None, int | None] | None:
    """``window`` of ``flash_attention`` as ``(left, right)`` keys, None where a side is
    unbounded; None for no window. Query i sees keys j with ``i - left <= j <= i + right``
    (``jax.nn.dot_product_attention``'s ``local_window_size``): an int W is ``(W, 0)``
    when causal, else ``(W, W)``; a causal mask has no right window.

    Raises ValueError naming the value (a window <= 0, a side < 0, a right side with
    causal, or ``(0, 0)``).
    """
    if window is None:
        return None

    def side(value):
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
            raise ValueError(f"window={window!r}: each side must be an integer >= 0 or None")
        return int(value)

    if isinstance(window, tuple | list):
        if len(window) != 2:
            raise ValueError(f"window={window!r} must be W or (left, right)")
        left, right = side(window[0]), side(window[1])
    elif isinstance(window, bool) or not isinstance(window, int | np.integer) or window <= 0:
        raise ValueError(f"window={window!r} must be a positive integer (keys) or (left, right)")
    else:
        left, right = int(window), (0 if causal else int(window))
    if causal:
        if right not in (None, 0):
            raise ValueError(f"window={window!r}: a causal mask has no right window")
        right = 0
    if left == 0 and right == 0:
        raise ValueError(f"window={window!r} leaves each query only itself: must be > 0")
    if left is None and (right is None or causal):
        return None  # no restriction beyond the causal one
    return left, right


def visible_bounds(causal: bool, window, diagonal_offset: int = 0):
    """``(left, right)`` of the keys row i sees, ``i - left <= j <= i + right``, None for
    an unbounded side: ``window`` (checked by ``window_bounds``; its checked form passes
    unchanged) and the causal diagonal, shifted by the tests' ``diagonal_offset``."""
    left, right = window_bounds(window, causal) or (None, None)
    if causal:
        right = diagonal_offset
    return left, right


def tile_range(first_row, *, rows, tile, length, left, right, queries=None):
    """``(start, full_start, full_end, end)``: the tiles of ``tile`` keys that rows
    ``[first_row, first_row + rows)`` see, when row i sees keys ``[i - left, i + right]``
    (None: unbounded) of keys ``[0, length)``; with ``queries``, only the rows below it
    count (a last partial block: ``first_row < queries``). Tiles ``[start, end)`` are
    visited, ``[full_start, full_end)`` need no mask (every row sees them whole, no key
    past ``length``). Exactly the tiles holding a key some row sees are visited: those
    wholly outside the window (or above the causal diagonal) never are. Python ints where
    nothing depends on ``first_row``; ``start <= full_start <= full_end <= end`` always.
    """
    from jax import lax

    n_tiles, n_full = -(-length // tile), length // tile
    if left is None and right is None:
        return 0, 0, n_full, n_tiles
    last_row = first_row + rows - 1
    if queries is not None:
        last_row = jnp.minimum(last_row, queries - 1)
    start, full_start = 0, 0
    if left is not None:  # lowest key: first_row - left; all rows see a key >= last_row - left
        first_key = jnp.maximum(first_row - left, 0)
        start = jnp.where(first_key < length, lax.div(first_key, tile), n_tiles)
        full_start = lax.div(jnp.maximum(last_row - left + tile - 1, 0), tile)
    end, full_end = n_tiles, n_full
    if right is not None:  # highest key: last_row + right; all rows see keys <= first_row + right
        end = jnp.clip(lax.div(jnp.maximum(last_row + right + tile, 0), tile), 0, n_tiles)
        full_end = lax.div(jnp.maximum(first_row + right + 1, 0), tile)
    end = jnp.maximum(end, start)
    full_end = jnp.maximum(jnp.minimum(jnp.minimum(full_end, end), n_full), start)
    full_start = jnp.minimum(jnp.maximum(full_start, start), full_end)
    return start, full_start, full_end, end


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


def sm_count(device=None) -> int:
    """The GPU's SM count (132 on an H100/H200 SXM where the device does not say)."""
    device = device or jax.devices()[0]
    return int(getattr(device, "core_count", 0) or 132)
