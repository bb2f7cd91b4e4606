"""JAX/Pallas attention kernels: the code that runs on the GPU, and nothing else.

``flash_attention`` is the fused kernel (forward backends: FlashAttention-2 in Triton,
``flash_triton``; FlashAttention-3 style in Mosaic GPU, ``flash_mosaic``; backward:
``flash_mosaic_backward`` on Hopper, ``flash_backward`` in Triton elsewhere);
``paged_decode`` the decode kernel over a paged KV cache;
``context_parallel`` the ring and all-gather schedules over several devices;
``naive_attention`` the three unfused steps the model calls "naive";
``reference_attention`` the plain-JAX specification all are tested against.
Benchmarks, timing and checks live in the harness package ``kernel_bench``; this
package imports no ``perfmodel``.
"""

try:
    import jax  # noqa: F401
except ModuleNotFoundError:  # one line that says what to install, not a chain of imports
    raise ModuleNotFoundError(
        "pallas_kernels needs jax, which is not installed: pip install 'perfmodel[kernels]'"
    ) from None

from pallas_kernels.flash_attention import flash_attention, flash_attention_forward
from pallas_kernels.naive import naive_attention
from pallas_kernels.reference import reference_attention

__all__ = [
    "flash_attention",
    "flash_attention_forward",
    "naive_attention",
    "reference_attention",
]
