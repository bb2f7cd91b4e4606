"""Frameworks a kernel is called from, as data: the host's latency of one synchronous call.

``time_s`` is device time; what a user's script sees for one call that waits for its
result adds the framework's dispatch and synchronisation (``call_latency_s``). Only a
framework with a measured figure gives one; the others give none.

>>> call_latency_of("jax") > 0, call_latency_of("pytorch") != call_latency_of("pytorch")
(True, True)
"""

from __future__ import annotations

import functools

from pydantic import BaseModel, ConfigDict, model_validator

from perfmodel.catalog import registry as _registry
from perfmodel.catalog.fields import Latency


class Framework(BaseModel):
    """One framework: its measured call latency (None where nobody measured it)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    aliases: tuple[str, ...] = ()
    description: str = ""
    call_latency_s: Latency | None = None
    sources: dict[str, str]

    @model_validator(mode="after")
    def _sourced(self) -> Framework:
        if "call_latency_s" not in self.sources:
            raise ValueError(f"framework {self.name!r}: sources.call_latency_s is missing")
        return self


@functools.cache
def registry() -> dict[str, Framework]:
    return _registry.build("frameworks", Framework, "framework")


def load_framework(name: str) -> Framework:
    return _registry.lookup(name, registry(), Framework, "framework")


def call_latency_of(name: str) -> float:
    """Seconds of one synchronous call from ``name``; NaN where it was never measured."""
    latency = load_framework(name).call_latency_s
    return float("nan") if latency is None else latency
