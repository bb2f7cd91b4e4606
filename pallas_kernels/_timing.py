"""Moved to ``kernel_bench.timing`` (issue 22: timing is the harness's). These names stay
importable from here while issue 21's ceilings driver (``pallas_kernels.ceilings``) still
imports them; delete this file when it has moved to ``kernel_bench``."""

from kernel_bench.timing import (  # noqa: F401 - re-exported for the ceilings driver
    call_latency,
    kernel_time,
    measure_all,
    plan,
    queued_samples,
    queued_time,
    spin_up,
)
