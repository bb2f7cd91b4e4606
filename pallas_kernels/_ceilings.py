"""Moved to ``kernel_bench.probes`` (issue 22: measurements are the harness's). These
names stay importable from here while issue 21's ceilings driver
(``pallas_kernels.ceilings``) still imports them; delete this file when it has moved."""

from kernel_bench.device import device_spec  # noqa: F401 - re-exported, as above
from kernel_bench.probes import (  # noqa: F401 - re-exported for the ceilings driver
    copy_bytes_per_s,
    device_properties,
    l2_read_bytes_per_s,
    launch_overhead_s,
    matmul_flops_per_s,
    measure_ceilings,
    median_time,
)
