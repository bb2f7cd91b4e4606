"""Device time and call latency of one jitted function, measured as such (GPU).

Three numbers per function, each with its own method (docs/perf-notes.md, "Device
time"):

``device_time``
    Kernel time: the summed durations of every GPU kernel that one call launches, read
    from CUPTI through ``jax.experimental.mosaic.gpu.profiler.measure`` (the tool JAX's
    own Pallas GPU kernels are benchmarked with). No host dispatch, no launch gaps.
``queued_time``
    Wall time per call of calls queued back to back (several per synchronised
    sample, rotating over input sets). Equal to device time when the device is the
    bottleneck; when the host cannot enqueue calls as fast as the device runs them it
    measures dispatch instead, and ``host_share`` (time spent enqueueing over the
    sample's time) says so: near 1 means host-bound.
``call_latency``
    One synchronous call, ``fn(*args)`` then ``block_until_ready``, as a user's
    script sees it: dispatch, launch, kernels, synchronisation.

Everything here imports only jax and the standard library (the GPU image has no
pydantic). Times are seconds.
"""

from __future__ import annotations

import math
import statistics
import time

import jax


def _quantiles(times: list[float]) -> dict:
    s = sorted(times)
    return {
        "median": statistics.median(s),
        "p10": s[int(0.1 * (len(s) - 1))],
        "p90": s[math.ceil(0.9 * (len(s) - 1))],
        "min": s[0],
        "n": len(s),
    }


def call_latency(fn, args, *, samples: int = 5) -> dict:
    """Quantiles of one synchronous call (the first call, which compiles, is untimed)."""
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(samples):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    return _quantiles(times)


def queued_samples(fn, sets, *, samples: int, calls: int) -> tuple[list[float], list[float]]:
    """Per-call wall time of ``samples`` samples, each ``calls`` calls queued back to back
    (rotating over ``sets``) then one sync; and each sample's host share (the time spent
    issuing the calls over the whole sample). The first call, which compiles, is untimed."""
    jax.block_until_ready(fn(*sets[0]))
    times, shares = [], []
    i = 0
    for _ in range(samples):
        t0 = time.perf_counter()
        for _ in range(calls):
            out = fn(*sets[i % len(sets)])
            i += 1
        t1 = time.perf_counter()
        jax.block_until_ready(out)
        t2 = time.perf_counter()
        times.append((t2 - t0) / calls)
        shares.append((t1 - t0) / (t2 - t0))
    return times, shares


def queued_time(fn, sets, *, samples: int = 5, calls: int = 10) -> dict:
    """Quantiles of per-call wall time, ``calls`` calls queued per sample, and host_share."""
    times, shares = queued_samples(fn, sets, samples=samples, calls=calls)
    return {**_quantiles(times), "calls": calls, "host_share": statistics.median(shares)}


def _cupti_ext():
    """JAX's CUPTI hooks (what ``jax.experimental.mosaic.gpu.profiler.measure`` calls),
    or None where this jax has none (CPU, versions without Mosaic GPU)."""
    try:
        from jax._src.lib import mosaic_gpu as lib

        ext = lib._mosaic_gpu_ext
        ext._cupti_init, ext._cupti_get_timings  # noqa: B018 - both must exist
        return ext
    except Exception:  # noqa: BLE001 - optional
        return None


def kernel_time(fn, args, *, iterations: int = 5) -> dict | None:
    """Quantiles of summed kernel durations per call (CUPTI), and kernels per call.

    ``fn`` is any callable (one jitted function, or several called from Python as the
    three-step naive baseline): every kernel launched between the CUPTI hooks counts;
    the ``iterations`` calls are queued back to back and the kernels split evenly
    between them, as ``profiler.measure`` does. None when CUPTI is unavailable.
    """
    calls = kernel_timings(fn, args, iterations=iterations)
    if calls is None:
        return None
    times = [sum(s for _, s in call) for call in calls]
    return {**_quantiles(times), "kernels": len(calls[0]), "kernel_list": kernel_list(calls)}


def kernel_list(calls: list[list[tuple[str, float]]]) -> list[list]:
    """``[name, median seconds]`` of each kernel of a call, in launch order (names cut to
    120 characters): what a structure term counts, kept in a run's details."""
    import numpy as np

    return [
        [name[:120], float(np.median([call[i][1] for call in calls]))]
        for i, (name, _) in enumerate(calls[0])
    ]


def kernel_timings(fn, args, *, iterations: int = 5) -> list[list[tuple[str, float]]] | None:
    """Per call of ``iterations`` queued back to back, its kernels as ``(name, seconds)``
    in launch order (CUPTI); None when CUPTI is unavailable or the kernels do not split
    evenly between the calls."""
    ext = _cupti_ext()
    if ext is None or jax.devices()[0].platform != "gpu":
        return None
    jax.block_until_ready(fn(*args))
    ext._cupti_init()
    try:
        outs = [fn(*args) for _ in range(iterations)]
        jax.block_until_ready(outs)
    finally:
        timings = ext._cupti_get_timings(True)
    if not timings or len(timings) % iterations:
        return None
    per = len(timings) // iterations
    return [
        [(name, ms / 1e3) for name, ms in timings[i * per : (i + 1) * per]]
        for i in range(iterations)
    ]


def spin_up(fn, args, *, seconds: float = 0.03) -> None:
    """Calls back to back for ``seconds``: the clocks leave their idle state (the GPU
    idles at a few hundred MHz while a point compiles) before anything is timed."""
    t0 = time.perf_counter()
    out = fn(*args)
    while time.perf_counter() - t0 < seconds:
        jax.block_until_ready(out)
        out = fn(*args)
    jax.block_until_ready(out)


def plan(t_call: float, *, budget_s: float = 0.15) -> dict:
    """Sample counts for a call of ``t_call`` seconds, so a point costs about ``budget_s``."""
    iters = max(3, min(20, int(budget_s / 3 / max(t_call, 1e-6))))
    calls = max(1, min(50, math.ceil(2e-3 / max(t_call, 1e-6))))
    samples = max(3, min(10, int(budget_s / 3 / max(t_call * calls, 1e-6))))
    return {"iterations": iters, "calls": calls, "samples": samples, "latency": min(iters, 10)}


def measure_all(
    fn, sets, *, device_fn=None, budget_s: float = 0.15, with_kernels: bool = False
) -> dict:
    """Point fields: device time (CUPTI, else queued), queued time, call latency.

    ``fn`` is the user-level call, timed all three ways; ``device_fn``, when given,
    replaces it for the kernel timer only. Keys follow ``perfmodel.validation.measured.Point``;
    ``with_kernels``: also ``"kernel_list"`` (:func:`kernel_list`, None without CUPTI), for a
    run's details, not a point field.
    """
    lat = call_latency(fn, sets[0], samples=3)
    spin_up(fn, sets[0])
    p = plan(lat["median"], budget_s=budget_s)
    lat = call_latency(fn, sets[0], samples=p["latency"])
    queued = queued_time(fn, sets, samples=p["samples"], calls=p["calls"])
    kern = None
    try:
        kern = kernel_time(device_fn or fn, sets[0], iterations=p["iterations"])
    except Exception as err:  # noqa: BLE001 - the profiler is optional; queued time remains
        print(f"CUPTI kernel timer failed: {type(err).__name__}: {err}"[:300], flush=True)
    dev, method = (kern, "cupti_kernel_sum") if kern else (queued, "queued_calls")
    return {
        "device_time_s": dev["median"],
        "device_time_method": method,
        "device_p10_s": dev["p10"],
        "device_p90_s": dev["p90"],
        "device_samples": dev["n"],
        "kernels_per_call": kern["kernels"] if kern else None,
        "queued_time_s": queued["median"],
        "queued_calls_per_sample": queued["calls"],
        "queued_host_share": queued["host_share"],
        "call_latency_s": lat["median"],
        "call_latency_p10_s": lat["p10"],
        "call_latency_samples": lat["n"],
        **({"kernel_list": kern["kernel_list"] if kern else None} if with_kernels else {}),
    }
