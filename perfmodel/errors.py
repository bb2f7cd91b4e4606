"""The one exception family perfmodel raises for bad input (the CLI prints its message),
and how a message spells an argument: as the API takes it (``kernel='fa2'``) or, while
the command line runs (:func:`cli_spelling`), as the option was typed (``--kernel fa2``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

#: The running command's options by API name (``kv_len`` -> ``--kv-len``); None: the API.
_OPTIONS: ContextVar[Mapping[str, str] | None] = ContextVar("perfmodel_options", default=None)


class PerfmodelError(ValueError):
    """Bad input to perfmodel: a shape, a device, a dtype or a data file."""


def spell(name: str, value: Any, shown: str | None = None) -> str:
    """``name`` given ``value`` as the caller wrote it: ``kernel='fa2'`` from Python, and
    ``--kernel fa2`` under :func:`cli_spelling` where the command has that option
    (``--kernel`` alone where the value is None: not given). ``shown``: the API form of
    the value (default ``repr``).

    >>> spell("kernel", "fa2")
    "kernel='fa2'"
    >>> with cli_spelling({"kernel": "--kernel"}):
    ...     spell("kernel", "fa2"), spell("kernel", None)
    ('--kernel fa2', '--kernel (not given)')
    """
    option = (_OPTIONS.get() or {}).get(name)
    if option is None:
        return f"{name}={repr(value) if shown is None else shown}"
    return f"{option} {'(not given)' if value is None else value}"


def named(name: str) -> str:
    """How a message names an argument without a value: ``naive=`` (the API) or
    ``--naive`` (under :func:`cli_spelling`, where the command has it)."""
    option = (_OPTIONS.get() or {}).get(name)
    return f"{name}=" if option is None else option


@contextmanager
def cli_spelling(options: Mapping[str, str]) -> Iterator[None]:
    """Messages raised inside name the arguments as these options (API name -> option)."""
    token = _OPTIONS.set(options)
    try:
        yield
    finally:
        _OPTIONS.reset(token)
