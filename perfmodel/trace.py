"""Numbers that record what is done to them: one point's evaluation as straight-line code.

The engine's rules are written once, over numbers or columns (``roofline.xp_of``). Run
on :class:`Traced` numbers instead of floats, a point's evaluation records every
operation that depends on its inputs (the rest is computed then, and printed as a
constant); each branch taken on such a value is a guard. :class:`Paths` keeps the traces
of one discrete case (device, family, profiles, mode, head dim, dtype, causal...) as a
tree of guards and prints it as one Python function of straight-line code with no numpy:
a new point of that case is one call of it, the same operations on the same types in the
same order, so the same numbers bit for bit. A point whose guards lead where no trace
went is a miss (``None``): the caller evaluates it the usual way and may trace it.

What keeps a trace honest: a traced number is a ``float`` subclass, so the rules take
their one-point branch (``isinstance(x, float)``), but its float payload is NaN and each
conversion that would carry its value out of the trace as a constant (``float()``,
``int()``, numpy, hashing as a cache key, formatting) raises :class:`Untraceable`, which
stops the trace (the point goes to the engine). What keeps the tree small: ``min``,
``max`` and selections of traced numbers (``roofline.FLOATS``; the builtins in the
modules of :data:`FOLLOWED`; the printed models' conditionals, ``compile.Compiled``) are
recorded as operations, not branches; a rule that runs numpy on one point is one
recorded call of itself (:func:`opaque`); a search that evaluates a function at points
it picks (the floor's best split count) calls that function traced once and printed
(:func:`searching`). A result made of dicts and registered types (:func:`built_as`) is
rebuilt by printed code from the traced numbers (:meth:`Paths.add_result`).
"""

from __future__ import annotations

import enum
import functools
import importlib
import math
import operator
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

_F = TypeVar("_F", bound=Callable[..., Any])

__all__ = [
    "FINITE",
    "Miss",
    "Paths",
    "Traced",
    "Untraceable",
    "as_float",
    "as_int",
    "built_as",
    "flat",
    "is_traced",
    "never_negative",
    "searching",
    "tracing",
    "value_of",
]


class Untraceable(BaseException):  # noqa: N818 - not an error of the caller's: a signal
    """A traced number was used where its trace cannot follow (converted to a plain
    number, given to numpy, hashed): the point is evaluated the usual way instead.
    A ``BaseException``, so that no ``except Exception`` in a rule swallows it."""


_INF = math.inf


class _Recorder:
    """The operations and guards of one trace, in order."""

    def __init__(self, prefix: str = "t") -> None:
        self.prefix = prefix
        self.searches = 0
        self.lines: list[tuple[str, str, tuple[str, ...]]] = []  # (name, code, names used)
        self.events: list[tuple[int, str, bool]] = []  # (lines before it, guard, outcome)
        self.count = 0
        self.known: dict[str, str] = {}
        self.values: dict[str, Any] = {}  # each name's value at the traced point
        self.constants: dict[str, Any] = {}  # the case's named constants (Paths.constants)
        self.signs: dict[str, int] = {}  # each name's sign, at every point (_sign_of)
        self.negated: dict[str, Traced] = {}  # each -x printed, by name: its x
        self.bounds: dict[str, float] = {}  # each name's largest magnitude (_bound_of)
        self.guarded: set[str] = set()
        self.stopped: BaseException | None = None

    def emit(
        self, code: str, used: tuple[str, ...], value: Any, sign: int = 0, bound: float = _INF
    ) -> Traced:
        name = self.known.get(code)  # computed before on this path: the same value
        if name is None:
            name = self.known[code] = f"{self.prefix}{self.count}"
            self.count += 1
            self.lines.append((name, code, used))
            self.values[name] = value
            self.signs[name] = sign
            self.bounds[name] = bound
        return Traced(value, name)

    def guard(self, name: str, outcome: bool) -> None:
        if name in self.guarded:  # tested before on this path: known here
            return
        self.guarded.add(name)
        self.events.append((len(self.lines), name, outcome))


_RECORDER: _Recorder | None = None


def tracing() -> bool:
    """Whether a trace is being recorded."""
    return _RECORDER is not None


def _recorder() -> _Recorder:
    if _RECORDER is None:
        raise Untraceable("a traced number outside its trace")
    return _RECORDER


_NAN = float("nan")


def _literal(value: Any) -> str:
    """``value`` as Python source that evaluates to it (of the same type)."""
    if type(value) is float:
        if value != value:
            return "_nan"
        if value in (math.inf, -math.inf):
            return "_inf" if value > 0 else "(-_inf)"
        return repr(value)
    if type(value) in (int, bool, str) or value is None:
        return repr(value)
    named = _BY_ID.get(id(value))
    if named is not None:  # a constant the case names (its device)
        return named
    if isinstance(value, enum.Enum):  # a member by its class and name: the same each run
        kind = type(value)
        name = f"_e_{kind.__name__}_{value.name}"
        _NAMESPACE[name] = value
        _RECIPES[name] = (kind.__module__, kind.__qualname__, value.name)
        return name
    try:  # another object (a mask): a name in the printed code's namespace
        key: Any = (type(value), value)
        hash(key)
    except TypeError:
        key = ("id", id(value))
    known = _CONSTANTS.get(key)
    if known is None:
        known = _CONSTANTS[key] = f"_k{len(_CONSTANTS)}"
        _NAMESPACE[known] = value
    return known


#: Constants of printed code that are not literals, by (type, value) or identity: names
#: of this process only (``_k...``: printed code that reads one is not kept on disk).
_CONSTANTS: dict[Any, str] = {}
#: The enum members printed code reads, by name: (module, class, member).
_RECIPES: dict[str, tuple[str, str, str]] = {}
#: The constants the case being traced names (``Paths.constants``), by identity.
_BY_ID: dict[int, str] = {}


def _operand(x: Any) -> tuple[Any, str, tuple[str, ...]]:
    if type(x) is Traced or type(x) is _Named:
        return getattr(x, "v", None), x.name, (x.name,)
    return x, _literal(x), ()


def _binary(symbol: str, fn: Callable[[Any, Any], Any], a: Any, b: Any) -> Any:
    av, ac, au = _operand(a)
    bv, bc, bu = _operand(b)
    value = fn(av, bv)
    sa, sb = _sign_of(a), _sign_of(b)
    ba, bb = _bound_of(a), _bound_of(b)
    if _always_zero(symbol, a, sa, ba, b, sb, bb, value):
        return value  # x - x, 0 * x of a finite x: a zero at every point
    if _identity(symbol, a, av, sa, b, bv, sb, value):
        return a if au else b  # x * 1.0, x / 1.0, x - 0.0, x + 0.0...: x itself, bit for bit
    sign, bound = _binary_sign(symbol, sa, sb, value), _binary_bound(symbol, ba, b, bb)
    return _recorder().emit(f"{ac} {symbol} {bc}", au + bu, value, sign, bound)


# --- how large a traced number can be at every point of its case ----------------------
#: A number whose magnitude is bounded below this is finite wherever its case runs: no
#: infinity, and no NaN (of finite operands only 0/0 gives one, and Python raises).
FINITE = 1e300


def _bound_of(x: Any) -> float:
    """A bound on ``x``'s magnitude at every point: a traced number's (its inputs' from
    :class:`Paths`, :func:`_binary_bound`, :func:`_call_bound`), a constant's own; inf
    where none is known."""
    if type(x) is Traced:
        return _recorder().bounds.get(x.name, _INF)
    if type(x) is float or type(x) is bool or (type(x) is int and abs(x) < 2**1000):
        size = abs(float(x))
        return size if size == size else _INF
    return _INF


def _binary_bound(symbol: str, ba: float, b: Any, bb: float) -> float:
    """A bound on ``a symbol b`` from its operands' (a quotient's only where the divisor
    is a constant other than zero)."""
    if symbol in _COMPARISONS:
        return 1.0
    if symbol in ("+", "-"):
        return ba + bb
    if symbol == "*":
        return ba * bb if ba < _INF and bb < _INF else _INF
    if symbol in ("/", "//") and _number(b) and bb > 0:  # a constant divisor
        return ba / bb + (symbol == "//")
    if symbol == "%":
        return bb
    if symbol in ("&", "|") and ba <= 1 and bb <= 1:
        return 1.0
    return _INF


def _call_bound(fn_name: str, bounds: list[float]) -> float:
    """A bound on a recorded call from its arguments'."""
    if fn_name in ("min", "max"):
        return max(bounds[0], bounds[1])
    if fn_name == "_select":
        return max(bounds[1], bounds[2])
    if fn_name in ("_ceil", "_floor", "_trunc"):
        return bounds[0] + 1
    if fn_name in ("int", "float", "_pos", "_neg", "abs"):
        return bounds[0]
    return _INF


def _always_zero(
    symbol: str, a: Any, sa: int, ba: float, b: Any, sb: int, bb: float, value: Any
) -> bool:
    """Whether ``a symbol b`` (``value``) is the same zero at every point: ``x - x`` of a
    finite ``x`` (+0.0, or 0), ``0 * x`` of a finite ``x`` never below zero nor -0.0."""
    if value != 0 or (type(value) is float and math.copysign(1.0, value) < 0):
        return False
    if symbol == "-":
        return type(a) is Traced and type(b) is Traced and a.name == b.name and ba < FINITE
    if symbol != "*":
        return False
    for zero, x, sign, bound in ((a, b, sb, bb), (b, a, sa, ba)):
        if type(x) is Traced and _number(zero) and zero == 0 and sign == POSITIVE_OR_ZERO:
            return bound < FINITE and math.copysign(1.0, zero) > 0
    return False


# --- what is known of a traced number's sign at every point of its case ---------------
#: Never below zero (a zero of either sign, a positive number, infinity or NaN).
NOT_NEGATIVE = 1
#: Never -0.0 (an int, a bool, or a float that cannot be a negative zero).
NOT_MINUS_ZERO = 2
#: Both: +0.0, a positive number, +infinity or NaN.
POSITIVE_OR_ZERO = NOT_NEGATIVE | NOT_MINUS_ZERO
_COMPARISONS = frozenset(("<", "<=", ">", ">=", "==", "!="))


def _sign_of(x: Any) -> int:
    """What is known of ``x``'s sign wherever the printed code runs: a traced number's
    (:meth:`_Recorder.emit`, the inputs' from :class:`Paths`), a constant's own."""
    if type(x) is Traced:
        return _recorder().signs.get(x.name, 0)
    if type(x) is bool:
        return POSITIVE_OR_ZERO
    if type(x) is int:
        return NOT_MINUS_ZERO | (NOT_NEGATIVE if x >= 0 else 0)
    if type(x) is float:
        negative_zero = x == 0 and math.copysign(1.0, x) < 0
        return (0 if x < 0 else NOT_NEGATIVE) | (0 if negative_zero else NOT_MINUS_ZERO)
    return 0


def _binary_sign(symbol: str, sa: int, sb: int, value: Any) -> int:
    """The sign of ``a symbol b`` known from its operands' (IEEE 754, round to nearest:
    a sum is -0.0 only where both terms are; a difference only where ``a`` is -0.0; a
    product or quotient of two numbers of positive sign has positive sign)."""
    sign = 0 if type(value) is float else NOT_MINUS_ZERO  # an int or bool: no -0.0
    if symbol in _COMPARISONS:
        return POSITIVE_OR_ZERO
    if symbol == "+":
        return sign | (sa & sb & NOT_NEGATIVE) | ((sa | sb) & NOT_MINUS_ZERO)
    if symbol == "-":
        return sign | (sa & NOT_MINUS_ZERO)
    if symbol in ("*", "/", "//", "&", "|"):
        both = sa & sb
        return sign | (both if both == POSITIVE_OR_ZERO else both & NOT_NEGATIVE)
    if symbol == "%":  # the sign of the divisor
        return sign | (sb if sb == POSITIVE_OR_ZERO else 0)
    return sign


def _call_sign(fn_name: str, signs: list[int], value: Any) -> int:
    """The sign of a recorded call known from its arguments' (or declared by the rule
    called: :func:`never_negative`)."""
    sign = (0 if type(value) is float else NOT_MINUS_ZERO) | _SIGNS.get(fn_name, 0)
    if fn_name == "max":  # ``a`` unless ``b > a``: not below ``a`` where ``a`` is not below 0
        return sign | (signs[0] & signs[1]) | (signs[0] if signs[0] & NOT_NEGATIVE else 0)
    if fn_name == "min":  # one of its arguments
        return sign | (signs[0] & signs[1])
    if fn_name == "_select":
        return sign | (signs[1] & signs[2])
    if fn_name in ("_ceil", "_floor", "_trunc", "int", "float", "_pos"):
        return sign | signs[0]
    if fn_name == "abs":
        return POSITIVE_OR_ZERO
    return sign


def _identity(
    symbol: str, a: Any, av: Any, sa: int, b: Any, bv: Any, sb: int, value: Any
) -> bool:
    """Whether ``a symbol b`` (``value``) is its traced operand unchanged, whatever its
    value, of the same type: ``x * 1``, ``x / 1.0``, ``x - 0.0``; ``x + 0.0`` where ``x`` is
    never -0.0."""
    if type(a) is Traced and type(av) is type(value) and _number(b):  # x op constant
        if symbol in ("*", "/"):
            return bool(b == 1)
        if symbol == "+":
            return b == 0 and _adds_nothing(b, sa)
        return symbol == "-" and b == 0 and _adds_nothing(-b, sa)
    if type(b) is Traced and type(bv) is type(value) and _number(a):  # constant op x
        if symbol == "*":
            return bool(a == 1)
        return symbol == "+" and a == 0 and _adds_nothing(a, sb)
    return False


#: The rules called as one operation (:func:`opaque`, :func:`searching`) whose result is
#: never below zero, by their printed name: their result's sign.
_SIGNS: dict[str, int] = {}


def _printed_name(fn: Callable[..., Any]) -> str:
    """The name printed code calls a rule by (:func:`opaque`, :func:`searching`)."""
    return f"_{fn.__module__.replace('.', '_')}_{fn.__qualname__}"


def never_negative(fn: _F) -> _F:
    """Declares that a rule called as one operation (``@never_negative`` above
    ``@opaque`` or ``@searching``) returns +0.0, a positive number or NaN at every
    point, never a negative number or -0.0: a traced sum of its result and a zero is
    its result (:func:`_identity`)."""
    _SIGNS[_printed_name(fn)] = POSITIVE_OR_ZERO
    return fn


def _number(x: Any) -> bool:
    return type(x) is float or type(x) is int  # not a bool: True + x is an int


def _adds_nothing(zero: Any, sign: int) -> bool:
    """Whether ``x + zero`` is ``x`` (bits included): -0.0 always; +0.0 (or 0) where
    ``x`` is never -0.0."""
    minus_zero = type(zero) is float and math.copysign(1.0, zero) < 0
    return minus_zero or bool(sign & NOT_MINUS_ZERO)


def _call(fn_name: str, fn: Callable[..., Any], *args: Any) -> Any:
    values, codes = [], []
    used: tuple[str, ...] = ()
    for a in args:
        v, c, u = _operand(a)
        values.append(v)
        codes.append(c)
        used += u
    signs = [_sign_of(a) for a in args]
    bounds = [_bound_of(a) for a in args]
    if fn_name == "max" and _never_above(args[1], args[0], signs[0]):
        return args[0]  # max(x, 0.0) of an x never below zero: x
    recorder = _recorder()
    if fn_name == "_neg" and type(args[0]) is Traced and args[0].name in recorder.negated:
        return recorder.negated[args[0].name]  # -(-x): x, bit for bit
    inline = _INLINE.get(fn_name)
    code = f"{fn_name}({', '.join(codes)})" if inline is None else inline.format(*codes)
    value = fn(*values)
    sign, bound = _call_sign(fn_name, signs, value), _call_bound(fn_name, bounds)
    result = recorder.emit(code, used, value, sign, bound)
    if fn_name == "_neg" and type(args[0]) is Traced:
        recorder.negated[result.name] = args[0]
    return result


def _never_above(c: Any, x: Any, sign: int) -> bool:
    """Whether a constant ``c`` is never above a traced ``x`` (``c <= 0``, ``x`` never
    below zero): ``max(x, c)``, printed ``(c if c > x else x)``, is ``x``."""
    return type(x) is Traced and _number(c) and not c > 0 and bool(sign & NOT_NEGATIVE)


#: Calls printed as the expression they evaluate (no call: a third of the time), each
#: operand a name or a literal: ``min(a, b)`` is ``a`` unless ``b < a``, ``max(a, b)``
#: ``a`` unless ``b > a``, as the builtins decide.
_INLINE = {
    "min": "({1} if {1} < {0} else {0})",
    "max": "({1} if {1} > {0} else {0})",
    "_select": "({1} if {0} else {2})",
    "_neg": "(-{0})",
}


def _lost(self: Traced, *args: Any, **kwargs: Any) -> Any:
    raise Untraceable(f"traced value {self.v!r} ({self.name}) left its trace")


class Traced(float):
    """A number of one point whose operations are recorded (its float payload is NaN:
    ``v`` is its value at the traced point, ``name`` its variable in the trace)."""

    __slots__ = ("v", "name")
    v: Any
    name: str

    def __new__(cls, value: Any, name: str) -> Traced:
        self = float.__new__(cls, _NAN)
        self.v = value
        self.name = name
        return self

    def __repr__(self) -> str:
        return f"<traced {self.name}={self.v!r}>"

    __str__ = __repr__

    def __bool__(self) -> bool:
        outcome = bool(self.v)
        _recorder().guard(self.name, outcome)
        return outcome

    # arithmetic and comparisons: recorded
    def __add__(self, o: Any) -> Any:
        return _binary("+", operator.add, self, o)

    def __radd__(self, o: Any) -> Any:
        return _binary("+", operator.add, o, self)

    def __sub__(self, o: Any) -> Any:
        return _binary("-", operator.sub, self, o)

    def __rsub__(self, o: Any) -> Any:
        return _binary("-", operator.sub, o, self)

    def __mul__(self, o: Any) -> Any:
        return _binary("*", operator.mul, self, o)

    def __rmul__(self, o: Any) -> Any:
        return _binary("*", operator.mul, o, self)

    def __truediv__(self, o: Any) -> Any:
        return _binary("/", operator.truediv, self, o)

    def __rtruediv__(self, o: Any) -> Any:
        return _binary("/", operator.truediv, o, self)

    def __floordiv__(self, o: Any) -> Any:
        return _binary("//", operator.floordiv, self, o)

    def __rfloordiv__(self, o: Any) -> Any:
        return _binary("//", operator.floordiv, o, self)

    def __mod__(self, o: Any) -> Any:
        return _binary("%", operator.mod, self, o)

    def __rmod__(self, o: Any) -> Any:
        return _binary("%", operator.mod, o, self)

    def __pow__(self, o: Any) -> Any:  # type: ignore[override]
        return _binary("**", operator.pow, self, o)

    def __rpow__(self, o: Any) -> Any:  # type: ignore[override]
        return _binary("**", operator.pow, o, self)

    def __lt__(self, o: Any) -> Any:
        return _binary("<", operator.lt, self, o)

    def __le__(self, o: Any) -> Any:
        return _binary("<=", operator.le, self, o)

    def __gt__(self, o: Any) -> Any:
        return _binary(">", operator.gt, self, o)

    def __ge__(self, o: Any) -> Any:
        return _binary(">=", operator.ge, self, o)

    def __eq__(self, o: Any) -> Any:
        return _binary("==", operator.eq, self, o)

    def __ne__(self, o: Any) -> Any:
        return _binary("!=", operator.ne, self, o)

    def __and__(self, o: Any) -> Any:
        return _binary("&", operator.and_, self, o)

    def __rand__(self, o: Any) -> Any:
        return _binary("&", operator.and_, o, self)

    def __or__(self, o: Any) -> Any:
        return _binary("|", operator.or_, self, o)

    def __ror__(self, o: Any) -> Any:
        return _binary("|", operator.or_, o, self)

    def __neg__(self) -> Any:
        return _call("_neg", operator.neg, self)

    def __pos__(self) -> Any:
        return _call("_pos", operator.pos, self)

    def __abs__(self) -> Any:
        return _call("abs", abs, self)

    def __ceil__(self) -> Any:
        return _call("_ceil", math.ceil, self)

    def __floor__(self) -> Any:
        return _call("_floor", math.floor, self)

    def __trunc__(self) -> Any:
        return _call("_trunc", math.trunc, self)

    # what would leave the trace: refused
    __float__ = __int__ = __index__ = __hash__ = _lost
    __round__ = __format__ = __array__ = __array_ufunc__ = _lost
    __divmod__ = __rdivmod__ = __invert__ = is_integer = _lost
    as_integer_ratio = hex = conjugate = __getnewargs__ = _lost


def is_traced(*values: Any) -> bool:
    """Whether any value is a traced number."""
    for v in values:  # noqa: SIM110 - a loop: cheaper than any() of a generator
        if type(v) is Traced:
            return True
    return False


def value_of(x: Any) -> Any:
    """A traced number's value at the traced point (anything else as it is)."""
    return x.v if type(x) is Traced else x


def as_int(x: Any) -> Any:
    """``int(x)``, recorded for a traced number."""
    if type(x) is Traced:
        return _call("int", int, x)
    return int(x)


def as_float(x: Any) -> Any:
    """``float(x)``, recorded for a traced number (not where it is a float already)."""
    if type(x) is Traced:
        return x if type(x.v) is float else _call("float", float, x)
    return float(x)


def select(mask: Any, yes: Any, no: Any) -> Any:
    """``yes if mask else no``, both already computed: recorded as a selection where
    ``mask`` is traced (not a guard)."""
    if type(mask) is not Traced:
        return yes if mask else no
    return _call("_select", _select, mask, yes, no)


def _select(mask: Any, yes: Any, no: Any) -> Any:
    return yes if mask else no


#: What printed code runs with: the functions its operations call.
_NAMESPACE: dict[str, Any] = {
    "_nan": _NAN,
    "_inf": math.inf,
    "_ceil": math.ceil,
    "_floor": math.floor,
    "_trunc": math.trunc,
    "_neg": operator.neg,
    "_pos": operator.pos,
    "_select": _select,
}


def minimum(a: Any, b: Any) -> Any:
    """``min(a, b)``, recorded as one operation where either is traced."""
    if type(a) is Traced or type(b) is Traced:
        return _call("min", min, a, b)
    return min(a, b)


def maximum(a: Any, b: Any) -> Any:
    """``max(a, b)``, recorded as one operation where either is traced."""
    if type(a) is Traced or type(b) is Traced:
        return _call("max", max, a, b)
    return max(a, b)


def opaque(fn: _F) -> _F:
    """``fn`` (a module-level function of numbers, strings and None, returning a number)
    called as one operation of a trace where an argument is traced: the printed code
    calls it, so a rule that runs numpy on a point stays one definition."""
    name = _printed_name(fn)
    _NAMESPACE[name] = fn

    @functools.wraps(fn)
    def call(*args: Any) -> Any:
        if is_traced(*args):
            return _call(name, fn, *args)
        return fn(*args)

    return cast(_F, call)


class Miss(Exception):  # noqa: N818 - a signal, not an error
    """Printed code met a branch that its trace did not take inside a searched
    function (:func:`searching`): the point is evaluated as usual."""


def _miss_inside() -> None:
    raise Miss


_NAMESPACE["_miss"] = _miss_inside


def searching(fn: _F) -> _F:
    """``fn(a, b, at)``, a search that calls ``at(None, p, s)`` (numbers in, a number
    out) at the points it chooses, recorded as one operation where ``a`` or ``b`` is
    traced: ``at`` is traced once into a function of the printed code (straight-line,
    its branches checked: :class:`Miss` where one goes elsewhere) that ``fn`` itself
    calls, so the search stays one definition."""
    name = _printed_name(fn)
    _NAMESPACE[name] = fn

    @functools.wraps(fn)
    def call(a: Any, b: Any, at: Any) -> Any:
        if not is_traced(a, b):
            return fn(a, b, at)
        return _search(name, fn, a, b, at)

    return cast(_F, call)


def _search(name: str, fn: Callable[..., Any], a: Any, b: Any, at: Any) -> Any:
    global _RECORDER
    outer = _recorder()
    label = f"_f{outer.searches}"
    outer.searches += 1
    found: list[tuple[str, tuple[str, ...]]] = []
    printed: list[Callable[..., Any]] = []

    def traced(rows: Any, p: Any, s: Any) -> Any:
        global _RECORDER
        if printed:  # traced once: printed, run on the numbers (it checks its branches)
            try:
                return printed[0](rows, p, s)
            except Miss:
                raise Untraceable("a searched function branches elsewhere at another point")
        inner = _Recorder(prefix=f"u{outer.searches - 1}_")
        inner.signs = dict(outer.signs)  # the names it reads from the code around it
        inner.bounds = dict(outer.bounds)
        _RECORDER = inner
        try:
            result = at(rows, Traced(p, "_p"), Traced(s, "_s"))
        finally:
            _RECORDER = outer
        function = _function(label, inner, result)
        found[:] = [function]
        code, free = function
        namespace = {**_NAMESPACE, **outer.constants, **{n: outer.values[n] for n in free}}
        exec(compile(code, "<perfmodel.trace search>", "exec"), namespace)  # noqa: S102
        printed.append(namespace[label])
        return value_of(result)

    value = fn(value_of(a), value_of(b), traced)
    if not found:  # no call at this point: the function as it runs at s = 2
        traced(None, value_of(a), 2.0)
    code, free = found[0]
    outer.lines.append((label, code, free))
    av, ac, au = _operand(a)
    bv, bc, bu = _operand(b)
    sign = _SIGNS.get(name, 0) | (0 if type(value) is float else NOT_MINUS_ZERO)
    return outer.emit(f"{name}({ac}, {bc}, {label})", au + bu + (label,), value, sign)


def _function(label: str, inner: _Recorder, result: Any) -> tuple[str, tuple[str, ...]]:
    """The printed function of a searched call's trace, and the names it reads from the
    code around it."""
    value, code, _ = _operand(result)
    need = {code} if type(result) is Traced else set()
    guards = {at: (guard, outcome) for at, guard, outcome in inner.events}
    need.update(guard for guard, _ in guards.values())
    kept: list[str] = []
    own = {name for name, _, _ in inner.lines} | {"_p", "_s"}
    for i in range(len(inner.lines), -1, -1):
        if i in guards:
            guard, outcome = guards[i]
            kept.append(f"    if {'not ' if outcome else ''}{guard}: _miss()")
        if i == 0:
            break
        name, line, used = inner.lines[i - 1]
        if name in need:
            kept.append(f"    {name} = {line}")
            need.update(used)
    free = tuple(sorted(n for n in need if n not in own))
    body = "\n".join(reversed(kept))
    return f"def {label}(_rows, _p, _s):\n{body}\n    return {code}", free


def smallest(*args: Any, **kwargs: Any) -> Any:
    """The builtin ``min``, recorded as one operation where its arguments are traced."""
    return _extreme(min, "min", args, kwargs)


def largest(*args: Any, **kwargs: Any) -> Any:
    """The builtin ``max``, recorded as one operation where its arguments are traced."""
    return _extreme(max, "max", args, kwargs)


def _extreme(builtin: Any, name: str, args: Any, kwargs: Any) -> Any:
    items = list(args[0]) if len(args) == 1 else list(args)
    key = kwargs.get("key")
    keys = items if key is None else [key(x) for x in items]
    if not is_traced(*keys):
        return builtin(*args, **kwargs)
    if set(kwargs) - {"key"}:
        raise Untraceable(f"{name}() with {sorted(kwargs)}")
    # the builtin's order: the first item, then each later one that is strictly
    # smaller (larger): ``best = x if key(x) < key(best) else best``
    better = operator.lt if name == "min" else operator.gt
    best, best_key = items[0], keys[0]
    for x, k in zip(items[1:], keys[1:], strict=True):
        if key is None and (type(x) is Traced or type(best) is Traced):
            best = best_key = _call(name, builtin, best, x)
            continue
        wins = better(k, best_key)
        best = select(wins, x, best)
        best_key = select(wins, k, best_key)
    return best


class _Leaf:
    """Where a trace ended: its outputs (names or literals), or a fallback."""

    def __init__(self, outputs: tuple[str, ...] | None, index: int):
        self.outputs = outputs
        self.index = index


class _Node:
    """A stretch of straight-line code, then a guard (two children) or a leaf."""

    def __init__(self, lines: list[tuple[str, str, tuple[str, ...]]]):
        self.lines = lines
        self.guard: str | None = None
        self.children: dict[bool, _Node] = {}
        self.leaf: _Leaf | None = None


#: The modules whose calls of the builtin ``min`` and ``max`` a trace records as one
#: operation each (:func:`smallest`, :func:`largest`), not as a branch per comparison.
FOLLOWED = ("perfmodel.roofline", "perfmodel.evaluate", "perfmodel.launch")

#: Guards a trace may pass; more and it is not kept (the point is evaluated as usual).
MAX_GUARDS = 64


class Paths:
    """The traces of one discrete case, as a tree of guards, printed as one function of
    the inputs ``names`` returning ``(leaf, outputs)``: ``leaf`` the index of the trace
    whose outputs these are (:meth:`keys`), or None where no trace went (a miss), or
    ``-1`` where a trace went and could not be kept (the point is evaluated as usual)."""

    def __init__(
        self,
        names: Sequence[str],
        most: int = 256,
        constants: dict[str, Any] | None = None,
        positive: bool = False,
        limits: Sequence[float] | None = None,
    ):
        self.names = tuple(names)
        #: Whether every input is above zero wherever the function is called (its
        #: caller checks): then ``x + 0.0`` of a sum of them is ``x`` (:func:`_identity`).
        self.positive = positive
        #: Each input's largest magnitude wherever the function is called (its caller
        #: checks), None: not known; then ``x - x`` of a finite ``x`` is 0.0 (:func:`_always_zero`).
        self.limits = None if limits is None else tuple(limits)
        self.root: _Node | None = None
        self.leaves: list[Any] = []  # per leaf: what the caller keeps with it
        self.bodies: list[str | None] = []  # per leaf: its builder's code (add_result)
        self.most = most
        #: Objects printed code names (``_hw``...), the same in every process for a case.
        self.constants = dict(constants or {})
        self.fn: Callable[..., Any] = _miss
        self.code = ""

    def _named(self) -> dict[int, str]:
        return {id(value): name for name, value in self.constants.items()}

    def full(self) -> bool:
        return len(self.leaves) >= self.most

    def trace(self, fn: Callable[..., Any], values: Sequence[Any]) -> tuple[Any, Any]:
        """``fn(*inputs)`` on traced inputs (their values ``values``): its result (the
        traced numbers in it still traced), and the trace (for :meth:`add`); the trace
        is None where it stopped (:class:`Untraceable`), the result then None."""
        global _RECORDER, _BY_ID
        recorder = _Recorder()
        recorder.constants = self.constants
        recorder.values.update(zip(self.names, values, strict=True))
        if self.positive:
            recorder.signs.update(dict.fromkeys(self.names, POSITIVE_OR_ZERO))
        if self.limits is not None:
            recorder.bounds.update(zip(self.names, self.limits, strict=True))
        inputs = [Traced(v, name) for v, name in zip(values, self.names, strict=True)]
        previous, _RECORDER = _RECORDER, recorder
        named, _BY_ID = _BY_ID, self._named()
        modules = [sys.modules[m] for m in FOLLOWED if m in sys.modules]
        for module in modules:  # their min and max: recorded (the builtins otherwise)
            module.min, module.max = smallest, largest  # type: ignore[attr-defined]
        try:
            result = fn(*inputs)
            return result, recorder
        except (Untraceable, Exception) as stop:  # an error too: the engine raises it
            recorder.stopped = stop
            return None, recorder
        finally:
            _RECORDER, _BY_ID = previous, named
            for module in modules:
                del module.min, module.max

    def add_result(self, recorder: _Recorder, result: Any) -> int:
        """Add a trace whose result is ``result``, an object made of dicts, lists,
        tuples, objects of the types :func:`built_as` registers, traced numbers and
        constants: the printed function returns its traced numbers, and the leaf keeps
        a printed function that builds ``result``'s like from them (its ``build``)."""
        global _BY_ID
        names: list[str] = []
        named, _BY_ID = _BY_ID, self._named()
        try:
            body = _render(result, names)
        finally:
            _BY_ID = named
        index = self.add(recorder, [_Named(name) for name in names], self._builder(body))
        if index >= 0:
            self.bodies[index] = body
        return index

    def _builder(self, body: str) -> Callable[[Any], Any]:
        """The printed function that builds a result from its traced numbers (``v``)."""
        key = (body, tuple((name, id(value)) for name, value in self.constants.items()))
        build = _BUILT.get(key)
        if build is None:  # another shape of result: printed once
            code = f"def _build(v):\n    return {body}\n"
            namespace = {**_NAMESPACE, **self.constants}
            exec(compile(code, "<perfmodel.trace build>", "exec"), namespace)  # noqa: S102
            build = _BUILT[key] = namespace["_build"]
        return build

    def state(self) -> dict[str, Any] | None:
        """The traces as plain data (JSON) that :meth:`restore` reads back in another
        process; None where printed code reads a constant of this process only."""
        if self.root is None:
            return None
        leaves = self.bodies
        data = {"names": list(self.names), "root": _node_state(self.root), "leaves": leaves}
        text = repr(data)
        if re.search(r"\b_k\d", text):
            return None
        data["enums"] = {n: list(r) for n, r in _RECIPES.items() if n in text}
        return data

    def restore(self, data: dict[str, Any]) -> None:
        """The traces of :meth:`state`, printed (the enum members they read imported)."""
        for name, (module, qualname, member) in data["enums"].items():
            kind: Any = importlib.import_module(module)
            for part in qualname.split("."):
                kind = getattr(kind, part)
            _NAMESPACE[name] = getattr(kind, member)
        if list(data["names"]) != list(self.names):
            raise ValueError("traces of other inputs")
        self.root = _node_from(data["root"])
        self.bodies = list(data["leaves"])
        self.leaves = [None if b is None else self._builder(b) for b in self.bodies]
        self._print()

    def add(self, recorder: _Recorder, outputs: Sequence[Any] | None, keep: Any = None) -> int:
        """Add a trace ending in ``outputs`` (traced numbers or constants; None: it
        stopped, and points reaching where it stopped are evaluated as usual) and print
        the function again. Returns the leaf's index (-1 for a stop)."""
        events, lines = recorder.events, recorder.lines
        if len(events) > MAX_GUARDS:  # too many branches: a stop at the last one kept
            lines = lines[: events[MAX_GUARDS][0]]
            events, outputs = events[:MAX_GUARDS], None
        rendered = None if outputs is None else tuple(_operand(o)[1] for o in outputs)
        index = -1 if rendered is None else len(self.leaves)
        leaf = _Leaf(rendered, index)
        if rendered is not None:
            self.leaves.append(keep)
            self.bodies.append(None)
        segments: list[tuple[list[Any], str, bool]] = []
        start = 0
        for at, guard, outcome in events:
            segments.append((lines[start:at], guard, outcome))
            start = at
        tail = lines[start:]
        if self.root is None:
            self.root = _Node(segments[0][0] if segments else tail)
        node = self.root
        for i, (stretch, guard, outcome) in enumerate(segments):
            if node.lines != stretch or node.leaf is not None:
                raise AssertionError("a trace differs from another before their guards do")
            if node.guard is None:
                node.guard = guard
            elif node.guard != guard:
                raise AssertionError("two traces of one case guard on different values")
            nxt = segments[i + 1][0] if i + 1 < len(segments) else tail
            child = node.children.get(outcome)
            if child is None:
                child = node.children[outcome] = _Node(nxt)
            node = child
        if node.lines != tail or node.guard is not None:
            raise AssertionError("a trace ends where another goes on")
        node.leaf = leaf
        self._print()
        return index

    def _print(self) -> None:
        assert self.root is not None
        out = [f"def _point({', '.join(self.names)}):"]
        _emit(self.root, out, 1, {})
        self.code = "\n".join(out) + "\n"
        namespace = {**_NAMESPACE, **self.constants}
        exec(compile(self.code, "<perfmodel.trace>", "exec"), namespace)  # noqa: S102
        self.fn = namespace["_point"]


def _node_state(node: _Node) -> dict[str, Any]:
    leaf = node.leaf
    return {
        "lines": [[name, code, list(used)] for name, code, used in node.lines],
        "guard": node.guard,
        "children": {str(int(k)): _node_state(c) for k, c in node.children.items()},
        "leaf": None if leaf is None else [leaf.outputs, leaf.index],
    }


def _node_from(data: dict[str, Any]) -> _Node:
    node = _Node([(name, code, tuple(used)) for name, code, used in data["lines"]])
    node.guard = data["guard"]
    node.children = {bool(int(k)): _node_from(c) for k, c in data["children"].items()}
    if data["leaf"] is not None:
        outputs, index = data["leaf"]
        node.leaf = _Leaf(None if outputs is None else tuple(outputs), index)
    return node


def _miss(*args: Any) -> None:
    return None


class _Named:
    """A traced value by its name alone (a result's traced numbers, :meth:`Paths.add_result`)."""

    def __init__(self, name: str):
        self.name = name


#: The builders printed so far, by their code and the constants they name.
_BUILT: dict[Any, Callable[[Any], Any]] = {}
#: How printed code builds an object of each registered type from its fields (a dict).
_BUILDERS: dict[type, str] = {}


def built_as(kind: type, build: Callable[[dict[str, Any]], Any]) -> None:
    """Register how a result of type ``kind`` is rebuilt by printed code: ``build`` of
    a dict of its fields (its ``__dict__``, every field given)."""
    name = f"_b{len(_BUILDERS)}"
    _BUILDERS[kind] = name
    _NAMESPACE[name] = build


def _render(obj: Any, names: list[str]) -> str:
    """Python source that builds ``obj`` again, its traced numbers read from ``v``."""
    kind = type(obj)
    if kind is Traced:
        if obj.name not in names:
            names.append(obj.name)
        return f"v[{names.index(obj.name)}]"
    if kind is dict:
        items = (f"{_render(k, names)}: {_render(x, names)}" for k, x in obj.items())
        return "{" + ", ".join(items) + "}"
    if kind is list:
        return "[" + ", ".join(_render(x, names) for x in obj) + "]"
    if kind is tuple:
        return "(" + "".join(_render(x, names) + ", " for x in obj) + ")"
    builder = _BUILDERS.get(kind)
    if builder is not None:
        return f"{builder}({_render(dict(vars(obj)), names)})"
    return _literal(obj)


def flat(obj: Any) -> list[Any]:
    """The numbers and labels of a result, in :func:`_render`'s order, traced ones as
    their values: two results built alike compare item by item."""
    kind = type(obj)
    if kind is dict:
        return [y for k, x in obj.items() for y in (*flat(k), *flat(x))]
    if kind in (list, tuple):
        return [y for x in obj for y in flat(x)]
    if kind in _BUILDERS:
        return flat(dict(vars(obj)))
    value = value_of(obj)
    return [(type(value).__name__, value)]




def _needs(node: _Node, memo: dict[int, set[str]]) -> set[str]:
    """The names a node's code and everything after it read (for dead-code removal),
    each node's once (``memo``)."""
    found = memo.get(id(node))
    if found is not None:
        return found
    need = _after(node, memo)
    for name, _, used in reversed(node.lines):
        if name in need:
            need.discard(name)
            need.update(used)
    memo[id(node)] = need
    return need


def _after(node: _Node, memo: dict[int, set[str]]) -> set[str]:
    """The names read after a node's own lines: its guard, its children, its leaf."""
    need: set[str] = set()
    if node.leaf is not None and node.leaf.outputs is not None:
        need.update(node.leaf.outputs)
    for child in node.children.values():
        need |= _needs(child, memo)
    if node.guard is not None:
        need.add(node.guard)
    return need


def _emit(node: _Node, out: list[str], depth: int, memo: dict[int, set[str]]) -> None:
    pad = "    " * depth
    later = _after(node, memo)
    live: list[tuple[str, str]] = []
    for name, code, used in reversed(node.lines):
        if name in later:
            live.append((name, code))
            later.update(used)
    for name, code in reversed(live):
        if code.startswith("def "):  # a searched call's function (:func:`searching`)
            out.extend(pad + line for line in code.splitlines())
        else:
            out.append(f"{pad}{name} = {code}")
    if node.leaf is not None:
        if node.leaf.outputs is None:
            out.append(f"{pad}return -1, None")
        else:
            out.append(f"{pad}return {node.leaf.index}, ({', '.join(node.leaf.outputs)},)")
        return
    assert node.guard is not None
    out.append(f"{pad}if {node.guard}:")
    for outcome in (True, False):
        if not outcome:
            out.append(f"{pad}else:")
        child = node.children.get(outcome)
        if child is None:
            out.append(f"{pad}    return None")
        else:
            _emit(child, out, depth + 1, memo)
