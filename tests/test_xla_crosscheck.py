"""Cross-check the model's counts against XLA's own cost analysis of plain-JAX attention.

XLA counts 2·M·N·K FLOPs per dot and one transcendental per exp; the model's matmul
FLOPs and exponential count must agree with an independent counter.
"""

import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

from perfmodel.compile import compiled  # noqa: E402
from perfmodel.costs import symbolic  # noqa: E402

SHAPES = [(1, 1, 256, 64), (2, 4, 512, 128), (1, 8, 384, 64), (3, 2, 128, 32)]


def _cost(fn, *args):
    analysis = jax.jit(fn).lower(*args).compile().cost_analysis()
    return analysis[0] if isinstance(analysis, list) else analysis


def _attention(q, k, v):  # [b, h, n, d]
    s = jnp.einsum("bhnd,bhmd->bhnm", q, k)
    p = jax.nn.softmax(s, axis=-1)
    return jnp.einsum("bhnm,bhmd->bhnd", p, v)


def _matmuls_only(q, k, v):
    s = jnp.einsum("bhnd,bhmd->bhnm", q, k)
    return jnp.einsum("bhnm,bhmd->bhnd", s, v)


def _model(b, h, n, d):
    values = dict(b=b, h=h, h_kv=h, n=n, m=n, d=d, s=4, block_q=64, block_k=64)
    naive = symbolic("naive")
    return (
        float(compiled(naive.matmul_flops)(**values)),
        float(compiled(naive.exp_count)(**values)),
    )


@pytest.mark.parametrize("b, h, n, d", SHAPES)
def test_matmul_flops_and_exps_match_xla(b, h, n, d):
    x = jnp.ones((b, h, n, d), jnp.float32)
    matmul_flops, exps = _model(b, h, n, d)
    assert _cost(_matmuls_only, x, x, x)["flops"] == pytest.approx(matmul_flops, rel=1e-6)
    full = _cost(_attention, x, x, x)
    assert full["transcendentals"] == pytest.approx(exps, rel=1e-6)
    # the rest of XLA's count is the softmax's elementwise work: O(b·h·n²), a few per score
    softmax_per_score = (full["flops"] - matmul_flops) / (b * h * n * n)
    assert 1 <= softmax_per_score <= 8
