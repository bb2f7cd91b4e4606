"""Measured attention timings: the schema, a loader and an atomic merge-writer.

A measurement file (``specs/measurements/*.json``) holds runs; each run is one
benchmark process on one device, with the ceilings it measured and one point per
(implementation, shape) it timed. The GPU benchmark (``kernel_bench/bench.py``)
writes the same field names with plain ``json`` (its image has no pydantic); this
module validates them. It never imports jax. Units are SI: seconds, bytes, FLOP/s.

>>> ceil = Ceilings(matmul_bf16_flops_per_s=7.7e14, copy_bytes_per_s=4.3e12)
>>> ceil.l2_bytes is None
True
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from perfmodel.atomic import write_json
from perfmodel.catalog.fields import (
    NUMBER,
    ByteCount,
    BytesPerSecond,
    Count,
    Flag,
    FlopsPerSecond,
    Fraction,
    NonNegativeCount,
    Overhead,
    Ratio,
    Seconds,
    within,
)
from perfmodel.catalog.kernels import GroupSplit, SequencePadding
from perfmodel.catalog.registry import parse, parse_model, read_text
from perfmodel.costs import masks, nominal
from perfmodel.errors import PerfmodelError
from perfmodel.shape import Shape
from perfmodel.vocabulary import Implementation, dtype

Status = Literal["ok", "oom", "error"]
Phase = Literal["forward", "backward", "train"]
#: How ``device_time_s`` was measured (kernel_bench/timing.py): CUPTI's summed kernel
#: durations per call; wall time of calls queued back to back; or (naive, one early run)
#: CUPTI over the three steps compiled as one program with optimisation barriers.
DeviceTimeMethod = Literal["cupti_kernel_sum", "queued_calls", "cupti_one_program_barriers"]
#: What ``median_s`` is: device time, or (files before 2026-11-30, no field) wall time
#: per call with up to 50 calls queued per synchronised sample, host dispatch included.
TimeBasis = Literal["device", "legacy_queued"]


#: A clock rate: 1 MHz to 100 GHz.
Hertz = Annotated[float, NUMBER, within(1e6, 1e11, unit=" Hz")]
#: Tokens per second: above 0, at most 10^15.
TokenRate = Annotated[float, NUMBER, within(0.0, 1e15, open_low=True, unit=" tokens/s")]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Ceilings(_Frozen):
    """Rates measured on the device in the same run as the points."""

    matmul_bf16_flops_per_s: FlopsPerSecond
    copy_bytes_per_s: BytesPerSecond  #: bytes read + bytes written, per second
    l2_read_bytes_per_s: BytesPerSecond | None = None
    launch_overhead_s: Overhead | None = None
    l2_bytes: ByteCount | None = None
    sm_count: Count | None = None
    clock_hz: Hertz | None = None


class BackwardConfig(_Frozen):
    """The backward kernels' launch a point timed (``pallas_kernels.flash_backward.Config``):
    the dK/dV kernel's tile, the dQ pass's, warps and stages, and how dQ is summed."""

    block_q: Count
    block_k: Count
    dq_block_q: Count | None = None
    dq_block_k: Count | None = None
    num_warps: Count
    num_stages: Count
    dq: Literal["two_pass", "atomic"] | None = None
    #: the dQ pass's launch parameters where they differ (None: the dK/dV kernel's)
    dq_num_warps: Count | None = None
    dq_num_stages: Count | None = None


class Point(_Frozen):
    """One implementation timed at one shape; times are over ``runs`` timed calls."""

    implementation: Implementation
    n: Count  #: query length
    kv_len: Count
    d: Count
    h: Count
    h_kv: Count
    batch: Count
    dtype: str
    causal: Flag
    block_q: Count | None = None
    block_k: Count | None = None
    #: Paged decode only: tokens per KV page, and KV chunks per sequence (split-KV).
    page_size: Count | None = None
    splits: Count | None = None
    num_warps: Count | None = None
    num_stages: Count | None = None
    status: Status
    error: str | None = None
    median_s: Seconds | None = None
    p10_s: Seconds | None = None
    p90_s: Seconds | None = None
    min_s: Seconds | None = None
    runs: NonNegativeCount = 0
    #: nominal FLOPs (``perfmodel.costs.nominal``: 4·b·h·n·kv_len·d, halved when causal;
    #: under a ``window``, 4·d·b·h per visible query-key pair) over ``median_s``
    tflops: Ratio | None = None
    tokens_per_s: TokenRate | None = None  #: batch * n / median_s
    peak_memory_bytes: NonNegativeCount | None = None
    #: Kernel family of the implementation (specs/kernels/*.toml), when recorded.
    family: str | None = None
    #: What one call timed: the forward (absent in older files), the backward alone, or a
    #: training step (forward and backward in one call); ``predict``'s ``mode``.
    phase: Phase | None = None
    #: Absent in older files: read as "legacy_queued" (:meth:`basis`).
    time_basis: TimeBasis | None = None
    #: Device time per call, the quantity the model's ``time_s`` predicts.
    device_time_s: Seconds | None = None
    device_time_method: DeviceTimeMethod | None = None
    kernels_per_call: Count | None = None  #: kernels CUPTI saw per call
    #: Wall time per call with calls queued back to back, and the share of a sample the
    #: host spent issuing them (near 1: host-bound, the number is dispatch).
    queued_time_s: Seconds | None = None
    queued_host_share: Fraction | None = None
    queued_calls_per_sample: Count | None = None
    #: One synchronous call as a user's script sees it: dispatch, kernels, sync.
    call_latency_s: Seconds | None = None
    call_latency_p10_s: Seconds | None = None
    call_latency_samples: Count | None = None
    #: Spread of the device time over its samples.
    device_p10_s: Seconds | None = None
    device_p90_s: Seconds | None = None
    device_samples: Count | None = None
    #: Bytes the forward keeps for the backward (O, the log-sum-exp; naive: P).
    residual_bytes: NonNegativeCount | None = None
    #: The backward kernels' launch, where the benchmark set one.
    backward_config: BackwardConfig | None = None
    #: The kernel family whose ``[backward]`` ran, where it is not what the point's
    #: family runs today (``specs/kernels``): our runs before the Mosaic backward existed
    #: (2026-12-02) ran the Triton backward ("pallas-triton") after either forward.
    backward_family: str | None = None
    #: The forward's sequence padding (``KernelFamily.sequence_padding``) where it is not
    #: what the point's family does today: our Mosaic runs before 2026-12-02's blocked
    #: layout (``flash_mosaic.Config.pad_seq`` True then) padded per consumer.
    sequence_padding: SequencePadding | None = None
    #: How the backward's dK/dV kernel summed a GQA group (``Backward.group_split``)
    #: where it is not what the family does today; the comparison sets it from the run's
    #: time for runs before the family's ``group_split_since`` (``compare.as_run``).
    group_split: GroupSplit | None = None
    #: A launch variant of a tuning sweep, not the kernel's default (``variant`` names
    #: it): listed, but neither validated nor fitted on.
    tuning: Flag | None = None
    variant: str | None = None
    #: A sliding window the call ran under, (left, right) keys (None: unbounded side),
    #: as ``predict(window=...)`` takes it (``kernel_bench/bench_window.py``); None: none.
    window: tuple[NonNegativeCount | None, NonNegativeCount | None] | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Point:
        if self.h % self.h_kv:
            raise ValueError(f"h={self.h} must be a multiple of h_kv={self.h_kv}")
        if self.time_basis == "device" and self.status == "ok" and self.device_time_s is None:
            raise ValueError("a point with time_basis='device' needs device_time_s")
        if self.status == "ok" and self.median_s is None:
            raise ValueError("an 'ok' point needs median_s")
        if self.status != "ok" and self.error is None:
            raise ValueError(f"a {self.status!r} point needs an error message")
        return self

    @property
    def timings_contradict(self) -> bool:
        """Device time above the wall time of the same calls queued back to back: one of
        the two is wrong (kept out of fits: ``perfmodel.validation.compare.fittable``)."""
        return (
            self.device_time_s is not None
            and self.queued_time_s is not None
            and self.device_time_s > self.queued_time_s
        )

    def basis(self) -> TimeBasis:
        """What ``median_s`` measures; points written before the field existed are legacy."""
        return self.time_basis or "legacy_queued"

    def nominal_flops(self) -> float:
        """The forward's nominal FLOPs at this shape (``perfmodel.costs.nominal``); under
        a window, over the query-key pairs it keeps (``costs.masks.keys_seen``)."""
        if self.window is None:
            return nominal.nominal_flops(
                batch=self.batch,
                h=self.h,
                n=self.n,
                kv_len=self.kv_len,
                d=self.d,
                causal=self.causal,
            )
        mask = masks.mask_of(self.n, self.kv_len, causal=self.causal, window=self.window)
        return nominal.visible_flops(
            batch=self.batch, h=self.h, d=self.d, pairs=masks.keys_seen(mask, self.n, self.kv_len)
        )

    def shape(self) -> Shape:
        """The attention shape this point timed (dtype in the model's names: ``bf16``), with
        the tiles, warps and splits it recorded; its kernel family where it names one."""
        return Shape(
            n=self.n,
            kv_len=self.kv_len,
            d=self.d,
            h=self.h,
            h_kv=self.h_kv,
            batch=self.batch,
            dtype=str(dtype(self.dtype, framework_names=True)),
            causal=self.causal,
            block_q=self.block_q,
            block_k=self.block_k,
            kernel=self.family or Shape.kernel,
            warps=self.num_warps,
            splits=self.splits,
            window=self.window,
        )


class Run(_Frozen):
    """One benchmark process: where and when it ran, what it measured."""

    run_id: str
    device_name: str
    jax_version: str
    git_commit: str
    timestamp: str  #: ISO 8601, UTC
    #: None: the run measured no ceilings of its own (the backward runs of 2026-11-30).
    ceilings: Ceilings | None = None
    points: list[Point]
    #: What a benchmark kept per shape beside its points (``kernel_bench/bench_window.py``:
    #: the shape, output differences against a peer, variants), as it wrote it.
    details: list[dict[str, Any]] | None = None


class MeasurementFile(_Frozen):
    """A whole measurement file: runs appended in the order they were made."""

    schema_version: Literal[1] = 1  #: the file format's version; only 1 exists
    runs: list[Run]

    @model_validator(mode="after")
    def _unique_ids(self) -> MeasurementFile:
        ids = [r.run_id for r in self.runs]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"duplicate run_id values: {dupes}")
        return self


def read_measurement_file(path: str | Path) -> MeasurementFile:
    """Parse and validate one file; raises PerfmodelError naming the file and the problem."""
    loads = functools.partial(json.loads, parse_constant=_no_constant, parse_float=_finite)
    raw = parse(read_text(path, "measurement"), path, "measurement", loads)
    return parse_model(MeasurementFile, raw, path, "measurement")


def _finite(text: str) -> float:
    """A JSON number as a float; one too large for a float (``1e999``) is refused, not
    read as infinity."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is too large for a number")
    return value


def _no_constant(name: str) -> float:
    """NaN and Infinity are not JSON, and not a time: refuse them where they stand."""
    raise ValueError(f"{name} is not a number JSON allows")


def load_measurements(paths: str | Path | Iterable[str | Path]) -> list[tuple[Run, Point]]:
    """Every ``(run, point)`` pair of one file or several, in file and run order."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    return [
        (run, p) for path in paths for run in read_measurement_file(path).runs for p in run.points
    ]


def merge_write(path: str | Path, new_run: Run | dict[str, Any]) -> MeasurementFile:
    """Append ``new_run`` to the file at ``path`` (created if absent), atomically.

    The merged file is validated before anything is written and replaces the old one
    with ``os.replace`` from a temporary file in the same folder, so a failure (invalid
    run, duplicate id, full disk) leaves the earlier data as it was.
    """
    path = Path(path)
    old = read_measurement_file(path).runs if path.exists() else []
    try:
        run = new_run if isinstance(new_run, Run) else Run.model_validate(new_run)
        merged = MeasurementFile(runs=[*old, run])
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise PerfmodelError(f"run not added to {str(path)!r}: {where}: {first['msg']}") from None
    write_json(path, merged.model_dump(mode="json"))
    return merged
