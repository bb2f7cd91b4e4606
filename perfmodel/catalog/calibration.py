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
from typing import Literal

from pydantic import BaseModel, ConfigDict

from perfmodel.catalog.data import data_dir
from perfmodel.catalog.fields import Fraction, Overhead, PositiveFraction, Ratio
from perfmodel.catalog.registry import read_toml
from perfmodel.errors import PerfmodelError


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
    launch_overhead_s: Overhead | None = None
    #: Host time to issue one kernel and wait for it, fitted on synchronous single-call
    #: timings; it enters ``call_latency_s`` only, never the device time ``time_s``.
    dispatch_overhead_s: Overhead = 0.0
    #: How far the compute roofs of one kernel overlap: 1 = perfectly (the roofline's max),
    #: 0 = not at all (matmul, exp and vector work add up, as in one warp's FA-2 loop).
    compute_overlap: Fraction = 1.0
    #: Fixed cost of each thread block of a tiled kernel (loading Q, filling the K/V
    #: pipeline, writing O), in units of one inner-loop step.
    block_overhead_tiles: Ratio = 0.0
    #: Fit statistics, shown and never computed with (NaN: a stderr the fit cannot give).
    fit: dict[str, int | float | str] = {}
    sources: dict[str, str] = {}

    def efficiency(self, roof: str) -> float:
        return float(getattr(self, f"{roof}_efficiency"))


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


def family_default(family, hw) -> Calibration:
    """The datasheet profile of one kernel family on one device, no fit: ``default``'s
    deratings, the compute overlap of the family's structure (softmax between the
    matmuls: 0; overlapped by another warpgroup: 1), and for a family on warp-level
    ``mma.sync`` the share of the matrix peak that instruction reaches on the device."""
    key = (family.name, hw.name, family.matmul, family.softmax)
    if key not in _FAMILY_DEFAULTS:
        _FAMILY_DEFAULTS[key] = _family_default(family, hw)
    return _FAMILY_DEFAULTS[key]


_FAMILY_DEFAULTS: dict[tuple, Calibration] = {}


def _family_default(family, hw) -> Calibration:
    base = _load_named("default")
    matmul = base.matmul_efficiency
    if family.matmul == "mma" and hw.warp_mma_fraction is not None:
        matmul = min(matmul, hw.warp_mma_fraction)
    return base.model_copy(
        update={
            "name": f"default:{family.name}",
            "description": f"datasheet deratings with {family.name}'s structure",
            "kernel": family.name,
            "algorithm": "flash",
            "matmul_efficiency": matmul,
            "compute_overlap": family.compute_overlap,
        }
    )
