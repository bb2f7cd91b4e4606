"""What XLA makes of the naive baseline's row softmax, as plain numbers (no sympy: the
catalog reads it to count a measured call's bytes, ``catalog.ceilings._naive_bytes``;
``costs.naive`` builds its symbolic rule from it).

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
