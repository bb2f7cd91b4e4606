"""Every sympy symbol of the cost models, declared once with its assumptions.

Shape symbols follow the FlashAttention papers: ``n`` query rows, ``m`` key/value
rows, ``d`` head dimension, ``h`` query heads, ``h_kv`` key/value heads (GQA),
``b`` batch, ``block_q``/``block_k`` the tile sizes B_r/B_c, ``s`` bytes per element.
Hardware symbols enter only the cache model (L2 capacity, resident thread blocks).
"""

from __future__ import annotations

import sympy as sp

_pos_int = {"integer": True, "positive": True}

n, m, d, h, h_kv, b, block_q, block_k = sp.symbols("n m d h h_kv b block_q block_k", **_pos_int)
s = sp.Symbol("s", positive=True)

# Decode / KV cache.
q_len, layers, page, splits = sp.symbols("q_len layers page splits", **_pos_int)
#: Query heads of one GQA group sharing a tile (1: one program per query head).
pack = sp.Symbol("pack", positive=True)
#: Programs of a backward dK/dV kernel sharing one GQA group's query heads, each summing
#: its share into float32 partials (``kernel_rules.group_split``; 1: on chip).
group_split = sp.Symbol("group_split", positive=True)
#: 1 where a backward writes a GQA group's dK, dV per query head in the input dtype and
#: sums them over the group in kernels of their own after (cuDNN: ``Backward.group_reduce``
#: "kernels", ``launch.backward_launch``); 0 where the group is summed in the main kernel.
group_reduce = sp.Symbol("group_reduce", nonnegative=True)
#: gcd(B_r/pack, B_c): the period of the causal diagonal across tiles of any size.
tile_gcd = sp.Symbol("tile_gcd", positive=True)
#: The tile of a two-pass backward's dQ kernel (query rows a CTA owns, keys a step), where
#: it differs from the dK/dV kernel's ``block_q`` x ``block_k`` (``BackwardTile.dq_*``),
#: and its causal period gcd(dq_block_q, dq_block_k).
dq_block_q, dq_block_k = sp.symbols("dq_block_q dq_block_k", **_pos_int)
dq_tile_gcd = sp.Symbol("dq_tile_gcd", positive=True)
#: K/V tile stages a thread block keeps in shared memory (a kernel family's ``kv_stages``).
kv_stages = sp.Symbol("kv_stages", **_pos_int)

# The rest of a decoder layer (``perfmodel.costs.transformer``): tokens through a layer,
# tokens whose logits are computed, the model's widths, and a mixture of experts.
rows, head_rows, hidden, inter, vocab, experts, top_k = sp.symbols(
    "rows head_rows hidden inter vocab experts top_k", **_pos_int
)
#: Shared experts a MoE layer runs on every token (DeepSeek-MoE; 0 elsewhere).
shared = sp.Symbol("shared", integer=True, nonnegative=True)
#: Tensor parallelism: devices one layer's heads and MLP columns are split over.
tp = sp.Symbol("tp", **_pos_int)

# Hardware, for the L2 model only.
l2_capacity = sp.Symbol("l2_capacity", positive=True)
resident_ctas = sp.Symbol("resident_ctas", **_pos_int)

#: Bytes of one float32 value (running statistics, log-sum-exp, accumulators).
F32 = 4

SHAPE = (n, m, d, h, h_kv, b, block_q, block_k, s)

# Multi-head latent attention (``perfmodel.costs.mla``): the cached latent's width, the
# rotary key's, the per-head no-rotary QK part and V, and the query bottleneck.
kv_rank, rope_dim, nope_dim, v_dim, q_rank = sp.symbols(
    "kv_rank rope_dim nope_dim v_dim q_rank", **_pos_int
)

# A mask's visited tiles (``perfmodel.costs.masks``), per (batch, head group): tiles,
# scores computed, K/V rows streamed; per (batch, K/V head): distinct K/V rows, and rows
# times the waves of thread blocks that read them.
mask_tiles, mask_scores, mask_kv_rows, mask_kv_touched, mask_kv_wave_rows = sp.symbols(
    "mask_tiles mask_scores mask_kv_rows mask_kv_touched mask_kv_wave_rows", nonnegative=True
)
#: The backward's K-block-major walk under a mask (``masks.Backward.dkdv``), per (batch,
#: query head): Q rows streamed, distinct Q rows read, Q rows times the waves reading them.
mask_q_rows, mask_q_touched, mask_q_wave_rows = sp.symbols(
    "mask_q_rows mask_q_touched mask_q_wave_rows", nonnegative=True
)

# FP8 attention as a family runs it (``perfmodel.costs.precision``): bytes an element of O
# as written, and vector ops a score and an output element beyond a 16-bit kernel's.
s_out = sp.Symbol("s_out", positive=True)
fp8_score_ops, fp8_output_ops = sp.symbols("fp8_score_ops fp8_output_ops", nonnegative=True)
