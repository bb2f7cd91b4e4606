"""Device ceilings measured in the benchmark's own process (GPU only).

Each function returns one number in SI units: a large bf16 matrix product's FLOP/s, a
large elementwise pass's bytes read + written per second, an L2-resident read
kernel's bytes per second, and the round-trip time of a trivial jitted op. Device
properties (L2 size, SM count, SM clock) come from torch / NVML when present.
"""

from __future__ import annotations

import statistics

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

from kernel_bench.device import device_spec
from kernel_bench.timing import queued_samples
from pallas_kernels._common import triton_compiler_params


def median_time(fn, args_sets, *, samples: int = 20, calls_per_sample: int = 1) -> list[float]:
    """Per-call seconds of ``samples`` timed samples, ``calls_per_sample`` calls queued
    back to back in each (``kernel_bench.timing.queued_samples``)."""
    return queued_samples(fn, args_sets, samples=samples, calls=calls_per_sample)[0]


def matmul_flops_per_s(size: int = 8192) -> float:
    """bf16 ``size^3`` matrix product on random data, 2*size^3 FLOPs per call."""
    keys = jax.random.split(jax.random.key(1), 4)
    sets = [
        (
            jax.random.normal(keys[2 * i], (size, size), jnp.bfloat16),
            jax.random.normal(keys[2 * i + 1], (size, size), jnp.bfloat16),
        )
        for i in range(2)
    ]
    f = jax.jit(jnp.matmul)
    t = statistics.median(median_time(f, sets, samples=20, calls_per_sample=5))
    return 2.0 * size**3 / t


def copy_bytes_per_s(n_bytes: int = 2 << 30) -> float:
    """Bytes read + written per second by the faster of two large device copies.

    JAX: an elementwise ``x + 1`` over ``n_bytes`` of bf16 (an XLA loop fusion);
    torch (when present): ``dst.copy_(src)`` timed with CUDA events. Both are printed.
    """
    x = jax.random.normal(jax.random.key(2), (n_bytes // 2,), jnp.bfloat16)
    f = jax.jit(lambda a: a + jnp.bfloat16(1))
    t = statistics.median(median_time(f, [(x,)], samples=20, calls_per_sample=5))
    del x
    rates = {"jax_add_one": 2.0 * n_bytes / t}
    try:
        rates["torch_copy"] = _torch_copy_bytes_per_s(n_bytes)
    except Exception as err:  # noqa: BLE001 - torch is optional
        print(f"torch copy unavailable: {err!r}")
    print(f"copy rates (B/s): {rates}", flush=True)
    return max(rates.values())


def _torch_copy_bytes_per_s(n_bytes: int) -> float:
    import torch

    src = torch.randn(n_bytes // 2, dtype=torch.bfloat16, device="cuda")
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(20):
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    del src, dst
    torch.cuda.empty_cache()
    return 2.0 * n_bytes / statistics.median(times)


def _l2_read_kernel(x_ref, o_ref, *, rows_per_tile, n_tiles):
    """Each program sums every tile of the buffer, starting at its own tile index."""
    pid = pl.program_id(0)

    def body(i, acc):
        start = pl.multiple_of(((pid + i) % n_tiles) * rows_per_tile, rows_per_tile)
        return acc + x_ref[pl.ds(start, rows_per_tile), :]

    acc = jnp.zeros((rows_per_tile, x_ref.shape[1]), jnp.float32)
    o_ref[...] = lax.fori_loop(0, n_tiles, body, acc)


#: Programs per SM of the L2 read (8 x 132 = 1056 on the H200, as in the committed runs).
L2_READ_PROGRAMS_PER_SM = 8


def l2_read_bytes_per_s(buffer_bytes: int = 16 << 20, programs: int | None = None) -> float:
    """Bytes/s when ``programs`` Pallas programs each read a ``buffer_bytes`` buffer (in L2);
    by default ``L2_READ_PROGRAMS_PER_SM`` per SM of the device spec file
    (``kernel_bench.device.device_spec``)."""
    if programs is None:
        programs = L2_READ_PROGRAMS_PER_SM * device_spec()["sm_count"]
    cols, rows_per_tile = 1024, 8
    rows = buffer_bytes // (4 * cols)
    n_tiles = rows // rows_per_tile
    x = jax.random.normal(jax.random.key(3), (rows, cols), jnp.float32)
    kernel = pl.pallas_call(
        lambda x_ref, o_ref: _l2_read_kernel(
            x_ref, o_ref, rows_per_tile=rows_per_tile, n_tiles=n_tiles
        ),
        grid=(programs,),
        in_specs=[pl.BlockSpec((rows, cols), lambda p: (0, 0))],
        out_specs=pl.BlockSpec((None, rows_per_tile, cols), lambda p: (p, 0, 0)),
        out_shape=jax.ShapeDtypeStruct((programs, rows_per_tile, cols), jnp.float32),
        compiler_params=triton_compiler_params(4, 3),
        name="l2_read",
    )
    f = jax.jit(kernel)
    t = statistics.median(median_time(f, [(x,)], samples=20, calls_per_sample=5))
    return float(programs) * rows * cols * 4 / t


def launch_overhead_s() -> float:
    """Median time of a trivial jitted op on one element, synchronised each call."""
    x = jnp.ones((1,), jnp.float32)
    f = jax.jit(lambda a: a + 1)
    return statistics.median(median_time(f, [(x,)], samples=200))


def device_properties() -> dict:
    """``l2_bytes``, ``sm_count``, ``clock_hz`` (max SM clock) where the tools are present."""
    props: dict = {"l2_bytes": None, "sm_count": None, "clock_hz": None}
    try:
        import torch

        p = torch.cuda.get_device_properties(0)
        props["l2_bytes"] = int(p.L2_cache_size)
        props["sm_count"] = int(p.multi_processor_count)
        if getattr(p, "clock_rate", None):
            props["clock_hz"] = float(p.clock_rate) * 1e3
    except Exception as err:  # noqa: BLE001 - optional tool, report and go on
        print(f"torch device properties unavailable: {err!r}")
    if props["clock_hz"] is None:
        try:
            import pynvml

            pynvml.nvmlInit()
            handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            props["clock_hz"] = 1e6 * pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM)
        except Exception as err:  # noqa: BLE001
            print(f"NVML clock unavailable: {err!r}")
    return props


def measure_ceilings() -> dict:
    """All ceilings as a dict with the field names of ``perfmodel.validation.measured.Ceilings``."""
    result = device_properties()
    for name, fn in [
        ("matmul_bf16_flops_per_s", matmul_flops_per_s),
        ("copy_bytes_per_s", copy_bytes_per_s),
        ("l2_read_bytes_per_s", l2_read_bytes_per_s),
        ("launch_overhead_s", launch_overhead_s),
    ]:
        try:
            result[name] = float(fn())
        except Exception as err:  # noqa: BLE001 - a failed ceiling must not stop the run
            print(f"ceiling {name} failed: {err!r}")
            result[name] = None
    return result
