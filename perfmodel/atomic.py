"""Atomic file writes (standard library only, so the GPU benchmarks can use it too).

A file is written to a temporary name in its own folder, flushed to disk, then moved
over the old one with ``os.replace``: a crash or a full disk leaves the earlier file as
it was, never half-written.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO


def write_text(path: str | Path, text: str) -> None:
    """Replace ``path`` with ``text``, atomically."""
    write_with(path, lambda f: f.write(text.encode()))


def write_with(path: str | Path, write: Callable[[BinaryIO], Any]) -> None:
    """Replace ``path`` with what ``write(f)`` puts in the binary file ``f``, atomically
    (``write_with(path, lambda f: fig.savefig(f, format="png"))`` for a figure)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # as open() would create it, not mkstemp's 0600
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_figure(fig: Any, path: str | Path, **savefig: Any) -> None:
    """A matplotlib figure to ``path``, atomically, in the format its suffix names."""
    fmt = Path(path).suffix.lstrip(".").lower() or None
    write_with(path, lambda f: fig.savefig(f, format=fmt, **savefig))


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_json(path: str | Path, data: Any) -> None:
    """Replace ``path`` with ``data`` as indented JSON, atomically."""
    write_text(path, json.dumps(data, indent=1) + "\n")
