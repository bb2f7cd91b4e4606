"""FP8 as it runs (perfmodel.costs.precision, the flash model's ``fp8`` form), by hand."""

import pytest

from perfmodel.compile import compiled
from perfmodel.costs import flash, precision
from perfmodel.errors import PerfmodelError

SHAPE = dict(
    n=1024,
    m=1024,
    d=128,
    h=4,
    h_kv=4,
    b=2,
    s=1,
    block_q=128,
    block_k=128,
    pack=1,
    splits=1,
    page=1,
    tile_gcd=128,
    l2_capacity=50 * 2**20,
    resident_ctas=132,
)


def kernel_numbers(fp8, **extra):
    k = flash.build(launch=True, fp8=fp8).kernels[0]
    return {
        f: float(compiled(getattr(k, f))(**SHAPE, **extra))
        for f in ("hbm_bytes", "vector_flops", "matmul_flops")
    }


def test_fp8_form_with_nothing_wider_is_the_plain_model():
    assert kernel_numbers(True, s_out=1, fp8_score_ops=0, fp8_output_ops=0) == kernel_numbers(False)


def test_bf16_output_and_extra_ops_by_hand():
    plain = kernel_numbers(False)
    # FlashAttention-3's FP8: O in BF16, P converted (1 op a score), V descaled (1 an output)
    fa3 = kernel_numbers(True, s_out=2, fp8_score_ops=1, fp8_output_ops=1)
    outputs = 2 * 4 * 1024 * 128
    scores = 2 * 4 * 1024 * 1024
    assert fa3["hbm_bytes"] - plain["hbm_bytes"] == outputs * (2 - 1)
    assert fa3["vector_flops"] - plain["vector_flops"] == scores + outputs
    assert fa3["matmul_flops"] == plain["matmul_flops"]


def test_family_facts_to_model_values():
    assert precision.vector_per_score(p="e4m3", amax=True) == 2  # convert P, max|S|
    assert precision.vector_per_score(p="bf16", amax=False) == 0
    assert precision.vector_per_output(amax=True) == 2  # V's descale, max|O|
    assert precision.output_bytes("bf16") == 2 and precision.output_bytes("e4m3") == 1
    # P in 16 bits: PV at the 16-bit rate; two matmuls of equal FLOPs
    assert precision.matmul_rate(2.0, 1.0, p="fp16") == pytest.approx(2 / (1 / 2 + 1 / 1))
    with pytest.raises(PerfmodelError, match="unknown element format 'int4'"):
        precision.output_bytes("int4")
