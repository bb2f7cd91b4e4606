"""``perfmodel report``: one device, n swept, conclusions, markdown and figures.

breakdown (per-kernel roof times), conclusions (the headline numbers), measured
(measured points beside the model), markdown (the text), figures (the charts),
build (writes report.md and the figures).
"""
