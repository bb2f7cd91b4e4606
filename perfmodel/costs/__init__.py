"""Symbolic cost models, one module per algorithm.

>>> model = symbolic("flash")
>>> sorted(str(x) for x in model.matmul_flops.free_symbols)
['b', 'd', 'h', 'm', 'n']
"""

from __future__ import annotations

import functools
import importlib
from typing import TYPE_CHECKING, Any

from perfmodel.errors import PerfmodelError, spell

if TYPE_CHECKING:
    from perfmodel.costs.base import CostModel, Kernel

#: The algorithms with a cost model of their own (``naive.build``, ``flash.build``).
_ALGORITHMS = ("flash", "naive")


#: What a model costs: the forward pass, the backward (``perfmodel.costs.backward``), or
#: one training step of the attention call (forward then backward).
MODES = ("forward", "backward", "train")


def symbolic(
    algorithm: str,
    *,
    causal: bool = False,
    l2: bool = True,
    naive: str = "minimal",
    mode: str = "forward",
    dq: str = "atomic",
    split: bool = False,
    paged: bool = False,
    masked: bool = False,
) -> CostModel:
    """The sympy cost model of ``algorithm`` ("naive" or "flash").

    ``naive`` picks how naive attention is compiled (see ``perfmodel.costs.naive``);
    ``mode`` one of ``MODES``: the backward's flash dQ is summed as ``dq`` says ("atomic":
    FlashAttention-2's own kernel; "two_pass": ours). The backward of naive attention has
    one model (the minimal trips), whatever ``naive`` says. ``split`` and ``paged`` pick
    the forward flash model's split-KV and paged-cache forms (``perfmodel.costs.flash``);
    ``masked`` the flash backward over a mask's tiles (``perfmodel.costs.masks``).

    >>> [k.name for k in symbolic("flash", mode="train").kernels]
    ['flash', 'bwd_delta', 'bwd_dkdvdq', 'bwd_dq_convert', 'bwd_group_reduce']
    """
    for name, value in (("algorithm", algorithm), ("naive", naive), ("mode", mode), ("dq", dq)):
        if not isinstance(value, str):
            raise PerfmodelError(f"{name}={value!r} must be a name (a string)")
    flags = (("causal", causal), ("l2", l2), ("split", split), ("paged", paged))
    for flag, given in (*flags, ("masked", masked)):
        if not isinstance(given, bool):
            raise PerfmodelError(f"{flag}={given!r} must be True or False")
    return _symbolic(algorithm, causal, l2, naive, mode, dq, split, paged, masked)


@functools.cache
def _symbolic(
    algorithm: str,
    causal: bool,
    l2: bool,
    naive: str,
    mode: str,
    dq: str,
    split: bool = False,
    paged: bool = False,
    masked: bool = False,
) -> CostModel:
    from perfmodel.costs import backward, flash
    from perfmodel.costs import naive as naive_model

    if algorithm not in _ALGORITHMS:
        raise PerfmodelError(f"unknown algorithm {algorithm!r}; known: {list(_ALGORITHMS)}")
    if mode not in MODES:
        raise PerfmodelError(f"unknown mode={mode!r}; known: {MODES}")
    if masked and (algorithm, mode) != ("flash", "backward"):
        raise PerfmodelError(
            f"masked=True: symbolic() has the flash backward's masked form (mode='backward'); "
            f"got algorithm={algorithm!r}, mode={mode!r} (the forward's: costs.flash.build)"
        )
    if mode != "forward":
        if dq not in backward.DQ_FAMILIES:
            raise PerfmodelError(f"unknown dq={dq!r}; known: {backward.DQ_FAMILIES}")
        bwd = backward.build(algorithm, causal=causal, l2=l2, dq=dq, masked=masked)
        if mode == "backward":
            return bwd
        return backward.training_step(symbolic(algorithm, causal=causal, l2=l2, naive=naive), bwd)
    if algorithm == "flash":
        return flash.build(causal=causal, l2=l2, split=split, paged=paged)
    if naive not in naive_model.IMPLEMENTATIONS:
        raise PerfmodelError(f"unknown {spell('naive', naive)}; known: {naive_model.IMPLEMENTATIONS}")
    return naive_model.build(causal=causal, implementation=naive)


def __getattr__(name: str) -> Any:
    """The sympy models load when first used (``costs.flash``, ``costs.CostModel``...):
    the numbers of an earlier process's compiled models need no sympy
    (``perfmodel.compile``)."""
    if name in ("CostModel", "Kernel"):
        return getattr(importlib.import_module("perfmodel.costs.base"), name)
    try:
        return importlib.import_module(f"perfmodel.costs.{name}")
    except ModuleNotFoundError as e:
        if e.name != f"perfmodel.costs.{name}":
            raise
        raise AttributeError(f"module 'perfmodel.costs' has no attribute {name!r}") from None


__all__ = ["MODES", "CostModel", "Kernel", "symbolic"]
