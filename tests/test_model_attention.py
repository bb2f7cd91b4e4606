"""estimate and advise use each model's own attention: local/global layers (Gemma 2)."""

from perfmodel import predict
from perfmodel.analysis.estimate import decode_splits, estimate
from perfmodel.analysis.kvcache import decode_step
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
    local, glob = (op for op in e.prefill.operators if op.name == "attention")
    heads = dict(d=256, h=16, h_kv=8, batch=batch, causal=True, dtype="bf16")
    p_local = predict(n=prompt, hw="h200", window=4095, **heads)
    p_global = predict(n=prompt, hw="h200", **heads)
    assert local.flops == 21 * p_local.flash.flops and glob.flops == 21 * p_global.flash.flops
    assert local.flops < 0.8 * glob.flops
    # decode: a local layer reads the last 4096 tokens of its cache, a global one all of them
    context = prompt + output // 2
    d_local, d_global = (op for op in e.decode.operators if op.name == "attention")
    splits = decode_splits(load_hardware("h200"), batch, 8, 4096, 16)  # estimate's rule
    step = decode_step(
        "h200", batch=batch, kv_len=4096, h=16, h_kv=8, d=256, page_tokens=16, splits=splits
    )
    assert d_local.hbm_bytes == 21 * step.hbm_bytes
    assert d_global.hbm_bytes > d_local.hbm_bytes * (context / 4096) * 0.95
