"""Symbolic cost models, one module per algorithm.

>>> model = symbolic("flash")
>>> sorted(str(x) for x in model.matmul_flops.free_symbols)
['b', 'd', 'h', 'm', 'n']
"""

from __future__ import annotations

import functools

from perfmodel.costs import flash, naive
from perfmodel.costs.base import CostModel, Kernel
from perfmodel.errors import PerfmodelError

_BUILDERS = {"naive": naive.build, "flash": flash.build}


@functools.cache
def symbolic(algorithm: str, *, causal: bool = False, l2: bool = True) -> CostModel:
    """The sympy cost model of ``algorithm`` ("naive" or "flash")."""
    if algorithm not in _BUILDERS:
        raise PerfmodelError(f"unknown algorithm {algorithm!r}; known: {sorted(_BUILDERS)}")
    if algorithm == "flash":
        return flash.build(causal=causal, l2=l2)
    return _BUILDERS[algorithm](causal=causal)


__all__ = ["CostModel", "Kernel", "symbolic"]
