"""sympy expression -> fast numpy callable, compiled once and cached.

The compiled object keeps its expression, so ``repr`` and plots can show the formula.

>>> from perfmodel.symbols import n, d
>>> f = compiled(4 * n**2 * d)
>>> f(n=1024, d=128)
536870912.0
>>> f(n=[1024, 2048], d=128)
array([5.36870912e+08, 2.14748365e+09])
>>> f
Compiled(4*d*n**2)
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import sympy as sp

from perfmodel.roofline import NUMBERS


class Compiled:
    """A lambdified sympy expression (or tuple of them, sharing subexpressions).

    Called with keyword arguments named after its symbols; extra keywords are ignored,
    so one dict of values serves every expression. Results broadcast to the inputs.
    """

    def __init__(self, expr: sp.Expr | tuple[sp.Expr, ...]):
        self.expr = expr
        exprs = expr if isinstance(expr, tuple) else (expr,)
        free = set().union(*(sp.sympify(e).free_symbols for e in exprs))
        self.symbols: tuple[sp.Symbol, ...] = tuple(sorted(free, key=str))
        self.names = tuple(str(x) for x in self.symbols)
        body = list(exprs) if isinstance(expr, tuple) else expr
        self._fn: Callable[..., Any] = sp.lambdify(self.symbols, body, modules="numpy", cse=True)
        # Plain-float twin for one point: numpy's per-call overhead dominates there.
        self._scalar_fn: Callable[..., Any] = sp.lambdify(
            self.symbols, body, modules="math", cse=True
        )

    def __call__(self, **values: Any) -> Any:
        try:
            raw = [values[name] for name in self.names]
        except KeyError:
            missing = [name for name in self.names if name not in values]
            raise TypeError(f"{self.expr} needs values for {missing}") from None
        if all(isinstance(v, NUMBERS) for v in raw):  # one point: the ``math`` twin, floats
            out = self._scalar_fn(*map(float, raw))
            return list(map(float, out)) if isinstance(self.expr, tuple) else float(out)
        args = [np.asarray(v, dtype=np.float64) for v in raw]
        shape = np.broadcast_shapes(*(a.shape for a in args)) if args else ()
        out = self._fn(*args)
        if isinstance(self.expr, tuple):
            return [np.broadcast_to(np.asarray(o, dtype=np.float64), shape) for o in out]
        return np.broadcast_to(np.asarray(out, dtype=np.float64), shape)

    def __repr__(self) -> str:
        return f"Compiled({self.expr})"


@functools.cache
def compiled(expr: sp.Expr | tuple[sp.Expr, ...]) -> Compiled:
    """The cached numpy callable for ``expr`` (sympy expressions are hashable)."""
    return Compiled(expr)
