"""estimate and advise use each model's own attention: local/global layers (Gemma 2)."""

import pytest

from perfmodel import predict
from perfmodel.analysis.advise import advise
from perfmodel.analysis.estimate import LOCAL_ATTENTION, decode_splits, estimate
from perfmodel.analysis.kvcache import decode_step, kv_cache_bytes
from perfmodel.catalog.hardware import load_hardware
from perfmodel.catalog.models import load_model


def test_gemma_2_alternates_local_and_global_layers():
    spec = load_model("gemma-2-9b")
    windows = spec.layer_windows()
    # transformers' Gemma2Config: even layers sliding (4096 keys, itself included), odd global
    assert windows[:4] == (4095, None, 4095, None) and windows.count(None) == 21
    assert load_model("mistral-7b-v0.3").layer_windows() == (None,) * 32  # v0.3: no window


def test_gemma_estimate_costs_each_layer_kind():
    batch, prompt, output = 2, 8000, 64
    e = estimate("gemma-2-9b", "h200", prompt=prompt, output=output, batch=batch)
    ops = {op.name: op for op in e.prefill.operators}
    local, glob = ops[LOCAL_ATTENTION], ops["attention"]
    assert local.count == glob.count == 21
    heads = dict(d=256, h=16, h_kv=8, batch=batch, causal=True, dtype="bf16")
    p_local = predict(n=prompt, hw="h200", window=4095, **heads)
    p_global = predict(n=prompt, hw="h200", **heads)
    assert local.flops == 21 * p_local.flash.flops and glob.flops == 21 * p_global.flash.flops
    assert local.flops < 0.8 * glob.flops
    # decode: a local layer reads the last 4096 tokens of its cache, a global one all of them
    context = prompt + output // 2
    d_ops = {op.name: op for op in e.decode.operators}
    d_local, d_global = d_ops[LOCAL_ATTENTION], d_ops["attention"]
    splits = decode_splits(load_hardware("h200"), batch, 8, 4096, 16)  # estimate's rule
    step = decode_step(
        "h200", batch=batch, kv_len=4096, h=16, h_kv=8, d=256, page_tokens=16, splits=splits
    )
    assert d_local.hbm_bytes == 21 * step.hbm_bytes
    assert d_global.hbm_bytes > d_local.hbm_bytes * (context / 4096) * 0.95
    assert e.prefill.attention_s == local.time_s + glob.time_s
    assert any("21 sliding-window layers" in note for note in e.notes)
    assert "attention-swa" in str(e) and "21 global layers" in str(e)


def test_a_model_without_windows_has_one_attention_operator_and_no_note():
    e = estimate("llama-3.1-8b", "h200", prompt=4096, output=16)
    names = [op.name for op in e.prefill.operators]
    assert names.count("attention") == 1 and LOCAL_ATTENTION not in names and e.notes == ()


def test_local_layers_keep_only_their_windows_kv_cache():
    """Gemma 2: 21 global layers keep every token, 21 local ones the last 4096."""
    per_layer_token = 2 * 8 * 256 * 2  # K and V, 8 KV heads of 256, bf16
    for tokens in (1000, 4096, 8192):
        want = 21 * per_layer_token * (tokens + min(tokens, 4096))
        assert float(kv_cache_bytes("gemma-2-9b", "bf16", tokens)) == want
    # paged: the last 4096 of 4097 tokens (positions 1..4096) span 257 pages of 16
    paged = float(kv_cache_bytes("gemma-2-9b", "bf16", 4097, page_tokens=16))
    assert paged == 21 * per_layer_token * (257 * 16 + 257 * 16)
    paged = float(kv_cache_bytes("gemma-2-9b", "bf16", 8192, page_tokens=16))
    assert paged == 21 * per_layer_token * (8192 + 4096)  # window on a page boundary
    e = estimate("gemma-2-9b", "h200", prompt=8000, output=192, batch=2, kv="contiguous")
    assert e.memory.kv_cache_bytes == 2 * 21 * per_layer_token * (8192 + 4096)


WORKLOAD = """
name = "long-chat-gemma"
description = "Long chats on Gemma 2 (a test's workload)"
model = "gemma-2-9b"
dtype = "bf16"
concurrency = 64
max_len_tokens = 8192
chars_per_token = 1.0

[prompt]
unit = "tokens"
quantiles = { p10 = 2000, p50 = 6000, p90 = 7000 }

[response]
unit = "tokens"
quantiles = { p10 = 100, p50 = 500, p90 = 1000 }

[sources]
prompt = "a test's assumption"
response = "a test's assumption"
"""


def test_advise_counts_the_windows_in_memory_and_prefill(tmp_path):
    """Contiguous reservations of Gemma 2 hold 8192 tokens in global layers and 4096 in
    local ones; the prefill attention advise weighs is both layer kinds'."""
    path = tmp_path / "long-chat-gemma.toml"
    path.write_text(WORKLOAD)
    a = advise(path, "h200")
    full_cache = 42 * 2 * 8 * 256 * 2 * 8192  # every token in every layer
    assert a.kv["contiguous"].reserved_bytes_per_seq == full_cache * 0.75
    e = estimate("gemma-2-9b", "h200", prompt=6000, output=1, check_memory=False)
    naive = estimate(
        "gemma-2-9b", "h200", prompt=6000, output=1, attention="naive", check_memory=False
    )
    assert a.flash.numbers["prefill_saved_p50"] == pytest.approx(1 - e.ttft_s / naive.ttft_s)
    assert e.prefill.attention_s > e.prefill.share("attention") * e.prefill.time_s


def test_mistral_7b_v0_1_is_local_in_every_layer():
    """A sliding_window without global_every: every layer local (Mistral 7B v0.1)."""
    spec = load_model("mistral-7b-v0.1")
    assert spec.layer_windows() == (4095,) * 32 and spec.counted_params() == spec.params
    e = estimate("mistral-7b-v0.1", "h200", prompt=8000, output=100)
    names = [op.name for op in e.prefill.operators]
    assert LOCAL_ATTENTION in names and "attention" not in names
    per_token = 2 * 32 * 8 * 128 * 2  # every layer's K and V, bf16
    # the last 4096 of 8100 tokens, positions 4004..8099, span pages 250..506 of 16 tokens
    assert e.memory.kv_cache_bytes == per_token * 257 * 16
