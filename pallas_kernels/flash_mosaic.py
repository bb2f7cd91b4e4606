"""Forward flash attention for Hopper in Pallas Mosaic GPU (FlashAttention-3 style).

Work in progress (issue 12): the limits below are those of the kernel being written;
``mosaic_flash_attention`` raises NotImplementedError until it lands.
"""

from __future__ import annotations

from pallas_kernels._common import DTYPES_16BIT, check_qkv, is_hopper

SUPPORTED_HEAD_DIMS = (64, 128, 256)
SUPPORTED_DTYPES = DTYPES_16BIT


def unsupported_reason(q, k, v, *, causal: bool, interpret: bool = False) -> str | None:
    """Why this kernel cannot run the call (None when it can)."""
    if interpret:
        return "Mosaic GPU kernels have no interpret mode (use backend='triton')"
    try:
        check_qkv(q, k, v, head_dims=SUPPORTED_HEAD_DIMS, dtypes=SUPPORTED_DTYPES)
    except ValueError as err:
        return str(err)
    if not is_hopper():
        return "needs a Hopper (sm_90) GPU"
    return "the Mosaic GPU kernel is not written yet (issue 12)"


def mosaic_flash_attention(q, k, v, *, causal=False, sm_scale=None, return_lse=False, **options):
    raise NotImplementedError("the Mosaic GPU kernel is not written yet (issue 12)")
