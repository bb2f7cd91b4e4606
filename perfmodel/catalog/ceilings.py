"""Measured device ceilings: the schema and loader of ``specs/devices/<device>.ceilings.toml``.

A ceilings file is what ``python -m pallas_kernels.ceilings`` (or ``perfmodel
calibrate``) wrote after timing microbenchmarks that are not attention on one GPU
(issue 21): the roofs an attention kernel runs against, each with its method, sizes and
the SM clock NVML read while it was timed. The datasheet spec of the same device
(``specs/devices/<device>.toml``, :mod:`perfmodel.catalog.hardware`) stays as it is;
a ceilings file sits beside it, names it in ``device``, and is found by
:func:`load_ceilings` from the device's name or read from any path.

Fields (``Ceilings``):

``ceilings`` (:class:`CeilingValues`), each a :class:`Measured` (``value``, ``unit``,
``method``, ``size``, ``clock_sm_hz``) or absent when the run did not measure it:

============================== ======================================================
``wgmma_{bf16,fp16}_flops_per_s``  best Mosaic GPU wgmma tile, operands in shared memory
``mma_sync_{bf16,fp16}_...``       best Triton tile compiled with mma.sync (Triton's
                                   ``DISABLE_MMA_V3``; see ``lowering_confirmed`` rows)
``triton_default_{bf16,fp16}_...`` best Triton tile as Triton lowers it (wgmma on sm_90)
``gemm_bf16_flops_per_s``          cuBLAS 8192³ on random data (``..._zeros_...``: zeros)
``exp_per_s``                      exp2 per second in registers (MUFU)
``vector_fp32_flops_per_s``        FP32 FMA FLOP/s in registers (``fma.rn.f32``, inline PTX)
``vector_fp32_mul_add_...``        the same ``x * a + b`` as Triton compiles it
``hbm_{read,write,copy}_bytes_per_s`` streaming kernels at the largest size (copy: bytes
                                   read + written)
``l2_read_bytes_per_s``            re-reads of an L2-resident working set (best <= 32 MiB)
``launch_latency_s``               one synchronous call of a trivial jitted op
``dispatch_interval_s``            per call, trivial calls queued back to back (host)
``kernel_min_s``                   device time of a one-program kernel
``block_cost_s``                   seconds an SM spends per (nearly empty) thread block
``wave_cost_s``                    fixed cost of one wave of (nearly empty) blocks
``hbm_idle_latency_s``             one dependent load from DRAM, nothing else in flight
                                   (pointer chase over 1 GiB, one program)
``hbm_loaded_latency_s``           a load while the memory is busy: Little's law on a
                                   streaming read at 2 programs a SM, one tile in flight
``l2_hit_latency_s``               the same from a working set inside the L2 (4 MiB)
``l2_{triton_red,tma_reduce}_``    float32 tiles added into a buffer (best <= 32 MiB),
``{spread,shared}_bytes_per_s``    Triton's atomics or Mosaic's TMA reduce-add, each
                                   program its own tiles or 16 sharing them in order
============================== ======================================================

Tables, each row one timed kernel: ``tensor_core`` (:class:`TensorCoreRate`: the
instruction, lowering, dtype, M×N×K, warps, operands "smem" or "streamed"), ``hbm``
(:class:`HbmRate`: op and size), ``l2`` (:class:`L2Rate`: working set), ``grid``
(:class:`GridTime`: device time against programs), ``latency`` (:class:`ChaseTime`: a
pointer chase's device time at two step counts), ``atomics`` (:class:`AtomicRate`: form,
working set, sharing). Header: ``device``, ``date``,
``jax_version``, ``git_commit``, ``command``, ``clocks`` (NVML summary) and ``failed``
(what did not run, and why).

A missing, non-finite or non-positive value is refused with one line naming the file and
the field (``PerfmodelError``), as every data file of the catalog is.

>>> c = load_ceilings("h200")
>>> c is None or c.ceilings.hbm_read_bytes_per_s.value > 1e12
True
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from perfmodel.catalog import registry
from perfmodel.catalog.data import data_dir
from perfmodel.catalog.fields import Flag
from perfmodel.catalog.hardware import HardwareSpec, load_hardware
from perfmodel.catalog.kernels import KernelFamily
from perfmodel.vocabulary import BYTES_PER_ELEMENT

__all__ = [
    "DATASHEET_FIELD",
    "CeilingValues",
    "Ceilings",
    "Measured",
    "beside_datasheet",
    "ceilings_files",
    "load_ceilings",
    "read_ceilings",
    "sibling_ceilings",
]

#: A measured figure: a finite number above zero (TOML's inf and nan are refused; so
#: are booleans, which pydantic would otherwise read as 1; flags are real booleans).
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False, strict=True)]
Count = Annotated[int, Field(gt=0, strict=True)]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Measured(_Frozen):
    """One ceiling: its value in SI units, how it was measured, at what size."""

    value: Positive
    unit: str
    method: str
    size: str | None = None
    clock_sm_hz: Positive | None = None  #: median SM clock while it was timed (NVML)


class CeilingValues(_Frozen):
    """The headline figures (module docstring); each absent where not measured."""

    wgmma_bf16_flops_per_s: Measured | None = None
    wgmma_fp16_flops_per_s: Measured | None = None
    mma_sync_bf16_flops_per_s: Measured | None = None
    mma_sync_fp16_flops_per_s: Measured | None = None
    triton_default_bf16_flops_per_s: Measured | None = None
    triton_default_fp16_flops_per_s: Measured | None = None
    gemm_bf16_flops_per_s: Measured | None = None
    gemm_bf16_zeros_flops_per_s: Measured | None = None
    exp_per_s: Measured | None = None
    vector_fp32_flops_per_s: Measured | None = None
    vector_fp32_mul_add_flops_per_s: Measured | None = None
    hbm_read_bytes_per_s: Measured | None = None
    hbm_write_bytes_per_s: Measured | None = None
    hbm_copy_bytes_per_s: Measured | None = None
    l2_read_bytes_per_s: Measured | None = None
    launch_latency_s: Measured | None = None
    dispatch_interval_s: Measured | None = None
    kernel_min_s: Measured | None = None
    block_cost_s: Measured | None = None
    wave_cost_s: Measured | None = None
    hbm_idle_latency_s: Measured | None = None
    hbm_loaded_latency_s: Measured | None = None
    l2_hit_latency_s: Measured | None = None
    l2_triton_red_spread_bytes_per_s: Measured | None = None
    l2_triton_red_shared_bytes_per_s: Measured | None = None
    l2_tma_reduce_spread_bytes_per_s: Measured | None = None
    l2_tma_reduce_shared_bytes_per_s: Measured | None = None


class TensorCoreRate(_Frozen):
    """One tile kernel: ``iters`` products of M×N×K (K = head dim) per program."""

    instruction: Literal["wgmma", "mma.sync", "triton_default"]
    lowering: Literal["mosaic", "triton"]
    dtype: Literal["bf16", "fp16"]
    m: Count
    n: Count
    k: Count
    warps: Count
    operands: Literal["smem", "streamed"]
    flops_per_s: Positive
    device_s: Positive
    timing: str
    #: False: above the datasheet, the compiler must have hoisted the product
    valid: Flag
    #: mma.sync rows: False when DISABLE_MMA_V3 left the shared tile's rate unchanged
    lowering_confirmed: Flag | None = None
    programs: Count | None = None
    ctas: Count | None = None
    warpgroups: Count | None = None
    iters: Count | None = None
    clock_sm_hz: Positive | None = None
    power_w: Positive | None = None
    #: the product a row stands for where it is not S = Q K^T: ``"pv"``, O += P V with
    #: N a head dim or one column block of it (``pallas_kernels.ceilings.WGMMA_PV_TILES``)
    #: ``"bwd"``: one warpgroup shaped as a 64 x 64 backward tile's products
    #: (``pallas_kernels.ceilings.WGMMA_BWD_TILES``)
    #: ``"pv_mn"``: O += P V with V N-contiguous, as the forward holds it
    #: (``pallas_kernels.ceilings.WGMMA_PV_MN_TILES``); ``"bwd_lone"``: the ``"bwd"``
    #: tiles at one CTA a SM; ``"bwd_serial"``: the same, each wgmma waited for before the
    #: next (``pallas_kernels.ceilings.WGMMA_FORMS``)
    form: Literal["pv", "bwd", "pv_mn", "bwd_lone", "bwd_serial"] | None = None
    #: the shared-memory swizzle where it is not 128 bytes (a row of K 16-bit values that
    #: 128 does not divide: ``pallas_kernels.ceilings.WGMMA_SWIZZLE_TILES``)
    swizzle_bytes: Count | None = None


class HbmRate(_Frozen):
    op: Literal["read", "write", "copy"]
    bytes: Count  #: buffer size
    bytes_moved: Count  #: per call (copy: read + written)
    bytes_per_s: Positive
    device_s: Positive
    buffers: Count  #: input sets rotated between calls (so no call hits L2)
    timing: str
    clock_sm_hz: Positive | None = None
    clock_mem_hz: Positive | None = None


class LoadedLatency(_Frozen):
    """One streaming read at a known number of bytes in flight
    (``pallas_kernels.ceilings.measure_loaded_latency``): Little's law gives the latency
    of a load while the memory system is busy, ``bytes_in_flight / bytes_per_s``."""

    programs: Count
    bytes: Count  #: buffer read
    bytes_in_flight: Count  #: one 16 KB tile a program
    bytes_per_s: Positive
    latency_s: Positive
    device_s: Positive
    timing: str
    clock_sm_hz: Positive | None = None
    clock_mem_hz: Positive | None = None


class XlaNaiveRate(_Frozen):
    """One library call the naive baseline is made of, as XLA compiles it, on random data
    (``pallas_kernels.ceilings.measure_xla_naive``): a row softmax of ``m`` keys over
    ``rows`` rows, or a batched product at ``n = m`` and head dim ``d`` (``scores``
    writes the ``rows x m`` operand, ``pv`` reads it)."""

    op: Literal["softmax", "scores", "pv"]
    dtype: Literal["bf16", "fp16"]
    rows: Count
    m: Count
    d: Count | None = None
    bytes_moved: Count  #: of the rows x m operand(s): softmax read + write, else one pass
    bytes_per_s: Positive
    flops_per_s: Positive | None = None
    device_s: Positive
    timing: str
    kernels_per_call: Positive | None = None
    clock_sm_hz: Positive | None = None


class L2Rate(_Frozen):
    working_set_bytes: Count
    bytes_read: Count
    bytes_per_s: Positive
    device_s: Positive
    timing: str
    clock_sm_hz: Positive | None = None


class AtomicRate(_Frozen):
    """Float32 tiles added into a buffer, one way (``pallas_kernels.ceilings.measure_atomics``)."""

    form: Literal["triton_red", "tma_reduce"]
    working_set_bytes: Count
    sharing: Count  #: programs adding into the same tiles in the same order
    programs: Count
    tile_bytes: Count
    bytes_added: Count
    bytes_per_s: Positive
    device_s: Positive
    timing: str
    clock_sm_hz: Positive | None = None


class GridTime(_Frozen):
    programs: Count
    warps: Count
    device_s: Positive
    timing: str


class ChaseTime(_Frozen):
    case: str
    working_set_bytes: Count
    slots: Count
    steps: list[Count]
    device_s: list[Positive]
    latency_s: Positive
    timing: str


class Clocks(_Frozen):
    sm_max_hz: Positive | None = None
    mem_max_hz: Positive | None = None
    sm_median_hz_under_load: Positive | None = None
    sm_min_hz_under_load: Positive | None = None
    mem_median_hz: Positive | None = None
    power_median_w_under_load: Positive | None = None
    power_max_w: Positive | None = None
    temperature_max_c: Positive | None = None
    samples: Count | None = None
    source: str | None = None


class Ceilings(_Frozen):
    """A whole ceilings file (module docstring)."""

    schema_: Literal["perfmodel-ceilings/1"] = Field(alias="schema")
    device: str  #: the device spec it refines (a name or alias of specs/devices)
    device_kind: str  #: what jax called the GPU
    date: str
    jax_version: str
    git_commit: str
    command: str
    duration_s: Positive
    sm_count: Count
    interpret: Flag = False  #: True: the Pallas interpreter on a CPU, nothing real
    clocks: Clocks = Clocks()
    ceilings: CeilingValues
    failed: list[str] = []
    previous: dict[str, str | float | int | list[str]] | None = None
    tensor_core: list[TensorCoreRate] = []
    hbm: list[HbmRate] = []
    l2: list[L2Rate] = []
    grid: list[GridTime] = []
    latency: list[ChaseTime] = []
    atomics: list[AtomicRate] = []
    xla_naive: list[XlaNaiveRate] = []
    loaded_latency: list[LoadedLatency] = []

    def value(self, name: str) -> float | None:
        """A headline figure by its field name, None where it was not measured."""
        entry = getattr(self.ceilings, name)
        return None if entry is None else entry.value

    def tensor(self, instruction: str, dtype: str, operands: str = "smem") -> list[TensorCoreRate]:
        """The valid tile rows of one instruction and dtype, fastest first."""
        rows = [
            r
            for r in self.tensor_core
            if (r.instruction, r.dtype, r.operands) == (instruction, dtype, operands)
            and r.valid
            and r.form is None  # the S = Q K^T tiles; blocked_ratios reads the others
        ]
        return sorted(rows, key=lambda r: -r.flops_per_s)


def read_ceilings(path: str | Path) -> Ceilings:
    """One ceilings file; a bad one raises PerfmodelError naming the file and field."""
    return registry.read_toml(Path(path), Ceilings, "ceilings")


def ceilings_files() -> list[Path]:
    """The shipped ceilings files (``specs/devices/*.ceilings.toml``)."""
    return sorted(data_dir("devices").glob(f"*{registry.CEILINGS_SUFFIX}"))


@functools.cache
def _shipped() -> dict[str, Path]:
    """Device spec name -> its shipped ceilings file."""
    return {load_hardware(read_ceilings(p).device).name: p for p in ceilings_files()}


def sibling_ceilings(spec: HardwareSpec) -> tuple[HardwareSpec, Ceilings] | None:
    """The device whose measured ceilings stand as priors for ``spec`` where ``spec``'s own
    file lacks a figure (or ``ceilings="datasheet"`` sets it aside): another device of the
    same architecture (``arch``) with a shipped file, the one with the most headlines (then
    by name); None where no other device of its architecture measured any. The priors
    are fractions of that device's datasheet roofs, applied to ``spec``'s datasheet."""
    if spec.arch is None:
        return None
    found = []
    for name, path in sorted(_shipped().items()):
        other = load_hardware(name)
        if other.name != spec.name and other.arch == spec.arch:
            c = read_ceilings(path)
            found.append((-len(beside_datasheet(c, other)), name, other, c))
    if not found:
        return None
    _, _, other, c = min(found, key=lambda row: row[:2])
    return other, c


def load_ceilings(device: str | Path | HardwareSpec) -> Ceilings | None:
    """The measured ceilings of a device: from a path to a ceilings file, or (a device
    name, alias or spec) the shipped file that names that device; None when it has none."""
    if isinstance(device, Path) or (
        isinstance(device, str) and (device.endswith(".toml") or "/" in device)
    ):
        return read_ceilings(device)
    spec = load_hardware(device)
    path = _shipped().get(spec.name)
    return None if path is None else read_ceilings(path)


#: The datasheet figure each headline sits beside (``perfmodel hw show``): a field of
#: ``HardwareSpec`` or ``peak_flops_per_s.<dtype>``.
DATASHEET_FIELD = {
    "wgmma_bf16_flops_per_s": "peak_flops_per_s.bf16",
    "wgmma_fp16_flops_per_s": "peak_flops_per_s.fp16",
    "mma_sync_bf16_flops_per_s": "peak_flops_per_s.bf16",
    "mma_sync_fp16_flops_per_s": "peak_flops_per_s.fp16",
    "triton_default_bf16_flops_per_s": "peak_flops_per_s.bf16",
    "triton_default_fp16_flops_per_s": "peak_flops_per_s.fp16",
    "gemm_bf16_flops_per_s": "peak_flops_per_s.bf16",
    "gemm_bf16_zeros_flops_per_s": "peak_flops_per_s.bf16",
    "exp_per_s": "exp_per_s",
    "vector_fp32_flops_per_s": "vector_fp32_flops_per_s",
    "vector_fp32_mul_add_flops_per_s": "vector_fp32_flops_per_s",
    "hbm_read_bytes_per_s": "hbm_bandwidth_bytes_per_s",
    "hbm_write_bytes_per_s": "hbm_bandwidth_bytes_per_s",
    "hbm_copy_bytes_per_s": "hbm_bandwidth_bytes_per_s",
    "l2_read_bytes_per_s": "l2_bandwidth_bytes_per_s",
    "l2_triton_red_spread_bytes_per_s": "l2_bandwidth_bytes_per_s",
    "l2_triton_red_shared_bytes_per_s": "l2_bandwidth_bytes_per_s",
    "l2_tma_reduce_spread_bytes_per_s": "l2_bandwidth_bytes_per_s",
    "l2_tma_reduce_shared_bytes_per_s": "l2_bandwidth_bytes_per_s",
    "launch_latency_s": "launch_overhead_s",
    "dispatch_interval_s": "launch_overhead_s",
    "kernel_min_s": "launch_overhead_s",
}


def _datasheet(spec: HardwareSpec, field: str | None) -> float | None:
    if field is None:
        return None
    obj: object = spec
    for part in field.split("."):
        obj = getattr(obj, part, None)
    return obj if isinstance(obj, int | float) else None


def beside_datasheet(c: Ceilings, spec: HardwareSpec) -> list[tuple[str, Measured, float | None]]:
    """(name, measured, datasheet figure or None) for every headline the file has."""
    rows = []
    for name in CeilingValues.model_fields:
        entry = getattr(c.ceilings, name)
        if entry is not None:
            rows.append((name, entry, _datasheet(spec, DATASHEET_FIELD.get(name))))
    return rows


# --- what the model takes from a ceilings file ----------------------------------------
#: Where a family's matrix products run, as the ceilings name it: (instruction, operands).
#: A producer warpgroup (TMA) keeps the operands in shared memory ahead of use; a kernel
#: whose compute warps load their own tiles pays for the loads in the product's loop.
def tensor_rows(c: Ceilings, family: KernelFamily, dtype: str = "bf16") -> list[TensorCoreRate]:
    """The measured tile kernels that run the family's products (valid rows of ``dtype``)."""
    if family.matmul == "mma":
        return c.tensor("mma.sync", dtype)
    if family.producer_warps:
        return c.tensor("wgmma", dtype)
    return c.tensor("triton_default", dtype, "streamed") or c.tensor("triton_default", dtype)


def fp16_ratio(c: Ceilings, family: KernelFamily) -> float | None:
    """The median, over the family's tiles measured in both dtypes, of the fp16 rate over
    the bf16 rate (None: no tile measured in both)."""

    def key(r: TensorCoreRate) -> tuple[Any, ...]:
        return (r.instruction, r.lowering, r.m, r.n, r.k, r.warps, r.operands)

    bf16 = {key(r): r.flops_per_s for r in tensor_rows(c, family, "bf16")}
    ratios = sorted(
        r.flops_per_s / bf16[key(r)] for r in tensor_rows(c, family, "fp16") if key(r) in bf16
    )
    if not ratios:
        return None
    mid = len(ratios) // 2
    return ratios[mid] if len(ratios) % 2 else (ratios[mid - 1] + ratios[mid]) / 2


def matmul_by_head_dim(rows: list[TensorCoreRate], peak: float) -> tuple[tuple[int, float], ...]:
    """(K, fraction of the datasheet peak) for each measured inner dimension K = head dim:
    the fastest tile at that K."""
    best: dict[int, float] = {}
    for r in rows:
        best[r.k] = max(best.get(r.k, 0.0), r.flops_per_s)
    return tuple((k, min(1.0, best[k] / peak)) for k in sorted(best))


def wgmma_rates(c: Ceilings) -> dict[tuple[int, int, int], float]:
    """The fastest valid Mosaic wgmma row of each M x N x K, bf16, operands in shared
    memory, of any form: the rates the tile-shape terms compare."""
    rate: dict[tuple[int, int, int], float] = {}
    for r in c.tensor_core:
        if (r.instruction, r.dtype, r.operands, r.valid) == ("wgmma", "bf16", "smem", True):
            key = (r.m, r.n, r.k)
            rate[key] = max(rate.get(key, 0.0), r.flops_per_s)
    return rate


def blocked_ratios(
    c: Ceilings, family: KernelFamily, spec: HardwareSpec
) -> tuple[tuple[int, float], ...]:
    """(d, c) for each head dim the family's blocked layout splits (``blocked_cols``):
    the blocked layout's matmul rate over the tiled layout's at d, from the family's
    instruction's tile rows (bf16, any form). Its two products have equal FLOPs: O += P V
    is one wgmma per column block (M = the query tile, N = the block's columns, K = the
    key tile), at ``r_pv`` = that tile's rate over N = d's; S = Q K^T is a chain of
    wgmmas of K = the block's columns (N = the key tile), at ``r_qk`` = that tile's rate
    over K = d's. ``c = 1 / (1/(2 r_qk) + 1/(2 r_pv))``; a ratio whose two tiles were not
    both measured is 1, a head dim with neither is left out (no term there)."""
    if not family.blocked_cols or family.matmul != "wgmma":
        return ()
    rate = wgmma_rates(c)

    def ratio(narrow: tuple[int, int, int], whole: tuple[int, int, int]) -> float | None:
        if narrow in rate and whole in rate:
            return min(1.0, rate[narrow] / rate[whole])
        return None

    out = []
    for d, cols in sorted(family.blocked_cols.items()):
        if cols >= d:
            continue
        tile = family.tile_for(d, causal=False, arch=spec.arch)
        q, k = tile.block_q, tile.block_k
        r_pv, r_qk = ratio((q, cols, k), (q, d, k)), ratio((q, k, cols), (q, k, d))
        if r_pv is None and r_qk is None:
            continue
        out.append((d, 1.0 / (0.5 / (r_qk or 1.0) + 0.5 / (r_pv or 1.0))))
    return tuple(out)


def narrow_n_ratios(c: Ceilings, family: KernelFamily) -> tuple[tuple[int, float], ...]:
    """(N, r) for each N below 64 measured on the family's instruction (wgmma, bf16, two
    warpgroups of 64 rows, operands in shared memory, any form): ``r`` = the fastest
    such tile at N over the fastest at N = 64; empty for other instructions or where
    N = 64 was not measured."""
    if family.matmul != "wgmma":
        return ()
    best: dict[int, float] = {}
    for (m, n, _), rate in wgmma_rates(c).items():
        if m == 128:
            best[n] = max(best.get(n, 0.0), rate)
    if 64 not in best:
        return ()
    return tuple((n, min(1.0, best[n] / best[64])) for n in sorted(best) if n < 64)


def wgmma_drains(c: Ceilings) -> tuple[tuple[int, float], ...]:
    """(K, seconds) for each K at which a 64-row, 64-column wgmma tile of one warpgroup
    alone on its SM was measured both ways: each product waited for before the next is
    issued ("bwd_serial") and the next in flight behind it ("bwd_lone"). The difference of
    the two per product, on one SM, is the drain a dependent product exposes (empty where
    either was not measured): ``2·64·64·K·SMs·(1/r_serial − 1/r_lone)``."""
    rate: dict[tuple[str, int], float] = {}
    for r in c.tensor_core:
        key = (str(r.form), r.k)
        wanted = key[0] in ("bwd_serial", "bwd_lone") and (r.m, r.n) == (64, 64)
        if wanted and r.instruction == "wgmma" and r.dtype == "bf16" and r.valid:
            rate[key] = max(rate.get(key, 0.0), r.flops_per_s)
    out = []
    for k in sorted({k for form, k in rate if form == "bwd_serial"}):
        if ("bwd_lone", k) in rate:
            flops = 2.0 * 64 * 64 * k * c.sm_count
            drain = flops * (1.0 / rate["bwd_serial", k] - 1.0 / rate["bwd_lone", k])
            out.append((k, max(0.0, drain)))
    return tuple(out)


#: The naive model's kernel each [[xla_naive]] call stands for, and the shape variable
#: (a symbol of ``perfmodel.symbols``) its rate goes by.
XLA_NAIVE_KERNELS = {"scores": ("qk", "d"), "softmax": ("softmax", "m"), "pv": ("pv", "d")}


def _naive_bytes(r: XlaNaiveRate) -> float:
    """The bytes the naive model (its "xla" compile, no batch copies) counts for the call
    of ``r``: the scores product reads Q and K and writes S, the PV product reads P and
    V and writes O, the softmax reads S as often as ``costs.naive`` says (more than once
    past XLA's one-fusion row) and writes P."""
    from perfmodel.costs.xla_rows import softmax_reads

    item = BYTES_PER_ELEMENT[r.dtype]
    big = r.rows * r.m * item
    if r.op == "softmax":
        return (softmax_reads("xla", r.m) + 1) * big
    return big + 2 * r.rows * (r.d or 0) * item


def xla_naive_ratios(c: Ceilings) -> tuple[tuple[str, str, tuple[tuple[int, float], ...]], ...]:
    """For each naive kernel whose XLA library call the ceilings measured (``[[xla_naive]]``:
    a row softmax by row length, the two batched products by head dim, random data):
    (kernel, the variable its rate goes by, (value, ratio) table). A ratio is the rate at
    which the call moved the bytes the naive model counts for it (:func:`_naive_bytes`)
    over the same device's HBM copy rate (``hbm_copy_bytes_per_s``, the naive profile's
    ``hbm_efficiency``): what the library call reaches, whatever bounds it (a product at
    d = 256 is near its matmul roof), as a share of what a copy does, so that it stands
    as a prior on a sibling of another HBM (empty: no copy rate measured)."""
    copy = c.value("hbm_copy_bytes_per_s")
    if not copy:
        return ()
    out = []
    for op, (kernel, variable) in XLA_NAIVE_KERNELS.items():
        best: dict[int, float] = {}
        for r in c.xla_naive:
            if r.op == op:
                x = r.m if variable == "m" else (r.d or 0)
                rate = _naive_bytes(r) / r.device_s / copy
                best[x] = max(best.get(x, 0.0), rate)
        if best:
            out.append((kernel, variable, tuple(sorted(best.items()))))
    return tuple(out)


def l2_plateau(c: Ceilings, spec: HardwareSpec) -> float | None:
    """The L2 re-read rate attention sees: the median of the working sets from 8 MiB up
    to the L2's size (a few MiB run faster: they fit one partition of the L2)."""
    top = spec.l2_bytes or 0
    rates = sorted(r.bytes_per_s for r in c.l2 if 8 * 2**20 <= r.working_set_bytes <= top)
    if not rates:
        return c.value("l2_read_bytes_per_s")
    return rates[len(rates) // 2]


def measured_fractions(
    c: Ceilings, spec: HardwareSpec, family: KernelFamily | None
) -> dict[str, Any]:
    """The fractions of each datasheet roof the device's microbenchmarks reach, for a
    family's fused kernel (``family``) or for the naive side's library calls (None):
    ``Calibration`` fields, each with its source."""
    peak = spec.peak("bf16")
    out: dict[str, Any] = {}
    sources: dict[str, str] = {}
    if family is None:
        gemm = c.value("gemm_bf16_flops_per_s")
        if gemm:
            out["matmul_efficiency"] = min(1.0, gemm / peak)
            sources["matmul_efficiency"] = "ceilings: gemm_bf16_flops_per_s (cuBLAS 8192^3)"
        hbm = c.value("hbm_copy_bytes_per_s")
        hbm_name = "hbm_copy_bytes_per_s (read + write passes)"
        _put(
            out,
            sources,
            "hbm_ratio_by_kernel",
            xla_naive_ratios(c),
            "ceilings: [[xla_naive]], XLA's row softmax by row length and batched products by "
            "head dim on random data, at the bytes the naive model counts, over the HBM copy "
            "rate (xla_naive_ratios)",
        )
    else:
        table = matmul_by_head_dim(tensor_rows(c, family), peak)
        if table:
            out["matmul_efficiency_by_d"] = table
            out["matmul_efficiency"] = interpolate(table, 128.0)
            sources["matmul_efficiency"] = (
                f"ceilings: {family.matmul} tile kernels of [[tensor_core]] by K = head dim"
            )
        _put(
            out,
            sources,
            "matmul_narrow_ratio_by_n",
            narrow_n_ratios(c, family),
            f"ceilings: {family.matmul} tiles of [[tensor_core]] at N < 64 over N = 64, bf16, "
            "128 rows (narrow_n_ratios)",
        )
        blocked = blocked_ratios(c, family, spec)
        if blocked:
            out["matmul_blocked_ratio_by_d"] = blocked
            out["blocked_multiple"] = family.blocked_multiple
            sources["matmul_blocked_ratio_by_d"] = (
                f"ceilings: {family.matmul} tiles of [[tensor_core]]: O += P V at N = one "
                "column block over N = d, S = Q K^T at K = one column block over K = d "
                "(blocked_ratios)"
            )
        _put(
            out,
            sources,
            "wgmma_drain_s_by_d",
            wgmma_drains(c) if family.matmul == "wgmma" else (),
            "ceilings: wgmma 64x64xK tiles of one warpgroup alone on an SM, each product "
            "waited for (bwd_serial) against the next in flight (bwd_lone) (wgmma_drains)",
        )
        _put(
            out,
            sources,
            "matmul_fp16_ratio",
            fp16_ratio(c, family),
            f"ceilings: fp16 over bf16 rate of the {family.matmul} tile kernels measured in "
            "both (median)",
        )
        hbm = c.value("hbm_read_bytes_per_s")
        hbm_name = "hbm_read_bytes_per_s (attention reads far more than it writes)"
    pairs = (
        ("exp_efficiency", c.value("exp_per_s"), spec.exp_per_s, "exp_per_s"),
        (
            "vector_efficiency",
            c.value("vector_fp32_flops_per_s"),
            spec.vector_fp32_flops_per_s,
            "vector_fp32_flops_per_s",
        ),
        ("hbm_efficiency", hbm, spec.hbm_bandwidth_bytes_per_s, hbm_name),
        (
            "l2_efficiency",
            l2_plateau(c, spec),
            spec.l2_bandwidth_bytes_per_s,
            "median of [[l2]] from 8 MiB to the L2 size",
        ),
    )
    for field, measured, datasheet, name in pairs:
        if measured and datasheet:
            out[field] = min(1.0, measured / datasheet)
            sources[field] = f"ceilings: {name}"
    if family is not None and family.dq_atomics is not None:
        name = REDUCE_CEILING[family.dq_atomics]
        reduce = c.value(name)
        if reduce:
            out["l2_reduce_efficiency"] = min(1.0, reduce / spec.l2_reduce_base_bytes_per_s)
            sources["l2_reduce_efficiency"] = f"ceilings: {name} ({family.dq_atomics} dQ adds)"
    kernel_min = c.value("kernel_min_s")
    if kernel_min:
        out["launch_overhead_s"] = kernel_min
        sources["launch_overhead_s"] = "ceilings: kernel_min_s"
    out["sources"] = sources
    return out


#: The headline that measures each form of an atomic dQ's adds (``DqAtomics``): the
#: pattern of a backward's programs, a head's K/V blocks adding into the same Q tiles.
REDUCE_CEILING = {
    "element": "l2_triton_red_shared_bytes_per_s",
    "bulk": "l2_tma_reduce_shared_bytes_per_s",
}


def _put(out: dict[str, Any], sources: dict[str, str], field: str, value: Any, source: str) -> None:
    """``out[field] = value`` with its source, where the ceilings gave one (not empty)."""
    if value:
        out[field] = value
        sources[field] = source


def interpolate(table: tuple[tuple[int, float], ...], d: Any) -> Any:
    """A fraction at head dim ``d`` from a (K, fraction) table: linear in log2 K between
    measured K, the nearest measured K outside them (numbers or arrays)."""
    ks = np.log2([k for k, _ in table])
    values = [v for _, v in table]
    out = np.interp(np.log2(np.asarray(d, dtype=float)), ks, values)
    return float(out) if np.ndim(out) == 0 else out
