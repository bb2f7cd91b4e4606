"""Data files as validated models: one TOML file per entry, looked up by name or alias.

Devices, model configurations and workloads all ship this way (``specs/<kind>/*.toml``);
this module reads them, builds the exact-name/alias table, and says clearly what is wrong
with a file or a name.
"""

from __future__ import annotations

import difflib
import os
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from perfmodel.catalog.data import data_dir
from perfmodel.errors import PerfmodelError

M = TypeVar("M", bound=BaseModel)
#: Measured-ceiling files that sit beside the device specs (``perfmodel.catalog.ceilings``):
#: ``specs/devices/<device>.ceilings.toml``; not entries of the device table.
CEILINGS_SUFFIX = ".ceilings.toml"

#: The command that lists each kind of entry, named when a name is unknown.
LISTING = {"hardware": "perfmodel hw list", "kernel family": "perfmodel kernels list"}

#: Largest data file read (bytes): a spec is a few kB, the largest measurement file 0.2 MB.
MAX_FILE_BYTES = 64 * 2**20
#: Deepest nesting of tables and lists a data file may have (the schemas use four).
MAX_DEPTH = 32


def read_text(path: str | os.PathLike[str], what: str) -> str:
    """A data file's text; every failure names the path and says what is wrong."""
    shown = repr(str(path))
    try:
        size = Path(path).stat().st_size
        if size > MAX_FILE_BYTES:
            raise PerfmodelError(
                f"{what} file {shown} is {size:,} bytes, above the {MAX_FILE_BYTES:,} a data "
                "file may have"
            )
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PerfmodelError(f"{what} file {shown} does not exist") from None
    except IsADirectoryError:
        raise PerfmodelError(f"{what} file {shown} is a folder, not a file") from None
    except UnicodeDecodeError as e:
        raise PerfmodelError(
            f"{what} file {shown} is not UTF-8 text (byte {e.object[e.start]:#04x} at "
            f"offset {e.start})"
        ) from None
    except OSError as e:
        raise PerfmodelError(f"cannot read {what} file {shown}: {e.strerror or e}") from None


def parse(
    text: str, path: str | os.PathLike[str], what: str, loads: Callable[[str], Any] = tomllib.loads
) -> Any:
    """``loads(text)`` (TOML by default, or a JSON reader), nested at most MAX_DEPTH deep;
    a syntax error names the file, on one line."""
    shown = repr(str(path))
    kind = "TOML" if loads is tomllib.loads else "JSON"
    try:
        data = loads(text)
    except RecursionError:
        data = None
    except ValueError as e:  # a syntax error (tomllib's and json's are ValueErrors)
        message = str(e).replace("\n", " ")
        raise PerfmodelError(f"{what} file {shown} is not valid {kind}: {message}") from None
    if data is None or _depth(data) > MAX_DEPTH:
        raise PerfmodelError(f"{what} file {shown} is nested deeper than {MAX_DEPTH} levels")
    return data


def _depth(data: Any) -> int:
    """How deep lists and tables nest in ``data`` (without recursion)."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            if level > MAX_DEPTH:
                break
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, level + 1) for child in children)
    return deepest


def parse_model(model: type[M], data: Any, path: str | os.PathLike[str], what: str) -> M:
    """``model.model_validate(data)``; a wrong schema names the first bad field, on one line."""
    try:
        return model.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        got = repr(first.get("input")).replace("\n", " ")
        got = got if len(got) <= 40 else got[:37] + "..."
        shown = "" if first["type"] == "missing" else f" (got {got})"
        more = e.error_count() - 1
        message = first["msg"].removeprefix("Value error, ")
        raise PerfmodelError(
            f"{what} file {str(path)!r} is invalid: {where}: {message}{shown}"
            + (f"; {more} more error(s)" if more else "")
        ) from None


def read_toml(path: Path, model: type[M], what: str) -> M:
    """One file validated as ``model``; errors name the file and the first bad field."""
    return parse_model(model, parse(read_text(path, what), path, what), path, what)


def build(kind: str, model: type[M], what: str) -> dict[str, M]:
    """Every shipped entry of ``specs/<kind>``, keyed by lower-cased name and each alias."""
    table: dict[str, M] = {}
    for path in sorted(data_dir(kind).glob("*.toml")):
        if path.name.endswith(CEILINGS_SUFFIX):
            continue
        entry: Any = read_toml(path, model, what)
        for key in (entry.name, *entry.aliases):
            key = key.lower()
            if key in table and table[key] is not entry:
                raise PerfmodelError(f"{key!r} names both {table[key].name!r} and {entry.name!r}")  # type: ignore[attr-defined]
            table[key] = entry
    return table


def names(table: dict[str, Any]) -> list[str]:
    """Canonical names in a table built by :func:`build`."""
    return sorted({entry.name for entry in table.values()})


def lookup(value: str | Path, table: dict[str, M], model: type[M], what: str) -> M:
    """By exact name or alias (case-insensitive), or a path to a TOML file."""
    if not isinstance(value, str | os.PathLike) or not str(value).strip():
        raise PerfmodelError(f"{what}={value!r} must be a name or a path to a .toml file")
    text = str(value)
    entry = table.get(text.lower())
    if entry is not None:
        return entry
    if text.endswith(".toml") or Path(text).is_file():
        if not Path(text).is_file():
            raise PerfmodelError(f"{what} file {text!r} does not exist")
        return read_toml(Path(text), model, what)
    known = names(table)
    close = difflib.get_close_matches(text.lower(), list(table), n=3, cutoff=0.6)
    close = list(dict.fromkeys(table[k].name for k in close))  # type: ignore[attr-defined]
    listing = LISTING.get(what)
    raise PerfmodelError(
        f"unknown {what} {text!r}"
        + (f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else "")
        + f"; known: {', '.join(known)}"
        + (f" ({listing} shows them with their aliases)" if listing else "")
        + ", or give a path to a .toml file"
    )
