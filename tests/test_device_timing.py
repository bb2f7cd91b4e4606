"""Timing harness fields, the one-jit naive baseline and the decode split rule (CPU)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from kernel_bench.timing import measure_all, plan
from pallas_kernels.naive import naive_attention_jit
from pallas_kernels.paged_decode import default_splits
from pallas_kernels.reference import attention_float64


def test_measure_all_fields_off_gpu():
    """Off a GPU there is no CUPTI: device time falls back to queued calls, and says so."""
    f = jax.jit(lambda x: x * 2.0)
    sets = [(jnp.ones((64,)),), (jnp.zeros((64,)) + 3.0,)]
    fields = measure_all(f, sets, budget_s=0.01)
    assert fields["device_time_method"] == "queued_calls"
    assert fields["device_time_s"] == fields["queued_time_s"] > 0
    assert fields["call_latency_s"] > 0
    assert 0 <= fields["queued_host_share"] <= 1
    assert fields["device_p10_s"] <= fields["device_time_s"] <= fields["device_p90_s"]


def test_plan_scales_with_call_time():
    short, long = plan(1e-5), plan(1e-2)
    assert short["calls"] == 50 and long["calls"] == 1
    assert short["iterations"] == 20 and 3 <= long["iterations"] < 20


@pytest.mark.parametrize("causal", [False, True])
def test_naive_jit_matches_float64(causal):
    rng = np.random.default_rng(1)
    q = jnp.asarray(rng.standard_normal((2, 24, 6, 16)), jnp.float32)
    k = jnp.asarray(rng.standard_normal((2, 24, 3, 16)), jnp.float32)
    v = jnp.asarray(rng.standard_normal((2, 24, 3, 16)), jnp.float32)
    out = np.asarray(naive_attention_jit(q, k, v, causal=causal))
    ref = np.asarray(attention_float64(q, k, v, causal=causal)[0])
    assert np.linalg.norm(out - ref) / np.linalg.norm(ref) < 1e-5


def test_naive_jit_rejects_bad_heads():
    x = jnp.ones((1, 8, 6, 16))
    with pytest.raises(ValueError, match="h=6"):
        naive_attention_jit(x, x[:, :, :4], x[:, :, :4])


def test_decode_split_rule_is_the_models():
    """The kernel's default split equals perfmodel.costs.decode.auto_splits at
    8 programs per SM and at least 4 pages per chunk (what bench_decode records)."""
    bench = pytest.importorskip("kernel_bench.bench_decode")
    for batch, h_kv, pages in [(1, 8, 2048), (4, 8, 512), (16, 8, 64), (64, 8, 32), (1, 1, 3)]:
        assert bench.auto_splits(batch, h_kv, pages, 132) == default_splits(batch, h_kv, pages, 132)
    assert default_splits(1, 8, 2048, 132) == 132  # 8 programs per SM, not one
    assert default_splits(1, 8, 8, 132) == 2  # at least 4 pages per chunk


def test_device_spec_reads_the_toml():
    bench = pytest.importorskip("kernel_bench.bench_decode")
    spec = bench.device_spec()
    assert spec == {"sm_count": 132, "l2_bytes": 62_914_560}
