"""Multi-head latent attention: its costs by hand, its cache, and the DeepSeek-V3 config."""

import pytest

from perfmodel.analysis.kvcache import kv_bytes_per_token, kv_cache_bytes, paging_overhead
from perfmodel.catalog.models import load_model
from perfmodel.compile import compiled
from perfmodel.costs import mla

# DeepSeek-V3's shapes (config.json), bf16, 4 sequences of 4096 cached tokens.
B, H, M, S = 4, 128, 4096, 2
RANK, ROPE, NOPE, V, Q_RANK, HIDDEN = 512, 64, 128, 128, 1536, 7168
VALUES = dict(
    b=B,
    h=H,
    m=M,
    s=S,
    kv_rank=RANK,
    rope_dim=ROPE,
    nope_dim=NOPE,
    v_dim=V,
    q_rank=Q_RANK,
    hidden=HIDDEN,
)


def at(expr, **kw):
    return float(compiled(expr)(**{**VALUES, **kw}))


def test_absorbed_decode_attention_by_hand():
    k = mla.absorbed_attention()
    scores = B * H * 1 * M
    # each score: a 576-wide dot product (512 latent + 64 rope) and a 512-wide PV update
    assert at(k.matmul_flops, q_len=1) == 2 * scores * 576 + 2 * scores * 512
    assert at(k.exp_count, q_len=1) == scores
    # the cache once for all 128 heads, the absorbed queries in, the latent outputs out
    cache = B * M * (RANK + ROPE) * S
    assert at(k.hbm_bytes, q_len=1) == cache + B * H * (576 + 512) * S


def test_absorbed_decode_reads_57x_fewer_bytes_than_mha_of_the_same_heads():
    cache = at(mla.cache_bytes)
    mha = B * M * 2 * H * NOPE * S  # 128 heads of 128 as MHA
    assert mha / cache == pytest.approx(2 * 128 * 128 / 576)
    assert mha / cache > 56


def test_absorb_and_decompress_gemms_by_hand():
    q, o = mla.absorb_kernels()
    assert at(q.matmul_flops, rows=B) == 2 * B * H * NOPE * RANK
    assert at(o.matmul_flops, rows=B) == 2 * B * H * RANK * V
    # weights: the two halves of W_UKV, once each
    assert at(q.hbm_bytes, rows=B) == (B * H * NOPE + H * NOPE * RANK + B * RANK) * S
    dec = mla.decompress(B * M)
    assert at(dec.matmul_flops) == 2 * B * M * RANK * H * (NOPE + V)


def test_non_absorbed_attention_is_flash_at_the_mean_head_dim():
    """FLOPs 2·(192 + 128) a score and bytes of Q+O, K+V: those of d = 160 exactly."""
    from perfmodel import predict

    shape = mla.prefill_attention_shape(NOPE + ROPE, V, H)
    assert shape == {"d": 160, "h": 128, "h_kv": 128}
    n, b = 2048, 1
    p = predict(n=n, batch=b, hw="h200", causal=False, **shape)
    assert p.flash.matmul_flops == 2 * b * H * n * n * (NOPE + ROPE + V)
    q_and_o = b * n * H * (NOPE + ROPE + V) * S
    kv = b * n * H * (NOPE + ROPE + V) * S
    # naive (minimal): Q, K, V, O once each, and the four trips of the n x n S and P
    assert p.naive.hbm_bytes == q_and_o + kv + 4 * b * H * n * n * S


def test_latent_cache_per_token_and_paging():
    spec = load_model("deepseek-v3")
    assert kv_bytes_per_token(spec, "bf16") == 61 * (512 + 64) * 2
    # one int32 page id a page per sequence, over 576 values a token
    got = paging_overhead(spec, "bf16", tokens=[4096], page_tokens=64)
    assert float(got[0]) == pytest.approx(4 / (64 * 576 * 2))
    cache = kv_cache_bytes(spec, "fp8", tokens=[1000, 3000], batch=2)
    assert list(cache) == [2 * 61 * 576 * 1000, 2 * 61 * 576 * 3000]  # one byte a value


def test_deepseek_v3_config_counts_671b():
    spec = load_model("deepseek-v3")
    assert spec.mla is not None and spec.mla.qk_head_dim == 192 and spec.mla.cache_width == 576
    assert spec.dense_layers == 3 and spec.moe_layers == 58
    assert spec.counted_params() == spec.params
    assert 670e9 < spec.params < 672e9  # model card: 671B without the MTP module


def test_deepseek_v3_estimate_reads_the_latent_cache_at_decode():
    from perfmodel.analysis.estimate import estimate

    batch, prompt, output = 8, 4096, 256
    e = estimate(
        "deepseek-v3", "h200", prompt=prompt, output=output, batch=batch, tp=8, dtype="fp8"
    )
    ops = {op.name: op for op in e.decode.operators}
    context = prompt + output // 2
    heads = 128 // 8  # per device; the latent cache is every head's, so each device holds it
    cache = batch * context * 576 * 1  # fp8: one byte a value
    queries = batch * heads * (576 + 512) * 1
    assert ops["mla_attention"].hbm_bytes == 61 * (cache + queries)
    assert ops["mla_attention"].count == 61
    assert "attention" not in ops  # no GQA attention: MLA is the model's own
    assert e.memory.kv_cache_bytes == batch * (prompt + output) * 61 * 576  # paged, 16 | 4352
    prefill = {op.name for op in e.prefill.operators}
    assert {"attention", "mla_decompress", "mla_q_a", "mla_kv_a"} <= prefill
    # 3 dense layers and 58 MoE layers: a dense gate_up at 18432/8 wide and one over experts
    gate_up = [op for op in e.prefill.operators if op.name == "gate_up"]
    assert [op.count for op in gate_up] == [3, 58]
