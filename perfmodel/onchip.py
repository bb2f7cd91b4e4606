"""On-chip capacity of one thread block: shared memory, registers, blocks per SM, spills.

A flash-attention thread block keeps on chip its Q tile and ``kv_stages`` K and V tiles
in shared memory, and its float32 accumulators in registers: the score tile
S (B_r × B_c), the output O (B_r × d) and the running max and sum (2·B_r). Spread over
the block's compute threads, the accumulators set the registers each thread needs; a
thread can hold at most ``max_registers_per_thread`` (255 on sm80/sm90), and what does
not fit spills to local memory, which each inner-loop step writes and reads back.
Shared memory, registers and threads decide how many blocks an SM holds at once.

This reproduces what the FlashAttention-2 sources say of their own tiles: 256×64 at
d=64 with 4 warps "is 85% slower because of register spilling" (256·(64+64) f32 over
128 threads = 256 registers), and d=256 at 64×64 takes 96 KB so that "we can get
2 CTAs per SM" on H100 (csrc/flash_attn/src/flash_fwd_launch_template.h).

Left out: registers for addresses and loop state (taken as zero, so a tile right at
the limit is counted as fitting), the register allocation granularity, and the P tile
(converted from S in place).

>>> fp = footprint(block_q=128, block_k=128, d=128, s=2, kv_stages=2, warps=4)
>>> fp.registers_per_thread, fp.smem_bytes
(258.0, 163840)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from perfmodel.errors import PerfmodelError
from perfmodel.roofline import is_scalar

#: Bytes of one register (32 bits) and of one float32 accumulator.
REGISTER_BYTES = 4
WARP = 32


@dataclass(frozen=True)
class Footprint:
    """What one thread block asks of an SM (arrays broadcast over a sweep)."""

    smem_bytes: Any
    registers_per_thread: Any  #: demanded, before any cap
    threads: Any  #: compute threads (the accumulators are spread over these)
    producer_threads: Any = 0


def footprint(*, block_q, block_k, d, s, kv_stages, warps, producer_warps=0) -> Footprint:
    """Shared memory and registers of one flash block (FlashAttention-2 Algorithm 1 /
    FlashAttention-3's consumer warpgroups: the same tiles, split over the warps)."""
    smem = (block_q + kv_stages * 2 * block_k) * d * s
    accumulators = block_q * block_k + block_q * d + 2 * block_q  # float32: S, O, m, l
    if is_scalar(block_q, block_k, d, s, warps):
        threads = WARP * int(warps)
        return Footprint(int(smem), float(accumulators / threads), threads, WARP * producer_warps)
    threads = WARP * np.asarray(warps)
    return Footprint(smem, accumulators / threads, threads, WARP * np.asarray(producer_warps))


@dataclass(frozen=True)
class Capacity:
    """How a block sits on an SM: blocks at once, and spilled registers per thread."""

    blocks_per_sm: Any
    spilled_registers_per_thread: Any


def capacity(hw: Any, fp: Footprint) -> Capacity:
    """Blocks per SM from shared memory, registers and threads; spills past the
    per-thread register limit. Devices without register facts: shared memory only."""
    if isinstance(fp.registers_per_thread, float) and is_scalar(fp.threads):
        return _capacity_one(hw, fp)
    smem_sm = hw.sram_per_sm_bytes
    blocks = np.floor_divide(smem_sm, np.maximum(fp.smem_bytes, 1))
    spilled = np.zeros_like(np.asarray(fp.registers_per_thread, dtype=float))
    if hw.max_registers_per_thread is not None:
        cap = hw.max_registers_per_thread
        spilled = np.maximum(0.0, np.asarray(fp.registers_per_thread) - cap)
        used = np.minimum(fp.registers_per_thread, cap)
        # producer warps run on a small register budget (FA-3 sets 24-32 with setmaxnreg)
        per_block = used * fp.threads + 32 * fp.producer_threads
        blocks = np.minimum(blocks, np.floor_divide(hw.registers_per_sm, per_block))
        threads = fp.threads + fp.producer_threads
        blocks = np.minimum(blocks, np.floor_divide(hw.max_threads_per_sm, threads))
        blocks = np.minimum(blocks, hw.max_blocks_per_sm)
    blocks = np.maximum(blocks, 1)
    if np.ndim(blocks) == 0:
        return Capacity(int(blocks), float(spilled))
    return Capacity(blocks, spilled)


def _capacity_one(hw: Any, fp: Footprint) -> Capacity:
    blocks = hw.sram_per_sm_bytes // max(int(fp.smem_bytes), 1)
    spilled = 0.0
    if hw.max_registers_per_thread is not None:
        cap = hw.max_registers_per_thread
        spilled = max(0.0, fp.registers_per_thread - cap)
        threads, producers = int(fp.threads), int(fp.producer_threads)
        per_block = min(fp.registers_per_thread, cap) * threads + 32 * producers
        blocks = min(
            blocks,
            int(hw.registers_per_sm // per_block),
            hw.max_threads_per_sm // (threads + producers),
            hw.max_blocks_per_sm,
        )
    return Capacity(max(int(blocks), 1), spilled)


def check_fits(hw: Any, fp: Footprint, *, what: Any) -> None:
    """A block must fit one SM's shared memory (the per-block limit where the spec has one)."""
    limit = hw.smem_per_block_bytes or hw.sram_per_sm_bytes
    if isinstance(fp.smem_bytes, int) and fp.smem_bytes <= limit:
        return
    too_big = np.asarray(fp.smem_bytes) > limit
    if np.any(too_big):
        need = int(np.max(np.asarray(fp.smem_bytes)[too_big] if too_big.ndim else fp.smem_bytes))
        name = "per block" if hw.smem_per_block_bytes else "per SM"
        what = what() if callable(what) else what
        raise PerfmodelError(
            f"{what} needs {need} B of shared memory; {hw.name} allows {limit} B {name}"
        )


def spill_bytes_per_step(cap: Capacity, fp: Footprint) -> Any:
    """Local-memory traffic of one inner-loop step: spilled registers written and read."""
    return 2 * REGISTER_BYTES * cap.spilled_registers_per_thread * fp.threads


def effective_overlap(overlap: Any, blocks_per_sm: Any) -> Any:
    """Compute overlap with ``k`` blocks per SM: a block whose softmax sits between its
    matmuls leaves the tensor cores idle, which the other resident blocks' matmuls can
    fill (the warp schedulers interleave independent blocks), so 1 - (1 - overlap)/k."""
    if is_scalar(overlap, blocks_per_sm):
        return 1 - (1 - float(overlap)) / float(blocks_per_sm)
    return 1 - (1 - np.asarray(overlap, dtype=float)) / blocks_per_sm
