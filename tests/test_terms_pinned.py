"""Every cost term, against a value derived without the model's code.

Each test counts one term another way: by hand (the arithmetic written out), or by
brute force (walking the FlashAttention-2 loop nest block by block). A change to any
single term fails at least one test here; ``tools/mutate_terms.py`` checks that claim.
"""

import math

import pytest

from perfmodel import roofline
from perfmodel.compile import compiled
from perfmodel.costs import decode, symbolic
from perfmodel.costs import terms as t

F32 = 4
# A small shape where every factor is distinct: b=2, h=4 query heads over h_kv=2.
B, H, HKV, N, D, S = 2, 4, 2, 384, 64, 2
SHAPE = dict(b=B, h=H, h_kv=HKV, n=N, m=N, d=D, s=S, block_q=128, block_k=64)


def at(expr, **kw):
    values = {**SHAPE, "l2_capacity": 50 * 2**20, "resident_ctas": 132, **kw}
    values.setdefault("dq_block_q", values["block_q"])  # the dQ kernel at the dK/dV tile
    values.setdefault("dq_block_k", values["block_k"])
    values.setdefault("dq_tile_gcd", math.gcd(values["dq_block_q"], values["dq_block_k"]))
    return float(compiled(expr)(**values))


# --- tensor sizes ---------------------------------------------------------------------
def test_tensor_bytes_by_hand():
    assert at(t.q_bytes) == B * H * N * D * S == 393_216
    assert at(t.o_bytes) == 393_216
    assert at(t.k_bytes) == B * HKV * N * D * S == 196_608
    assert at(t.v_bytes) == 196_608
    assert at(t.score_matrix_bytes) == B * H * N * N * S == 2_359_296
    assert at(t.lse_bytes) == B * H * N * 4 == 12_288  # one float32 per query row


# --- naive: three kernels, by hand --------------------------------------------------------
def _kernels(model, **kw):
    return {k.name: {f: at(getattr(k, f), **kw) for f in _FIELDS} for k in model.kernels}


_FIELDS = ("matmul_flops", "vector_flops", "exp_count", "hbm_bytes")
SCORES = B * H * N * N
QB, KB, SB = B * H * N * D * S, B * HKV * N * D * S, SCORES * S


def test_naive_minimal_kernels_by_hand():
    k = _kernels(symbolic("naive"))
    # QKᵀ: 2·d FLOPs a score, one scale multiply a score; reads Q and K, writes S.
    assert k["qk"] == dict(
        matmul_flops=2 * D * SCORES, vector_flops=SCORES, exp_count=0, hbm_bytes=QB + KB + SB
    )
    # softmax: max, subtract, sum (3) and divide (1) a score, one exp; reads S, writes P.
    assert k["softmax"] == dict(
        matmul_flops=0, vector_flops=4 * SCORES, exp_count=SCORES, hbm_bytes=2 * SB
    )
    # PV: 2·d FLOPs a score; reads P and V, writes O.
    assert k["pv"] == dict(
        matmul_flops=2 * D * SCORES, vector_flops=0, exp_count=0, hbm_bytes=SB + KB + QB
    )
    assert at(symbolic("naive").extra_memory_bytes) == 2 * SB  # S and P


def test_naive_xla_causal_mask_pass_adds_eight_bytes_a_score():
    # cuBLAS writes float32 scores (4 B) and a second fusion reads them back (4 B): the
    # scores' second pass, its own kernel; the score product counts S as the minimal does
    # at b = 1 (no tensor copied head-major: the next test).
    one = dict(b=1)
    minimal = _kernels(symbolic("naive", causal=True), **one)
    xla = _kernels(symbolic("naive", causal=True, naive="xla"), **one)
    assert xla["qk"]["hbm_bytes"] == minimal["qk"]["hbm_bytes"]
    assert xla["scores_pass"]["hbm_bytes"] == 8 * (SCORES // B)
    assert "scores_pass" not in minimal


@pytest.mark.parametrize(("naive", "h_kv", "per_score"), [
    ("xla", HKV, 2 * S),  # a GQA group of 2: S read and written again, transposed
    ("xla", H, 0),  # MHA: the product writes [b, h, n, m] itself
    ("sdpa", HKV, 0),  # jax.nn's path repeats K/V heads: no regrouped scores
])  # fmt: skip
def test_xla_transposes_a_gqa_groups_scores(naive, h_kv, per_score):
    model = symbolic("naive", naive=naive)
    k = _kernels(model, h_kv=h_kv)["scores_pass"]
    assert k == dict(matmul_flops=0, vector_flops=0, exp_count=0, hbm_bytes=per_score * SCORES)
    launches = next(x.launches for x in model.kernels if x.name == "scores_pass")
    assert at(launches, h_kv=h_kv) == (1 if per_score else 0)


@pytest.mark.parametrize("naive", ["xla", "sdpa"])
def test_xla_copies_q_k_v_o_head_major_where_a_call_has_a_batch(naive):
    # b = 2, h = 4, h_kv = 2: Q and K read and written once more before the score GEMM,
    # V and O around the PV GEMM (each a read and a write: 2x its bytes)
    minimal, compiled = (_kernels(symbolic("naive", naive=c)) for c in ("minimal", naive))
    logits = (4 if naive == "sdpa" else S) * SCORES  # the score matmul's output
    assert compiled["qk"]["hbm_bytes"] - minimal["qk"]["hbm_bytes"] == 2 * (QB + KB) + logits - SB
    assert compiled["pv"]["hbm_bytes"] - minimal["pv"]["hbm_bytes"] == 2 * (KB + QB)
    for heads in (dict(h=1, h_kv=1), dict(b=1)):  # one head each, or no batch: bitcasts
        mine, theirs = (_kernels(symbolic("naive", naive=c), **heads) for c in ("minimal", naive))
        assert theirs["pv"]["hbm_bytes"] == mine["pv"]["hbm_bytes"]


def test_sdpa_softmax_reads_float32_logits_and_writes_p_in_the_input_dtype():
    softmax = _kernels(symbolic("naive", naive="sdpa"), m=N)["softmax"]["hbm_bytes"]
    assert softmax == 4 * SCORES + SB  # one read at a short row


@pytest.mark.parametrize(("m", "reads"), [(8192, 1), (8193, 3)])
def test_xla_softmax_reads_s_three_times_past_a_32_kib_float32_row(m, reads):
    model = symbolic("naive", naive="xla")
    kw = dict(n=16, m=m, b=1, h=1, h_kv=1)
    softmax = _kernels(model, **kw)["softmax"]["hbm_bytes"]
    assert softmax == (reads + 1) * 16 * m * S  # reads of S, one write of P


# --- flash: walk the FlashAttention-2 loop nest ---------------------------------------
def brute_flash(n, m, d, bq, bk, causal):
    """Per (batch, head): scores, rows rescaled, K/V rows streamed, tiles, Q blocks."""
    tr, tc = math.ceil(n / bq), math.ceil(m / bk)
    scores = rescaled = kv_rows = tiles = 0
    for i in range(tr):
        last_row = min((i + 1) * bq, n) - 1
        for j in range(tc):
            if causal and j * bk > last_row:
                continue
            cols = min(bk, m - j * bk)
            tiles += 1
            rescaled += bq  # the online softmax rescales every row of the Q block
            kv_rows += cols
            # the model counts full tiles of causal scores (masked ones are computed too)
            scores += bq * bk if causal else min(bq, n - i * bq) * cols
    return scores, rescaled, kv_rows, tiles, tr


@pytest.mark.parametrize(
    ("n", "bq", "bk", "causal"),
    [
        (384, 128, 64, False),
        (300, 64, 128, False),
        (384, 128, 64, True),
        (200, 128, 64, True),
        (200, 64, 128, True),  # two Q blocks reach the partial last K block
        (300, 32, 128, True),
    ],
)
def test_flash_kernel_against_the_loop_nest(n, bq, bk, causal):
    scores, rescaled, kv_rows, tiles, tr = brute_flash(n, n, D, bq, bk, causal)
    kw = dict(n=n, m=n, block_q=bq, block_k=bk)
    (k,) = symbolic("flash", causal=causal).kernels
    assert at(k.matmul_flops, **kw) == B * H * 4 * D * scores
    assert at(k.vector_flops, **kw) == B * H * (4 * scores + rescaled * D)
    assert at(k.exp_count, **kw) == B * H * (scores + rescaled)
    io = B * H * n * D * S * 2 + B * H * n * F32  # Q, O and the log-sum-exp, once
    assert at(k.l2_bytes, **kw) == io + B * H * 2 * kv_rows * D * S
    assert at(k.work_items, **kw) == B * H * tr
    assert at(k.tiles, **kw) == B * H * tiles


def test_flash_on_chip_working_set_by_hand():
    model = symbolic("flash")
    # Q tile, plus K and V tiles double-buffered (2 stages), in the input dtype.
    assert at(model.sram_bytes) == (128 + 2 * 2 * 64) * D * S
    # S tile, O accumulator, and m_i, l_i per row, in float32.
    assert at(model.register_bytes) == (128 * 64 + 128 * D + 2 * 128) * F32
    assert at(model.extra_memory_bytes) == B * H * N * F32  # the log-sum-exp


# --- the L2 re-read model ----------------------------------------------------------------
# n = m = 4096 with 128-row Q blocks: T_r = 32 thread blocks a head, so with 132 SMs
# ceil(132/32) = 5 heads are in flight, each streaming 2·4096·64·2 B = 1 MiB of K/V.
L2_SHAPE = dict(n=4096, m=4096, block_q=128, block_k=64)
KV_HEAD = 2 * 4096 * D * S
COMPULSORY = B * H * 4096 * D * S * 2 + B * H * 4096 * F32
KV_ONCE = B * HKV * 4096 * D * S * 2


def flash_dram(l2, resident=132):
    (k,) = symbolic("flash").kernels
    return at(k.hbm_bytes, l2_capacity=l2, resident_ctas=resident, **L2_SHAPE)


def test_kv_crosses_dram_once_while_the_heads_in_flight_fit_in_l2():
    assert KV_HEAD == 1 << 20
    assert flash_dram(l2=5 * KV_HEAD) == COMPULSORY + KV_ONCE  # exactly fits


def test_past_l2_kv_crosses_dram_once_per_wave_of_its_readers():
    # The h/h_kv = 2 query heads of a group read their K/V side by side: 2 x 32 = 64
    # programs per K/V head, so 132 resident blocks hold ceil(132/64) = 3 K/V heads.
    assert flash_dram(l2=3 * KV_HEAD) == COMPULSORY + KV_ONCE  # exactly fits
    # One byte short: spill, but all 64 readers run in one wave: still once.
    assert flash_dram(l2=3 * KV_HEAD - 1) == COMPULSORY + KV_ONCE * 1
    # 16 resident blocks: ceil(64/16) = 4 waves; one head in flight (1 MiB) still spills.
    assert flash_dram(l2=KV_HEAD - 1, resident=16) == COMPULSORY + KV_ONCE * 4
    assert flash_dram(l2=KV_HEAD, resident=16) == COMPULSORY + KV_ONCE


def test_backward_dq_pass_rereads_kv_once_per_wave_and_query_head_past_l2():
    # The dQ kernel walks the forward's loop order: each of the h query heads streams its
    # group's K/V (not packed), so past L2 every query head re-reads it once per wave.
    dq = symbolic("flash", mode="backward", dq="two_pass").kernels[-1]
    assert dq.name == "bwd_dq"
    kv_head = 2 * N * D * S  # K and V of one head: 98,304 B
    kv = B * HKV * kv_head  # 393,216 B
    compulsory = (
        2 * B * H * N * D * S + B * H * N * D * S + 2 * B * H * N * F32
    )  # Q, dQ, dO, LSE, D
    # T_r = 3 blocks per head; 132 resident blocks hold them all: K/V once while it fits.
    assert at(dq.hbm_bytes, l2_capacity=44 * kv_head) == compulsory + kv
    # 2 resident blocks, one head's K/V does not fit: ceil(3/2) = 2 waves x h/h_kv = 2.
    spill = dict(l2_capacity=kv_head - 1, resident_ctas=2)
    assert at(dq.hbm_bytes, **spill) == compulsory + kv * 2 * 2
    assert (
        at(dq.hbm_bytes, **spill, h_kv=H) == compulsory + 2 * kv * 2
    )  # no GQA: K/V x2, once a wave


# --- decode ---------------------------------------------------------------------------------
DECODE = dict(b=3, h=8, h_kv=2, d=128, q_len=1, s=2, page=64, splits=4)


def dec(expr, **kw):
    return float(compiled(expr)(**{**DECODE, "m": 1000, "resident_ctas": 132, **kw}))


def test_decode_block_table_and_partials_by_hand():
    # the engine's flash model at a decode launch (the group's heads in one tile)
    paged = decode.launch_model(paged=True)
    plain = decode.launch_model()
    pages = math.ceil(1000 / 64)  # 16 int32 page ids per (sequence, KV head)
    assert dec(paged.hbm_bytes) - dec(plain.hbm_bytes) == 3 * 2 * pages * 4
    assert dec(paged.hbm_bytes, m=1024) - dec(plain.hbm_bytes, m=1024) == 3 * 2 * 16 * 4
    split = decode.launch_model(split=True)
    partials = 3 * 8 * 1 * 4 * (128 + 2) * F32  # acc (d) + m_i + l_i, float32, per split
    lse = 3 * 8 * 1 * F32  # one float32 a query row
    assert dec(split.extra_memory_bytes) == partials + lse
    combine = split.kernels[1]
    assert dec(combine.vector_flops) == 3 * (3 * 8 * 1) * 4 * (128 + 2)
    assert dec(combine.hbm_bytes) == partials + 3 * 8 * 1 * 128 * 2 + lse


def test_decode_occupancy_and_split_rule_by_hand():
    # 3·2·4 = 24 programs on 10 SMs: 3 waves, 24/30 of the SM-time busy.
    programs = dec(decode.launch_model(split=True).kernels[0].work_items)
    assert programs == 3 * 2 * 4
    assert roofline.wave_efficiency(programs, 10) == pytest.approx(24 / 30)
    assert roofline.busy_fraction(programs, 132) == pytest.approx(24 / 132)
    # The split rule: as many chunks as keep b·h_kv·splits in one wave, at least one.
    assert dec(decode.auto_splits(), resident_ctas=10) == 1  # floor(10 / 6)
    assert dec(decode.auto_splits(), resident_ctas=132) == 16  # min(pages = 16, 22)
