"""What every public entry point accepts: one declaration per parameter, one error type.

The Python API and each CLI command check their arguments here, once, at the boundary:

>>> check(n=4096, causal=False)
{'n': 4096, 'causal': False}
>>> check(n=0)
Traceback (most recent call last):
...
perfmodel.errors.PerfmodelError: n=0 must be a positive integer (query length)
>>> check(causal="False")
Traceback (most recent call last):
...
perfmodel.errors.PerfmodelError: causal='False' must be True or False

A new parameter is one line in :data:`PARAMETERS`. Every failure is a
:class:`~perfmodel.errors.PerfmodelError` (a ``ValueError``) whose one-line message names
the argument, the value and what it accepts; sizes above a stated limit are refused, so
that a result is never ``inf`` or ``nan``. :func:`output_folder` checks that a folder can
be written *before* any long work; :func:`require` says which extra to install. (Data
files are read by :mod:`perfmodel.catalog.registry`.)
"""

from __future__ import annotations

import functools
import math
import numbers
import os
import tempfile
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np

from perfmodel.errors import PerfmodelError, spell
from perfmodel.vocabulary import BYTES_PER_ELEMENT, Algorithm, NaiveCompile

# --- limits: beyond them a count would be unphysical or overflow a float ------------------
#: Tokens per sequence (n, kv_len): 2^32, past any context length in use.
MAX_TOKENS = 2**32
#: Sequences in a batch.
MAX_BATCH = 2**32
#: Heads, and the head dimension.
MAX_HEADS = 2**16
MAX_HEAD_DIM = 2**16
#: Tile sides (block_q, block_k): larger than any SRAM holds.
MAX_TILE = 2**16
#: Largest n of ``perfmodel report``: its crossover scan evaluates every n up to it.
MAX_REPORT_N = 2**20


def _show(value: Any) -> str:
    """The value as the message shows it: one line, at most 60 characters."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, int) and abs(value) > 10**15:
        return f"{'-' if value < 0 else ''}{str(abs(value))[0]}e{len(str(abs(value))) - 1}"
    text = repr(value).replace("\n", " ")
    return text if len(text) <= 60 else text[:57] + "..."


def fail(name: str, value: Any, must: str) -> PerfmodelError:
    """The error for ``name=value``: ``n=0 must be a positive integer`` (``--n 0 ...`` from
    the command line: ``errors.spell``)."""
    return PerfmodelError(f"{spell(name, value, _show(value))} {must}")


# --- parameter kinds ----------------------------------------------------------------------
@dataclass(frozen=True)
class Param:
    """A parameter kind: ``scalar`` checks one value, ``column`` a list or array of them."""

    what: str = ""  #: what the value is, shown in the message
    optional: bool = False  #: None is accepted (and kept)

    def scalar(self, name: str, value: Any) -> Any:
        if value is None and self.optional:
            return None
        return self._one(name, value)

    def column(self, name: str, value: Any) -> np.ndarray:
        """A 1-D array of checked values (a scalar is one value); empty lists are refused."""
        try:
            scalar = isinstance(value, str | bytes) or value is None or np.ndim(value) == 0
            arr = np.asarray([value] if scalar else value)
        except (TypeError, ValueError):
            raise fail(name, value, f"must be a flat list of values{self._about()}") from None
        if arr.ndim != 1 or arr.size == 0:
            raise fail(name, value, f"must be a non-empty flat list{self._about()}")
        return self._many(name, arr)

    def _about(self) -> str:
        return f" ({self.what})" if self.what else ""

    def _one(self, name: str, value: Any) -> Any:
        raise NotImplementedError

    def _many(self, name: str, arr: np.ndarray) -> np.ndarray:
        out = [self.scalar(name, v.item() if isinstance(v, np.generic) else v) for v in arr]
        return np.asarray(out, dtype=object if self.optional else None)


@dataclass(frozen=True)
class PositiveInt(Param):
    """An integer from 1 to ``limit`` (not a bool; an integral float is taken as its int)."""

    limit: int = MAX_TOKENS
    power_of_two: bool = False

    def scalar(self, name: str, value: Any) -> Any:
        if type(value) is int and 0 < value <= self.limit and not self.power_of_two:
            return value  # a plain int in range: as _one takes it, without its calls
        return super().scalar(name, value)

    def _must(self) -> str:
        kind = "a power of two" if self.power_of_two else "a positive integer"
        return f"must be {kind}{self._about()}"

    def _one(self, name: str, value: Any) -> int:
        number = value if type(value) is int else self._integral(name, value)
        if number <= 0 or (self.power_of_two and number & (number - 1)):
            raise fail(name, value, self._must())
        if number > self.limit:
            raise fail(name, value, f"exceeds the limit {self.limit:,}{self._about()}")
        return number

    def _integral(self, name: str, value: Any) -> int:
        """A value that is not a plain int as one: a whole float or numpy number."""
        if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
            raise fail(name, value, self._must())
        if isinstance(value, float | np.floating) and not (
            math.isfinite(value) and float(value).is_integer()
        ):
            raise fail(name, value, self._must())
        return int(cast(float, value))  # a real number, integral: int() takes it

    def _many(self, name: str, arr: np.ndarray) -> np.ndarray:
        if arr.dtype == object and self.optional and any(v is None for v in arr.flat):
            return super()._many(name, arr)
        if arr.dtype.kind not in "iuf":  # text, booleans, None, huge ints: one by one
            return np.asarray([self._one(name, v) for v in arr.tolist()], dtype=np.int64)
        if arr.dtype.kind == "f":  # whole, finite numbers only; then as integers
            bad = ~np.isfinite(arr) | (arr != np.floor(arr)) | (arr <= 0)
            if np.any(bad):
                raise fail(name, arr[bad][0].item(), self._must())
            if np.any(arr > self.limit):
                big = arr[arr > self.limit][0].item()
                raise fail(name, big, f"exceeds the limit {self.limit:,}{self._about()}")
            arr = arr.astype(np.int64)
        bad = arr <= 0
        if self.power_of_two:
            bad |= (arr & (arr - 1)) != 0
        if np.any(bad):
            raise fail(name, arr[bad][0].item(), self._must())
        if np.any(arr > self.limit):
            big = arr[arr > self.limit][0].item()
            raise fail(name, big, f"exceeds the limit {self.limit:,}{self._about()}")
        return arr


@dataclass(frozen=True)
class Flag(Param):
    """True or False, and nothing else: not 1, not "False"."""

    def _one(self, name: str, value: Any) -> bool:
        if not isinstance(value, bool | np.bool_):
            raise fail(name, value, "must be True or False")
        return bool(value)

    def _many(self, name: str, arr: np.ndarray) -> np.ndarray:
        if arr.dtype != bool:
            return np.asarray([self._one(name, v) for v in arr.tolist()], dtype=bool)
        return arr


@dataclass(frozen=True)
class Real(Param):
    """A finite number in [low, high] (bounds optional; ``open_low`` excludes ``low``)."""

    low: float | None = None
    high: float | None = None
    open_low: bool = False

    def _must(self) -> str:
        if self.low is not None and self.high is not None:
            lo = "(" if self.open_low else "["
            return f"must be a number in {lo}{self.low:g}, {self.high:g}]{self._about()}"
        if self.low is not None:
            return f"must be a number {'above' if self.open_low else 'at least'} {self.low:g}" + (
                self._about()
            )
        return f"must be a finite number{self._about()}"

    def _one(self, name: str, value: Any) -> float:
        if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
            raise fail(name, value, self._must())
        x = float(value)
        low_ok = self.low is None or (x > self.low if self.open_low else x >= self.low)
        if not math.isfinite(x) or not low_ok or (self.high is not None and x > self.high):
            raise fail(name, value, self._must())
        return x


@dataclass(frozen=True)
class Choice(Param):
    """One of a closed set of names (exact spelling)."""

    known: Collection[str] | Callable[[], Collection[str]] = ()

    def names(self) -> list[str]:
        known = self.known() if callable(self.known) else self.known
        return sorted(str(k) for k in known)

    @functools.cached_property
    def _known_once(self) -> frozenset[str]:
        """The names, read on first use (``known``'s functions return fixed tuples)."""
        return frozenset(self.names())

    def _one(self, name: str, value: Any) -> str:
        if isinstance(value, str) and value in self._known_once:
            return value
        names = self.names()
        if not isinstance(value, str) or value not in names:
            raise fail(name, value, f"is not one of {', '.join(names)}")
        return value

    def _many(self, name: str, arr: np.ndarray) -> np.ndarray:
        values = arr.tolist()
        for v in dict.fromkeys(values if arr.dtype == object else map(str, values)):
            self._one(name, v)
        return arr.astype(str)


def _modes() -> Collection[str]:
    from perfmodel.costs import MODES

    return MODES


def _ceilings() -> Collection[str]:
    from perfmodel.catalog.calibration import CEILINGS

    return CEILINGS


def _schemes() -> Collection[str]:
    from perfmodel.vocabulary import SCHEMES

    return SCHEMES


#: Every parameter of the public API, by name: one line each.
PARAMETERS: dict[str, Param] = {
    "n": PositiveInt("query length", limit=MAX_TOKENS),
    "kv_len": PositiveInt("key length", optional=True, limit=MAX_TOKENS),
    "d": PositiveInt("head dimension", limit=MAX_HEAD_DIM),
    "h": PositiveInt("query heads", limit=MAX_HEADS),
    "h_kv": PositiveInt("key/value heads", optional=True, limit=MAX_HEADS),
    "batch": PositiveInt("sequences", limit=MAX_BATCH),
    # None: the kernel family's tile; multiples of the instruction shape are checked
    # with the family (perfmodel.launch), fitting on chip against the device
    "block_q": PositiveInt("tile rows B_r", optional=True, limit=MAX_TILE),
    "block_k": PositiveInt("tile columns B_c", optional=True, limit=MAX_TILE),
    "q_len": PositiveInt("query rows per decode step", limit=MAX_TOKENS),
    "splits": PositiveInt("KV chunks per sequence", limit=MAX_TOKENS),
    # None: the kernel family's warps for the tile (perfmodel.launch)
    "warps": PositiveInt("warps per thread block", optional=True, limit=64),
    "page_tokens": PositiveInt("tokens per KV page", optional=True, limit=MAX_TOKENS),
    "tokens": PositiveInt("tokens", optional=True, limit=MAX_TOKENS * MAX_BATCH),
    "max_len": PositiveInt("longest sequence, tokens", limit=MAX_TOKENS),
    "causal": Flag(),
    "grid": Flag(),
    "attention_only": Flag(),
    "dtype": Choice(known=BYTES_PER_ELEMENT),
    "naive": Choice(known=[str(c) for c in NaiveCompile]),
    "algorithm": Choice(known=[str(a) for a in Algorithm]),
    "mode": Choice(known=_modes),
    "ceilings": Choice(known=_ceilings),
    "cp": PositiveInt("context-parallel devices", limit=MAX_HEADS),
    "tp": PositiveInt("tensor-parallel devices", limit=MAX_HEADS),
    "cp_scheme": Choice(known=_schemes),
    "time_s": Real("a measured time, seconds", low=0, open_low=True, high=1e6),
    "hbm_util": Real("fraction of peak", low=0, high=1),
    "sm_util": Real("fraction of peak", low=0, high=1),
    "hbm_bytes_per_s": Real("bytes/s", optional=True, low=0, open_low=True, high=1e18),
    "matmul_flops_per_s": Real("FLOP/s", optional=True, low=0, open_low=True, high=1e21),
    "memory_fraction": Real("fraction of HBM", low=0, open_low=True, high=1),
    "max_bytes": PositiveInt("bytes a sweep's result may take", limit=2**62),
    "threshold": Real("a speedup", low=1, open_low=True, high=1e6),
}


def check(**values: Any) -> dict[str, Any]:
    """Each value checked as its parameter in :data:`PARAMETERS` declares; returns them."""
    return {k: PARAMETERS[k].scalar(k, v) for k, v in values.items()}


def check_columns(**values: Any) -> dict[str, np.ndarray]:
    """Each value checked as a non-empty 1-D column (``sweep``'s arguments)."""
    return {k: PARAMETERS[k].column(k, v) for k, v in values.items()}


# --- folders and optional packages ---------------------------------------------------
def output_folder(path: str | os.PathLike[str], name: str = "out") -> Path:
    """A folder that can be created (or written into), checked before any work; not created.

    Refused: an existing file, a path under a file, a folder where a file cannot be
    created (tried: a temporary file made and removed, since permission bits do not
    tell for ``/sys`` or ``/proc``), and an empty name (not read as the current folder).
    """
    if not os.fspath(path).strip():
        raise fail(name, os.fspath(path), "is empty; give a folder")
    return _writable_folder(Path(path), name, os.fspath(path))


def output_file(
    path: str | os.PathLike[str], name: str = "out", suffixes: Collection[str] = ()
) -> Path:
    """A file that can be written (its folder checked as :func:`output_folder`), checked
    before any work: not a folder, not a name ending in ``/``, one of ``suffixes`` if given."""
    text = os.fspath(path)
    if not text.strip() or text.endswith(("/", os.sep)) or Path(text).is_dir():
        raise fail(name, text, "names a folder; give a file name")
    out = Path(text)
    if suffixes and out.suffix.lower().lstrip(".") not in suffixes:
        raise fail(name, text, f"must end in one of {', '.join('.' + s for s in sorted(suffixes))}")
    _writable_folder(out.parent, name, text)
    return out


def _writable_folder(out: Path, name: str, shown: str) -> Path:
    if out.exists() and not out.is_dir():
        raise fail(name, shown, f"cannot be written: {str(out)!r} is a file, not a folder")
    parent = out
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise fail(name, shown, f"cannot be created: {str(parent)!r} is a file")
    try:
        fd, tmp = tempfile.mkstemp(prefix=".perfmodel-write-test-", dir=parent)
    except OSError as e:
        why = e.strerror or type(e).__name__
        raise fail(name, shown, f"cannot be written: {str(parent)!r}: {why}") from None
    os.close(fd)
    os.unlink(tmp)
    return out


def require(module: str, extra: str, feature: str) -> None:
    """Import ``module`` or say which extra to install: ``pip install 'perfmodel[plot]'``."""
    import importlib

    try:
        importlib.import_module(module)
    except ImportError:
        raise PerfmodelError(
            f"{feature} needs {module}, which is not installed: pip install 'perfmodel[{extra}]'"
        ) from None
