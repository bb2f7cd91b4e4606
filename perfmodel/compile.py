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

The engine's own expressions (each model's, the launch's footprint) are compiled by
name (:func:`compiled_named`): the code sympy's ``lambdify`` prints for them is kept in
a file under the user's cache folder (``PERFMODEL_CACHE``, else
``$XDG_CACHE_HOME/perfmodel``), one file per version of the sources the expressions
are built from (:data:`SOURCES`, hashed with sympy's and numpy's versions). A process
that finds its expressions there runs that same code without importing sympy (the
first ``predict()`` of a process takes a quarter of the time); a changed cost model
changes the hash, and its expressions are built and printed again; the folder keeps
the files of the :data:`KEEP_FILES` most recently written versions (:func:`prune`).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from perfmodel import roofline, trace
from perfmodel.roofline import NUMBERS

if TYPE_CHECKING:
    import sympy as sp

#: One expression or a tuple of them (sharing subexpressions).
Expressions = Any


class Compiled:
    """A lambdified sympy expression (or tuple of them, sharing subexpressions).

    Called with keyword arguments named after its symbols; extra keywords are ignored,
    so one dict of values serves every expression. Results broadcast to the inputs.
    """

    def __init__(self, expr: sp.Expr | tuple[sp.Expr, ...]):
        import sympy as sp

        self._expr: Expressions = expr
        self._build: Callable[[], Expressions] | None = None
        exprs = expr if isinstance(expr, tuple) else (expr,)
        free = set().union(*(sp.sympify(e).free_symbols for e in exprs))
        symbols = tuple(sorted(free, key=str))
        self.names = tuple(str(x) for x in symbols)
        self.is_tuple = isinstance(expr, tuple)
        body = list(exprs) if isinstance(expr, tuple) else expr
        # The modules as objects, not names: lambdify reads a module object's namespace
        # as it is, where for the name "numpy" it runs ``from numpy import *``, which
        # loads numpy's lazy submodules (f2py, testing...: a third of a second).
        self._fn: Callable[..., Any] = sp.lambdify(
            symbols, body, modules=[NUMPY_OVERRIDES, np], cse=True
        )
        # Plain-float twin for one point: numpy's per-call overhead dominates there.
        self._scalar_fn: Callable[..., Any] = sp.lambdify(symbols, body, modules=math, cse=True)
        self._traced: Callable[..., Any] | None = None
        self._math_source: str | None = None  # inspect finds lambdify's

    @classmethod
    def _printed(cls, entry: dict[str, Any], build: Callable[[], Expressions]) -> Compiled:
        """The compiled code of an earlier process (:func:`_entry`), its expression
        built only when asked for (``expr``)."""
        self = cls.__new__(cls)
        self._expr, self._build = None, build
        self.names = tuple(entry["names"])
        self.is_tuple = bool(entry["tuple"])
        self._fn = _run(entry["numpy"], np)
        self._scalar_fn = _run(entry["math"], math)
        self._traced, self._math_source = None, entry["math"]
        return self

    def _traced_fn(self) -> Callable[..., Any]:
        """The ``math`` twin for a point being traced (``perfmodel.trace``): the same
        printed code, each conditional (a ``Piecewise``, a ``Min``...) a selection of
        both its arms, recorded as one operation rather than a branch (printed code
        that raises on an arm it does not take leaves the point to the engine)."""
        if self._traced is None:
            import ast
            import inspect

            source = self._math_source or inspect.getsource(self._scalar_fn)
            tree = ast.parse(source)

            class Select(ast.NodeTransformer):
                def visit_IfExp(self, node: ast.IfExp) -> ast.AST:
                    self.generic_visit(node)
                    args = [node.test, node.body, node.orelse]
                    call = ast.Call(ast.Name("_select", ast.Load()), args, [])
                    return ast.copy_location(call, node)

            tree = ast.fix_missing_locations(Select().visit(tree))
            namespace = {**_namespace(math), "_select": trace.select}
            exec(compile(tree, "<perfmodel.compile traced>", "exec"), namespace)  # noqa: S102
            self._traced = namespace["_lambdifygenerated"]
        return self._traced

    @property
    def expr(self) -> Expressions:
        """The sympy expression (or tuple) this computes."""
        if self._expr is None and self._build is not None:
            self._expr = self._build()
        return self._expr

    def __call__(self, **values: Any) -> Any:
        return self._evaluate(values, _full_shape)

    def numbers_or_columns(self, **values: Any) -> Any:
        """Its value(s) as a call gives them, but an expression that is a constant (a
        model's terms of 0, its one launch) stays a number rather than a column of it:
        the engine's rules take numbers and columns alike, and a number costs no pass
        over the points."""
        return self._evaluate(values, _number_or_column)

    def _evaluate(self, values: dict[str, Any], shaped: Callable[[Any, Shape], Any]) -> Any:
        try:
            raw = [values[name] for name in self.names]
        except KeyError:
            missing = [name for name in self.names if name not in values]
            raise TypeError(f"{self.expr} needs values for {missing}") from None
        if _numbers(raw):  # one point: the ``math`` twin, floats
            if trace.is_traced(*raw):  # a point being traced: the same code, recorded
                out = self._traced_fn()(*map(trace.as_float, raw))
                as_float = trace.as_float
                return list(map(as_float, out)) if self.is_tuple else as_float(out)
            out = self._scalar_fn(*map(float, raw))
            return list(map(float, out)) if self.is_tuple else float(out)
        args = [np.asarray(v, dtype=np.float64) for v in raw]
        shape = np.broadcast_shapes(*(a.shape for a in args)) if args else ()
        out = self._fn(*args)
        if self.is_tuple:
            return [shaped(o, shape) for o in out]
        return shaped(out, shape)

    def __repr__(self) -> str:
        return f"Compiled({self.expr})"


def _numbers(values: list[Any]) -> bool:
    """Whether every value is a plain number (one point); a loop, not ``all()`` of a
    generator, which costs more than the test on every call."""
    for v in values:  # noqa: SIM110
        if not isinstance(v, NUMBERS):
            return False
    return True


#: The shape of a call's columns.
Shape = tuple[int, ...]


def _full_shape(value: Any, shape: Shape) -> Any:
    """``value`` as a float64 array of ``shape`` (a read-only view where it is smaller)."""
    if type(value) is np.ndarray and value.dtype == np.float64 and value.shape == shape:
        return value
    return np.broadcast_to(np.asarray(value, dtype=np.float64), shape)


def _number_or_column(value: Any, shape: Shape) -> Any:
    """A constant (a number, or an array of no dimension) as a float, else
    :func:`_full_shape` of ``value``."""
    if np.ndim(value) == 0:
        return float(value)
    return _full_shape(value, shape)


@functools.cache
def compiled(expr: sp.Expr | tuple[sp.Expr, ...]) -> Compiled:
    """The cached numpy callable for ``expr`` (sympy expressions are hashable)."""
    return Compiled(expr)


# --- the engine's expressions, by name, printed once per version of their sources -----
#: What the engine's expressions are built from (relative to the package): a change to
#: any of these files makes a new cache file.
SOURCES = ("costs", "symbols.py", "vocabulary.py", "compile.py", "evaluate.py", "launch.py")
_PACKAGE = Path(__file__).resolve().parent
_NAMED: dict[str, tuple[Compiled, Any]] = {}


def compiled_named(name: str, build: Callable[[], tuple[Expressions, Any]]) -> tuple[Compiled, Any]:
    """The compiled expressions ``build()`` returns (with its JSON-ready ``extra``: names,
    kernels), by ``name``: in this process once, from the cache file when an earlier
    process printed them for the same sources, else built with sympy and added there."""
    if name in _NAMED:
        return _NAMED[name]
    cache = _cache()
    entry = cache.entries.get(name)
    if entry is not None:
        done = Compiled._printed(entry, lambda: build()[0]), entry["extra"]
    else:
        expr, extra = build()
        fn = compiled(expr)
        done = fn, extra
        printed = _entry(fn, extra)
        if printed is not None:
            cache.add(name, printed)
    _NAMED[name] = done
    return done


def _entry(fn: Compiled, extra: Any) -> dict[str, Any] | None:
    """What the cache keeps of ``fn``: the code lambdify printed, for numpy and for plain
    floats. None where that code calls something not in numpy, math or the builtins."""
    import inspect

    out: dict[str, Any] = {"names": list(fn.names), "tuple": fn.is_tuple, "extra": extra}
    for key, code, module in (("numpy", fn._fn, np), ("math", fn._scalar_fn, math)):
        names = _namespace(module)
        for used in code.__code__.co_names:
            if used in code.__globals__ and code.__globals__[used] is not names.get(used):
                return None
        out[key] = inspect.getsource(code)
    return out


#: What the printed numpy code calls instead of numpy's own function of that name: the
#: same numbers, faster on the whole numbers the models hold (``roofline.mod``) and on
#: a Piecewise's arms (``roofline.select``).
NUMPY_OVERRIDES: dict[str, Any] = {"mod": roofline.mod, "select": roofline.select}


def _namespace(module: Any) -> dict[str, Any]:
    """The names printed code of ``module`` (numpy or math) runs with."""
    names: dict[str, Any] = dict(vars(module))
    if module is np:
        names.update(NUMPY_OVERRIDES)
    return names


def _run(source: str, module: Any) -> Callable[..., Any]:
    """The function ``source`` defines, its free names from ``module``."""
    namespace = _namespace(module)
    exec(compile(source, "<perfmodel.compile cache>", "exec"), namespace)  # noqa: S102
    fn: Callable[..., Any] = namespace["_lambdifygenerated"]
    return fn


class _CacheFile:
    def __init__(self, path: Path | None):
        self.path = path
        self.entries: dict[str, dict[str, Any]] = {}
        if path is not None and path.is_file():
            try:
                self.entries = json.loads(path.read_text())
            except (OSError, ValueError):  # unreadable: rebuilt as it is used
                self.entries = {}

    def add(self, name: str, entry: dict[str, Any]) -> None:
        self.entries[name] = entry
        if self.path is None:
            return
        from perfmodel.atomic import write_text

        try:
            write_text(self.path, json.dumps(self.entries))
        except OSError:  # a read-only cache folder: this process compiles for itself
            self.path = None
            return
        prune(self.path.parent, keep=self.path)


#: Cache files kept in the folder: those of the most recently written versions of the
#: sources (each a few tens of kB); older ones are removed when a new one is written.
KEEP_FILES = 8


def prune(folder: Path, keep: Path | None = None, most: int = KEEP_FILES) -> list[Path]:
    """Remove all but the ``most`` newest cache files (by modification time; ``keep``
    stays whatever its age), so that the folder cannot grow without bound as the
    sources change. Returns the files removed; one another process removed first, or
    that cannot be removed, is passed over."""
    found = []
    for path in folder.glob("compiled-*.json"):
        try:
            found.append((path.stat().st_mtime_ns, path))
        except OSError:
            continue
    found.sort(reverse=True)
    others = [path for _, path in found if path != keep]
    removed = []
    for path in others[most - (keep is not None) :]:
        try:
            path.unlink()
        except OSError:
            continue
        removed.append(path)
    return removed


@functools.cache
def _cache() -> _CacheFile:
    folder = cache_folder()
    if folder is None:  # PERFMODEL_CACHE="" : no cache file
        return _CacheFile(None)
    return _CacheFile(folder / f"compiled-{fingerprint()[:20]}.json")


def cache_folder() -> Path | None:
    """The user's cache folder of perfmodel (``PERFMODEL_CACHE``, else
    ``$XDG_CACHE_HOME/perfmodel``); None where ``PERFMODEL_CACHE`` is empty."""
    folder = os.environ.get("PERFMODEL_CACHE")
    if folder is None:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        folder = str(Path(base) / "perfmodel")
    return Path(folder) if folder else None


def fingerprint() -> str:
    """A hash of the sources the engine's expressions come from (:data:`SOURCES`), of
    sympy's release and numpy's version, and of the Python version."""
    digest = hashlib.sha256()
    files: list[Path] = []
    for item in SOURCES:
        path = _PACKAGE / item
        files.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    spec = importlib.util.find_spec("sympy")
    if spec is not None and spec.origin is not None:
        files.append(Path(spec.origin).parent / "release.py")
    for path in files:
        digest.update(str(path.relative_to(path.parents[1])).encode())
        digest.update(path.read_bytes())
    digest.update(f"{np.__version__} {sys.version}".encode())
    return digest.hexdigest()
