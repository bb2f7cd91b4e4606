"""The guard every contract case runs under: a wall-clock limit and a memory limit.

``guarded(fn)`` calls ``fn()`` with ``RLIMIT_AS`` lowered to what the process already
maps plus :data:`MEMORY_HEADROOM` (so a missing size guard raises ``MemoryError``
instead of taking the machine) and a ``SIGALRM`` after :data:`TIME_LIMIT_S` (so a missing
early refusal fails instead of hanging). Both are restored afterwards; the process keeps
its own limits outside a case.
"""

from __future__ import annotations

import contextlib
import resource
import signal
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

#: Seconds one case may run: a bad input is refused before any long work.
TIME_LIMIT_S = 20
#: Address space one case may add to what the process maps already (bytes).
MEMORY_HEADROOM = 2 * 2**30


class TooSlow(Exception):
    """A case ran past the time limit."""


def _mapped_bytes() -> int:
    """The process's virtual size now (``VmSize``)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize in /proc/self/status")


@contextlib.contextmanager
def limits(time_s: float = TIME_LIMIT_S, headroom: int = MEMORY_HEADROOM) -> Iterator[None]:
    """Inside: at most ``time_s`` seconds and ``headroom`` more bytes of address space."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = _mapped_bytes() + headroom
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)

    def alarm(signum: int, frame: Any) -> None:
        raise TooSlow(f"still running after {time_s} s")

    old = signal.signal(signal.SIGALRM, alarm)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    signal.setitimer(signal.ITIMER_REAL, time_s)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        signal.signal(signal.SIGALRM, old)


def guarded(fn: Callable[[], T], time_s: float = TIME_LIMIT_S) -> T:
    """``fn()`` under :func:`limits`."""
    with limits(time_s):
        return fn()
