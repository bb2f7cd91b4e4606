"""Whole-model estimates: the operator sums against hand counts, memory, and bad input."""

from __future__ import annotations

import json

import pytest

from perfmodel.analysis.estimate import estimate, estimate_sweep
from perfmodel.catalog.models import load_model
from perfmodel.errors import PerfmodelError


@pytest.fixture(scope="module")
def e8b():
    return estimate("llama-3.1-8b", "h200", prompt=2048, output=256, batch=4)


def test_prefill_flops_are_two_per_parameter_per_token_plus_attention(e8b):
    spec = load_model("llama-3.1-8b")
    tokens = 4 * 2048
    body = spec.params - 2 * spec.vocab * spec.hidden  # embeddings do no matmul per token
    matmul = sum(
        op.flops for op in e8b.prefill.operators if op.name in ("qkv", "o_proj", "gate_up", "down")
    )
    assert matmul == pytest.approx(2 * body * tokens, rel=1e-3)
    head = next(op for op in e8b.prefill.operators if op.name == "lm_head")
    assert head.flops == pytest.approx(2 * 4 * spec.hidden * spec.vocab)


def test_decode_reads_every_weight_and_the_cache_once(e8b):
    spec = load_model("llama-3.1-8b")
    weights = (spec.params - spec.vocab * spec.hidden) * 2  # the embedding is gathered, not read
    kv = 4 * e8b.decode.context * 2 * spec.layers * spec.kv_heads * spec.head_dim * 2
    # plus the split-KV partials (float32, written and read back: ~1 % here)
    assert weights + kv < e8b.decode.hbm_bytes < 1.015 * (weights + kv)
    assert e8b.decode.t_lower_s == pytest.approx(e8b.decode.hbm_bytes / 4.8e12, rel=0.01)


def test_times_add_up_and_stay_above_the_floor(e8b):
    for phase in (e8b.prefill, e8b.decode):
        assert phase.time_s == pytest.approx(sum(op.time_s for op in phase.operators))
        assert all(op.time_s >= op.t_lower_s for op in phase.operators)
    assert e8b.latency_s == pytest.approx(e8b.ttft_s + 255 * e8b.tpot_s)
    assert e8b.throughput_tokens_per_s == pytest.approx(4 * 256 / e8b.latency_s)


def test_naive_needs_more_memory_and_time_at_long_prompts():
    kw = dict(prompt=16384, batch=1)
    naive = estimate("llama-3.1-8b", "h200", attention="naive", **kw)
    flash = estimate("llama-3.1-8b", "h200", attention="fa2", **kw)
    assert naive.memory.attention_scratch_bytes > 100 * flash.memory.attention_scratch_bytes
    assert naive.ttft_s > flash.ttft_s
    assert naive.tpot_s == flash.tpot_s  # decode does not depend on the prefill kernel


def test_paged_reserves_whole_pages():
    kw = dict(prompt=1000, output=10, batch=2)
    paged = estimate("llama-3.1-8b", "h200", kv="paged", page_tokens=16, **kw)
    contig = estimate("llama-3.1-8b", "h200", kv="contiguous", **kw)
    per_token = contig.memory.kv_cache_bytes / (2 * 1010)
    assert paged.memory.kv_cache_bytes == pytest.approx(2 * 1024 * per_token)


def test_70b_does_not_fit_one_h100_and_says_by_how_much():
    with pytest.raises(PerfmodelError, match=r"does not fit on one H100 SXM.*short by"):
        estimate("llama-3.1-70b", "h100", prompt=1024)
    e = estimate("llama-3.1-70b", "h100", prompt=1024, check_memory=False)
    assert e.memory.shortfall_bytes > 60e9


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(model="gpt-17"), "unknown model"),
        (dict(prompt=131072, output=1), "max_context_tokens"),
        (dict(context=200_000), "max_context_tokens"),
        (dict(batch=0), "batch=0"),
        (dict(attention="sparse"), "attention=.sparse. is not one of"),
        (dict(attention="naive", kernel="cudnn"), "implements flash"),
        (dict(kv="ring"), "kv=.ring. is not one of"),
        (dict(batch=4096, prompt=32768, output=1), "does not fit"),
    ],
)
def test_bad_input_one_clear_error(kwargs, match):
    args = dict(model="llama-3.1-8b", hw="h200", prompt=128, output=8, batch=1) | kwargs
    with pytest.raises(PerfmodelError, match=match):
        estimate(**args)


def test_sweep_marks_what_does_not_fit():
    rows = estimate_sweep("llama-3.1-8b", "h200", prompt=[4096, 32768], batch=1)
    fits = {(r["prompt"], r["attention"]): r["fits"] for r in rows}
    assert fits == {
        (4096, "naive"): True,
        (4096, "flash"): True,
        (32768, "naive"): False,
        (32768, "flash"): True,
    }


def test_cli_table_json_and_errors(capsys, tmp_path):
    from perfmodel.cli import main

    assert main(["estimate", "--model", "llama-3.1-8b", "--hw", "h200", "--prompt", "512"]) == 0
    out = capsys.readouterr().out
    assert "gate_up" in out and "time to first token" in out
    assert main(["estimate", "--model", "llama-3.1-8b", "--hw", "h200", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ttft_s"] > 0 and data["memory"]["fits"]
    assert main(["estimate", "--model", "nope", "--hw", "h200"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown model" in err
    plot = tmp_path / "sweep.png"
    argv = [
        "estimate",
        "--model",
        "llama-3.1-8b",
        "--hw",
        "h200",
        "--sweep",
        "prompt=512,4096",
        "--plot",
        str(plot),
    ]
    assert main(argv) == 0 and plot.stat().st_size > 0
    assert main(["estimate", "--model", "llama-3.1-8b", "--hw", "h200", "--sweep", "n=1"]) == 2


def test_moe_decode_reads_the_experts_its_tokens_pick():
    spec = load_model("mixtral-8x7b")
    expert_mlp = 3 * spec.hidden * spec.intermediate * 2  # bytes of one expert in bf16
    one = estimate("mixtral-8x7b", "h200", prompt=512, output=2, batch=1)
    many = estimate("mixtral-8x7b", "h200", prompt=512, output=2, batch=64)

    def mlp_weights(e):
        return sum(op.hbm_bytes for op in e.decode.operators if op.name in ("gate_up", "down"))

    # 2 of 8 experts for one token; every expert once 64 tokens pick 128 times
    assert mlp_weights(one) == pytest.approx(spec.layers * 2 * expert_mlp, rel=1e-3)
    assert mlp_weights(many) == pytest.approx(spec.layers * 8 * expert_mlp, rel=0.01)
    assert any(op.name == "router" for op in one.prefill.operators)
    assert one.memory.weights_bytes == pytest.approx(spec.params * 2)


def test_tensor_parallel_splits_weights_and_adds_two_allreduces_per_layer():
    one = estimate("llama-3.1-8b", "h200", prompt=1024, output=16, batch=8)
    two = estimate("llama-3.1-8b", "h200", prompt=1024, output=16, batch=8, tp=2)
    spec = load_model("llama-3.1-8b")
    assert two.memory.weights_bytes == pytest.approx(one.memory.weights_bytes / 2, rel=0.01)
    assert two.memory.kv_cache_bytes == pytest.approx(one.memory.kv_cache_bytes / 2)
    ops = {op.name: op for op in two.decode.operators}
    assert ops["all_reduce"].count == 2 * spec.layers
    # ring all-reduce of 8 x 4096 bf16 values at tp=2: 2·(1/2) of the buffer on the link
    assert ops["all_reduce"].t_lower_s == pytest.approx(2 * 32 * 8 * 4096 * 2 / 266e9)
    single = {op.name: op for op in one.decode.operators}
    assert ops["gate_up"].flops == pytest.approx(single["gate_up"].flops / 2)
    assert ops["attention"].hbm_bytes < 0.51 * single["attention"].hbm_bytes  # half the heads
    assert two.ttft_s < one.ttft_s


def test_70b_fits_two_h200_by_tensor_parallelism():
    with pytest.raises(PerfmodelError, match="does not fit on one H200"):
        estimate("llama-3.1-70b", "h200", prompt=2048, output=256, batch=16)
    e = estimate("llama-3.1-70b", "h200", prompt=2048, output=256, batch=16, tp=2)
    assert e.memory.fits and e.tp == 2


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(tp=3), "does not divide"),
        (dict(tp=16), "across nodes"),
        (dict(tp=2, hw="tpu-v4"), "no link bandwidth"),
        (dict(tp=0), "tp=0"),
    ],
)
def test_tensor_parallel_bad_input(kwargs, match):
    args = dict(model="llama-3.1-8b", hw="h200", prompt=128) | kwargs
    with pytest.raises(PerfmodelError, match=match):
        estimate(**args)
