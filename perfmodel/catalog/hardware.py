"""Hardware specs: a frozen pydantic model, loaded from the TOML files under ``specs/devices``.

Every number carries a source: a spec file must name one under ``[sources]`` for each
figure it gives (``peak_flops_per_s`` may be sourced as a whole or per dtype).
Units are in the field names and are SI (bytes, seconds, FLOP/s).

>>> spec = load_hardware("h100")
>>> spec.name
'H100 SXM'
>>> spec.ridge_point("bf16") > 100
True
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    NonNegativeFloat,
    PositiveFloat,
    PositiveInt,
    model_validator,
)

from perfmodel.catalog import registry as _registry
from perfmodel.errors import PerfmodelError

DType = Literal["fp32", "tf32", "fp16", "bf16", "fp8"]

#: Bytes per element of each dtype (tf32 is stored as fp32).
BYTES_PER_ELEMENT: dict[str, int] = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1}

# Fields that are labels, not figures: they need no source.
_UNSOURCED = {"name", "aliases", "vendor", "kind", "sources", "notes"}


class PeakFlops(BaseModel):
    """Dense (no structured sparsity) matrix-unit peak FLOP/s per input dtype."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    fp32: PositiveFloat | None = None
    tf32: PositiveFloat | None = None
    fp16: PositiveFloat | None = None
    bf16: PositiveFloat | None = None
    fp8: PositiveFloat | None = None


class HardwareSpec(BaseModel):
    """One accelerator, as the roofline model sees it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    aliases: tuple[str, ...] = ()
    vendor: str
    kind: Literal["gpu", "tpu"]
    peak_flops_per_s: PeakFlops
    vector_fp32_flops_per_s: PositiveFloat
    exp_per_s: PositiveFloat | None = None
    hbm_capacity_bytes: PositiveInt
    hbm_bandwidth_bytes_per_s: PositiveFloat
    sm_count: PositiveInt
    sram_per_sm_bytes: PositiveInt
    l2_bytes: PositiveInt | None = None
    l2_bandwidth_bytes_per_s: PositiveFloat | None = None
    launch_overhead_s: NonNegativeFloat
    sources: dict[str, str]
    notes: str = ""

    @model_validator(mode="after")
    def _every_figure_has_a_source(self) -> HardwareSpec:
        missing = [f for f in self._figures() if f not in self.sources]
        if missing:
            raise ValueError(f"spec {self.name!r} gives no source for {missing}")
        if not any(v is not None for v in self.peak_flops_per_s.model_dump().values()):
            raise ValueError(f"spec {self.name!r} gives no peak_flops_per_s at all")
        return self

    def _figures(self) -> list[str]:
        out = []
        for field in type(self).model_fields:
            if field in _UNSOURCED or getattr(self, field) is None:
                continue
            if field == "peak_flops_per_s" and field not in self.sources:
                given = self.peak_flops_per_s.model_dump(exclude_none=True)
                out += [f"peak_flops_per_s.{k}" for k in given]
            else:
                out.append(field)
        return out

    def peak(self, dtype: str) -> float:
        """Dense matrix peak for ``dtype``; a clear error where the device has none."""
        if dtype not in BYTES_PER_ELEMENT:
            raise PerfmodelError(f"unknown dtype {dtype!r}; known: {sorted(BYTES_PER_ELEMENT)}")
        value = getattr(self.peak_flops_per_s, dtype)
        if value is None:
            given = sorted(self.peak_flops_per_s.model_dump(exclude_none=True))
            raise PerfmodelError(f"{self.name} has no {dtype} matrix peak; it has {given}")
        return float(value)

    def ridge_point(self, dtype: str) -> float:
        """FLOP per HBM byte at which the matrix roof meets the bandwidth slope."""
        return self.peak(dtype) / self.hbm_bandwidth_bytes_per_s


@functools.cache
def registry() -> dict[str, HardwareSpec]:
    """Every shipped spec, keyed by lower-cased name and by each declared alias."""
    return _registry.build("devices", HardwareSpec, "hardware")


def known_names() -> list[str]:
    """Canonical names of the shipped devices."""
    return _registry.names(registry())


def load_hardware(hw: str | Path | HardwareSpec) -> HardwareSpec:
    """A spec by exact name or alias (case-insensitive), or from a path to a TOML file."""
    if isinstance(hw, HardwareSpec):
        return hw
    return _registry.lookup(hw, registry(), HardwareSpec, "hardware")
