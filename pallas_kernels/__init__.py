"""JAX/Pallas attention kernels measured on a GPU to check the roofline model.

``flash_attention`` is the fused forward kernel (backends: FlashAttention-2 in Triton,
FlashAttention-3 style in Mosaic GPU); ``naive_attention``
runs the three unfused steps the model calls "naive"; ``reference_attention`` is the
plain-JAX specification both are tested against.
"""

try:
    import jax  # noqa: F401
except ModuleNotFoundError:  # one line that says what to install, not a chain of imports
    raise ModuleNotFoundError(
        "pallas_kernels needs jax, which is not installed: pip install 'perfmodel[kernels]'"
    ) from None

from pallas_kernels.flash_attention import BlockSizes, flash_attention, flash_attention_forward
from pallas_kernels.naive import naive_attention
from pallas_kernels.reference import reference_attention

__all__ = [
    "BlockSizes",
    "flash_attention",
    "flash_attention_forward",
    "naive_attention",
    "reference_attention",
]
