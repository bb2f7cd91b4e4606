"""Launch rules our kernels run and the model costs, each written once.

``pallas_kernels`` (what runs on the GPU) imports no ``perfmodel`` and ``perfmodel``
imports no kernel package, yet some choices a kernel makes per call are exactly what
the model must cost: those live here, in plain Python and numpy (no jax, no pydantic,
no sympy), and both sides import them. A rule takes numbers or numpy columns.

* :func:`group_split` — how many CTAs share a GQA group in our Mosaic backward's dK/dV
  kernel (``flash_mosaic_backward``; the model's ``[backward] group_split =
  "fill_waves"``, ``perfmodel.launch.backward_launch``).
"""

from kernel_rules.group_split import group_split

__all__ = ["group_split"]
