"""Numbers for attention split over devices: ``perfmodel.costs.parallel`` on a device.

Each chunk's compute is the single-device flash model (``perfmodel.evaluate``, with
a calibration profile when given) at the chunk's shape; each transfer is bytes over
the link that carries it plus one latency per step. The link is the device's NVLink
(or ICI) while the devices fit in one node (``links.devices_per_node``), else its
share of the scale-out network: a ring or an all-gather is as fast as its slowest
hop, and an all-to-all sends (P - G)/(P - 1) of its bytes off the node.

>>> r = predict_parallel(131072, "h200", cp=2, scheme="ring", h=16, dtype="bf16")
>>> r.devices, r.scheme, r.time_s < r.one_device_s
(2, 'ring', True)
"""

from __future__ import annotations

import dataclasses
import functools
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfmodel.catalog.calibration import Calibration, family_default, load_calibration
from perfmodel.catalog.hardware import HardwareSpec, Links, load_hardware
from perfmodel.catalog.kernels import KernelFamily, load_kernel
from perfmodel.compile import Compiled, compiled
from perfmodel.errors import PerfmodelError, spell
from perfmodel.evaluate import evaluate_flash
from perfmodel.launch import resolve_point
from perfmodel.vocabulary import BALANCES, SCHEMES, bytes_per_element, symbol_values

if TYPE_CHECKING:
    import sympy as sp
#: The collective that carries each scheme's transfers (keys of ``Links.measured``).
COLLECTIVES = {"ring": "ppermute", "allgather": "all_gather", "ulysses": "all_to_all"}


@dataclasses.dataclass(frozen=True)
class LinkRates:
    """What the model needs of a device's links (SI units)."""

    intra_bytes_per_s: float
    latency_s: float
    devices_per_node: int
    network_bytes_per_s: float | None

    @classmethod
    def of(cls, spec: HardwareSpec, scheme: str | None = None) -> LinkRates:
        """From the spec's links: the measured rate of ``scheme``'s collective where the
        spec has one, else the datasheet's (``scheme=None``: the datasheet's)."""
        links = spec.links
        if links is None:
            raise PerfmodelError(f"{spec.name} has no links in its spec: cannot split attention")
        key = f"{COLLECTIVES[scheme]}_bytes_per_s" if scheme in COLLECTIVES else None
        intra = links.measured.get(key) if key else None
        intra = (
            intra
            or links.nvlink_bytes_per_s
            or links.infinity_fabric_bytes_per_s
            or links.ici_bytes_per_s
            or links.pcie_bytes_per_s
        )
        if intra is None:
            raise PerfmodelError(f"{spec.name}'s links give no bandwidth")
        return cls(
            intra_bytes_per_s=float(intra),
            latency_s=float(links.measured.get("latency_s", links.link_latency_s or 0.0)),
            # no node size given (PCIe cards): one flat domain at the intra link's rate
            devices_per_node=links.devices_per_node or 1 << 30,
            network_bytes_per_s=links.network_bytes_per_s,
        )

    def bandwidth(self, devices: int, scheme: str) -> float:
        """Bytes/s one device's slowest hop moves, for ``devices`` devices."""
        if devices <= self.devices_per_node:
            return self.intra_bytes_per_s
        if self.network_bytes_per_s is None:
            raise PerfmodelError(
                f"cp={devices} spans more than one node of {self.devices_per_node} devices "
                "and the spec gives no network bandwidth"
            )
        if scheme != "ulysses":  # a ring crosses the network at its slowest hop
            return self.network_bytes_per_s
        off_node = (devices - self.devices_per_node) / (devices - 1)
        return 1.0 / (off_node / self.network_bytes_per_s + (1 - off_node) / self.intra_bytes_per_s)


@dataclasses.dataclass(frozen=True)
class ParallelPrediction:
    """One split attention: the slowest device's time and what it is made of."""

    scheme: str
    devices: int
    tp: int
    causal: bool
    balance: str
    time_s: float
    one_device_s: float
    compute_s: float
    comm_s: float
    sent_bytes: float
    memory_bytes: float
    link_bytes_per_s: float
    chunk_times_s: dict[str, float]

    @property
    def speedup(self) -> float:
        return self.one_device_s / self.time_s

    @property
    def efficiency(self) -> float:
        return self.speedup / (self.devices * self.tp)


def flash_time(
    spec: HardwareSpec,
    family: KernelFamily,
    *,
    calibration: Calibration,
    dtype: str,
    n: int,
    m: int,
    h: int,
    h_kv: int,
    d: int,
    batch: int,
    causal: bool,
    splits: int | None = None,
) -> float:
    """The single-device flash model's time for one shape as ``family`` launches it
    (``perfmodel.launch``; its calibrated estimate, ``predict``'s ``flash.time_s``);
    ``m`` is the key/value length (``kv_len``)."""
    shape = symbol_values(n=n, kv_len=m, d=d, h=h, h_kv=h_kv, batch=batch, dtype=dtype)
    launch = resolve_point(family, spec, **shape, causal=causal, splits=splits)
    out = evaluate_flash(
        launch,
        family,
        causal=causal,
        hw=spec,
        peak=spec.peak(dtype),
        shape={**shape, "page": 1},
        calibration=calibration,
        floor=False,
        effects=False,
    )
    return float(out["time_s"])


def check_split(n: int, h: int, h_kv: int, cp: int, tp: int, scheme: str, balance: str) -> None:
    """One clear error for a split that cannot run, naming the value."""
    for name, value in (("n", n), ("h", h), ("h_kv", h_kv), ("cp", cp), ("tp", tp)):
        if type(value) is not int or value < 1:
            raise PerfmodelError(f"{spell(name, value)} must be a positive integer")
    if scheme not in SCHEMES:
        raise PerfmodelError(f"unknown {spell('cp_scheme', scheme)}; known: {SCHEMES}")
    if balance not in BALANCES:
        raise PerfmodelError(f"unknown {spell('balance', balance)}; known: {BALANCES}")
    chunks = cp * (2 if balance == "zigzag" else 1)
    if cp > 1 and n % chunks:  # one device (tp alone) holds the whole sequence
        raise PerfmodelError(f"{spell('n', n)} is not divisible by {chunks} ({balance} split, {spell('cp', cp)})")
    if h % h_kv:
        raise PerfmodelError(f"{spell('h', h)} is not divisible by {spell('h_kv', h_kv)}")
    if h % tp:
        raise PerfmodelError(f"{spell('h', h)} is not divisible by {spell('tp', tp)}")
    if h_kv % tp and tp % h_kv:
        raise PerfmodelError(f"{spell('tp', tp)} must divide {spell('h_kv', h_kv)} or be a multiple of it")
    if scheme == "ulysses" and (h // tp) % cp:
        raise PerfmodelError(f"ulysses needs heads per device h/tp={h // tp} divisible by {spell('cp', cp)}")


def _cp_model() -> Any:
    """``perfmodel.costs.parallel``, the sympy model, loaded when a split is costed."""
    from perfmodel.costs import parallel

    return parallel


@functools.cache
def _time_fn(
    scheme: str, causal: bool, balance: str, overlap: bool
) -> tuple[Compiled, Compiled, Compiled]:
    expr = _cp_model().attention_time(scheme, causal, balance, overlap)
    comm = _cp_model().sent_bytes(scheme)
    mem = _cp_model().memory_bytes(scheme)
    return compiled(expr), compiled(comm), compiled(mem)


def predict_parallel(
    n: int,
    hw: str | Path | HardwareSpec,
    *,
    cp: int = 1,
    scheme: str = "ring",
    tp: int = 1,
    d: int = 128,
    h: int = 16,
    h_kv: int | None = None,
    batch: int = 1,
    dtype: str = "bf16",
    causal: bool = False,
    balance: str | None = None,
    overlap: bool = True,
    calibration: str | Path | Calibration | None = None,
    links: LinkRates | None = None,
    kernel: str | Path | KernelFamily = "fa2",
    splits: int | None = None,
) -> ParallelPrediction:
    """Self-attention of n tokens on cp x tp devices: sequence split cp ways, heads tp ways.

    ``balance`` defaults to zig-zag for causal ring and all-gather, contiguous else. Each
    device's attention is the one-device flash model as ``kernel`` launches it (its
    tiles, packing and splits; ``splits`` named for the one-device launch), with
    ``calibration`` (default: the family's datasheet profile, as ``predict``'s).
    """
    spec = load_hardware(hw)
    h_kv = h if h_kv is None else h_kv
    if balance is None:
        # zig-zag balances a causal sequence split: with cp = 1 there is none
        balance = "zigzag" if causal and scheme != "ulysses" and cp > 1 else "contiguous"
    check_split(n, h, h_kv, cp, tp, scheme, balance)
    bytes_per_element(dtype)  # the one dtype check: an unknown name raises, naming it
    family = load_kernel(kernel)
    profile = family_default(family, spec) if calibration is None else load_calibration(calibration)
    h_dev = h // tp  # tensor parallelism: heads divided; K/V divided or one replicated copy
    kv_dev = max(h_kv // tp, 1)
    flash = functools.partial(
        flash_time,
        spec,
        family,
        calibration=profile,
        dtype=dtype,
        d=d,
        batch=batch,
        h=h_dev,
        h_kv=kv_dev,
    )
    whole = functools.partial(
        flash_time, spec, family, calibration=profile, dtype=dtype, d=d, batch=batch
    )
    one_device = whole(n=n, m=n, h=h, h_kv=h_kv, causal=causal, splits=splits)
    if cp == 1:
        t = flash(n=n, m=n, causal=causal)
        mem = _tp_memory(n, d, h, h_kv, batch, dtype, tp)
        return ParallelPrediction(
            scheme, 1, tp, causal, balance, t, one_device, t, 0.0, 0.0, mem, 0.0, {"t_local": t}
        )
    chunks = _chunk_times(flash, n, cp, h_dev, kv_dev, scheme, causal)
    merge = compiled(_cp_model().merge_bytes())(
        **symbol_values(n=n, d=d, h=h_dev, batch=batch, dtype=dtype), P=cp
    )
    chunks["t_merge"] = merge / (spec.hbm_bandwidth_bytes_per_s * profile.hbm_efficiency)
    rates = links or LinkRates.of(spec, scheme)
    bw = rates.bandwidth(cp * tp, scheme)
    h_kv_cp = math.lcm(kv_dev, cp) if scheme == "ulysses" else kv_dev
    values = dict(
        **symbol_values(n=n, kv_len=n, d=d, h=h_dev, h_kv=kv_dev, batch=batch, dtype=dtype),
        P=cp,
        h_kv_cp=h_kv_cp,
        link_bandwidth=bw,
        link_latency=rates.latency_s,
        **chunks,
    )
    time_fn, sent_fn, mem_fn = _time_fn(scheme, causal, balance, overlap)
    total = time_fn(**values)
    compute = _compute_only(scheme, causal, balance, values)
    return ParallelPrediction(
        scheme=scheme,
        devices=cp,
        tp=tp,
        causal=causal,
        balance=balance,
        time_s=total,
        one_device_s=one_device,
        compute_s=compute,
        comm_s=total - compute,
        sent_bytes=sent_fn(**values),
        memory_bytes=mem_fn(**values),
        link_bytes_per_s=bw,
        chunk_times_s=chunks,
    )


def _chunk_times(
    flash: functools.partial[float],
    n: int,
    cp: int,
    h_dev: int,
    kv_dev: int,
    scheme: str,
    causal: bool,
) -> dict[str, float]:
    """The ``t_*`` symbols' values: single-device flash times of the chunk shapes."""
    c = n // cp
    if scheme == "ulysses":  # whole sequence, h/P heads (K/V replicated up to lcm)
        kv = math.lcm(kv_dev, cp) // cp
        local = _flash_on_heads(flash, n, h_dev // cp, kv, causal)
        return {"t_local": local, "t_chunk": local, "t_diag": local, "t_half": local}
    out = {"t_chunk": flash(n=c, m=c, causal=False), "t_diag": flash(n=c, m=c, causal=True)}
    if causal:  # zig-zag: n/P queries x n/(2P) keys, or n/(2P) x n/P; the slower of the two
        out["t_half"] = max(flash(n=c, m=c // 2, causal=False), flash(n=c // 2, m=c, causal=False))
    else:
        out["t_half"] = out["t_chunk"]
    out["t_local"] = flash(n=c, m=n, causal=False)
    return out


def _flash_on_heads(
    flash: functools.partial[float], n: int, heads: int, kv_heads: int, causal: bool
) -> float:
    return flash.func(
        *flash.args, **{**flash.keywords, "h": heads, "h_kv": kv_heads}, n=n, m=n, causal=causal
    )


def _compute_only(scheme: str, causal: bool, balance: str, values: dict[str, Any]) -> float:
    """The same time with free, instant links: what the compute alone costs."""
    free = {**values, "link_bandwidth": 1e30, "link_latency": 0.0}
    return float(_time_fn(scheme, causal, balance, True)[0](**free))


def _tp_memory(n: int, d: int, h: int, h_kv: int, batch: int, dtype: str, tp: int) -> float:
    expr = _cp_model().tp_memory_bytes()
    values = symbol_values(n=n, d=d, h=h, h_kv=h_kv, batch=batch, dtype=dtype)
    return float(compiled(expr)(**values, T=tp))


def crossover_n(
    hw: str | Path | HardwareSpec,
    *,
    cp: int,
    scheme: str,
    lo: int = 256,
    hi: int = 1 << 22,
    **kw: Any,
) -> int | None:
    """Smallest n (a multiple of 2·cp·128) where the split beats one device, or None."""
    step = 2 * cp * 128

    def wins(n: int) -> bool:
        r = predict_parallel(n, hw, cp=cp, scheme=scheme, **kw)
        return r.time_s < r.one_device_s

    lo_k, hi_k = max(1, lo // step), hi // step
    if not wins(hi_k * step):
        return None
    while lo_k < hi_k:  # the split's advantage grows with n: bisect on the first win
        mid = (lo_k + hi_k) // 2
        lo_k, hi_k = (lo_k, mid) if wins(mid * step) else (mid + 1, hi_k)
    return lo_k * step


def symbolic_time(scheme: str, causal: bool, balance: str, overlap: bool = True) -> sp.Expr:
    """The time formula, for display (``perfmodel.costs.parallel.attention_time``)."""
    return _cp_model().attention_time(scheme, causal, balance, overlap)


__all__ = [
    "BALANCES",
    "COLLECTIVES",
    "SCHEMES",
    "LinkRates",
    "Links",
    "ParallelPrediction",
    "check_split",
    "crossover_n",
    "predict_parallel",
    "symbolic_time",
]
