"""Nominal attention FLOPs (``perfmodel.costs.nominal``), counted again by hand."""

import subprocess
import sys

import pytest

from perfmodel.costs.nominal import nominal_flops
from perfmodel.errors import PerfmodelError


def _products(b, h, n, m, d, count):
    """``count`` matrix products of an n x m score block by d, 2 FLOPs per multiply-add."""
    return count * b * h * (2 * n * m * d)


@pytest.mark.parametrize(
    ("b", "h", "n", "m", "d"), [(1, 1, 1, 1, 1), (4, 16, 4096, 4096, 128), (2, 32, 1, 8192, 128)]
)
def test_forward_is_two_products_over_every_score(b, h, n, m, d):
    # QK^T: n x d by d x m; PV: n x m by m x d -> n·m·d multiply-adds each.
    got = nominal_flops(batch=b, h=h, n=n, kv_len=m, d=d)
    assert got == _products(b, h, n, m, d, 2)
    assert nominal_flops(batch=b, h=h, n=n, kv_len=m, d=d, causal=True) == got / 2


def test_backward_and_train_count_five_and_seven_products():
    shape = dict(batch=2, h=8, n=1024, kv_len=2048, d=64)
    assert nominal_flops(**shape, mode="backward") == _products(2, 8, 1024, 2048, 64, 5)
    assert nominal_flops(**shape, mode="train") == _products(2, 8, 1024, 2048, 64, 7)
    forward = nominal_flops(**shape, causal=True)
    assert nominal_flops(**shape, causal=True, mode="backward") == 2.5 * forward


def test_unknown_mode_is_named():
    with pytest.raises(PerfmodelError, match="mode='sideways'"):
        nominal_flops(batch=1, h=1, n=1, kv_len=1, d=1, mode="sideways")


def test_imports_without_pydantic_or_jax():
    """The GPU benchmarks import it where pydantic is absent."""
    code = (
        "import sys; import perfmodel.costs.nominal; "
        "print(sorted(m for m in ('pydantic', 'jax') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
