"""The GPU harness around ``pallas_kernels``: benchmarks, timing, checks and probes.

Every module here runs as ``python -m kernel_bench.<module>`` on the GPU machine (plain
JSON out, the field names of ``perfmodel.validation.measured``: the GPU image has no
pydantic) or reads committed data without a GPU (``--table``). This is the one part of
the kernel code that imports ``perfmodel``:

=================  ==============================================================
bench              forward sweep: ours, cuDNN, XLA, naive (``--tune``, ``--table``)
bench_backward     backward and training step, ours against cuDNN
bench_decode       paged decode, ours against cuDNN and XLA
bench_heldout      device time again on the committed sweep, and held-out shapes
bench_shapes       a seeded random set of untuned shapes, forward/backward/training
bench_llama        one Llama layer and decode step built on the kernels
bench_parallel     two-GPU context parallel and the link ceilings
mosaic_check       the Mosaic kernel on Hopper: correctness, then speed
floor_check        measured points against the model's floor (no GPU)
naive_breakdown    the naive baseline's three steps timed apart
recheck            re-measure chosen points of a committed file
timing, probes     CUPTI kernel time, queued time; device ceilings (matmul, copy, L2)
device             SM count and L2 size from a spec file
=================  ==============================================================
"""
