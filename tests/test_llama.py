"""The Llama-shaped network of the whole-model benchmark, on tiny shapes (CPU, interpret).

Attention implementations must not change the function: naive and our flash kernel give
the same logits, and a decode step over the prompt's own cache (contiguous, or paged
with a shuffled block table) gives the logits of the prompt's last token.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pallas_kernels.llama import LlamaConfig, LlamaModel

CFG = LlamaConfig(layers=2, hidden=64, heads=4, kv_heads=2, head_dim=16, intermediate=96, vocab=101)
PAGE = 16


@pytest.fixture(scope="module")
def model():
    return LlamaModel.random(CFG, chunk=1, seed=3, dtype=jnp.float32)


@pytest.fixture(scope="module")
def tokens():
    return jax.random.randint(jax.random.key(7), (2, 32), 0, CFG.vocab, jnp.int32)


def _close(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.linalg.norm(a - b) / np.linalg.norm(b)


def test_flash_matches_naive(model, tokens):
    naive = model.prefill(tokens, attention="naive")
    flash = model.prefill(tokens, attention="flash")
    assert naive.shape == (2, CFG.vocab) and np.all(np.isfinite(naive))
    assert _close(flash, naive) < 1e-4


@pytest.mark.parametrize("kv", ["contiguous", "paged"])
def test_decode_over_prompt_cache_is_last_prefill_row(model, tokens, kv):
    logits, cache = model.prefill(tokens, attention="naive", return_cache=True)
    b, m = tokens.shape
    pages = m // PAGE
    rng = np.random.default_rng(0)
    order = np.arange(b * pages) if kv == "contiguous" else rng.permutation(b * pages)
    table = order.reshape(b, pages).astype(np.int32)
    chunks = []
    for k, v in cache:  # one chunk per layer here (chunk=1)
        pool = []
        for x in (k, v):
            blocks = np.asarray(x).reshape(b * pages, PAGE, CFG.kv_heads, CFG.head_dim)
            out = np.empty_like(blocks)
            out[table.reshape(-1)] = blocks
            pool.append(jnp.asarray(out))
        chunks.append([tuple(pool)])
    lengths = jnp.full((b,), m, jnp.int32)
    step = model.decode(tokens[:, -1], chunks, jnp.asarray(table), lengths, kv=kv, splits=2)
    assert _close(step, logits) < 1e-4


def test_weight_layout_does_not_change_the_function(model, tokens):
    cfg_t = dataclasses.replace(CFG, weight_layout="out_in")
    chunks = [
        [{k: (w.T if w.ndim == 2 else w) for k, w in layer.items()} for layer in chunk]
        for chunk in model.chunks
    ]
    flipped = LlamaModel(cfg_t, chunks, {**model.ends, "lm_head": model.ends["lm_head"].T})
    naive = model.prefill(tokens, attention="naive")
    assert _close(flipped.prefill(tokens, attention="naive"), naive) < 1e-5


def test_config_from_shipped_file():
    cfg = LlamaConfig.from_toml("llama-3.1-8b")
    assert (cfg.layers, cfg.hidden, cfg.heads, cfg.kv_heads, cfg.head_dim) == (32, 4096, 32, 8, 128)
    assert cfg.qkv_width == 6144
