"""Device ceilings from microbenchmarks that are not attention (issue 21).

    python -m pallas_kernels.ceilings --out specs/devices/h200-sxm.ceilings.toml

measures, on one GPU in about three minutes (progress on stdout), the roofs an
attention kernel runs against, each with a kernel that computes no attention:

* **Tensor cores** at the instruction and tile shapes the kernel families use
  (``specs/kernels/*.toml``): M x N x K with K the head dim (64, 128, 256), fp16 and
  bf16, f32 accumulation, random data, sustained. ``wgmma`` through Pallas Mosaic GPU
  (one or more warpgroups of 64 rows, A and B in shared memory, B transposed as K^T
  is in attention); Triton's own lowering of ``dot`` (wgmma on sm_90) and mma.sync
  (the same kernel compiled with Triton's ``DISABLE_MMA_V3``), with the operands
  loaded once ("smem": the loop only multiplies) or a B tile streamed from an
  L2-resident buffer each step ("streamed": as K tiles are in attention). A cuBLAS
  8192^3 product (XLA) on random data and on zeros is recorded beside them.
* **exp2** (MUFU) and **FP32 FMA** throughput in registers (Pallas Triton).
* **HBM** read, write and copy bandwidth against size (Pallas Triton streaming
  kernels; inputs rotated over enough buffers that no call hits L2).
* **L2** re-read bandwidth against the working set.
* **Launch**: one synchronous call's round trip, the interval of calls queued back
  to back, the device time of a one-program kernel; the fixed cost per thread block
  (device time against grid size, 4-warp programs) and per wave (32-warp programs,
  two resident per SM).

Each figure records its method, sizes, seconds and the median SM clock NVML read
while it was timed. Device time is CUPTI's kernel time where this jax has it
(``timing.kernel_time``), else calls queued back to back. The file is TOML, written
atomically; ``perfmodel.catalog.ceilings`` loads and checks it (field by field
there). Nothing here imports perfmodel or pydantic (the GPU image has neither).

``--interpret`` runs the Triton kernels in the Pallas interpreter at toy sizes (CPU:
checks the logic, measures nothing real); Mosaic GPU and CUPTI parts are skipped there.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import functools
import math
import os
import statistics
import sys
import threading
import time
from pathlib import Path

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

from pallas_kernels._common import sm_count, triton_compiler_params

try:  # the harness owns timing (issue 22); the old home while it moves
    from kernel_bench import timing
except ImportError:  # pragma: no cover - before the move
    from pallas_kernels import _timing as timing

SCHEMA = "perfmodel-ceilings/1"
#: Datasheet figures printed beside each measurement (H200 SXM, specs/devices/h200-sxm.toml);
#: for the progress lines only: the file records what was measured.
DATASHEET = {
    "FLOP/s": 989.4e12,
    "exp/s": 4.18e12,
    "FP32 FLOP/s": 67e12,
    "B/s": 4.8e12,
}
#: Tiles (M, N, K=d, warps) of the Triton-lowered families (specs/kernels): ours
#: (pallas-triton) and FlashAttention-2's mma.sync tiles (fa2).
TRITON_TILES = ((128, 128, 64, 4), (128, 128, 128, 8), (64, 64, 256, 8),
                (64, 64, 64, 4), (128, 64, 128, 4))  # fmt: skip (our d <= 64, d = 128 tiles)
MMA_SYNC_TILES = ((128, 128, 64, 4), (128, 64, 128, 4), (64, 64, 256, 4))
#: Mosaic wgmma: (warpgroups per CTA, N, K): 64 rows per warpgroup, as pallas-mosaic,
#: FA-3 and cuDNN run them (N = block_k, K = head dim; FA-3 d=64: 3 warpgroups, N=192).
WGMMA_TILES = (
    (2, 128, 64),
    (2, 128, 128),
    (2, 64, 256),
    (2, 256, 64),
    (2, 256, 128),
    (2, 128, 256),
    (2, 64, 64),
    (2, 64, 128),
    (3, 192, 64),
    (1, 128, 128),
)
WGMMA_FP16_TILES = ((2, 128, 64), (2, 128, 128), (2, 64, 256))
#: Mosaic wgmma S = Q K^T tiles (warpgroups, N = key tile, K = head dim) at head dims whose
#: row of 16-bit values is not a multiple of 128 bytes: the forward keeps such operands
#: in a 64- or 32-byte swizzle (``flash_mosaic.swizzle_bytes``), and its blocked layout
#: issues S = Q K^T as a chain of K = one column block (32 at d = 96 and 160, 16 at d = 80).
WGMMA_SWIZZLE_TILES = ((2, 128, 96), (2, 128, 32), (2, 128, 80), (2, 128, 16), (2, 64, 160),
                       (2, 64, 32), (2, 128, 48))  # fmt: skip
#: Mosaic wgmma shaped as the forward's O += P V: (warpgroups, N, K) with K = the key
#: tile (128 to d = 128, 64 above) and N = a head dim the tiled layout runs whole or one
#: column block of the blocked layout (``flash_mosaic._Buffers``: 16 at d = 80, 32 at
#: d = 96 and 160, 64 at 128, 192 and 256). B is K-major here, as in the tiles above (an
#: MN-major B narrower than 64 columns did not lower in this harness on jax 0.11.2).
WGMMA_PV_TILES = (
    (2, 16, 128), (2, 32, 128), (2, 80, 128), (2, 96, 128),
    (2, 32, 64), (2, 160, 64), (2, 192, 64),
)  # fmt: skip
#: Mosaic wgmma shaped as the forward's O += P V with B = V as the forward holds it: [K =
#: keys, N = head dim], N contiguous, in the swizzle of a row of N elements (64 bytes at
#: d = 96 and 160): (warpgroups, N, K = the key tile); kept as form "pv_mn".
WGMMA_PV_MN_TILES = ((2, 64, 128), (2, 96, 128), (2, 128, 128), (2, 80, 128),
                     (2, 64, 64), (2, 160, 64), (2, 192, 64), (2, 256, 64))  # fmt: skip
#: Mosaic wgmma of one warpgroup shaped as a 64 x 64 backward tile's products (cuDNN's
#: ``bprop_wgmma_..._64x64xD_1x4x1``): S = Q K^T and dP = dO V^T (N = 64, K = d) and
#: dV, dK, dQ (N = d, K = 64), two CTAs a SM as elsewhere; kept as form "bwd". The same
#: tiles with one CTA a SM (one warpgroup alone on its SM, as a backward tile whose shared
#: memory leaves room for no second CTA: d = 256) are form "bwd_lone"; alone and each
#: wgmma waited for before the next (a chain of dependent products), "bwd_serial".
WGMMA_BWD_TILES = ((1, 64, 64), (1, 64, 128), (1, 64, 256), (1, 128, 64), (1, 256, 64))
#: (CTAs a SM, wgmma groups left in flight) of each form's grid; (2, 1) where not named.
WGMMA_FORMS = {"bwd_lone": (1, 1), "bwd_serial": (1, 0)}
HBM_SIZES = (1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30, 4 << 30)
L2_WORKING_SETS = tuple(m << 20 for m in (2, 8, 16, 24, 32, 40, 48, 64, 96, 192))
#: Each timed call of the HBM kernels touches a new buffer until this many bytes
#: are in rotation (several times the L2), so no call reads what the last one left in L2.
ROTATION_BYTES = 512 << 20
GRID_4WARP = (1, 132, 528, 2112, 4224, 8448, 16896, 33792)
GRID_32WARP_WAVES = (1, 2, 4, 8, 16, 32)
TILE_COLS = 1024  # bf16 columns of a streaming tile: 8 rows = 16 KB
#: Outputs the CUPTI timer may hold at once (its queued calls all stay alive).
MAX_LIVE_BYTES = 12 << 30
#: Pointer chase: int32 lanes of one slot (64 bytes), and (name, working set, slots,
#: step counts): DRAM, a cycle of 2^21 slots over 2 GiB whose two starts are half a cycle
#: apart, so that between two calls from one start at least 2 x 2^19 lines of 128 bytes
#: (128 MiB, twice the L2) are loaded and a call never finds the last one's lines (the
#: first run, 2^20 slots and 2^17 steps, found some: 0.293 us a step against 0.404); L2,
#: a set well inside it.
CHASE_LANES = 16
LATENCY_CASES = (("hbm_idle", 2 << 30, 1 << 21, (1 << 19, 1 << 20)),
                 ("l2_hit", 4 << 20, 1 << 12, (1 << 14, 1 << 16)))  # fmt: skip
LATENCY_CASES_INTERPRET = (("hbm_idle", 1 << 16, 1 << 6, (8, 32)),)


# ---------------------------------------------------------------- timing and clocks


class Clocks:
    """NVML samples (SM and memory clock, power, temperature) every ``period`` s on a
    thread; ``window(t0, t1)`` summarises those taken between two ``time.monotonic``."""

    def __init__(self, period: float = 0.05):
        self.samples: list[tuple[float, float, float, float, float]] = []
        self.max_sm_hz = self.max_mem_hz = None
        self._stop = threading.Event()
        self._thread = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml, self._h = pynvml, pynvml.nvmlDeviceGetHandleByIndex(0)
            self.max_sm_hz = 1e6 * pynvml.nvmlDeviceGetMaxClockInfo(self._h, pynvml.NVML_CLOCK_SM)
            self.max_mem_hz = 1e6 * pynvml.nvmlDeviceGetMaxClockInfo(self._h, pynvml.NVML_CLOCK_MEM)
        except Exception as err:  # noqa: BLE001 - clocks are optional
            print(f"NVML unavailable, no clocks: {type(err).__name__}: {err}"[:200])
            self._nvml = None
            return
        self._thread = threading.Thread(target=self._run, args=(period,), daemon=True)
        self._thread.start()

    def _run(self, period: float) -> None:
        n, h = self._nvml, self._h
        while not self._stop.is_set():
            with contextlib.suppress(Exception):  # a failed read is a missing sample
                self.samples.append(
                    (
                        time.monotonic(),
                        1e6 * n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM),
                        1e6 * n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_MEM),
                        n.nvmlDeviceGetPowerUsage(h) / 1e3,
                        float(n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU)),
                    )
                )
            self._stop.wait(period)

    def window(self, t0: float, t1: float) -> dict:
        """Samples taken while the work ran (a read takes ~0.2 s here: up to 0.3 s after)."""
        rows = [s for s in self.samples if t0 <= s[0] <= t1 + 0.3]
        if not rows:
            return {}
        cols = list(zip(*rows, strict=True))
        return {
            "clock_sm_hz": statistics.median(cols[1]),
            "clock_mem_hz": statistics.median(cols[2]),
            "power_w": statistics.median(cols[3]),
        }

    def summary(self) -> dict:
        self._stop.set()
        if not self.samples:
            return {}
        cols = list(zip(*self.samples, strict=True))
        busy = [s for s in self.samples if s[3] > 150.0] or self.samples  # under load
        busy_cols = list(zip(*busy, strict=True))
        return {
            "sm_max_hz": self.max_sm_hz,
            "mem_max_hz": self.max_mem_hz,
            "sm_median_hz_under_load": statistics.median(busy_cols[1]),
            "sm_min_hz_under_load": min(busy_cols[1]),
            "mem_median_hz": statistics.median(cols[2]),
            "power_median_w_under_load": statistics.median(busy_cols[3]),
            "power_max_w": max(cols[3]),
            "temperature_max_c": max(cols[4]),
            "samples": len(self.samples),
            "source": "NVML (nvidia-ml-py) every 50 ms during the run; 'under load' = "
            "samples drawing more than 150 W",
        }


class Session:
    """Shared state of one run: the clock sampler, the deadline, the results."""

    def __init__(self, *, budget_s: float, interpret: bool, quick: bool):
        self.t_start = time.monotonic()
        self.deadline = self.t_start + budget_s
        self.interpret, self.quick = interpret, quick
        self.clocks = Clocks() if not interpret else None
        self.headline: dict[str, dict] = {}
        self.tables: dict[str, list[dict]] = {
            "tensor_core": [],
            "hbm": [],
            "l2": [],
            "grid": [],
            "latency": [],
            "atomics": [],
            "xla_naive": [],
            "loaded_latency": [],
        }
        self.failed: list[str] = []
        self.previous: dict = {}  # the earlier run a --resume kept results of
        self.sm_count = sm_count()

    def left_s(self) -> float:
        return self.deadline - time.monotonic()

    def log(self, text: str) -> None:
        print(f"[{time.monotonic() - self.t_start:6.1f} s] {text}", flush=True)

    def time(self, fn, sets, *, seconds: float = 0.25, sustain: float = 0.25) -> dict:
        """Device seconds per call of ``fn`` rotating over ``sets``, after ``sustain``
        seconds of calls back to back (clocks settle); with the clocks of the window."""
        if self.interpret:
            jax.block_until_ready(fn(*sets[0]))
            t0 = time.perf_counter()
            jax.block_until_ready(fn(*sets[0]))
            return {"device_s": time.perf_counter() - t0, "method": "interpret_wall", "n": 1}
        out = jax.block_until_ready(fn(*sets[0]))  # compiles
        out_bytes = sum(x.size * x.dtype.itemsize for x in jax.tree_util.tree_leaves(out))
        del out
        timing.spin_up(fn, sets[0], seconds=sustain)
        t0 = time.monotonic()
        probe = timing.queued_samples(fn, sets, samples=1, calls=len(sets))[0][0]
        calls = max(1, len(sets))
        iters = max(3, min(200, int(seconds / max(probe * calls, 1e-7))))
        # the kernel timer keeps every output of its iterations alive: at most MAX_LIVE_BYTES
        iters = max(3, min(iters, int(MAX_LIVE_BYTES // max(out_bytes * calls, 1))))

        def every(*group):
            return [fn(*s) for s in group]

        kern = None
        try:
            kern = timing.kernel_time(every, sets, iterations=iters)
        except Exception as err:  # noqa: BLE001 - queued time remains
            print(f"CUPTI failed: {type(err).__name__}: {err}"[:200])
        if kern:
            out = {"device_s": kern["median"] / calls, "method": "cupti_kernel_sum"}
            out.update(n=kern["n"], kernels_per_call=kern["kernels"] / calls)
        else:
            times, _ = timing.queued_samples(fn, sets, samples=max(3, iters // 4), calls=calls)
            out = {"device_s": statistics.median(times), "method": "queued_calls", "n": len(times)}
        if self.clocks is not None:
            out.update(self.clocks.window(t0, time.monotonic()))
        return out


def _random(key: int, shape, dtype):
    return jax.random.normal(jax.random.key(key), shape, jnp.float32).astype(dtype)


def _dtype_name(dtype) -> str:
    return {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}[jnp.dtype(dtype).name]


def _ratio(value: float, unit: str) -> str:
    peak = DATASHEET.get(unit)
    return f" ({value / peak:.2f} of datasheet {peak:.3g})" if peak else ""


def _si(value: float, unit: str) -> str:
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.1f} {prefix}{unit}"
    if unit == "s":
        return f"{value * 1e6:.2f} us"
    return f"{value:.3g} {unit}"


def _headline(
    s: Session,
    name: str,
    value: float,
    unit: str,
    method: str,
    size: str,
    t: dict,
    *,
    quiet: bool = False,
):
    entry = {"value": float(value), "unit": unit, "method": method, "size": size}
    entry.update({k: t[k] for k in ("clock_sm_hz",) if k in t})
    s.headline[name] = entry
    if not quiet:
        s.log(f"ceiling {name} = {_si(value, unit.split()[-1])}{_ratio(value, unit)}")


# ---------------------------------------------------------------- tensor cores


def _mma_kernel(a_ref, b_ref, o_ref, *, iters, n_tiles, streamed):
    """acc += A B^T, ``iters`` times: A [M, K] loaded once; B [N, K] loaded once
    (``streamed`` False: the loop only multiplies) or the next tile of an L2-resident
    buffer each step (as K tiles are in attention). The add folds into the dot's
    accumulator, so the loop-carried acc keeps every product."""
    a = a_ref[...]
    rows = a.shape[0]
    n = b_ref.shape[0] // n_tiles
    pid = pl.program_id(0)

    if streamed:

        def body(i, acc):
            start = pl.multiple_of(lax.rem(pid + i, n_tiles) * n, n)
            b = b_ref[pl.ds(start, n), :]
            return acc + pltriton.dot(a, b, trans_b=True)

    else:
        b = b_ref[pl.ds(0, n), :]

        def body(i, acc):
            return acc + pltriton.dot(a, b, trans_b=True)

    acc = lax.fori_loop(0, iters, body, jnp.zeros((rows, n), jnp.float32))
    o_ref[...] = acc


def triton_mma(m, n, k, warps, dtype, *, iters, programs, streamed, interpret, n_tiles=64):
    """(jitted fn, input sets, FLOPs per call) of the Triton tile kernel."""
    tiles = n_tiles if streamed else 1
    kernel = pl.pallas_call(
        functools.partial(_mma_kernel, iters=iters, n_tiles=tiles, streamed=streamed),
        grid=(programs,),
        in_specs=[
            pl.BlockSpec((None, m, k), lambda p: (p % 8, 0, 0)),
            pl.BlockSpec((tiles * n, k), lambda p: (0, 0)),
        ],
        out_specs=pl.BlockSpec((None, m, n), lambda p: (p, 0, 0)),
        out_shape=jax.ShapeDtypeStruct((programs, m, n), jnp.float32),
        compiler_params=None if interpret else triton_compiler_params(warps, 2),
        interpret=interpret,
        name=f"ceil_mma_{m}x{n}x{k}_w{warps}_{'s' if streamed else 'r'}"
        f"{'_v2' if os.environ.get('DISABLE_MMA_V3') else ''}",
    )
    a = _random(11, (8, m, k), dtype) * 0.1
    b = _random(12, (tiles * n, k), dtype) * 0.1
    return jax.jit(kernel), [(a, b)], 2.0 * m * n * k * iters * programs


def _iters_for(flops_per_iter: float, target_s: float, rate: float = 8e14) -> int:
    return max(8, int(target_s * rate / flops_per_iter))


def measure_triton_tensor(s: Session, dtype, *, mma_sync: bool) -> None:
    tiles = MMA_SYNC_TILES if mma_sync else TRITON_TILES
    modes = (False,) if mma_sync else (False, True)
    instruction = "mma.sync" if mma_sync else "triton_default"
    for m, n, k, warps in tiles:
        for streamed in modes:
            if s.left_s() < 20:
                s.failed.append(f"tensor {instruction} {m}x{n}x{k}: budget")
                continue
            programs = 4 * s.sm_count
            iters = 2 if s.interpret else _iters_for(2.0 * m * n * k * programs, 2e-3)
            if s.interpret:
                programs = 2
            old = os.environ.get("DISABLE_MMA_V3")
            if mma_sync:
                os.environ["DISABLE_MMA_V3"] = "1"
            try:
                fn, sets, flops = triton_mma(
                    m, n, k, warps, dtype, iters=iters, programs=programs,
                    streamed=streamed, interpret=s.interpret,
                )  # fmt: skip
                t = s.time(fn, sets)
            except Exception as err:  # noqa: BLE001 - one failed shape, the run goes on
                s.failed.append(f"tensor {instruction} {m}x{n}x{k}: {type(err).__name__}: {err}")
                s.log(f"FAILED {s.failed[-1][:200]}")
                continue
            finally:
                if mma_sync:
                    if old is None:
                        os.environ.pop("DISABLE_MMA_V3", None)
                    else:
                        os.environ["DISABLE_MMA_V3"] = old
            _tensor_row(s, instruction, "triton", dtype, m, n, k, warps, streamed, flops, t,
                        programs=programs, iters=iters)  # fmt: skip


def _tensor_row(s, instruction, lowering, dtype, m, n, k, warps, streamed, flops, t, **extra):
    rate = flops / t["device_s"]
    row = {
        "instruction": instruction,
        "lowering": lowering,
        "dtype": _dtype_name(dtype),
        "m": m,
        "n": n,
        "k": k,
        "warps": warps,
        "operands": "streamed" if streamed else "smem",
        "flops_per_s": rate,
        "device_s": t["device_s"],
        "timing": t["method"],
        **extra,
        **{key: t[key] for key in ("clock_sm_hz", "power_w") if key in t},
    }
    # A rate above the datasheet means the compiler hoisted the product out of the loop.
    row["valid"] = bool(rate < 1.05 * DATASHEET["FLOP/s"])
    s.tables["tensor_core"].append(row)
    mhz = f" {t['clock_sm_hz'] / 1e6:.0f} MHz" if "clock_sm_hz" in t else ""
    s.log(
        f"tensor {instruction:14s} {lowering:6s} {row['dtype']} {m}x{n}x{k} w{warps} "
        f"{row['operands']:8s} {rate / 1e12:7.1f} TFLOP/s{_ratio(rate, 'FLOP/s')}{mhz}"
        + ("" if row["valid"] else "  INVALID (above datasheet: loop hoisted?)")
    )


def _wgmma_body(a_ref, b_ref, o_ref, *, wgs, n, k, iters, n_tiles, mn_major=False, in_flight=1):
    """One CTA: each warpgroup copies its A [64, K] tile, warpgroup 0 the shared B
    [N, K] tile, into swizzled shared memory (the swizzle our forward gives a row of
    its elements, ``flash_mosaic.swizzle_bytes``); then ``iters`` wgmma S += A B^T (B
    transposed in shared memory, as K^T in attention), one group in flight; the row
    sums of S go out through shared memory (so nothing is dead code). ``mn_major``: B is
    [K, N] instead, N contiguous, as the forward holds V for O += P V. ``in_flight`` 0:
    each wgmma waited for before the next is issued (a chain of dependent products, as a
    backward's S -> dS -> dK runs when nothing else is resident to fill the drain)."""
    import jax.experimental.pallas.mosaic_gpu as plgpu

    from pallas_kernels.flash_mosaic import swizzle_bytes

    dtype = a_ref.dtype
    itemsize = jnp.dtype(dtype).itemsize

    def swizzled(row: int):
        swizzle = swizzle_bytes(row, itemsize)
        return (plgpu.TilingTransform((8, swizzle // itemsize)), plgpu.SwizzleTransform(swizzle))

    smem_types = (
        plgpu.SMEM((wgs, 64, k), dtype, transforms=swizzled(k)),
        plgpu.SMEM(
            (k, n) if mn_major else (n, k), dtype, transforms=swizzled(n if mn_major else k)
        ),
        plgpu.SMEM((wgs, 64), jnp.float32),
    )
    barrier_types = (plgpu.Barrier(num_barriers=wgs), plgpu.Barrier(num_barriers=1))

    def scoped(smem, barriers):
        a_smem, b_smem, out_smem = smem
        a_ready, b_ready = barriers
        wg = lax.axis_index("wg")
        cta = lax.axis_index("cta")
        tile = lax.rem(cta, jnp.int32(n_tiles))
        plgpu.copy_gmem_to_smem(a_ref.at[tile, wg], a_smem.at[wg], a_ready.at[wg])

        @pl.when(wg == 0)
        def _():
            plgpu.copy_gmem_to_smem(b_ref.at[tile], b_smem, b_ready.at[0])

        plgpu.barrier_wait(a_ready.at[wg])
        plgpu.barrier_wait(b_ready.at[0])
        b_t = b_smem if mn_major else plgpu.transpose_ref(b_smem, (1, 0))

        def acc_body(acc):
            @pl.loop(0, iters)
            def _(i):
                plgpu.wgmma(acc, a_smem.at[wg], b_t)
                plgpu.wgmma_wait(in_flight)

            plgpu.wgmma_wait(0)
            return acc[...]

        s = pl.run_scoped(acc_body, plgpu.ACC((64, n), jnp.float32))
        out_smem.at[wg][...] = s.sum(axis=1)
        plgpu.commit_smem()
        plgpu.copy_smem_to_gmem(out_smem.at[wg], o_ref.at[cta, wg])
        plgpu.wait_smem_to_gmem(0)

    pl.run_scoped(scoped, smem_types, barrier_types, collective_axes="wg")


def mosaic_wgmma(wgs, n, k, dtype, *, iters, ctas, n_tiles=8, mn_major=False, in_flight=1):
    """(jitted fn, input sets, FLOPs per call) of the Mosaic wgmma tile kernel."""
    import jax.experimental.pallas.mosaic_gpu as plgpu

    body = functools.partial(
        _wgmma_body, wgs=wgs, n=n, k=k, iters=iters, n_tiles=n_tiles, mn_major=mn_major,
        in_flight=in_flight,
    )
    fn = plgpu.kernel(
        body,
        out_type=jax.ShapeDtypeStruct((ctas, wgs, 64), jnp.float32),
        grid=(ctas,),
        grid_names=("cta",),
        num_threads=wgs,
        thread_name="wg",
    )
    a = _random(21, (n_tiles, wgs, 64, k), dtype) * 0.1
    b = _random(22, (n_tiles, k, n) if mn_major else (n_tiles, n, k), dtype) * 0.1
    return jax.jit(fn), [(a, b)], 2.0 * 64 * n * k * wgs * iters * ctas


def measure_wgmma(s: Session, dtype, tiles, form: str | None = None) -> None:
    """The Mosaic wgmma tiles ``(warpgroups, N, K)``; ``form``: the product they stand
    for where not S = Q K^T (``"pv"``: ``WGMMA_PV_TILES``; ``"pv_mn"``: the same with V
    N-contiguous, ``WGMMA_PV_MN_TILES``; ``"bwd_lone"``, ``"bwd_serial"``: ``WGMMA_FORMS``),
    kept in each row."""
    if s.interpret:
        s.failed.append("tensor wgmma mosaic: no interpret mode for Mosaic GPU")
        return
    for wgs, n, k in tiles:
        if s.left_s() < 20:
            s.failed.append(f"tensor wgmma {wgs}x64x{n}x{k}: budget")
            continue
        per_sm, in_flight = WGMMA_FORMS.get(form or "", (2, 1))
        ctas = per_sm * s.sm_count
        iters = _iters_for(2.0 * 64 * n * k * wgs * ctas, 2e-3)
        mn_major = form == "pv_mn"
        try:
            fn, sets, flops = mosaic_wgmma(
                wgs, n, k, dtype, iters=iters, ctas=ctas, mn_major=mn_major, in_flight=in_flight
            )
            t = s.time(fn, sets)
        except Exception as err:  # noqa: BLE001
            s.failed.append(f"tensor wgmma {wgs}wg {n}x{k}: {type(err).__name__}: {err}")
            s.log(f"FAILED {s.failed[-1][:300]}")
            if "mosaic" in str(err).lower() and len(s.failed) > 3:
                return
            continue
        from pallas_kernels.flash_mosaic import swizzle_bytes

        swizzle = swizzle_bytes(n if mn_major else k, jnp.dtype(dtype).itemsize)
        _tensor_row(s, "wgmma", "mosaic", dtype, 64 * wgs, n, k, 4 * wgs, False, flops, t,
                    warpgroups=wgs, ctas=ctas, iters=iters,
                    **({"swizzle_bytes": swizzle} if swizzle < 128 else {}),
                    **({"form": form} if form else {}))  # fmt: skip


def measure_gemm(s: Session) -> None:
    """cuBLAS (through XLA) bf16 8192^3 on random data, then on zeros: the old derating's
    source, and how much the data moves the tensor-core rate."""
    size = 256 if s.interpret else 8192
    f = jax.jit(jnp.matmul)
    for name, fill in (
        ("gemm_bf16_flops_per_s", "random"),
        ("gemm_bf16_zeros_flops_per_s", "zeros"),
    ):
        sets = [
            (
                _random(31 + i, (size, size), jnp.bfloat16),
                _random(41 + i, (size, size), jnp.bfloat16),
            )
            if fill == "random"
            else (jnp.zeros((size, size), jnp.bfloat16),) * 2
            for i in range(2)
        ]
        t = s.time(f, sets, seconds=0.4, sustain=1.0 if fill == "random" else 0.3)
        rate = 2.0 * size**3 / t["device_s"]
        _headline(s, name, rate, "FLOP/s",
                  f"jnp.matmul (cuBLAS via XLA), bf16 in and out, {fill} inputs, "
                  f"{t['method']}", f"{size}x{size}x{size}", t)  # fmt: skip


#: Row lengths (keys) of the XLA softmax rate, and head dims of its batched products.
XLA_SOFTMAX_ROWS = (256, 512, 1024, 2048, 4096, 8192, 16384, 32768)
XLA_PRODUCT_DIMS = (64, 128, 256)
#: Bytes of one n x m operand of the XLA rows (far above any L2).
XLA_SCORE_BYTES = 256 << 20


def xla_softmax(rows: int, m: int, dtype):
    """(jitted fn, input sets, bytes moved) of a row softmax as XLA compiles it for the
    naive baseline's middle step: float32 math, the input dtype in and out."""

    def softmax(x):
        return jax.nn.softmax(x.astype(jnp.float32), axis=-1).astype(x.dtype)

    sets = [(_random(70 + i, (rows, m), dtype),) for i in range(2)]
    return jax.jit(softmax), sets, 2 * rows * m * jnp.dtype(dtype).itemsize


def xla_product(op: str, batch: int, n: int, d: int, dtype):
    """(jitted fn, input sets, bytes of the n x n operand, FLOPs) of a batched product as
    XLA compiles it for the naive baseline (f32 accumulation, the input dtype out):
    ``scores`` [b, n, d] x [b, n, d] -> [b, n, n] (writes the big operand), ``pv``
    [b, n, n] x [b, n, d] -> [b, n, d] (reads it)."""
    f32 = jnp.float32
    if op == "scores":

        def fn(q, k):
            return jnp.einsum("bqd,bkd->bqk", q, k, preferred_element_type=f32).astype(q.dtype)

        shapes = ((batch, n, d), (batch, n, d))
    else:

        def fn(p, v):
            return jnp.einsum("bqk,bkd->bqd", p, v, preferred_element_type=f32).astype(p.dtype)

        shapes = ((batch, n, n), (batch, n, d))
    sets = [tuple(_random(80 + 2 * i + j, sh, dtype) for j, sh in enumerate(shapes))
            for i in range(2)]  # fmt: skip
    big = batch * n * n * jnp.dtype(dtype).itemsize
    return jax.jit(fn), sets, big, 2.0 * batch * n * n * d


def measure_xla_naive(s: Session) -> None:
    """The library calls the naive baseline is made of, as XLA compiles them, on random
    data (no attention): a row softmax by row length, and the two batched products at
    n = 2048 by head dim: the rate their bytes (softmax: read + write) move at."""
    dtype = jnp.bfloat16
    item = jnp.dtype(dtype).itemsize
    scale = 64 if s.interpret else 1
    jobs = [("softmax", m, None) for m in XLA_SOFTMAX_ROWS]
    jobs += [(op, 2048, d) for op in ("scores", "pv") for d in XLA_PRODUCT_DIMS]
    for op, m, d in jobs:
        if s.left_s() < 10:
            s.failed.append(f"xla naive {op} m={m} d={d}: budget")
            continue

        def build(op=op, m=m, d=d):
            if op == "softmax":
                rows = max(1, XLA_SCORE_BYTES // scale // (m * item))
                return (*xla_softmax(rows, m, dtype), 0.0, {"rows": rows, "m": m})
            n = m // (8 if s.interpret else 1)
            batch = max(1, XLA_SCORE_BYTES // scale // (n * n * item))
            return (*xla_product(op, batch, n, d, dtype), {"rows": batch * n, "m": n, "d": d})

        timed = _timed(s, f"xla naive {op} m={m} d={d}", build)
        if timed is None:
            continue
        t, (moved, flops, row) = timed
        rate = moved / t["device_s"]
        s.tables["xla_naive"].append({
            "op": op, "dtype": _dtype_name(dtype), **row, "bytes_moved": moved,
            "bytes_per_s": rate, "flops_per_s": flops / t["device_s"] if flops else None,
            "device_s": t["device_s"], "timing": t["method"],
            "kernels_per_call": t.get("kernels_per_call"),
            **{key: t[key] for key in ("clock_sm_hz",) if key in t},
        })  # fmt: skip
        s.log(f"xla {op:8s} m={m:6d} d={d or '-'!s:>4s} {_si(rate, 'B/s')}{_ratio(rate, 'B/s')}"
              + (f"  {flops / t['device_s'] / 1e12:.0f} TFLOP/s" if flops else ""))  # fmt: skip


# ---------------------------------------------------------------- exp and FMA


def _exp_kernel(x_ref, o_ref, *, iters):
    """x <- exp2(-x), four steps per loop trip: one MUFU exp2 per element per step."""

    def body(i, x):
        for _ in range(4):
            x = jnp.exp2(-x)
        return x

    o_ref[...] = lax.fori_loop(0, iters, body, x_ref[...])


def _fma_kernel(x_ref, o_ref, *, iters, asm):
    """x <- x * a + b (2 FLOP), eight steps per loop trip: as Triton compiles the
    expression (``asm`` False), or one ``fma.rn.f32`` each, written as inline PTX."""
    a = jnp.full(x_ref.shape, 0.999, jnp.float32)
    b = jnp.full(x_ref.shape, 0.001, jnp.float32)

    def step(x):
        if not asm:
            return x * 0.999 + 0.001
        (y,) = pltriton.elementwise_inline_asm(
            "fma.rn.f32 $0, $1, $2, $3;",
            args=[x, a, b],
            constraints="=f,f,f,f",
            pack=1,
            result_shape_dtypes=[jax.ShapeDtypeStruct(x.shape, jnp.float32)],
        )
        return y

    def body(i, x):
        for _ in range(8):
            x = step(x)
        return x

    o_ref[...] = lax.fori_loop(0, iters, body, x_ref[...])


def _elementwise_fn(kernel, rows, cols, programs, warps, interpret, name):
    call = pl.pallas_call(
        kernel,
        grid=(programs,),
        in_specs=[pl.BlockSpec((None, rows, cols), lambda p: (p, 0, 0))],
        out_specs=pl.BlockSpec((None, rows, cols), lambda p: (p, 0, 0)),
        out_shape=jax.ShapeDtypeStruct((programs, rows, cols), jnp.float32),
        compiler_params=None if interpret else triton_compiler_params(warps, 1),
        interpret=interpret,
        name=name,
    )
    return jax.jit(call)


def measure_vector(s: Session) -> None:
    rows, cols, warps = (8, 16, 1) if s.interpret else (32, 256, 4)
    programs = 2 if s.interpret else 8 * s.sm_count
    elems = rows * cols * programs
    x = jax.random.uniform(jax.random.key(5), (programs, rows, cols), jnp.float32)
    variants = [
        ("exp_per_s", _exp_kernel, 1.0, 4, "exp/s", "jnp.exp2(-x)"),
        ("vector_fp32_mul_add_flops_per_s", functools.partial(_fma_kernel, asm=False), 2.0, 8,
         "FP32 FLOP/s", "x * 0.999 + 0.001 as Triton compiles it"),
    ]  # fmt: skip
    if not s.interpret:  # inline PTX needs the GPU
        fma = functools.partial(_fma_kernel, asm=True)
        what = "fma.rn.f32 (inline PTX) x * 0.999 + 0.001"
        variants.append(("vector_fp32_flops_per_s", fma, 2.0, 8, "FP32 FLOP/s", what))
    for name, kernel, per_step, steps, unit, what in variants:
        iters = 2 if s.interpret else int(3e-3 * 4e12 / (elems * steps))
        if name.startswith("vector"):
            iters = 2 if s.interpret else int(3e-3 * 6e13 / (2 * elems * steps))
        try:
            fn = _elementwise_fn(functools.partial(kernel, iters=iters), rows, cols, programs,
                                 warps, s.interpret, f"ceil_{name}")  # fmt: skip
            t = s.time(fn, [(x,)])
        except Exception as err:  # noqa: BLE001
            s.failed.append(f"{name}: {type(err).__name__}: {err}")
            s.log(f"FAILED {s.failed[-1][:200]}")
            continue
        rate = per_step * elems * steps * iters / t["device_s"]
        _headline(s, name, rate, unit,
                  f"Pallas Triton: {what} chained {steps * iters} times on f32 values held in "
                  f"registers, {elems // programs} per program of {warps} warps, {t['method']}",
                  f"{programs} programs x {rows}x{cols} f32", t)  # fmt: skip


# ---------------------------------------------------------------- HBM and L2


def _read_kernel(x_ref, o_ref, *, rows, per_program):
    base = pl.program_id(0) * per_program

    def body(i, acc):
        start = pl.multiple_of((base + i) * rows, rows)
        return acc + x_ref[pl.ds(start, rows), :].astype(jnp.float32)

    o_ref[...] = lax.fori_loop(0, per_program, body, jnp.zeros((rows, x_ref.shape[1]), jnp.float32))


def _write_kernel(o_ref, *, rows, per_program):
    base = pl.program_id(0) * per_program
    value = jnp.full((rows, o_ref.shape[1]), 1.0, o_ref.dtype) * pl.program_id(0).astype(
        o_ref.dtype
    )

    def body(i, carry):
        start = pl.multiple_of((base + i) * rows, rows)
        o_ref[pl.ds(start, rows), :] = value
        return carry

    lax.fori_loop(0, per_program, body, 0)


def _copy_kernel(x_ref, o_ref, *, rows, per_program):
    base = pl.program_id(0) * per_program

    def body(i, carry):
        start = pl.multiple_of((base + i) * rows, rows)
        o_ref[pl.ds(start, rows), :] = x_ref[pl.ds(start, rows), :] + 1
        return carry

    lax.fori_loop(0, per_program, body, 0)


def stream_fn(op: str, n_bytes: int, programs: int, interpret: bool, tile_rows: int = 8):
    """(jitted fn, bytes moved per call) of one streaming kernel over ``n_bytes`` of bf16."""
    cols = TILE_COLS
    rows = n_bytes // (2 * cols)
    tiles = rows // tile_rows
    programs = max(1, min(programs, tiles))
    per = tiles // programs
    rows_used = programs * per * tile_rows
    full = pl.BlockSpec((rows, cols), lambda p: (0, 0))
    params = None if interpret else triton_compiler_params(4, 3)
    common = dict(grid=(programs,), compiler_params=params, interpret=interpret)
    kw = dict(rows=tile_rows, per_program=per)
    if op == "read":
        call = pl.pallas_call(
            functools.partial(_read_kernel, **kw),
            in_specs=[full],
            out_specs=pl.BlockSpec((None, tile_rows, cols), lambda p: (p, 0, 0)),
            out_shape=jax.ShapeDtypeStruct((programs, tile_rows, cols), jnp.float32),
            name="ceil_read",
            **common,
        )
        moved = rows_used * cols * 2
    elif op == "write":
        call = pl.pallas_call(
            functools.partial(_write_kernel, **kw),
            in_specs=[],
            out_specs=full,
            out_shape=jax.ShapeDtypeStruct((rows, cols), jnp.bfloat16),
            name="ceil_write",
            **common,
        )
        moved = rows_used * cols * 2
    else:
        call = pl.pallas_call(
            functools.partial(_copy_kernel, **kw),
            in_specs=[full],
            out_specs=full,
            out_shape=jax.ShapeDtypeStruct((rows, cols), jnp.bfloat16),
            name="ceil_copy",
            **common,
        )
        moved = 2 * rows_used * cols * 2
    return jax.jit(call), moved


def _timed(s: Session, label: str, build):
    """Time the call ``build()`` makes, ``(fn, sets, *facts)``: (its timing, facts), or
    None with the failure kept under ``label``; its inputs are freed either way."""
    try:
        fn, sets, *facts = build()
        return s.time(fn, sets, seconds=0.15, sustain=0.1), tuple(facts)
    except Exception as err:  # noqa: BLE001 - a broken measurement must not lose the rest
        s.failed.append(f"{label}: {type(err).__name__}: {err}")
        s.log(f"FAILED {s.failed[-1][:200]}")
        return None


def measure_hbm(s: Session) -> None:
    sizes = (64 << 10, 256 << 10) if s.interpret else HBM_SIZES
    programs = 2 if s.interpret else 4 * s.sm_count
    best: dict[str, tuple] = {}
    for op in ("read", "write", "copy"):
        for n_bytes in sizes:
            if s.left_s() < 12:
                s.failed.append(f"hbm {op} {n_bytes}: budget")
                continue
            copies = 1 if s.interpret else max(1, min(512, ROTATION_BYTES // n_bytes))

            def build(op=op, n_bytes=n_bytes, copies=copies):
                fn, moved = stream_fn(op, n_bytes, programs, s.interpret)
                rows = n_bytes // (2 * TILE_COLS)
                if op == "write":
                    return fn, [() for _ in range(copies)], moved  # no inputs to rotate
                sets = [(_random(60 + i, (rows, TILE_COLS), jnp.bfloat16),) for i in range(copies)]
                return fn, sets, moved

            timed = _timed(s, f"hbm {op} {n_bytes}", build)
            if timed is None:
                continue
            t, (moved,) = timed
            rate = moved / t["device_s"]
            s.tables["hbm"].append(
                {"op": op, "bytes": n_bytes, "bytes_moved": moved, "bytes_per_s": rate,
                 "device_s": t["device_s"], "buffers": copies, "timing": t["method"],
                 **{k: t[k] for k in ("clock_sm_hz", "clock_mem_hz") if k in t}}
            )  # fmt: skip
            s.log(f"hbm {op:5s} {n_bytes / 2**20:8.1f} MiB  {rate / 1e12:6.2f} TB/s"
                  f"{_ratio(rate, 'B/s')}  ({t['device_s'] * 1e6:.1f} us)")  # fmt: skip
            if n_bytes == max(sizes):
                best[op] = (rate, n_bytes, t)
    for op, (rate, n_bytes, t) in best.items():
        counted = "bytes read + bytes written" if op == "copy" else f"bytes {op}"
        _headline(s, f"hbm_{op}_bytes_per_s", rate, "B/s",
                  f"Pallas Triton streaming {op} kernel, {programs} programs of 4 warps, "
                  f"16 KB tiles, 3 stages; {counted} over {t['method']}",
                  f"{n_bytes / 2**20:.0f} MiB (curve in [[hbm]])", t)  # fmt: skip


def _l2_kernel(x_ref, o_ref, *, rows, per_program, n_tiles, stride):
    start_tile = lax.rem(pl.program_id(0) * stride, n_tiles)

    def body(i, acc):
        start = pl.multiple_of(lax.rem(start_tile + i, n_tiles) * rows, rows)
        return acc + x_ref[pl.ds(start, rows), :].astype(jnp.float32)

    acc = jnp.zeros((rows, x_ref.shape[1]), jnp.float32)
    o_ref[...] = lax.fori_loop(0, per_program, body, acc)


def measure_l2(s: Session) -> None:
    sets_ = (64 << 10, 128 << 10) if s.interpret else L2_WORKING_SETS
    programs = 2 if s.interpret else 8 * s.sm_count
    per = 2 if s.interpret else 256
    tile_rows, best = 8, None
    for ws in sets_:
        if s.left_s() < 15:
            s.failed.append(f"l2 {ws}: budget")
            continue
        rows = ws // (2 * TILE_COLS)
        n_tiles = rows // tile_rows
        stride = max(1, n_tiles // programs)
        call = pl.pallas_call(
            functools.partial(_l2_kernel, rows=tile_rows, per_program=per, n_tiles=n_tiles,
                              stride=stride),
            grid=(programs,),
            in_specs=[pl.BlockSpec((rows, TILE_COLS), lambda p: (0, 0))],
            out_specs=pl.BlockSpec((None, tile_rows, TILE_COLS), lambda p: (p, 0, 0)),
            out_shape=jax.ShapeDtypeStruct((programs, tile_rows, TILE_COLS), jnp.float32),
            compiler_params=None if s.interpret else triton_compiler_params(4, 3),
            interpret=s.interpret,
            name="ceil_l2_read",
        )  # fmt: skip
        x = _random(70, (rows, TILE_COLS), jnp.bfloat16)
        try:
            t = s.time(jax.jit(call), [(x,)], seconds=0.15, sustain=0.1)
        except Exception as err:  # noqa: BLE001
            s.failed.append(f"l2 {ws}: {type(err).__name__}: {err}")
            s.log(f"FAILED {s.failed[-1][:200]}")
            continue
        moved = programs * per * tile_rows * TILE_COLS * 2
        rate = moved / t["device_s"]
        s.tables["l2"].append(
            {"working_set_bytes": ws, "bytes_read": moved, "bytes_per_s": rate,
             "device_s": t["device_s"], "timing": t["method"],
             **{k: t[k] for k in ("clock_sm_hz",) if k in t}}
        )  # fmt: skip
        s.log(f"l2 re-read, working set {ws / 2**20:6.1f} MiB: {rate / 1e12:6.2f} TB/s")
        if ws <= 32 << 20 and (best is None or rate > best[0]):
            best = (rate, ws, t)
    if best:
        rate, ws, t = best
        _headline(s, "l2_read_bytes_per_s", rate, "B/s",
                  f"Pallas Triton: {programs} programs each read {per} 16 KB tiles of one "
                  f"bf16 buffer in turn (every tile re-read many times), {t['method']}; the "
                  "best working set up to 32 MiB (curve in [[l2]])",
                  f"working set {ws / 2**20:.0f} MiB", t)  # fmt: skip


# ---------------------------------------------------------------- L2 reductions (atomics)

#: (rows, cols) of one float32 tile a program adds into the buffer: a 64-row dQ tile of
#: head dim 128 (32 KB), as the atomic backward families send each tile's dQ.
ATOMIC_TILE = (64, 128)
#: Buffer sizes (bytes of float32) the adds land in: inside L2, about its size, past it.
ATOMIC_WORKING_SETS = tuple(m << 20 for m in (8, 32, 128))
#: How many programs add into the same tiles in the same order: 1, every program its own
#: tiles; 16, the K/V blocks of one head walking the same Q blocks together, as an
#: atomic backward's programs do.
ATOMIC_SHARING = (1, 16)


def _atomic_kernel(x_ref, *refs, rows, per_program, n_tiles, sharing, stride):
    """Each program adds its float32 tile into ``per_program`` tiles of the buffer in
    turn, starting where its group of ``sharing`` programs starts (Triton's atomic add:
    red.global.add.f32 per element, the result unused)."""
    o_ref = refs[-1]  # with a buffer given (``start``), it is the output aliased to it
    group = pl.program_id(0) // sharing
    start_tile = lax.rem(group * stride, n_tiles)
    val = x_ref[...]

    def body(i, carry):
        start = pl.multiple_of(lax.rem(start_tile + i, n_tiles) * rows, rows)
        pltriton.atomic_add(o_ref, (pl.ds(start, rows), slice(None)), val)
        return carry

    lax.fori_loop(0, per_program, body, 0)


def atomic_fn(
    ws_bytes: int, programs: int, per: int, sharing: int, interpret: bool, start: bool = False
):
    """(jitted fn, bytes added per call) of the Triton atomic-add kernel over a float32
    buffer of ``ws_bytes``: its contents are whatever the output buffer held (the
    additions, not their values, are timed), or with ``start`` a second argument the
    output is aliased to (the checks; jit then copies it first, so never timed)."""
    rows, cols = ATOMIC_TILE
    total_rows = ws_bytes // (4 * cols)
    n_tiles = total_rows // rows
    groups = max(1, programs // sharing)
    stride = max(1, n_tiles // groups)
    call = pl.pallas_call(
        functools.partial(_atomic_kernel, rows=rows, per_program=per, n_tiles=n_tiles,
                          sharing=sharing, stride=stride),
        grid=(programs,),
        in_specs=[pl.BlockSpec((rows, cols), lambda p: (0, 0))]
        + [pl.BlockSpec((total_rows, cols), lambda p: (0, 0))] * start,
        out_specs=pl.BlockSpec((total_rows, cols), lambda p: (0, 0)),
        out_shape=jax.ShapeDtypeStruct((total_rows, cols), jnp.float32),
        input_output_aliases={1: 0} if start else {},
        compiler_params=None if interpret else triton_compiler_params(4, 1),
        interpret=interpret,
        name="ceil_atomic_add",
    )  # fmt: skip
    return jax.jit(call), programs * per * rows * cols * 4


def _tma_reduce_body(x_ref, o_ref, *, rows, per, n_tiles, sharing, stride, in_flight):
    """One CTA of one thread: its float32 tile into shared memory once, then ``per``
    TMA bulk reduce-adds of it into the buffer's tiles in turn (FlashAttention-3's dQ
    form), at most ``in_flight`` outstanding."""
    import jax.experimental.pallas.mosaic_gpu as plgpu

    def scoped(tile_smem, ready):
        cta = lax.axis_index("cta")
        plgpu.copy_gmem_to_smem(x_ref, tile_smem, ready.at[0])
        plgpu.barrier_wait(ready.at[0])
        start_tile = lax.rem((cta // sharing) * stride, n_tiles)

        @pl.loop(0, per)
        def _(i):
            start = pl.multiple_of(lax.rem(start_tile + i, n_tiles) * rows, rows)
            plgpu.copy_smem_to_gmem(tile_smem, o_ref.at[pl.ds(start, rows)], reduction_op="add")
            plgpu.wait_smem_to_gmem(in_flight, wait_read_only=True)

        plgpu.wait_smem_to_gmem(0)

    pl.run_scoped(
        scoped, plgpu.SMEM(ATOMIC_TILE, jnp.float32), plgpu.Barrier(num_barriers=1)
    )


def tma_reduce_fn(ws_bytes: int, ctas: int, per: int, sharing: int, in_flight: int = 4):
    """(jitted fn, bytes added per call) of the Mosaic TMA reduce-add kernel."""
    import jax.experimental.pallas.mosaic_gpu as plgpu

    rows, cols = ATOMIC_TILE
    total_rows = ws_bytes // (4 * cols)
    n_tiles = total_rows // rows
    stride = max(1, n_tiles // max(1, ctas // sharing))
    body = functools.partial(_tma_reduce_body, rows=rows, per=per, n_tiles=n_tiles,
                             sharing=sharing, stride=stride, in_flight=in_flight)  # fmt: skip
    fn = plgpu.kernel(
        body,
        out_type=jax.ShapeDtypeStruct((total_rows, cols), jnp.float32),
        grid=(ctas,),
        grid_names=("cta",),
    )
    return jax.jit(fn), ctas * per * rows * cols * 4


def measure_atomics(s: Session) -> None:
    """Float32 adds into an L2 buffer, one way (a reduction whose result no one reads):
    the dQ of the atomic backward families. Triton's per-element atomics (FA-2's form)
    and Mosaic's TMA bulk reduce-add (FA-3's), each against working set and sharing."""
    rows, cols = ATOMIC_TILE
    tile = rows * cols * 4
    forms = [
        ("triton_red", "Pallas Triton atomic_add of a 64x128 f32 tile (red.global.add.f32, "
         "acq_rel)"),
    ]  # fmt: skip
    if not s.interpret:
        forms.append(("tma_reduce", "Pallas Mosaic GPU copy_smem_to_gmem(reduction_op='add') "
                      "of a 64x128 f32 tile, 4 in flight"))  # fmt: skip
    sets_ = (256 << 10,) if s.interpret else ATOMIC_WORKING_SETS
    programs = 2 if s.interpret else 2 * s.sm_count
    per = 2 if s.interpret else 256
    best: dict[tuple[str, int], tuple] = {}
    for form, what in forms:
        for ws in sets_:
            for sharing in (1, 2) if s.interpret else ATOMIC_SHARING:
                if s.left_s() < 12:
                    s.failed.append(f"atomics {form} {ws} {sharing}: budget")
                    continue
                try:
                    if form == "triton_red":
                        fn, moved = atomic_fn(ws, programs, per, sharing, s.interpret)
                    else:
                        fn, moved = tma_reduce_fn(ws, programs, per, sharing)
                    x = _random(80, ATOMIC_TILE, jnp.float32)
                    t = s.time(fn, [(x,)], seconds=0.15, sustain=0.1)
                except Exception as err:  # noqa: BLE001
                    s.failed.append(f"atomics {form} {ws} {sharing}: {type(err).__name__}: {err}")
                    s.log(f"FAILED {s.failed[-1][:300]}")
                    break
                rate = moved / t["device_s"]
                s.tables["atomics"].append(
                    {"form": form, "working_set_bytes": ws, "sharing": sharing,
                     "programs": programs, "tile_bytes": tile, "bytes_added": moved,
                     "bytes_per_s": rate, "device_s": t["device_s"], "timing": t["method"],
                     **{k: t[k] for k in ("clock_sm_hz",) if k in t}}
                )  # fmt: skip
                s.log(f"atomics {form:10s} ws {ws / 2**20:6.1f} MiB, {sharing:2d} programs a "
                      f"tile: {rate / 1e12:6.2f} TB/s")  # fmt: skip
                if ws <= 32 << 20 and (best.get((form, sharing)) is None
                                        or rate > best[(form, sharing)][0]):  # fmt: skip
                    best[(form, sharing)] = (rate, ws, t, what)
    for (form, sharing), (rate, ws, t, what) in best.items():
        shared = "each program its own tiles" if sharing == 1 else (
            f"{sharing} programs adding into the same tiles in the same order")
        _headline(s, f"l2_{form}_{'spread' if sharing == 1 else 'shared'}_bytes_per_s", rate,
                  "B/s", f"{what}; {programs} programs x {per} tiles, {shared}; bytes added "
                  f"over {t['method']}; the best working set up to 32 MiB (curve in [[atomics]])",
                  f"working set {ws / 2**20:.0f} MiB", t)  # fmt: skip


# ---------------------------------------------------------------- launch, blocks, waves


def _tiny_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1.0


def tiny_fn(programs: int, warps: int, interpret: bool):
    """A grid of ``programs`` minimal programs (load 8 x 128 f32, add, store)."""
    call = pl.pallas_call(
        _tiny_kernel,
        grid=(programs,),
        in_specs=[pl.BlockSpec((None, 8, 128), lambda p: (p % 64, 0, 0))],
        out_specs=pl.BlockSpec((None, 8, 128), lambda p: (p, 0, 0)),
        out_shape=jax.ShapeDtypeStruct((programs, 8, 128), jnp.float32),
        compiler_params=None if interpret else triton_compiler_params(warps, 1),
        interpret=interpret,
        name=f"ceil_tiny_w{warps}",
    )
    return jax.jit(call)


def _slope(xs, ys) -> float:
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    var = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var if var else math.nan


def measure_launch(s: Session) -> None:
    x = jnp.ones((1,), jnp.float32)
    f = jax.jit(lambda a: a + 1)
    lat = timing.call_latency(f, (x,), samples=3 if s.interpret else 100)
    t = {"device_s": lat["median"]}
    _headline(s, "launch_latency_s", lat["median"], "s",
              "one synchronous call of a jitted 1-element add: dispatch, launch, kernel, "
              "block_until_ready (median of 100)", "1 element", t)  # fmt: skip
    times, shares = timing.queued_samples(f, [(x,)], samples=5, calls=2 if s.interpret else 500)
    _headline(s, "dispatch_interval_s", statistics.median(times), "s",
              "wall time per call of 500 jitted 1-element adds queued back to back, then one "
              f"sync (median of 5; host share {statistics.median(shares):.2f}: the host's "
              "dispatch rate when near 1)", "1 element", t)  # fmt: skip
    x4 = jax.random.normal(jax.random.key(9), (64, 8, 128), jnp.float32)
    grid4 = (1, 4) if s.interpret else GRID_4WARP
    for warps, grids in ((4, grid4), (32, [w * 2 * s.sm_count for w in GRID_32WARP_WAVES])):
        if s.interpret and warps == 32:
            grids = (2,)
        for g in grids:
            if s.left_s() < 5:
                s.failed.append(f"grid {g} w{warps}: budget")
                continue
            try:
                t = s.time(tiny_fn(g, warps, s.interpret), [(x4,)], seconds=0.05, sustain=0.02)
            except Exception as err:  # noqa: BLE001
                s.failed.append(f"grid {g} w{warps}: {type(err).__name__}: {err}")
                s.log(f"FAILED {s.failed[-1][:200]}")
                continue
            s.tables["grid"].append(
                {"programs": g, "warps": warps, "device_s": t["device_s"], "timing": t["method"]}
            )
            s.log(f"grid {g:6d} programs of {warps:2d} warps: {t['device_s'] * 1e6:8.2f} us")
    rows4 = [r for r in s.tables["grid"] if r["warps"] == 4]
    if rows4 and rows4[0]["programs"] == 1:
        r = rows4[0]
        _headline(s, "kernel_min_s", r["device_s"], "s",
                  f"device time of a one-program Pallas Triton kernel (4 warps, 4 KB in and out), "
                  f"{r['timing']}", "1 program", {})  # fmt: skip
    big = [r for r in rows4 if r["programs"] >= 2112]
    if len(big) >= 3:
        per_block = _slope([r["programs"] for r in big], [r["device_s"] for r in big])
        _headline(s, "block_cost_s", per_block * s.sm_count, "s",
                  "slope of device time against grid size for minimal 4-warp programs "
                  "(>= 2112 programs), times the SM count: the seconds one SM spends per "
                  "thread block that does almost nothing", "2112-33792 programs", {})  # fmt: skip
    rows32 = [r for r in s.tables["grid"] if r["warps"] == 32 and r["programs"] >= 2 * s.sm_count]
    if len(rows32) >= 3:
        waves = [r["programs"] / (2 * s.sm_count) for r in rows32]
        per_wave = _slope(waves, [r["device_s"] for r in rows32])
        _headline(s, "wave_cost_s", per_wave, "s",
                  "slope of device time against waves for minimal 32-warp (1024-thread) "
                  "programs, two resident per SM by the thread limit: the fixed cost of one "
                  "wave of thread blocks", f"{GRID_32WARP_WAVES[0]}-{GRID_32WARP_WAVES[-1]} "
                  "waves", {})  # fmt: skip


# ---------------------------------------------------------------- latency


def _chase_kernel(start_ref, x_ref, o_ref, *, steps):
    """One program follows a chain of dependent loads: each 64-byte slot holds, in all
    16 of its int32 lanes, the index of the next slot; nothing overlaps two loads."""

    def body(i, idx):
        return jnp.max(x_ref[pl.ds(pl.multiple_of(idx, CHASE_LANES), CHASE_LANES)])

    last = lax.fori_loop(0, steps, body, jnp.max(start_ref[...]))
    o_ref[...] = jnp.full(o_ref.shape, last, jnp.int32)


def chase_table(ws_bytes: int, slots: int, seed: int = 5):
    """(table, chain starts): ``slots`` 64-byte slots spread evenly over ``ws_bytes`` of
    int32, linked in one random cycle; the starts are two points half a cycle apart."""
    import numpy as np

    n = ws_bytes // 4
    stride = n // slots
    order = np.random.default_rng(seed).permutation(slots).astype(np.int64) * stride
    table = np.zeros(n, np.int32)
    table[order[:, None] + np.arange(CHASE_LANES)] = np.roll(order, -1)[:, None]
    starts = [np.full(CHASE_LANES, order[k], np.int32) for k in (0, slots // 2)]
    return table, starts


def chase_fn(n: int, steps: int, interpret: bool):
    vec = pl.BlockSpec((CHASE_LANES,), lambda p: (0,))
    call = pl.pallas_call(
        functools.partial(_chase_kernel, steps=steps),
        grid=(1,),
        in_specs=[vec, pl.BlockSpec((n,), lambda p: (0,))],
        out_specs=vec,
        out_shape=jax.ShapeDtypeStruct((CHASE_LANES,), jnp.int32),
        compiler_params=None if interpret else triton_compiler_params(1, 1),
        interpret=interpret,
        name="ceil_chase",
    )
    return jax.jit(call)


def measure_latency(s: Session) -> None:
    """Dependent-load latency of one lone program (an idle memory system): the slope of
    device time against chain steps, over a working set far above the L2 (DRAM) and one
    well inside it (L2 hits)."""
    cases = LATENCY_CASES_INTERPRET if s.interpret else LATENCY_CASES
    for name, ws, slots, steps in cases:
        if s.left_s() < 10:
            s.failed.append(f"latency {name}: budget")
            continue
        table, starts = chase_table(ws, slots)
        x = jnp.asarray(table)
        sets = [(jnp.asarray(st), x) for st in starts]
        del table
        times = []
        try:
            for k in steps:
                t = s.time(chase_fn(x.size, k, s.interpret), sets, seconds=0.3, sustain=0.02)
                times.append(t["device_s"])
                us = t["device_s"] * 1e6
                s.log(f"chase {name}, {ws / 2**20:7.1f} MiB, {k:7d} steps: {us:10.1f} us")
        except Exception as err:  # noqa: BLE001
            s.failed.append(f"latency {name}: {type(err).__name__}: {err}")
            s.log(f"FAILED {s.failed[-1][:300]}")
            continue
        per = _slope(list(steps), times)
        s.tables["latency"].append(
            {"case": name, "working_set_bytes": ws, "slots": slots, "steps": list(steps),
             "device_s": times, "latency_s": per, "timing": t["method"]}
        )  # fmt: skip
        _headline(s, f"{name}_latency_s", per, "s",
                  f"pointer chase, one Pallas Triton program of 1 warp: each step loads the "
                  f"64-byte slot whose index the last load returned ({slots} slots spread over "
                  f"{ws / 2**20:.0f} MiB, one random cycle, two starts half a cycle apart); the "
                  f"slope of device time ({t['method']}) against {steps[0]}-{steps[-1]} steps",
                  f"{ws / 2**20:.0f} MiB", t)  # fmt: skip
        del x, sets


#: Programs a SM of the loaded-latency reads; the headline is Little's law at the second.
LOADED_PER_SM = (1, 2, 4)


def measure_loaded_latency(s: Session) -> None:
    """HBM latency under load (``hbm_loaded_latency_s``), by Little's law: a streaming read
    (``stream_fn``, 16 KB tiles) at ``LOADED_PER_SM`` programs a SM over 1 GiB, each
    program counted as one tile in flight (the method of the H200 spec's figure, the
    "stream_read" rows of ``specs/measurements/details/h200-heldout-decode-2026-11-30.json``,
    which the decode benchmark measured before this section owned it); latency = bytes in
    flight / bytes a second. A row each in ``[[loaded_latency]]``; the headline at 2 a SM,
    as there."""
    n_bytes = (256 << 10) if s.interpret else (1 << 30)
    rows = n_bytes // (2 * TILE_COLS)
    tile = 8 * TILE_COLS * 2
    for per_sm in LOADED_PER_SM:
        programs = 2 if s.interpret else per_sm * s.sm_count
        if s.left_s() < 12:
            s.failed.append(f"loaded latency {per_sm}/SM: budget")
            continue

        def build(programs=programs):
            fn, moved = stream_fn("read", n_bytes, programs, s.interpret)
            sets = [(_random(90 + i, (rows, TILE_COLS), jnp.bfloat16),) for i in range(2)]
            return fn, sets, moved

        timed = _timed(s, f"loaded latency {per_sm}/SM", build)
        if timed is None:
            continue
        t, (moved,) = timed
        rate = moved / t["device_s"]
        latency = programs * tile / rate
        s.tables["loaded_latency"].append(
            {"programs": programs, "bytes": n_bytes, "bytes_in_flight": programs * tile,
             "bytes_per_s": rate, "latency_s": latency, "device_s": t["device_s"],
             "timing": t["method"],
             **{k: t[k] for k in ("clock_sm_hz", "clock_mem_hz") if k in t}}
        )  # fmt: skip
        s.log(f"read, {per_sm} programs/SM, one 16 KB tile in flight each: "
              f"{rate / 1e12:.2f} TB/s, Little's law {latency * 1e6:.2f} us")  # fmt: skip
        if per_sm == 2:
            _headline(s, "hbm_loaded_latency_s", latency, "s",
                      f"Little's law on a Pallas Triton streaming read of "
                      f"{n_bytes / 2**20:.2f} MiB, {programs} programs of 4 warps ({per_sm} a SM), "
                      "one 16 KB tile in flight each: "
                      f"bytes in flight / bytes a second ({t['method']}); the other occupancies "
                      "in [[loaded_latency]]", f"{n_bytes / 2**20:.2f} MiB", t)  # fmt: skip


# ---------------------------------------------------------------- the file


def _toml_value(v) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ValueError(f"non-finite value {v!r}")
        return repr(v)
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ") + '"'


def _finite(d: dict) -> dict:
    return {
        k: v
        for k, v in d.items()
        if v is not None and not (isinstance(v, float) and not math.isfinite(v))
    }


def to_toml(doc: dict) -> str:
    """TOML of a header (scalars), tables of scalars and arrays of tables of scalars."""
    lines = [
        "# Measured device ceilings: python -m pallas_kernels.ceilings (issue 21). Loaded by",
        "# perfmodel.catalog.ceilings; every figure says how it was measured. Not attention.",
    ]
    tables, arrays = [], []
    for key, value in doc.items():
        if isinstance(value, dict):
            tables.append((key, value))
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            arrays.append((key, value))
        elif value is not None and value != []:
            lines.append(f"{key} = {_toml_value(value)}")
    for key, value in tables:
        nested = {k: v for k, v in value.items() if isinstance(v, dict)}
        flat = _finite({k: v for k, v in value.items() if not isinstance(v, dict)})
        if flat:
            lines += ["", f"[{key}]", *(f"{k} = {_toml_value(v)}" for k, v in flat.items())]
        for sub, entry in nested.items():
            lines += ["", f"[{key}.{sub}]"]
            lines += [f"{k} = {_toml_value(v)}" for k, v in _finite(entry).items()]
    for key, rows in arrays:
        for row in rows:
            lines += [
                "",
                f"[[{key}]]",
                *(f"{k} = {_toml_value(v)}" for k, v in _finite(row).items()),
            ]
    return "\n".join(lines) + "\n"


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _check_mma_sync(rows: list[dict]) -> None:
    """Whether ``DISABLE_MMA_V3`` changed the code: the one tile both Triton lists share
    (128x128x64, 4 warps) timed both ways. Within 2 %, mma.sync rows are marked
    ``lowering_confirmed = false`` (Triton may have ignored the variable)."""
    key = ("triton", 128, 128, 64, 4, "smem")
    for dtype in ("bf16", "fp16"):
        pair = {
            r["instruction"]: r["flops_per_s"]
            for r in rows
            if (r["lowering"], r["m"], r["n"], r["k"], r["warps"], r["operands"]) == key
            and r["dtype"] == dtype
        }
        if len(pair) == 2:
            same = abs(pair["mma.sync"] / pair["triton_default"] - 1) < 0.02
            for r in rows:
                if r["instruction"] == "mma.sync" and r["dtype"] == dtype:
                    r["lowering_confirmed"] = not same


def document(s: Session, device: str, command: str, *, quiet: bool = True) -> dict:
    dev = jax.devices()[0]
    _check_mma_sync(s.tables["tensor_core"])
    valid = [r for r in s.tables["tensor_core"] if r["valid"]]
    for instruction, lowering in (("wgmma", "mosaic"), ("mma.sync", "triton"),
                                  ("triton_default", "triton")):  # fmt: skip
        for dtype in ("bf16", "fp16"):
            rows = [r for r in valid if (r["instruction"], r["lowering"], r["dtype"]) ==
                    (instruction, lowering, dtype) and r["operands"] == "smem"
                    and r.get("form") is None]  # fmt: skip
            if rows:
                best = max(rows, key=lambda r: r["flops_per_s"])
                name = f"{instruction.replace('.', '_')}_{dtype}_flops_per_s"
                _headline(s, name, best["flops_per_s"], "FLOP/s",
                          f"the fastest {instruction} tile ({lowering}) of [[tensor_core]], "
                          "operands in shared memory, f32 accumulation, random data, "
                          f"sustained; {best['timing']}",
                          f"{best['m']}x{best['n']}x{best['k']}, {best['warps']} warps", best,
                          quiet=quiet)  # fmt: skip
    return {
        "schema": SCHEMA,
        "device": device,
        "device_kind": dev.device_kind,
        "date": dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z"),
        "jax_version": jax.__version__,
        "git_commit": os.environ.get("PERFMODEL_GIT_COMMIT", "unknown"),  # no .git there
        "command": command,
        "duration_s": round(time.monotonic() - s.t_start, 1),
        "sm_count": s.sm_count,
        "interpret": s.interpret,
        "clocks": s.clocks.summary() if s.clocks else {},
        "ceilings": dict(sorted(s.headline.items())),
        "failed": [f[:300] for f in s.failed] or None,
        "previous": s.previous or None,
        **s.tables,
    }


SECTIONS = ("gemm", "triton bf16", "mma.sync bf16", "exp and fma", "hbm", "l2", "launch",
            "latency", "wgmma bf16", "wgmma pv bf16", "wgmma fp16", "triton fp16",
            "mma.sync fp16", "atomics", "wgmma bwd bf16", "wgmma swizzle bf16",
            "xla naive", "wgmma pv_mn bf16", "wgmma bwd_lone bf16",
            "wgmma bwd_serial bf16", "loaded latency")  # fmt: skip
_LAUNCH = ("launch_latency_s", "dispatch_interval_s", "kernel_min_s", "block_cost_s", "wave_cost_s")


def section_of(table: str, entry: dict | str) -> str | None:
    """The section that measures a headline (by name) or a table row; None for the
    tensor headlines, which ``document`` derives from the rows."""
    if table == "tensor_core":
        if entry.get("form") in ("pv", "bwd", "pv_mn", "bwd_lone", "bwd_serial"):
            return f"wgmma {entry['form']} {entry['dtype']}"
        if entry.get("swizzle_bytes") and entry["lowering"] == "mosaic":
            return f"wgmma swizzle {entry['dtype']}"
        kind = {"mosaic": "wgmma"}.get(entry["lowering"]) or (
            "mma.sync" if entry["instruction"] == "mma.sync" else "triton"
        )
        return f"{kind} {entry['dtype']}"
    if table in ("hbm", "l2", "latency", "atomics"):
        return table
    if table == "xla_naive":
        return "xla naive"
    if table == "loaded_latency":
        return "loaded latency"
    if table == "grid":
        return "launch"
    name = str(entry)
    if name.startswith("gemm_"):
        return "gemm"
    if name == "exp_per_s" or name.startswith("vector_"):
        return "exp and fma"
    if name == "hbm_loaded_latency_s":
        return "loaded latency"
    if name.endswith("_latency_s") and name != "launch_latency_s":
        return "latency"
    if name.startswith("l2_") and name.endswith(("_spread_bytes_per_s", "_shared_bytes_per_s")):
        return "atomics"
    if name.startswith(("hbm_", "l2_")):
        return name.split("_")[0]
    return "launch" if name in _LAUNCH else None


def resume(s: Session, path: Path, rerun: set[str]) -> None:
    """Keep what an earlier file measured in the sections not run again now."""
    import tomllib

    old = tomllib.loads(path.read_text())
    for name, entry in old.get("ceilings", {}).items():
        section = section_of("ceilings", name)
        if section is not None and section not in rerun:
            s.headline[name] = entry
    for table in s.tables:
        s.tables[table] = [r for r in old.get(table, []) if section_of(table, r) not in rerun]
    s.previous = {k: old[k] for k in ("date", "command", "duration_s", "git_commit") if k in old}
    s.previous.update({f"clocks_{k}": v for k, v in old.get("clocks", {}).items()})
    kept = [section_of("ceilings", n) for n in s.headline]
    kept += [section_of(tb, r) for tb, rows in s.tables.items() for r in rows]
    s.previous["sections"] = sorted({k for k in kept if k is not None})
    s.log(
        f"resumed from {path}: kept {len(s.headline)} ceilings, sections {s.previous['sections']}"
    )


def run(out: Path, *, device: str, budget_s: float, interpret: bool, quick: bool, command: str,
        sections=SECTIONS, resume_from: Path | None = None):  # fmt: skip
    s = Session(budget_s=budget_s, interpret=interpret, quick=quick)
    if resume_from is not None:
        resume(s, resume_from, set(sections))
    s.log(f"jax {jax.__version__} on {jax.devices()[0].device_kind}; {s.sm_count} SMs; "
          f"budget {budget_s:.0f} s")  # fmt: skip
    steps = [
        ("gemm", measure_gemm),
        ("wgmma bf16", lambda s: measure_wgmma(s, jnp.bfloat16, WGMMA_TILES)),
        ("wgmma fp16", lambda s: measure_wgmma(s, jnp.float16, WGMMA_FP16_TILES)),
        ("wgmma pv bf16", lambda s: measure_wgmma(s, jnp.bfloat16, WGMMA_PV_TILES, "pv")),
        ("wgmma bwd bf16", lambda s: measure_wgmma(s, jnp.bfloat16, WGMMA_BWD_TILES, "bwd")),
        ("wgmma swizzle bf16", lambda s: measure_wgmma(s, jnp.bfloat16, WGMMA_SWIZZLE_TILES)),
        ("xla naive", measure_xla_naive),
        ("wgmma pv_mn bf16", lambda s: measure_wgmma(s, jnp.bfloat16, WGMMA_PV_MN_TILES, "pv_mn")),
        ("wgmma bwd_lone bf16",
         lambda s: measure_wgmma(s, jnp.bfloat16, WGMMA_BWD_TILES, "bwd_lone")),
        ("wgmma bwd_serial bf16",
         lambda s: measure_wgmma(s, jnp.bfloat16, WGMMA_BWD_TILES, "bwd_serial")),
        ("triton bf16", lambda s: measure_triton_tensor(s, jnp.bfloat16, mma_sync=False)),
        ("mma.sync bf16", lambda s: measure_triton_tensor(s, jnp.bfloat16, mma_sync=True)),
        ("triton fp16", lambda s: measure_triton_tensor(s, jnp.float16, mma_sync=False)),
        ("mma.sync fp16", lambda s: measure_triton_tensor(s, jnp.float16, mma_sync=True)),
        ("exp and fma", measure_vector),
        ("hbm", measure_hbm),
        ("l2", measure_l2),
        ("launch", measure_launch),
        ("latency", measure_latency),
        ("loaded latency", measure_loaded_latency),
        ("atomics", measure_atomics),
    ]
    steps = [st for st in steps if st[0] in sections and not (quick and "fp16" in st[0])]
    # Mosaic last but the fp16 repeats: a crash there (a process abort) loses the least.
    steps.sort(key=lambda st: SECTIONS.index(st[0]))
    for name, step in steps:
        s.log(f"-- {name}")
        try:
            step(s)
        except Exception as err:  # noqa: BLE001 - a broken section must not lose the rest
            s.failed.append(f"{name}: {type(err).__name__}: {err}")
            s.log(f"FAILED section {s.failed[-1][:300]}")
        write_atomic(out, to_toml(document(s, device, command)))  # after every section
    write_atomic(out, to_toml(document(s, device, command, quiet=False)))
    s.log(f"wrote {out} ({len(s.headline)} ceilings, {len(s.failed)} failed)")
    return s


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="the ceilings TOML to write")
    ap.add_argument("--device", default="h200-sxm", help="the device spec it refines")
    ap.add_argument("--budget-s", type=float, default=170.0, help="stop starting work after")
    ap.add_argument("--interpret", action="store_true", help="CPU: Pallas interpreter, toy sizes")
    ap.add_argument("--quick", action="store_true", help="bf16 only")
    ap.add_argument("--sections", default=",".join(SECTIONS), help="comma-separated, of these")
    ap.add_argument("--resume", type=Path, help="keep this file's other sections' results")
    args = ap.parse_args(argv)
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    command = "python -m pallas_kernels.ceilings " + " ".join(
        argv if argv is not None else sys.argv[1:]
    )
    if not args.interpret and jax.devices()[0].platform != "gpu":
        print(f"ceilings: no GPU here ({jax.devices()[0].platform}); --interpret for a dry run")
        return 2
    sections = tuple(x.strip() for x in args.sections.split(","))
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        ap.error(f"unknown sections {sorted(unknown)}; known: {', '.join(SECTIONS)}")
    run(args.out, device=args.device, budget_s=args.budget_s, interpret=args.interpret,
        quick=args.quick, command=command, sections=sections, resume_from=args.resume)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
