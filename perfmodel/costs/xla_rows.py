"""What XLA makes of the naive baseline's row softmax and score product, as plain numbers
(no sympy: the catalog reads it to count a measured call's bytes,
``catalog.ceilings._naive_bytes``, the engine to know which call ran,
``evaluate.kernel_memory``; ``costs.naive`` builds its symbolic rules from it).

XLA's one-fusion softmax holds a row of float32 scores in registers up to
``XLA_ROW_FUSION_BYTES``; a longer row spills, which the H200's step timings show as 2.3x
the time per score of a short row in the same single fusion: counted as two extra passes
over S (``costs.naive``).
"""

from __future__ import annotations

from perfmodel.vocabulary import BYTES_PER_ELEMENT

#: The float32 row XLA's one-fusion softmax keeps in registers.
XLA_ROW_FUSION_BYTES = 32 * 1024
#: The longest row (in keys) that fits the fusion.
ROW_FUSION_KEYS = XLA_ROW_FUSION_BYTES // BYTES_PER_ELEMENT["fp32"]


def softmax_reads(implementation: str, keys: float) -> int:
    """How often the softmax of a naive compile reads a row of ``keys`` scores: once in
    the textbook ("minimal") count; in XLA's compiles once within the fusion's row and
    three times past it."""
    if implementation == "minimal" or keys <= ROW_FUSION_KEYS:
        return 1
    return 3



def scores_apart(implementation: str, masked: bool, grouped: bool) -> str | None:
    """The second pass over the scores a naive compile makes after its score product, or
    None. "mask": under a mask, in "xla" and "sdpa", the product (a cuBLAS call) writes
    float32 scores and a fusion reads them, masks and rounds (8 bytes a score more than
    one call writing S: details/h200-naive-mask-hlo). "transpose": with no mask, in
    "xla", where a GQA group has more than one query head (``grouped``), the product
    writes S as ``[b, h_kv, n, group, m]`` and an ``input_transpose_fusion`` (or
    ``loop_transpose_fusion``) reads and writes it again as ``[b, h, n, m]`` (2 S
    bytes a score more: every grouped shape of the H100's draw 16, kernel lists in
    specs/measurements/details/h100-heldout16-2026-12-07.details.json; at b = 1,
    n = 3328, 8:1 heads, d = 128 the product moved 2.3 TB/s written as 2 bytes a score and
    the transpose 2.8 TB/s as 4, which 4 and 8 bytes of float32 would put above the
    HBM's 3.35). None in the textbook ("minimal") count."""
    if implementation == "minimal":
        return None
    if masked:
        return "mask"
    return "transpose" if grouped and implementation == "xla" else None
