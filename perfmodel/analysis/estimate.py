"""Whole-model estimates: time to first token, time per output token, throughput, memory.

A decoder-only model (``specs/models/*.toml``) on a device is a list of operators, each
one kernel with its FLOPs and HBM bytes (``perfmodel.costs.transformer`` for the
projections, MLP, norms and elementwise work; ``perfmodel.predict`` for prefill
attention; ``perfmodel.analysis.kvcache.decode_step`` for decode attention). Each operator's
time is its roofline time at the calibrated fraction of each roof plus one launch gap;
the operators of one forward run one after another, so their times add up.

* **Prefill** (time to first token): every layer over ``batch·prompt`` tokens, causal
  attention over the prompt, and the LM head on the last token of each sequence.
* **Decode** (time per output token): every layer over ``batch`` tokens, attention
  over a KV cache of ``context`` tokens (contiguous, or paged with a block table),
  and the LM head. Its time is affine in the context, so the mean over a response of
  ``output`` tokens is the step at ``prompt + output/2``.
* **Memory**: weights, the KV cache (contiguous: ``prompt + output`` tokens reserved per
  sequence; paged: whole pages), the activations alive at the MLP's peak, and the
  attention scratch (naive attention's S and P, one layer at a time).

Calibration: the GEMMs and elementwise kernels use the ``default`` profile (datasheet
roofs derated to what tuned libraries reach); attention uses the profile of its kernel
family where one was fitted on this device (``kernel="pallas"``, ``"cudnn"``,
``"xla"``), with its launch gap replaced by the device's and no host dispatch: inside a
whole model every kernel is one of hundreds queued in one executable.

>>> e = estimate("llama-3.1-8b", "h200", prompt=2048, output=256, batch=16)
>>> e.memory.fits, round(e.memory.weights_bytes / 1e9, 2)
(True, 16.06)
>>> e.prefill.time_s > e.decode.time_s
True
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfmodel import roofline, symbols
from perfmodel.analysis.kvcache import kept_tokens, layer_groups
from perfmodel.arguments import MAX_TOKENS, PARAMETERS, Choice, Flag, Param, PositiveInt
from perfmodel.catalog.calibration import Calibration, known_calibrations, load_calibration
from perfmodel.catalog.hardware import HardwareSpec, load_hardware
from perfmodel.catalog.models import ModelSpec, load_model
from perfmodel.compile import compiled
from perfmodel.costs import transformer as tf
from perfmodel.costs.base import Kernel
from perfmodel.errors import PerfmodelError
from perfmodel.evaluate import KernelRoofs, estimate_time, roof_rates
from perfmodel.results import html_table, markdown_table
from perfmodel.units import si
from perfmodel.vocabulary import ROOFS, Roof, symbol_values

if TYPE_CHECKING:
    from perfmodel.analysis.kvcache import DecodeStep
    from perfmodel.results import AlgorithmPrediction

#: Attention algorithms: naive (S and P through HBM) and FlashAttention-2.
ATTENTION = {"naive": "naive", "flash": "flash", "fa2": "flash", "flash2": "flash"}
#: Kernel families with fitted profiles: (algorithm, profile implementation, naive variant).
KERNELS = {
    "pallas": ("flash", "pallas_flash", "minimal"),
    "cudnn": ("flash", "cudnn", "minimal"),
    "xla": ("naive", "naive", "xla"),
}
KV_LAYOUTS = ("contiguous", "paged")
#: Page size of the paged KV cache (vLLM's default block size).
PAGE_TOKENS = 16


@dataclass(frozen=True)
class Operator:
    """One operator of a forward pass, summed over its ``count`` launches. SI units."""

    name: str
    count: int
    flops: float
    hbm_bytes: float
    t_lower_s: float  #: the roofline floor, no derating, no launch gap
    time_s: float  #: the estimate
    roof: str  #: the largest roof

    @property
    def intensity(self) -> float:
        return self.flops / self.hbm_bytes if self.hbm_bytes else math.inf


@dataclass(frozen=True)
class Phase:
    """Prefill or one decode step: its operators and their sums."""

    name: str
    tokens: int  #: tokens through each layer in this phase
    context: int  #: KV length attention reads
    operators: tuple[Operator, ...]

    @property
    def time_s(self) -> float:
        return sum(op.time_s for op in self.operators)

    @property
    def t_lower_s(self) -> float:
        return sum(op.t_lower_s for op in self.operators)

    @property
    def flops(self) -> float:
        return sum(op.flops for op in self.operators)

    @property
    def hbm_bytes(self) -> float:
        return sum(op.hbm_bytes for op in self.operators)

    def share(self, name: str) -> float:
        """Fraction of the phase's time spent in operator ``name``."""
        return sum(op.time_s for op in self.operators if op.name == name) / self.time_s

    @property
    def attention_s(self) -> float:
        """Time in attention proper, global and local layers (:data:`ATTENTION_OPERATORS`)."""
        return sum(op.time_s for op in self.operators if op.name in ATTENTION_OPERATORS)

    @property
    def attention_share(self) -> float:
        """Fraction of the phase's time in attention proper."""
        return self.attention_s / self.time_s


@dataclass(frozen=True)
class Memory:
    """Device memory at the peak of prefill, bytes."""

    weights_bytes: float
    kv_cache_bytes: float
    activations_bytes: float
    attention_scratch_bytes: float
    capacity_bytes: float

    @property
    def total_bytes(self) -> float:
        return (
            self.weights_bytes
            + self.kv_cache_bytes
            + self.activations_bytes
            + self.attention_scratch_bytes
        )

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.capacity_bytes

    @property
    def shortfall_bytes(self) -> float:
        return max(0.0, self.total_bytes - self.capacity_bytes)


@dataclass(frozen=True)
class Estimate:
    """A whole-model estimate for one model, device and workload."""

    model: str
    hardware: str
    dtype: str
    attention: str
    kernel: str | None
    kv: str
    batch: int
    prompt: int
    output: int
    prefill: Phase
    decode: Phase
    memory: Memory
    tp: int = 1  #: devices the model is split over (tensor parallel); phases and memory per device
    notes: tuple[str, ...] = field(default=())

    @property
    def ttft_s(self) -> float:
        """Time to first token: the prefill."""
        return self.prefill.time_s

    @property
    def tpot_s(self) -> float:
        """Time per output token, at the decode context."""
        return self.decode.time_s

    @property
    def latency_s(self) -> float:
        """End to end: prefill, then ``output - 1`` decode steps."""
        return self.ttft_s + (self.output - 1) * self.tpot_s

    @property
    def prefill_tokens_per_s(self) -> float:
        return self.batch * self.prompt / self.ttft_s

    @property
    def decode_tokens_per_s(self) -> float:
        return self.batch / self.tpot_s

    @property
    def throughput_tokens_per_s(self) -> float:
        """Output tokens per second over the whole request, prefill included."""
        return self.batch * self.output / self.latency_s

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for phase in ("prefill", "decode"):
            p = getattr(self, phase)
            out[phase].update(
                time_s=p.time_s, t_lower_s=p.t_lower_s, flops=p.flops, hbm_bytes=p.hbm_bytes
            )
        out["memory"].update(
            total_bytes=self.memory.total_bytes,
            fits=self.memory.fits,
            shortfall_bytes=self.memory.shortfall_bytes,
        )
        out.update(
            ttft_s=self.ttft_s,
            tpot_s=self.tpot_s,
            latency_s=self.latency_s,
            prefill_tokens_per_s=self.prefill_tokens_per_s,
            decode_tokens_per_s=self.decode_tokens_per_s,
            throughput_tokens_per_s=self.throughput_tokens_per_s,
        )
        return out

    def __str__(self) -> str:
        return estimate_table(self)

    def _repr_html_(self) -> str:
        return estimate_html(self)

    def _repr_markdown_(self) -> str:
        return estimate_markdown(self)


# --- input checks -----------------------------------------------------------------
#: estimate's arguments, in perfmodel.arguments' kinds (the shared ones from PARAMETERS).
ARGUMENTS: dict[str, Param] = {
    "prompt": PositiveInt("prompt tokens per request", limit=MAX_TOKENS),
    "output": PositiveInt("generated tokens per request", limit=MAX_TOKENS),
    "context": PositiveInt("KV length of the TPOT step", optional=True, limit=MAX_TOKENS),
    "page_tokens": PositiveInt("tokens per KV page", limit=MAX_TOKENS),
    "batch": PARAMETERS["batch"],
    "tp": PARAMETERS["tp"],
    "dtype": PARAMETERS["dtype"],
    "attention": Choice(known=ATTENTION),
    "kernel": Choice(known=KERNELS, optional=True),
    "kv": Choice(known=KV_LAYOUTS),
    "check_memory": Flag(),
}


def check_arguments(**values: object) -> dict[str, Any]:
    """Each of estimate's arguments checked as :data:`ARGUMENTS` declares; returns them."""
    return {k: ARGUMENTS[k].scalar(k, v) for k, v in values.items()}


def _attention_choice(attention: str, kernel: str | None) -> tuple[str, str | None, str]:
    """(algorithm, profile implementation or None, naive variant)."""
    algorithm = ATTENTION[attention]
    if kernel is None:
        return algorithm, None, "minimal"
    family, impl, variant = KERNELS[kernel]
    if family != algorithm:
        raise PerfmodelError(f"kernel={kernel!r} implements {family} attention, not {attention!r}")
    return algorithm, impl, variant


def _profile(device: HardwareSpec, impl: str | None) -> Calibration:
    """The attention profile: fitted for ``impl`` on this device, with the device's launch
    gap and no host dispatch (inside a model, kernels queue in one executable)."""
    if impl is None:
        return load_calibration("default")
    for name in known_calibrations():
        cal = load_calibration(name)
        if cal.device == device.name and cal.implementation == impl:
            return cal.model_copy(update={"launch_overhead_s": None, "dispatch_overhead_s": 0.0})
    raise PerfmodelError(f"no calibration fitted for kernel {impl!r} on {device.name}")


# --- operators ----------------------------------------------------------------------
def _values(
    spec: ModelSpec, dtype: str, rows: int, head_rows: int, moe: bool = True
) -> dict[str, int]:
    """Symbol values of one layer kind: a MoE layer (``moe``; a dense model's only kind)
    runs its experts of ``expert_width``, a dense layer of a MoE model (DeepSeek's first
    ``dense_layers``) one MLP of ``intermediate``."""
    routed = moe and spec.experts > 1
    latent = spec.mla
    return symbol_values(
        rows=rows,
        head_rows=head_rows,
        hidden=spec.hidden,
        inter=spec.expert_width if routed else spec.intermediate,
        vocab=spec.vocab,
        h=spec.heads,
        h_kv=spec.kv_heads,
        d=spec.head_dim,
        experts=spec.experts if moe else 1,
        top_k=spec.experts_per_token if moe else 1,
        shared=spec.shared_experts if routed else 0,
        **(
            {}
            if latent is None
            else dict(
                kv_rank=latent.kv_lora_rank,
                rope_dim=latent.qk_rope_head_dim,
                nope_dim=latent.qk_nope_head_dim,
                v_dim=latent.v_head_dim,
                q_rank=latent.q_lora_rank,
            )
        ),
        dtype=dtype,
    )


def _operator(
    kernel: Kernel,
    count: int,
    values: dict[str, Any],
    device: HardwareSpec,
    dtype: str,
    calibration: Calibration,
) -> Operator:
    """One kernel through the public evaluation door: roof times at the device's rates
    (:func:`perfmodel.evaluate.roof_rates`), then :func:`perfmodel.evaluate.estimate_time`
    (each roof at its calibrated fraction, plus one launch gap). Such a kernel fills the
    chip: no idle SMs, no per-block fill."""
    values_ = compiled(tuple(getattr(kernel, r.work) for r in ROOFS))(**values)
    rates = roof_rates(device, device.peak(dtype))
    roofs = dict(zip(ROOFS, values_, strict=True))  # the work each roof bounds
    times = roofline.roof_times(roofs, rates)
    launch = calibration.launch_overhead_s
    launch = device.launch_overhead_s if launch is None else launch
    time = estimate_time([KernelRoofs(kernel.name, times, times, 0.0, times)], calibration, launch)
    return Operator(
        name=kernel.name,
        count=count,
        flops=count * (roofs[Roof.MATMUL] + roofs[Roof.VECTOR]),
        hbm_bytes=count * roofs[Roof.HBM],
        t_lower_s=count * float(roofline.lower_bound(times)),  # one kernel: numbers
        time_s=count * float(time),
        roof=roofline.binding_roof(times),
    )


def _layer_operators(
    spec: ModelSpec, device: HardwareSpec, dtype: str, rows: int, head_rows: int
) -> list[Operator]:
    default = load_calibration("default")
    mla = spec.mla is not None
    ops = []
    for moe, count in ((False, spec.dense_layers), (True, spec.moe_layers)):
        if count:
            values = _values(spec, dtype, rows, head_rows, moe)
            kernels = tf.dense_layer(moe=moe and spec.experts > 1, mla=mla)
            ops += [_operator(k, count, values, device, dtype, default) for k in kernels]
    values = _values(spec, dtype, rows, head_rows)
    return ops + [_operator(k, 1, values, device, dtype, default) for k in tf.once_per_forward()]


def _summed(name: str, count: int, side: AlgorithmPrediction | DecodeStep) -> Operator:
    """``count`` launches of one attention result (a ``predict`` side or a decode step)."""
    return Operator(
        name=name,
        count=count,
        flops=count * side.flops,
        hbm_bytes=count * side.hbm_bytes,
        t_lower_s=count * side.t_lower_s,
        time_s=count * side.time_s,
        roof=getattr(side, "binding_roof", "hbm"),
    )


#: The operator of local (sliding-window) attention layers; "attention" is global.
LOCAL_ATTENTION = "attention-swa"
#: Operators of attention proper (both kinds of layer), as ``Phase.attention_s`` sums them.
ATTENTION_OPERATORS = ("attention", LOCAL_ATTENTION)


def _attention_name(window: int | None) -> str:
    return "attention" if window is None else LOCAL_ATTENTION


def _prefill_attention(
    spec: ModelSpec,
    device: HardwareSpec,
    dtype: str,
    prompt: int,
    batch: int,
    algorithm: str,
    impl: str | None,
    variant: str,
) -> tuple[tuple[Operator, ...], float]:
    """Prefill attention per layer kind (global, and local under its window), plus MLA's
    decompression of K and V; and the largest attention scratch of one layer."""
    from perfmodel.costs import mla
    from perfmodel.prediction import predict

    heads: dict[str, Any] = dict(d=spec.head_dim, h=spec.heads, h_kv=spec.kv_heads)
    if spec.mla is not None:  # non-absorbed: ordinary attention at the mean head dim
        heads = mla.prefill_attention_shape(spec.mla.qk_head_dim, spec.mla.v_head_dim, spec.heads)
    ops: list[Operator] = []
    scratch = 0.0
    for window, count in layer_groups(spec):
        masked: dict[str, Any] = {} if window is None else {"window": window}
        p = predict(
            n=prompt,
            hw=device,
            **heads,
            batch=batch,
            dtype=dtype,
            causal=True,
            calibration=_profile(device, impl),
            naive=variant,
            **masked,
        )
        side = p.flash if algorithm == "flash" else p.naive
        ops.append(_summed(_attention_name(window), count, side))
        scratch = max(scratch, side.extra_memory_bytes)
    if spec.mla is not None:
        values = _values(spec, dtype, batch * prompt, batch)
        default = load_calibration("default")
        for kernel in (mla.decompress(symbols.rows), mla.expand_rope(symbols.rows)):
            ops.append(_operator(kernel, spec.layers, values, device, dtype, default))
    return tuple(ops), scratch


def _attention_notes(spec: ModelSpec) -> tuple[str, ...]:
    """What the two attention operators are, for a model with sliding-window layers."""
    groups = layer_groups(spec)
    if all(window is None for window, _ in groups):
        return ()
    kinds = [
        f"{count} global layers (attention)"
        if window is None
        else f"{count} sliding-window layers ({LOCAL_ATTENTION}: {window + 1} keys a query, "
        f"its own included; KV cache: the last {window + 1} tokens)"
        for window, count in groups
    ]
    return ("attention: " + " + ".join(kinds),)


def decode_splits(device: HardwareSpec, batch: int, kv_heads: int, context: int, page: int) -> int:
    """KV chunks per sequence: the paged kernel's rule, ``perfmodel.costs.decode.paged_splits``
    with ``decode.PROGRAMS_PER_SM`` programs per SM."""
    from perfmodel.costs import decode

    values = symbol_values(batch=batch, h_kv=kv_heads, kv_len=context, page_tokens=page)
    resident = decode.PROGRAMS_PER_SM * device.sm_count
    return int(compiled(decode.paged_splits())(**values, resident_ctas=resident))


def _decode_attention(
    spec: ModelSpec,
    device: HardwareSpec,
    dtype: str,
    batch: int,
    context: int,
    kv: str,
    page_tokens: int,
) -> tuple[Operator, ...]:
    """One decode step's attention per layer kind: a local layer reads the last
    ``window + 1`` tokens of its cache at most; MLA reads its latent cache (absorbed)."""
    from perfmodel.analysis.kvcache import decode_step

    if spec.mla is not None:
        return _latent_decode(spec, device, dtype, batch, context)
    paged = kv == "paged"
    page = page_tokens if paged else 64  # contiguous: XLA fills the chip; 64-token blocks
    ops = []
    for window, count in layer_groups(spec):
        seen = int(kept_tokens(context, window))
        step = decode_step(
            device,
            batch=batch,
            kv_len=seen,
            h=spec.heads,
            h_kv=spec.kv_heads,
            d=spec.head_dim,
            dtype=dtype,
            page_tokens=page if paged else None,
            splits=decode_splits(device, batch, spec.kv_heads, seen, page),
        )
        ops.append(_summed(_attention_name(window), count, step))
    return tuple(ops)


def _latent_decode(
    spec: ModelSpec, device: HardwareSpec, dtype: str, batch: int, context: int
) -> tuple[Operator, ...]:
    """MLA decode, absorbed (FlashMLA's form): ``q·W_UK``, attention over the latent
    cache, ``·W_UV`` (``perfmodel.costs.mla``), at the default profile."""
    from perfmodel.costs import mla

    values = {**_values(spec, dtype, batch, batch), "b": batch, "m": context, "q_len": 1}
    default = load_calibration("default")
    kernels = (mla.absorb_kernels()[0], mla.absorbed_attention(), mla.absorb_kernels()[1])
    return tuple(_operator(k, spec.layers, values, device, dtype, default) for k in kernels)


def _ordered(ops: list[Operator], attention: tuple[Operator, ...]) -> tuple[Operator, ...]:
    """Layer operators in launch order with attention after rope (MLA: after the latent's
    norm), then the once-per-forward."""
    at = next(i for i, op in enumerate(ops) if op.name in ("rope", "mla_kv_norm")) + 1
    return tuple(ops[:at] + list(attention) + ops[at:])


def tensor_parallel_shard(spec: ModelSpec, device: HardwareSpec, tp: int) -> ModelSpec:
    """What one of ``tp`` devices holds of ``spec`` under Megatron-style tensor parallelism:
    ``h/tp`` query heads, ``h_kv/tp`` K/V heads (one replicated when ``tp > h_kv``),
    ``inter/tp`` MLP columns, ``vocab/tp`` embedding and LM-head rows; norms replicated."""
    tp = check_arguments(tp=tp)["tp"]
    if tp == 1:
        return spec
    links = device.links
    if links is None or _link_bytes_per_s(device) is None:
        raise PerfmodelError(
            f"{device.name} gives no link bandwidth in its spec: cannot estimate tp={tp}"
        )
    if links.devices_per_node is not None and tp > links.devices_per_node:
        raise PerfmodelError(
            f"tp={tp} exceeds the {links.devices_per_node} devices one {device.name} node joins;"
            " tensor parallelism across nodes is not modelled"
        )
    problem = _split_problem(spec, tp)
    if problem is not None:
        valid = ", ".join(map(str, valid_splits(spec, device)))
        raise PerfmodelError(f"{problem}; tp can be {valid} on {device.name}")
    shard = spec.model_copy(
        update=dict(
            name=f"{spec.name} (1/{tp})",
            heads=spec.heads // tp,
            kv_heads=max(spec.kv_heads // tp, 1),
            intermediate=spec.intermediate // tp,
            moe_intermediate=spec.moe_intermediate and spec.moe_intermediate // tp,
            vocab=math.ceil(spec.vocab / tp),
        )
    )
    return shard.model_copy(update=dict(params=shard.counted_params()))


def _link_bytes_per_s(device: HardwareSpec) -> float | None:
    """All-reduce bus bandwidth: measured on this device where the spec has it, else the
    fastest link the spec gives (NVLink, ICI, PCIe), per direction."""
    links = device.links
    if links is None:
        return None
    measured = links.measured.get("all_reduce_bytes_per_s")
    return measured or links.nvlink_bytes_per_s or links.ici_bytes_per_s or links.pcie_bytes_per_s


def _allreduce(spec: ModelSpec, device: HardwareSpec, dtype: str, rows: int, tp: int) -> Operator:
    """The two all-reduces per layer of ``rows × hidden`` partial sums, over the link."""
    value = compiled(tf.allreduce_link_bytes)(
        **symbol_values(rows=rows, hidden=spec.hidden, dtype=dtype, tp=tp)
    )
    count = tf.ALLREDUCES_PER_LAYER * spec.layers
    floor = value / _link_bytes_per_s(device)
    return Operator(
        name="all_reduce",
        count=count,
        flops=0.0,
        hbm_bytes=0.0,
        t_lower_s=count * floor,
        time_s=count * (floor + device.launch_overhead_s),
        roof="link",
    )


def _with_allreduce(ops: tuple[Operator, ...], extra: Operator | None) -> tuple[Operator, ...]:
    return ops if extra is None else (*ops, extra)


def memory_budget(
    spec: ModelSpec,
    device: HardwareSpec,
    dtype: str,
    *,
    batch: int,
    prompt: int,
    output: int,
    kv: str,
    page_tokens: int,
    attention_scratch: float,
) -> Memory:
    """Weights, the KV cache for ``prompt + output`` tokens per sequence (a local layer:
    its window's, ``kvcache.kv_cache_bytes``), the prefill's peak activations (one layer
    at a time) and attention scratch."""
    from perfmodel.analysis.kvcache import kv_cache_bytes

    paged = page_tokens if kv == "paged" else None
    cache = kv_cache_bytes(spec, dtype, prompt + output, batch=batch, page_tokens=paged)
    values = _values(spec, dtype, batch * prompt, batch)
    activations = compiled(tf.activation_elements())(**values) * values["s"]
    return Memory(
        weights_bytes=spec.weight_bytes(dtype),
        kv_cache_bytes=float(cache),
        activations_bytes=float(activations),
        attention_scratch_bytes=float(attention_scratch),
        capacity_bytes=float(device.hbm_capacity_bytes),
    )


def _does_not_fit(e: Estimate, spec: ModelSpec, device: HardwareSpec) -> str:
    m = e.memory
    parts = (
        f"weights {si(m.weights_bytes, 'B')} + KV cache {si(m.kv_cache_bytes, 'B')} + "
        f"activations {si(m.activations_bytes, 'B')} + attention scratch "
        f"{si(m.attention_scratch_bytes, 'B')}"
    )
    where = f"one {e.hardware}" if e.tp == 1 else f"{e.tp} x {e.hardware} (tp={e.tp}, per device)"
    need = math.ceil(e.tp * m.total_bytes / m.capacity_bytes)
    hint = _split_hint(e, need, spec, device)
    return (
        f"{e.model} with batch={e.batch}, prompt={e.prompt}, output={e.output} "
        f"({e.attention} attention) does not fit on {where}: {parts} = "
        f"{si(m.total_bytes, 'B')} > {si(m.capacity_bytes, 'B')}, short by "
        f"{si(m.shortfall_bytes, 'B')} (at least {need} devices' memory; {hint})"
    )


def _split_hint(e: Estimate, need: int, spec: ModelSpec, device: HardwareSpec) -> str:
    """The smallest tensor-parallel split from ``need`` devices up that the model and one
    node of the device allow (what tensor_parallel_shard accepts), or why there is none."""
    if device.links is None or _link_bytes_per_s(device) is None:
        return f"{device.name} gives no link bandwidth, so no tp split is modelled"
    splits = [t for t in valid_splits(spec, device) if t >= max(need, e.tp + 1)]
    if splits:
        return f"try tp={splits[0]}, the smallest split {e.model} allows from there"
    return f"no tensor-parallel split of one {device.name} node gives that"


def valid_splits(spec: ModelSpec, device: HardwareSpec) -> list[int]:
    """The tp values :func:`tensor_parallel_shard` accepts for ``spec`` on one node of
    ``device`` (up to 64 devices where the spec gives no node size)."""
    links = device.links
    most = links.devices_per_node if links is not None and links.devices_per_node else 64
    return [t for t in range(1, most + 1) if _split_problem(spec, t) is None]


def _split_problem(spec: ModelSpec, tp: int) -> str | None:
    """Why ``spec`` cannot be split ``tp`` ways by heads and MLP columns, or None."""
    widths = (("heads", spec.heads), ("intermediate", spec.intermediate))
    for name, value in (*widths, ("moe_intermediate", spec.moe_intermediate or tp)):
        if value % tp:
            return f"tp={tp} does not divide {spec.name}'s {name}={value}"
    if spec.kv_heads % tp and tp % spec.kv_heads:
        return f"tp={tp} and kv_heads={spec.kv_heads}: neither divides the other"
    return None


def estimate(
    model: str | Path | ModelSpec,
    hw: str | Path | HardwareSpec,
    *,
    prompt: int,
    output: int = 1,
    batch: int = 1,
    attention: str = "flash",
    kernel: str | None = None,
    dtype: str = "bf16",
    kv: str = "paged",
    page_tokens: int = PAGE_TOKENS,
    context: int | None = None,
    tp: int = 1,
    check_memory: bool = True,
) -> Estimate:
    """Prefill, decode and memory of ``model`` serving ``batch`` requests on ``hw``.

    ``attention``: "naive" or "flash" ("fa2"); ``kernel``: a fitted kernel family for it
    ("pallas", "cudnn" for flash; "xla" for naive), else the datasheet profile.
    ``kv``: "contiguous" or "paged" (``page_tokens`` per page). ``context``: the KV length
    of the decode step reported as TPOT (default ``prompt + output // 2``, the mean).
    ``tp``: tensor parallelism over that many devices of one node (phases and memory are
    per device, plus two all-reduces per layer over the device's link).
    ``check_memory=False`` returns an estimate that does not fit instead of raising.
    """
    args = check_arguments(
        prompt=prompt,
        output=output,
        batch=batch,
        page_tokens=page_tokens,
        context=context,
        tp=tp,
        dtype=dtype,
        attention=attention,
        kernel=kernel,
        kv=kv,
        check_memory=check_memory,
    )
    prompt, output, batch, page_tokens, tp = (
        args[k] for k in ("prompt", "output", "batch", "page_tokens", "tp")
    )
    full, device = load_model(model), load_hardware(hw)
    spec = tensor_parallel_shard(full, device, tp)
    if prompt + output > spec.max_context_tokens:
        raise PerfmodelError(
            f"prompt + output = {prompt + output} tokens exceeds {full.name}'s "
            f"max_context_tokens={spec.max_context_tokens}"
        )
    context = prompt + output // 2 if context is None else args["context"]
    if context > spec.max_context_tokens:
        raise PerfmodelError(
            f"context={context} exceeds {full.name}'s max_context_tokens={spec.max_context_tokens}"
        )
    algorithm, impl, variant = _attention_choice(attention, kernel)
    attn, scratch = _prefill_attention(spec, device, dtype, prompt, batch, algorithm, impl, variant)
    prefill = Phase(
        "prefill",
        batch * prompt,
        prompt,
        _with_allreduce(
            _ordered(_layer_operators(spec, device, dtype, batch * prompt, batch), attn),
            _allreduce(spec, device, dtype, batch * prompt, tp) if tp > 1 else None,
        ),
    )
    decode_attn = _decode_attention(spec, device, dtype, batch, context, kv, page_tokens)
    decode = Phase(
        "decode",
        batch,
        context,
        _with_allreduce(
            _ordered(_layer_operators(spec, device, dtype, batch, batch), decode_attn),
            _allreduce(spec, device, dtype, batch, tp) if tp > 1 else None,
        ),
    )
    memory = memory_budget(
        spec,
        device,
        dtype,
        batch=batch,
        prompt=prompt,
        output=output,
        kv=kv,
        page_tokens=page_tokens,
        attention_scratch=scratch,
    )
    result = Estimate(
        model=full.name,
        hardware=device.name,
        dtype=dtype,
        attention=algorithm,
        kernel=kernel,
        kv=kv,
        batch=batch,
        prompt=prompt,
        output=output,
        prefill=prefill,
        decode=decode,
        memory=memory,
        tp=tp,
        notes=_attention_notes(spec),
    )
    if args["check_memory"] and not memory.fits:
        raise PerfmodelError(_does_not_fit(result, full, device))
    return result


# --- display ------------------------------------------------------------------------
def _intensity(op: Operator) -> str:
    return f"{op.intensity:.1f}" if op.hbm_bytes else "-"


_PHASE_HEADER = (
    "operator",
    "count",
    "FLOPs",
    "HBM bytes",
    "FLOP/B",
    "roof",
    "floor",
    "time",
    "share",
)
_PHASE_WIDTHS = (-14, 6, 12, 12, 9, 8, 11, 11, 8)  #: text column widths; negative: left


def _phase_rows(phase: Phase) -> list[tuple[str, ...]]:
    """One phase's per-operator cells, then its total (text, HTML and markdown share them)."""
    rows: list[tuple[str, ...]] = [
        (
            op.name,
            str(op.count),
            si(op.flops, "FLOP"),
            si(op.hbm_bytes, "B"),
            _intensity(op),
            op.roof,
            si(op.t_lower_s, "s"),
            si(op.time_s, "s"),
            f"{op.time_s / phase.time_s:.1%}",
        )
        for op in phase.operators
    ]
    total = (si(phase.flops, "FLOP"), si(phase.hbm_bytes, "B"))
    rows.append(
        ("total", "", *total, f"{phase.flops / phase.hbm_bytes:.1f}", "")
        + (si(phase.t_lower_s, "s"), si(phase.time_s, "s"), "")
    )
    return rows


def _phase_lines(phase: Phase) -> list[str]:
    def line(cells: Sequence[str]) -> str:
        return (
            "  "
            + "".join(
                f"{c:<{-w}}" if w < 0 else f"{c:>{w}}"
                for c, w in zip(cells, _PHASE_WIDTHS, strict=True)
            ).rstrip()
        )

    return [line(_PHASE_HEADER), *(line(r) for r in _phase_rows(phase))]


def _headings(e: Estimate) -> tuple[str, str, str]:
    """The estimate's title and the captions of its two phase tables."""
    kernel = f", kernel {e.kernel}" if e.kernel else ""
    return (
        f"{e.model} on {e.hardware}, {e.dtype}: batch {e.batch}, prompt {e.prompt}, output "
        f"{e.output}, {e.attention} attention{kernel}, {e.kv} KV cache"
        + ("" if e.tp == 1 else f"; tensor parallel over {e.tp} devices, figures per device"),
        f"prefill ({e.prefill.tokens} tokens through each layer):",
        f"decode step (batch {e.batch}, context {e.decode.context}):",
    )


def _summary_lines(e: Estimate) -> list[str]:
    m = e.memory
    return [
        f"time to first token      {si(e.ttft_s, 's')}  "
        f"({e.prefill_tokens_per_s:,.0f} prompt tok/s)",
        f"time per output token    {si(e.tpot_s, 's')}  ({e.decode_tokens_per_s:,.0f} tok/s)",
        f"end-to-end latency       {si(e.latency_s, 's')}  "
        f"({e.throughput_tokens_per_s:,.0f} output tok/s)",
        f"memory: weights {si(m.weights_bytes, 'B')} + KV {si(m.kv_cache_bytes, 'B')} + "
        f"activations {si(m.activations_bytes, 'B')} + attention scratch "
        f"{si(m.attention_scratch_bytes, 'B')} = {si(m.total_bytes, 'B')} of "
        f"{si(m.capacity_bytes, 'B')} ({'fits' if m.fits else 'does NOT fit'})",
        *e.notes,
    ]


def estimate_table(e: Estimate) -> str:
    """The per-operator table of both phases, then the summary and the memory budget."""
    title, prefill, decode = _headings(e)
    lines = [
        title,
        prefill,
        *_phase_lines(e.prefill),
        decode,
        *_phase_lines(e.decode),
        *_summary_lines(e),
    ]
    return "\n".join(lines) + "\n"


def estimate_html(e: Estimate) -> str:
    """The same as :func:`estimate_table`, as HTML tables (a notebook's ``_repr_html_``)."""
    title, prefill, decode = _headings(e)
    return (
        f"<p><b>{html.escape(title)}</b></p>"
        + html_table(prefill, _PHASE_HEADER, _phase_rows(e.prefill))
        + html_table(decode, _PHASE_HEADER, _phase_rows(e.decode), _summary_lines(e))
    )


def estimate_markdown(e: Estimate) -> str:
    """The same as :func:`estimate_table`, as markdown tables."""
    title, prefill, decode = _headings(e)
    return "\n".join(
        (
            f"**{title}**\n",
            markdown_table(prefill, _PHASE_HEADER, _phase_rows(e.prefill)),
            markdown_table(decode, _PHASE_HEADER, _phase_rows(e.decode), _summary_lines(e)),
        )
    )


# --- sweeps -------------------------------------------------------------------------
def estimate_sweep(
    model: str | Path | ModelSpec,
    hw: str | Path | HardwareSpec,
    *,
    prompt: Any,
    batch: Any,
    kernel: str | None = None,
    **kwargs: Any,
) -> list[dict[str, Any]]:
    """Naive and flash over a list of prompt lengths or batch sizes (one of the two).

    One row per (value, attention); a point that does not fit is kept, marked
    ``fits = False``. ``kernel`` applies to the attention it implements; the other side
    uses the datasheet profile.
    """
    prompts = prompt if isinstance(prompt, list | tuple) else [prompt]
    batches = batch if isinstance(batch, list | tuple) else [batch]
    for name, values in (("prompt", prompts), ("batch", batches)):
        if not values:
            raise PerfmodelError(f"{name}={values!r} must be a non-empty list of positive integers")
    check_arguments(kernel=kernel)
    rows = []
    for n in prompts:
        for b in batches:
            for attention in ("naive", "flash"):
                k = kernel if kernel is None or KERNELS[kernel][0] == attention else None
                e = estimate(
                    model,
                    hw,
                    prompt=n,
                    batch=b,
                    attention=attention,
                    kernel=k,
                    check_memory=False,
                    **kwargs,
                )
                rows.append(
                    dict(
                        prompt=n,
                        batch=b,
                        attention=attention,
                        kernel=k,
                        ttft_s=e.ttft_s,
                        tpot_s=e.tpot_s,
                        latency_s=e.latency_s,
                        prefill_tokens_per_s=e.prefill_tokens_per_s,
                        decode_tokens_per_s=e.decode_tokens_per_s,
                        throughput_tokens_per_s=e.throughput_tokens_per_s,
                        attention_share=e.prefill.attention_share,
                        memory_bytes=e.memory.total_bytes,
                        fits=e.memory.fits,
                    )
                )
    return rows


def sweep_table(rows: list[dict[str, Any]], over: str) -> str:
    """Naive against flash per swept value: TTFT, prefill tokens/s, TPOT, memory."""
    head = (
        f"{over:>7} {'attention':>9} {'TTFT':>10} {'prompt tok/s':>13} {'attn share':>10} "
        f"{'TPOT':>10} {'out tok/s':>10} {'memory':>9}  fits"
    )
    lines = [head]
    for r in rows:
        lines.append(
            f"{r[over]:>7} {r['attention']:>9} {si(r['ttft_s'], 's'):>10} "
            f"{r['prefill_tokens_per_s']:>13,.0f} {r['attention_share']:>10.1%} "
            f"{si(r['tpot_s'], 's'):>10} {r['throughput_tokens_per_s']:>10,.0f} "
            f"{si(r['memory_bytes'], 'B'):>9}  {'yes' if r['fits'] else 'NO'}"
        )
    return "\n".join(lines) + "\n"
