"""Every sympy symbol of the cost models, declared once with its assumptions.

Shape symbols follow the FlashAttention papers: ``n`` query rows, ``m`` key/value
rows, ``d`` head dimension, ``h`` query heads, ``h_kv`` key/value heads (GQA),
``b`` batch, ``block_q``/``block_k`` the tile sizes B_r/B_c, ``s`` bytes per element.
Hardware symbols enter only the cache model (L2 capacity, resident thread blocks).
"""

from __future__ import annotations

import sympy as sp

_pos_int = {"integer": True, "positive": True}

n = sp.Symbol("n", **_pos_int)
m = sp.Symbol("m", **_pos_int)
d = sp.Symbol("d", **_pos_int)
h = sp.Symbol("h", **_pos_int)
h_kv = sp.Symbol("h_kv", **_pos_int)
b = sp.Symbol("b", **_pos_int)
block_q = sp.Symbol("block_q", **_pos_int)
block_k = sp.Symbol("block_k", **_pos_int)
s = sp.Symbol("s", positive=True)

# Decode / KV cache.
q_len = sp.Symbol("q_len", **_pos_int)
layers = sp.Symbol("layers", **_pos_int)
page = sp.Symbol("page", **_pos_int)
splits = sp.Symbol("splits", **_pos_int)
#: Query heads of one GQA group sharing a tile (1: one program per query head).
pack = sp.Symbol("pack", positive=True)
#: gcd(B_r/pack, B_c): the period of the causal diagonal across tiles of any size.
tile_gcd = sp.Symbol("tile_gcd", positive=True)

# The rest of a decoder layer (``perfmodel.costs.transformer``): tokens through a layer,
# tokens whose logits are computed, the model's widths, and a mixture of experts.
rows = sp.Symbol("rows", **_pos_int)
head_rows = sp.Symbol("head_rows", **_pos_int)
hidden = sp.Symbol("hidden", **_pos_int)
inter = sp.Symbol("inter", **_pos_int)
vocab = sp.Symbol("vocab", **_pos_int)
experts = sp.Symbol("experts", **_pos_int)
top_k = sp.Symbol("top_k", **_pos_int)
#: Tensor parallelism: devices one layer's heads and MLP columns are split over.
tp = sp.Symbol("tp", **_pos_int)

# Hardware, for the L2 model only.
l2_capacity = sp.Symbol("l2_capacity", positive=True)
resident_ctas = sp.Symbol("resident_ctas", **_pos_int)

#: Bytes of one float32 value (running statistics, log-sum-exp, accumulators).
F32 = 4

SHAPE = (n, m, d, h, h_kv, b, block_q, block_k, s)
