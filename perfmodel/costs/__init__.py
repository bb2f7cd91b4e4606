"""Symbolic cost models, one module per algorithm.

>>> model = symbolic("flash")
>>> sorted(str(x) for x in model.matmul_flops.free_symbols)
['b', 'd', 'h', 'm', 'n']
"""

from __future__ import annotations

import functools

from perfmodel.costs import flash
from perfmodel.costs import naive as naive_model
from perfmodel.costs.base import CostModel, Kernel
from perfmodel.errors import PerfmodelError

_BUILDERS = {"naive": naive_model.build, "flash": flash.build}


@functools.cache
def symbolic(
    algorithm: str, *, causal: bool = False, l2: bool = True, naive: str = "minimal"
) -> CostModel:
    """The sympy cost model of ``algorithm`` ("naive" or "flash").

    ``naive`` picks how naive attention is compiled (see ``perfmodel.costs.naive``).
    """
    if algorithm not in _BUILDERS:
        raise PerfmodelError(f"unknown algorithm {algorithm!r}; known: {sorted(_BUILDERS)}")
    if algorithm == "flash":
        return flash.build(causal=causal, l2=l2)
    if naive not in naive_model.IMPLEMENTATIONS:
        raise PerfmodelError(f"unknown naive={naive!r}; known: {naive_model.IMPLEMENTATIONS}")
    return naive_model.build(causal=causal, implementation=naive)


__all__ = ["CostModel", "Kernel", "symbolic"]
