"""KV-cache memory, paging, and the model configurations behind them."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.analysis.kvcache import (
    allocations,
    kv_bytes_per_token,
    kv_cache_bytes,
    paged_seq_kv_bytes,
    paged_waste_bytes,
    paging_overhead,
    seq_kv_bytes,
)
from perfmodel.catalog.models import ModelSpec, known_models, load_model
from perfmodel.compile import compiled
from perfmodel.errors import PerfmodelError
from perfmodel.symbols import d, h_kv, layers, m, s

DET = settings(derandomize=True, deadline=None, max_examples=50)
MODELS = ["Llama-3.1-8B", "Llama-3.1-70B", "Mistral-7B-v0.3", "Qwen2.5-7B", "Qwen2.5-32B"]


def test_chapter_kv_formula():
    """KV cache = 2 × layers × kv_heads × d × n × batch × bytes (chapter 3.1.8)."""
    assert sp.simplify(seq_kv_bytes - 2 * layers * h_kv * d * m * s) == 0
    spec = load_model("llama-3.1-8b")
    assert float(kv_cache_bytes(spec, "fp16", 8192, batch=4)) == 2 * 32 * 8 * 128 * 8192 * 4 * 2


@DET
@given(tokens=st.integers(1, 200_000), page=st.sampled_from([1, 8, 16, 32, 128, 512]))
def test_paged_waste_below_one_page(tokens, page):
    v = dict(layers=32, h_kv=8, d=128, s=2, m=tokens, page=page)
    waste = float(compiled(paged_waste_bytes)(**v))
    one_page = float(compiled(seq_kv_bytes)(**{**v, "m": page}))
    assert 0 <= waste < one_page


@DET
@given(
    model=st.sampled_from(MODELS),
    page=st.sampled_from([8, 16, 32, 64]),
    pages=st.integers(1, 2048),
    fractions=st.lists(st.floats(0.001, 1.0), min_size=1, max_size=6),
)
def test_paging_never_fits_fewer_sequences(model, page, pages, fractions):
    """With max_len a whole number of pages, paging fits at least as many sequences."""
    max_len = page * pages
    tokens = [max(1, int(f * max_len)) for f in fractions]
    a = allocations(model, "b200", dtype="bf16", tokens=tokens, max_len=max_len, page_tokens=page)
    assert a["paged"].max_concurrency >= a["contiguous"].max_concurrency
    assert a["paged"].reserved_bytes_per_seq <= a["contiguous"].reserved_bytes_per_seq
    assert 0 <= a["paged"].waste_fraction <= a["contiguous"].waste_fraction + 1e-12


@DET
@given(model=st.sampled_from(MODELS), tokens=st.integers(1, 100_000))
def test_gqa_divides_kv_bytes(model, tokens):
    spec = load_model(model)
    mha = spec.model_copy(update={"kv_heads": spec.heads})
    ratio = kv_cache_bytes(mha, "bf16", tokens) / kv_cache_bytes(spec, "bf16", tokens)
    assert float(ratio) == pytest.approx(spec.heads / spec.kv_heads, rel=1e-12)


def test_per_token_figures():
    assert kv_bytes_per_token("llama-3.1-8b", "bf16") == 2 * 32 * 8 * 128 * 2
    assert kv_bytes_per_token("llama-3.1-70b", "bf16") == 2 * 80 * 8 * 128 * 2
    assert kv_bytes_per_token("qwen2.5-7b", "bf16") == 2 * 28 * 4 * 128 * 2


def test_paged_reservation_is_whole_pages():
    v = dict(layers=1, h_kv=1, d=1, s=1)
    got = compiled(paged_seq_kv_bytes)(m=np.array([1, 16, 17, 33]), page=16, **v)
    np.testing.assert_array_equal(got, 2 * np.array([16, 16, 32, 48]))


def test_paging_overhead_is_table_over_kv():
    got = float(paging_overhead("llama-3.1-8b", "bf16", tokens=4096, page_tokens=16))
    assert got == pytest.approx(4 / (2 * 16 * 128 * 2))


@pytest.mark.parametrize("name", MODELS)
def test_shipped_models_params_match_their_shapes(name):
    spec = load_model(name)
    assert spec.counted_params() == spec.params
    assert spec.heads * spec.head_dim == spec.hidden
    assert {"config", "params"} <= set(spec.sources)


def test_model_lookup():
    assert set(MODELS) <= set(known_models())
    assert load_model("LLAMA-3.1-8B") is load_model("llama-8b")
    with pytest.raises(PerfmodelError, match="unknown model 'gpt-5'.*Llama-3.1-8B"):
        load_model("gpt-5")


def test_wrong_params_rejected():
    data = load_model("llama-3.1-8b").model_dump()
    with pytest.raises(ValueError, match="params=9000000000"):
        ModelSpec.model_validate({**data, "params": 9_000_000_000})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tokens": [0, 10]}, "tokens=0"),
        ({"tokens": [5000]}, "tokens=5000 exceeds max_len=4096"),
        ({"max_len": -3}, "max_len=-3"),
        ({"dtype": "int4"}, "int4"),
        ({"page_tokens": 0}, "page_tokens=0"),
    ],
)
def test_bad_input_names_the_value(kwargs, message):
    args = dict(dtype="bf16", tokens=[100], max_len=4096) | kwargs
    with pytest.raises(PerfmodelError, match=message):
        allocations("llama-3.1-8b", "h200", **args)


def test_weights_that_do_not_fit():
    with pytest.raises(PerfmodelError, match="Llama-3.1-70B weights .* do not fit"):
        allocations("llama-3.1-70b", "l4", dtype="bf16", tokens=[100], max_len=4096)
