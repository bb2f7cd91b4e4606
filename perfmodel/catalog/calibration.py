"""Efficiency profiles: achievable fractions of each roof, as data under ``specs/calibration``.

``default`` holds documented datasheet deratings; fitted profiles (``perfmodel
validate --fit``) hold per-device, per-implementation values with their fit quality.
Fractions are capped at 1, so ``time_s`` is never below ``t_lower_s``.

>>> load_calibration("default").matmul_efficiency
0.8
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

from perfmodel.catalog.data import data_dir
from perfmodel.catalog.fields import Fraction, Overhead, PositiveFraction, Ratio
from perfmodel.catalog.registry import read_toml
from perfmodel.errors import PerfmodelError

if TYPE_CHECKING:  # both import this module
    from perfmodel.catalog.hardware import HardwareSpec
    from perfmodel.catalog.kernels import KernelFamily


class Calibration(BaseModel):
    """Fractions of each roof a given implementation reaches, plus its launch overhead."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    description: str = ""
    device: str | None = None
    implementation: str | None = None
    #: The kernel family (``specs/kernels``) a fitted profile refines.
    kernel: str | None = None
    algorithm: Literal["naive", "flash"] | None = None
    matmul_efficiency: PositiveFraction = 1.0
    vector_efficiency: PositiveFraction = 1.0
    exp_efficiency: PositiveFraction = 1.0
    hbm_efficiency: PositiveFraction = 1.0
    l2_efficiency: PositiveFraction = 1.0
    #: The fraction of the L2 bandwidth reductions done in L2 reach (an atomic dQ's adds,
    #: in the backward family's form: ``Backward.dq_atomics``); None: ``l2_efficiency``
    #: (the prior where no ceilings measured them: reductions at the reads' fraction).
    l2_reduce_efficiency: PositiveFraction | None = None
    launch_overhead_s: Overhead | None = None
    #: Host time to issue one kernel and wait for it, fitted on synchronous single-call
    #: timings; it enters ``call_latency_s`` only, never the device time ``time_s``.
    dispatch_overhead_s: Overhead = 0.0
    #: How far the compute roofs of one kernel overlap: 1 = perfectly (the roofline's max),
    #: 0 = not at all (matmul, exp and vector work add up, as in one warp's FA-2 loop).
    compute_overlap: Fraction = 1.0
    #: ``compute_overlap`` at head dims above ``kernels.WIDE_HEAD_DIM``, where it differs
    #: (the family's ``wide_softmax_overlap``); None: ``compute_overlap`` at every d.
    wide_compute_overlap: Fraction | None = None
    #: Fixed cost of each thread block of a tiled kernel (loading Q, filling the K/V
    #: pipeline, writing O), in units of one inner-loop step.
    block_overhead_tiles: Ratio = 0.0
    #: (head dim, matmul fraction) measured by K = head dim where the device has
    #: ceilings (``perfmodel.catalog.ceilings``); empty: ``matmul_efficiency`` at every d.
    matmul_efficiency_by_d: tuple[tuple[int, Fraction], ...] = ()
    #: The tensor cores' fp16 rate over their bf16 rate on the family's instruction and
    #: tiles, where the device's ceilings measured both (1: the datasheet's, equal).
    matmul_fp16_ratio: Ratio = 1.0
    #: (head dim, the blocked layout's matmul rate over the tiled one's: S = Q K^T and
    #: O += P V at one column block), where the family's blocked layout splits d and the
    #: device's ceilings measured the tiles (``perfmodel.catalog.ceilings.blocked_ratios``);
    #: empty: no such term.
    matmul_blocked_ratio_by_d: tuple[tuple[int, Ratio], ...] = ()
    #: (N, rate of the family's instruction at N columns over its rate at N = 64) for the
    #: N below 64 the device's ceilings measured (``ceilings.narrow_n_ratios``): the
    #: rate of a product whose tile is that narrow (the two-pass dQ kernel's S and dP at
    #: a 32-key tile, ``evaluate.narrow_dq_ratio``); empty: no such term.
    matmul_narrow_ratio_by_n: tuple[tuple[int, Ratio], ...] = ()
    #: The family's ``blocked_multiple``: a point whose n or kv_len is not a multiple of
    #: it runs the blocked layout (None: never).
    blocked_multiple: int | None = None
    #: Per kernel of the naive side ("qk", "softmax", "pv"): the shape variable its HBM
    #: rate goes by ("d", "m") and the (value, ratio) table of the device's XLA library
    #: calls, each one's rate over the HBM copy's (``hbm_efficiency``:
    #: ``perfmodel.catalog.ceilings.xla_naive_ratios``); empty: ``hbm_efficiency`` for
    #: every kernel.
    hbm_ratio_by_kernel: tuple[tuple[str, str, tuple[tuple[int, Ratio], ...]], ...] = ()
    #: (head dim, seconds): how much longer a wgmma takes when it is waited for before the
    #: next is issued than when the next is in flight behind it, a 64-row tile of one
    #: warpgroup alone on its SM at K = head dim (``perfmodel.catalog.ceilings.wgmma_drains``:
    #: the "bwd_serial" rows against the "bwd_lone" ones); empty: no such term.
    wgmma_drain_s_by_d: tuple[tuple[int, Overhead], ...] = ()
    #: Fit statistics, shown and never computed with (NaN: a stderr the fit cannot give).
    fit: dict[str, int | float | str] = {}
    sources: dict[str, str] = {}

    def efficiency(self, roof: str) -> float:
        value = getattr(self, f"{roof}_efficiency")
        return float(self.l2_efficiency if value is None else value)


def known_calibrations() -> list[str]:
    return sorted(p.stem for p in data_dir("calibration").glob("*.toml"))


@functools.cache
def _load_named(name: str) -> Calibration:
    path = data_dir("calibration") / f"{name}.toml"
    if not path.is_file():
        raise PerfmodelError(
            f"unknown calibration {name!r}; known: {', '.join(known_calibrations())}"
        )
    return read_calibration(path)


def read_calibration(path: Path) -> Calibration:
    """One profile file; errors name the file and, for a wrong schema, the first bad field."""
    return read_toml(path, Calibration, "calibration")


def load_calibration(calibration: str | Path | Calibration | None) -> Calibration:
    """A profile by name, by path, or as given; None means ``default``."""
    if isinstance(calibration, Calibration):
        return calibration
    if calibration is None:
        return _load_named("default")
    if not isinstance(calibration, str | os.PathLike) or not str(calibration).strip():
        raise PerfmodelError(
            f"calibration={calibration!r} must be a profile name, a .toml path or None"
        )
    text = str(calibration)
    if text.endswith(".toml"):
        return read_calibration(Path(text))
    return _load_named(text)


#: Where the estimate's roof fractions come from: the device's measured ceilings
#: (``specs/devices/<device>.ceilings.toml``) where it has them, else the datasheet
#: deratings of ``default``; "datasheet" forces the latter.
CEILINGS = ("measured", "datasheet")


def family_default(
    family: KernelFamily, hw: HardwareSpec, ceilings: str = "measured"
) -> Calibration:
    """The unfitted profile of one kernel family on one device: the fractions of each
    roof the device's microbenchmarks reach (measured ceilings; the tensor-core rate of
    the family's instruction by head dim), else ``default``'s datasheet deratings (and
    for a family on warp-level ``mma.sync`` the share of the peak that instruction
    reaches); and the family's softmax overlap (``KernelFamily.compute_overlap``)."""
    key = (family.name, hw.name, family.matmul, family.softmax, ceilings)
    if key not in _FAMILY_DEFAULTS:
        _FAMILY_DEFAULTS[key] = _family_default(family, hw, ceilings)
    return _FAMILY_DEFAULTS[key]


def naive_default(hw: HardwareSpec, ceilings: str = "measured") -> Calibration:
    """The unfitted profile of the naive side (library GEMMs and XLA fusions): the
    device's measured ceilings where it has them (cuBLAS GEMM, HBM copy), else
    ``default``."""
    key = ("naive", hw.name, ceilings)
    if key not in _FAMILY_DEFAULTS:
        base = _load_named("default")
        measured, origin = _measured(hw, None, ceilings)
        if measured:
            name = f"{origin}:naive"
            base = base.model_copy(update={**measured, "name": name, "algorithm": "naive"})
        _FAMILY_DEFAULTS[key] = base
    return _FAMILY_DEFAULTS[key]


_FAMILY_DEFAULTS: dict[tuple[str, ...], Calibration] = {}


#: Measured fields a sibling's file does not lend: the XLA library calls' rates over the
#: HBM copy's. The short-row softmax and the output-bound score product are bound by the
#: bytes their blocks keep in flight over the memory latency, which differ between an
#: HBM3 and an HBM3e part of the same architecture: the H100's calls reach 1.04 (softmax,
#: 2048 keys) and 0.72 (scores, d = 128) of its copy rate, the H200's naive steps about
#: 0.72 and 0.55 of its own (details/h200-naive-breakdown-2026-11-29.json).
NOT_PRIORS = ("hbm_ratio_by_kernel",)


def _measured(
    hw: HardwareSpec, family: KernelFamily | None, ceilings: str
) -> tuple[dict[str, Any], str]:
    """The measured fractions of ``hw`` for ``family`` (None: the naive side), or {}: the
    device's own ceilings (``ceilings="measured"``), and for each field its file lacks
    (every field with ``"datasheet"``) the fraction a sibling of the same architecture
    measured (``ceilings.sibling_ceilings``), as a stated prior; and where they came
    from: "measured" (its own file), "prior" (a sibling's alone) or "datasheet" (neither)."""
    if ceilings not in CEILINGS:
        raise PerfmodelError(f"ceilings={ceilings!r}; known: {', '.join(CEILINGS)}")
    from perfmodel.catalog.ceilings import load_ceilings, measured_fractions, sibling_ceilings

    out: dict[str, Any] = {"sources": {}}
    origin = "datasheet"
    sibling = sibling_ceilings(hw)
    if sibling is not None:
        spec, found = sibling
        out, origin = measured_fractions(found, spec, family), "prior"
        for field in NOT_PRIORS:
            out.pop(field, None)
            out["sources"].pop(field, None)
        out["sources"] = {
            field: f"prior: {spec.name}'s {source} (the same {hw.arch} architecture; a fraction "
            f"of its datasheet roof, or its seconds, where {hw.name} measured none)"
            for field, source in out["sources"].items()
        }
    own = load_ceilings(hw) if ceilings == "measured" else None
    if own is not None:
        mine = measured_fractions(own, hw, family)
        out = {**out, **mine, "sources": {**out["sources"], **mine["sources"]}}
        origin = "measured"
    if origin == "datasheet":
        return {}, origin
    out["sources"] = {**_load_named("default").sources, **out["sources"]}
    return out, origin


#: The device whose measured reduction rates are the prior elsewhere.
REDUCE_PRIOR_DEVICE = "h200"


@functools.cache
def reduce_prior(form: str, l2: bool = True) -> float | None:
    """The fraction of the L2-reduce roof's full rate (``l2_reduce_base_bytes_per_s``: the L2
    bandwidth, with ``l2`` False the HBM's) an atomic dQ's adds of ``form`` reach where
    the device has no such ceiling (no datasheet states one): the fraction of the same
    base the one device that measured them reached (``REDUCE_PRIOR_DEVICE``), None
    without its file."""
    from perfmodel.catalog.ceilings import REDUCE_CEILING, load_ceilings
    from perfmodel.catalog.hardware import load_hardware

    spec = load_hardware(REDUCE_PRIOR_DEVICE)
    found = load_ceilings(spec)
    rate = None if found is None else found.value(REDUCE_CEILING[form])
    base = spec.l2_bandwidth_bytes_per_s if l2 else spec.hbm_bandwidth_bytes_per_s
    if rate is None or not base:
        return None
    return min(1.0, rate / base)


def _family_default(family: KernelFamily, hw: HardwareSpec, ceilings: str) -> Calibration:
    base = _load_named("default")
    matmul = base.matmul_efficiency
    if family.matmul == "mma" and hw.warp_mma_fraction is not None:
        matmul = min(matmul, hw.warp_mma_fraction)
    measured, origin = _measured(hw, family, ceilings)
    update = {"matmul_efficiency": matmul, **measured}
    if family.dq_atomics is not None and "l2_reduce_efficiency" not in update:
        on_l2 = hw.l2_bandwidth_bytes_per_s is not None
        update["l2_reduce_efficiency"] = reduce_prior(family.dq_atomics, on_l2)
        update["sources"] = {
            **base.sources,
            **update.get("sources", {}),
            "l2_reduce_efficiency": f"prior: the fraction {REDUCE_PRIOR_DEVICE}'s ceilings "
            f"measured for {family.dq_atomics} dQ adds (no datasheet states a reduction rate)",
        }
    if family.kernel_fixed_s and update.get("launch_overhead_s") is not None:
        update["launch_overhead_s"] = update["launch_overhead_s"] + family.kernel_fixed_s
    where = {
        "measured": "measured ceilings",
        "prior": "a sibling's measured ceilings as priors",
    }.get(origin, "datasheet deratings")
    return base.model_copy(
        update={
            **update,
            "name": f"default:{family.name}",
            "description": f"{where} with {family.name}'s structure",
            "kernel": family.name,
            "algorithm": "flash",
            "compute_overlap": family.compute_overlap,
            "wide_compute_overlap": family.wide_softmax_overlap,
        }
    )
