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

from pydantic import BaseModel, ConfigDict, model_validator

from perfmodel.catalog import registry as _registry
from perfmodel.catalog.fields import (
    ByteCount,
    BytesPerSecond,
    Count,
    FlopsPerSecond,
    Latency,
    Overhead,
    PositiveFraction,
)
from perfmodel.errors import PerfmodelError
from perfmodel.vocabulary import BYTES_PER_ELEMENT
from perfmodel.vocabulary import dtype as check_dtype

__all__ = ["BYTES_PER_ELEMENT", "HardwareSpec", "Links", "known_names", "load_hardware", "registry"]

# Fields that are labels, not figures: they need no source.
_UNSOURCED = {"name", "aliases", "vendor", "kind", "sources", "notes"}


class PeakFlops(BaseModel):
    """Dense (no structured sparsity) matrix-unit peak FLOP/s per input dtype."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    fp32: FlopsPerSecond | None = None
    tf32: FlopsPerSecond | None = None
    fp16: FlopsPerSecond | None = None
    bf16: FlopsPerSecond | None = None
    fp8: FlopsPerSecond | None = None


class Links(BaseModel):
    """A device's interconnects: bandwidth per device in ONE direction, all its links.

    ``devices_per_node``: how many devices one fast domain joins (NVLink/NVSwitch
    domain, or a TPU slice's ICI); past it traffic takes ``network_bytes_per_s``
    (the scale-out NICs' share of one device). ``measured`` holds figures read on
    this workplace's machines, keyed by collective, each with its command in sources.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    nvlink_generation: Count | None = None
    nvlink_bytes_per_s: BytesPerSecond | None = None
    pcie_generation: Count | None = None
    pcie_bytes_per_s: BytesPerSecond | None = None
    infinity_fabric_bytes_per_s: BytesPerSecond | None = None
    ici_topology: str | None = None
    ici_bytes_per_s: BytesPerSecond | None = None
    devices_per_node: Count | None = None
    network: str | None = None
    network_bytes_per_s: BytesPerSecond | None = None
    link_latency_s: Overhead | None = None
    measured: dict[str, BytesPerSecond] = {}

    def figures(self) -> list[str]:
        """Dotted names of the figures given (each needs a source)."""
        given = self.model_dump(exclude_none=True, exclude={"measured", "network"})
        return [f"links.{k}" for k in given] + [f"links.measured.{k}" for k in self.measured]


class HardwareSpec(BaseModel):
    """One accelerator, as the roofline model sees it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    aliases: tuple[str, ...] = ()
    vendor: str
    kind: Literal["gpu", "tpu"]
    peak_flops_per_s: PeakFlops
    vector_fp32_flops_per_s: FlopsPerSecond
    exp_per_s: FlopsPerSecond | None = None
    hbm_capacity_bytes: ByteCount
    hbm_bandwidth_bytes_per_s: BytesPerSecond
    sm_count: Count
    sram_per_sm_bytes: ByteCount
    #: Compute capability as the kernel sources spell it ("sm80", "sm90"): some kernel
    #: families pick their tiles per architecture.
    arch: str | None = None
    #: On-chip capacity of one SM and one block (``perfmodel.launch``).
    smem_per_block_bytes: ByteCount | None = None
    registers_per_sm: Count | None = None
    max_registers_per_thread: Count | None = None
    max_threads_per_sm: Count | None = None
    max_blocks_per_sm: Count | None = None
    #: Share of the dense matrix peak reachable with warp-level ``mma.sync`` where the
    #: device's full rate needs another instruction (Hopper's ``wgmma``).
    warp_mma_fraction: PositiveFraction | None = None
    #: Loaded memory latency: bytes in flight over bandwidth (Little's law), measured.
    memory_latency_s: Latency | None = None
    #: One dependent load from DRAM with nothing else in flight (a pointer chase): the
    #: latency of an idle memory system, which ``memory_latency_s`` (loaded) grows from.
    idle_memory_latency_s: Latency | None = None
    l2_bytes: ByteCount | None = None
    l2_bandwidth_bytes_per_s: BytesPerSecond | None = None
    launch_overhead_s: Overhead
    links: Links | None = None
    sources: dict[str, str]
    notes: str = ""

    @model_validator(mode="after")
    def _every_figure_has_a_source(self) -> HardwareSpec:
        missing = [f for f in self._figures() if f not in self.sources]
        if missing:
            raise ValueError(f"spec {self.name!r} gives no source for {missing}")
        register_facts = (
            self.registers_per_sm,
            self.max_registers_per_thread,
            self.max_threads_per_sm,
            self.max_blocks_per_sm,
        )
        if any(v is not None for v in register_facts) and any(v is None for v in register_facts):
            raise ValueError(
                f"spec {self.name!r}: registers_per_sm, max_registers_per_thread, "
                "max_threads_per_sm and max_blocks_per_sm come together"
            )
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
            elif field == "links" and self.links is not None:
                out += self.links.figures()
            else:
                out.append(field)
        return out

    def peak(self, dtype: str) -> float:
        """Dense matrix peak for ``dtype``; a clear error where the device has none."""
        value = getattr(self.peak_flops_per_s, check_dtype(dtype))
        if value is None:
            given = sorted(self.peak_flops_per_s.model_dump(exclude_none=True))
            raise PerfmodelError(
                f"{self.name} has no {dtype} matrix peak; it has {', '.join(given)}: give "
                f"dtype={self.default_dtype()!r} (--dtype {self.default_dtype()})"
            )
        return float(value)

    def default_dtype(self, preferred: str = "fp16") -> str:
        """``preferred`` where the device has a matrix peak for it, else its own 16-bit
        type (bf16 on a TPU), else the first type it has a peak for."""
        given = self.peak_flops_per_s.model_dump(exclude_none=True)
        for name in (preferred, "bf16", "fp16", *given):
            if name in given:
                return name
        raise PerfmodelError(f"{self.name} gives no matrix peak")  # the schema refuses this

    @property
    def l2_reduce_base_bytes_per_s(self) -> float:
        """The full rate of the L2-reduce roof (reductions done in L2, an atomic dQ's
        adds): no datasheet gives one, so the L2's bandwidth, or the HBM's where the spec
        states no L2 bandwidth (the reductions measured on the H200 run below both: the
        floor stays a floor); the estimate's fraction of it is measured
        (``ceilings.REDUCE_CEILING``) or ``calibration.reduce_prior``."""
        return float(self.l2_bandwidth_bytes_per_s or self.hbm_bandwidth_bytes_per_s)

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
