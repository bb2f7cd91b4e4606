"""Every name the model uses, once: algorithms, how naive attention is compiled, the
implementations that were measured, the roofs, the dtypes, and which cost-model symbol
each API argument becomes.

The enums are ``StrEnum``: a member equals its string (``Algorithm.FLASH == "flash"``),
so data files, JSON and keyword arguments keep their plain spelling.

>>> bytes_per_element("bf16")
2
>>> symbol_values(n=4096, kv_len=8192, batch=2, dtype="fp16")
{'n': 4096, 'm': 8192, 'b': 2, 's': 2}
>>> Implementation("xla").algorithm, Implementation("xla").naive
('naive', 'minimal')
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from perfmodel.errors import PerfmodelError


class _Name(StrEnum):
    """A name that prints, compares and hashes as its plain string."""

    def __repr__(self) -> str:
        return repr(self.value)


class Algorithm(_Name):
    """The two ways to compute attention that the model compares."""

    NAIVE = "naive"  #: S = QKᵀ and P = softmax(S) written to and read back from HBM
    FLASH = "flash"  #: FlashAttention-2: one fused kernel, S and P never leave the chip


#: naive first, then flash: the order of every table and figure.
ALGORITHMS: tuple[Algorithm, ...] = (Algorithm.NAIVE, Algorithm.FLASH)

#: How flash's backward sums dQ over K blocks (``perfmodel.costs.backward``).
DQ_FAMILIES = ("two_pass", "atomic")
#: How a sequence is split over devices, and how causal work is balanced over them
#: (``perfmodel.costs.parallel``).
SCHEMES = ("ring", "allgather", "ulysses")
BALANCES = ("contiguous", "zigzag")


class WindowAlign(_Name):
    """Where fewer queries than keys sit among the keys, for a sliding window
    (``perfmodel.costs.masks.query_offset``): query row q is at key position q + offset.
    With as many queries as keys both are offset 0."""

    #: the last n of the kv_len positions, offset kv_len - n: a KV cache's new tokens
    #: (decode, chunked prefill); FlashAttention's ``window_size``, cuDNN's BOTTOM_RIGHT
    BOTTOM_RIGHT = "bottom_right"
    #: the first n positions, offset 0: ``jax.nn.dot_product_attention``'s
    #: ``local_window_size`` and our kernels' ``window=`` (``pallas_kernels._common``)
    TOP_LEFT = "top_left"


#: ``predict``'s (and ``Shape``'s) shape defaults: the chapter's setting, one head of
#: d = 128 in fp16, one sequence. The command line's options and help read them here
#: (standard library only, so ``--help`` imports no model).
SHAPE_DEFAULTS: dict[str, Any] = {"d": 128, "h": 1, "batch": 1, "dtype": "fp16"}


class NaiveCompile(_Name):
    """How the naive side is compiled (``perfmodel.costs.naive``)."""

    MINIMAL = "minimal"  #: four HBM trips of S and P, the textbook count
    XLA = "xla"  #: the extra passes XLA adds (the mask pass, the max/sum reductions)
    SDPA = "sdpa"  #: jax.nn.dot_product_attention's XLA path (float32 logits)


class Implementation(_Name):
    """A measured kernel, as named in the measurement files."""

    PALLAS_FLASH = "pallas_flash"  #: our Pallas FlashAttention-2 kernel
    NAIVE = "naive"  #: our three-step baseline, compiled by XLA
    NAIVE_JIT = "naive_jit"  #: the same three steps as one jitted function
    CUDNN = "cudnn"  #: cuDNN's fused attention (a flash kernel)
    XLA = "xla"  #: XLA's own attention path (scores materialised)
    MGPU_ATTENTION = "mgpu_attention"  #: JAX's Mosaic GPU attention kernel
    PAGED_DECODE = "paged_decode"  #: our paged decode kernel (one query row)
    CONTIGUOUS_DECODE = "contiguous_decode"  #: the same decode over a contiguous cache

    @property
    def algorithm(self) -> Algorithm | None:
        """The prefill cost model that ``perfmodel validate`` compares it with; None for
        decode kernels (``perfmodel.costs.decode``) and for those it does not compare."""
        return ALGORITHM_OF.get(self)

    @property
    def naive(self) -> NaiveCompile:
        """How a naive-style implementation is compiled: our baseline's HLO is known
        (the XLA passes); XLA's own path is held to the minimal count."""
        return NaiveCompile.XLA if self is Implementation.NAIVE else NaiveCompile.MINIMAL


#: The prefill cost model of each implementation that ``perfmodel validate`` compares.
ALGORITHM_OF: dict[str, Algorithm] = {
    Implementation.PALLAS_FLASH: Algorithm.FLASH,
    Implementation.CUDNN: Algorithm.FLASH,
    Implementation.NAIVE: Algorithm.NAIVE,
    Implementation.XLA: Algorithm.NAIVE,
}


class Roof(_Name):
    """A rate that bounds a kernel: an execution unit or a memory level."""

    MATMUL = "matmul"  #: tensor-core matrix FLOP/s at the input dtype
    VECTOR = "vector"  #: fp32 vector FLOP/s (softmax arithmetic)
    EXP = "exp"  #: exponentials per second (special-function units)
    HBM = "hbm"  #: HBM bytes/s
    L2 = "l2"  #: L2 -> SM bytes/s
    #: SM -> L2 bytes/s of reductions done in L2 (an atomic dQ's adds): the other
    #: direction of the crossbar from the L2 roof's reads, so the two overlap
    L2_REDUCE = "l2_reduce"

    @property
    def work(self) -> str:
        """The field of a cost model's ``Kernel`` that this roof bounds."""
        return _WORK_OF[self]


_WORK_OF = {
    Roof.MATMUL: "matmul_flops",
    Roof.VECTOR: "vector_flops",
    Roof.EXP: "exp_count",
    Roof.HBM: "hbm_bytes",
    Roof.L2: "l2_bytes",
    Roof.L2_REDUCE: "l2_reduce_bytes",
}


#: Roofs on execution units, and roofs on memory levels.
COMPUTE_ROOFS: tuple[Roof, ...] = (Roof.MATMUL, Roof.VECTOR, Roof.EXP)
MEMORY_ROOFS: tuple[Roof, ...] = (Roof.HBM, Roof.L2, Roof.L2_REDUCE)
ROOFS: tuple[Roof, ...] = COMPUTE_ROOFS + MEMORY_ROOFS


class Dtype(_Name):
    """An element type of Q, K, V and O (tf32 is stored as fp32)."""

    FP32 = "fp32"
    TF32 = "tf32"
    FP16 = "fp16"
    BF16 = "bf16"
    FP8 = "fp8"

    @property
    def bytes(self) -> int:
        return _BYTES[self]


_BYTES = {Dtype.FP32: 4, Dtype.TF32: 4, Dtype.FP16: 2, Dtype.BF16: 2, Dtype.FP8: 1}
#: Bytes per element of each dtype, by name.
BYTES_PER_ELEMENT: dict[str, int] = {str(t): t.bytes for t in Dtype}
#: Names frameworks use (jax/numpy) for the model's dtypes.
_FRAMEWORK_NAMES = {"bfloat16": Dtype.BF16, "float16": Dtype.FP16, "float32": Dtype.FP32}


def dtype(name: Any, *, framework_names: bool = False) -> Dtype:
    """The one dtype check: ``name`` as a Dtype, or a PerfmodelError naming it. With
    ``framework_names`` (measurement files), ``bfloat16``/``float16``/``float32`` too."""
    if isinstance(name, Dtype):
        return name
    if isinstance(name, str):
        if name in BYTES_PER_ELEMENT:
            return Dtype(name)
        if framework_names and name in _FRAMEWORK_NAMES:
            return _FRAMEWORK_NAMES[name]
    raise PerfmodelError(f"unknown dtype {name!r}; known: {sorted(BYTES_PER_ELEMENT)}")


def bytes_per_element(name: Any) -> int:
    """Bytes of one element of ``name`` (checked by :func:`dtype`)."""
    return dtype(name).bytes


#: API argument -> cost-model symbol (``perfmodel.symbols``), where the two differ.
SYMBOL_OF: dict[str, str] = {"kv_len": "m", "batch": "b", "page_tokens": "page", "dtype": "s"}


def symbol_values(**api: Any) -> dict[str, Any]:
    """API-named values (``kv_len``, ``batch``, ``dtype``...) as the cost models' symbol
    values (``m``, ``b``, ``s`` in bytes...): the one translation. Other names pass as they are."""
    out = {}
    for name, value in api.items():
        out[SYMBOL_OF.get(name, name)] = bytes_per_element(value) if name == "dtype" else value
    return out
