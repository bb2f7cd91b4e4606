"""Mutation run over what predict() and sweep() run: does a test notice?

    python3 tools/mutate_terms.py                  # every mutant, a markdown table
    python3 tools/mutate_terms.py --only lse,fill  # mutants whose name contains these
    python3 tools/mutate_terms.py --write docs/mutants.md   # the table, into the docs

The mutants cover the cost terms, the mask counts (``costs/masks.py``) and the masked
forms, the sliding-window layers' KV cache, the launch rules (``perfmodel.launch``), the
floor and each effect of the estimate, and the roofline factors: code that ``predict()`` and
``sweep()`` run (``costs/decode.py``'s separate decode model, which they do not run, is
left out).

Each mutant changes one term or factor in a copy of the committed tree (``git archive
HEAD``: nobody's uncommitted work is read or touched): scaled by 1.1, shifted by one, a
comparison loosened, two rates swapped. It then runs the tests that pin that term
(``pytest -x``). A mutant is *killed* when a test fails, *survives* when all pass; a
mutation whose text is no longer in the file is reported as *stale* (update the table).
Exit status 1 if any mutant survives or is stale.
"""

# ruff: noqa: E501  (the mutant table below reads one mutant a line)
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

COSTS_TESTS = ("tests/test_terms_pinned.py", "tests/test_costs.py")
ROOF_TESTS = ("tests/test_roofline_pinned.py", "tests/test_predict.py")
LAUNCH_TESTS = ("tests/test_launch_pinned.py", "tests/test_launch.py")


@dataclass(frozen=True)
class Mutant:
    name: str  #: the term or factor
    path: str
    old: str
    new: str
    what: str  #: the mutation, in words
    tests: tuple[str, ...] = COSTS_TESTS


T, N, F = (
    "perfmodel/costs/terms.py",
    "perfmodel/costs/naive.py",
    "perfmodel/costs/flash.py",
)
R, E, H = "perfmodel/roofline.py", "perfmodel/evaluate.py", "perfmodel/catalog/hardware.py"
L, BW = "perfmodel/launch.py", "perfmodel/costs/backward.py"
M, KV = "perfmodel/costs/masks.py", "perfmodel/analysis/kvcache.py"
XR = "perfmodel/costs/xla_rows.py"
#: The mask counts' brute force, the masked models' dense and causal special cases, the
#: masks in every mode, and the models' sliding-window layers.
MASK_TESTS = ("tests/test_masks.py", "tests/test_mask_modes.py")
WINDOW_TESTS = ("tests/test_model_attention.py", "tests/test_kvcache.py")
#: Decode as it runs: the latency between idle and loaded, the imbalance of causal
#: programs, the XLA kernels around a paged decode.
TRUTH_TESTS = ("tests/test_truth_structure.py", "tests/test_launch_imbalance.py", *LAUNCH_TESTS)

# fmt: off
MUTANTS = (
    # --- tensor sizes -------------------------------------------------------------
    Mutant("Q bytes", T, "q_bytes = b * h * n * d * s", "q_bytes = b * h * n * d * s * 11 / 10", "x1.1"),
    Mutant("O bytes", T, "o_bytes = b * h * n * d * s", "o_bytes = b * h * n * d * s * 11 / 10", "x1.1"),
    Mutant("K bytes", T, "k_bytes = b * h_kv * m * d * s", "k_bytes = b * h_kv * m * d * s * 11 / 10", "x1.1"),
    Mutant("V bytes", T, "v_bytes = b * h_kv * m * d * s", "v_bytes = b * h_kv * m * d * s * 11 / 10", "x1.1"),
    Mutant("S/P matrix bytes", T, "score_matrix_bytes = b * h * n * m * s", "score_matrix_bytes = b * h * n * m * s * 11 / 10", "x1.1"),
    Mutant("log-sum-exp bytes", T, "lse_bytes = b * h * n * F32", "lse_bytes = b * h * n * (F32 + 1)", "4 -> 5 bytes a row"),
    # --- work ---------------------------------------------------------------------
    Mutant("matmul FLOPs", T, "return 4 * d * score_elements", "return 4 * (d + 1) * score_elements", "4d -> 4(d+1) a score"),
    Mutant("softmax FLOPs per score", T, "SOFTMAX_FLOPS_PER_SCORE = 4", "SOFTMAX_FLOPS_PER_SCORE = 5", "4 -> 5"),
    Mutant("normalise FLOPs per score", T, "NORMALISE_FLOPS_PER_SCORE = 1", "NORMALISE_FLOPS_PER_SCORE = 2", "1 -> 2"),
    # --- tiles and the L2 re-read model ---------------------------------------------
    Mutant("Q blocks T_r", T, "q_blocks = sp.ceiling(n / block_q)", "q_blocks = sp.floor(n / block_q) + 1", "ceil -> floor+1"),
    Mutant("K blocks T_c", T, "k_blocks = sp.ceiling(m / block_k)", "k_blocks = sp.floor(m / block_k) + 1", "ceil -> floor+1"),
    Mutant("causal tile count", T, "(k_wider, True)) + k_blocks", "(k_wider, True)) + k_blocks + 1", "+1"),
    Mutant("K/V head bytes (L2-fit threshold)", T, "kv_head_bytes = 2 * m * d * s", "kv_head_bytes = 2 * m * d * s * 11 / 10", "x1.1"),
    Mutant("L2-fit comparison", T, "return heads_in_flight * head_bytes <= l2_capacity", "return heads_in_flight * head_bytes < l2_capacity", "<= -> <"),
    Mutant("heads in flight", T, "heads_in_flight = sp.ceiling(resident / blocks_per_head)", "heads_in_flight = sp.ceiling(resident / blocks_per_head) + 1", "+1"),
    Mutant("re-read waves", T, "waves = sp.ceiling(blocks_per_head / resident)", "waves = sp.ceiling(blocks_per_head / resident) + 1", "+1"),
    Mutant("GQA spill factor (backward dQ)", T, "(waves * spill_factor, True)", "(waves, True)", "h/h_kv -> 1"),
    # --- naive ----------------------------------------------------------------------
    Mutant("causal mask pass bytes (XLA)", N, "2 * F32 * scores if causal", "3 * F32 * scores if causal", "8 -> 12 B a score"),
    Mutant("XLA row-fusion limit", XR, "XLA_ROW_FUSION_BYTES = 32 * 1024", "XLA_ROW_FUSION_BYTES = 64 * 1024", "x2"),
    Mutant("XLA softmax reads past the limit", XR, "    return 3\n", "    return 4\n", "3 -> 4"),
    Mutant("naive scale FLOPs", N, "vector_flops=scores,  # the scale", "vector_flops=2 * scores,", "1 -> 2 a score"),
    Mutant("naive softmax FLOPs", N, "(t.SOFTMAX_FLOPS_PER_SCORE - 1 + t.NORMALISE_FLOPS_PER_SCORE)", "(t.SOFTMAX_FLOPS_PER_SCORE + t.NORMALISE_FLOPS_PER_SCORE)", "drop the -1"),
    Mutant("naive extra memory (S+P)", N, "extra_memory_bytes=2 * t.score_matrix_bytes", "extra_memory_bytes=3 * t.score_matrix_bytes", "2 -> 3 matrices"),
    Mutant("naive PV bytes", N, "hbm_bytes=t.score_matrix_bytes + t.v_bytes + t.o_bytes", "hbm_bytes=t.score_matrix_bytes + t.v_bytes + 2 * t.o_bytes", "O twice"),
    # --- flash ----------------------------------------------------------------------
    Mutant("flash rescale FLOPs", F, "rows_rescaled * d + extra_ops,", "rows_rescaled * (d + 1) + extra_ops,", "d -> d+1 a row"),
    Mutant("flash rescale exps", F, "exp_count=scores + rows_rescaled", "exp_count=scores", "drop the per-tile exp"),
    Mutant("causal K/V rows (partial last block)", F, "kv_rows = tiles * block_k - reach_last * (t.k_blocks * block_k - m)", "kv_rows = tiles * block_k", "no partial block"),
    Mutant("Q blocks reaching the last K block", F, "reach_last = q_blocks - sp.floor(", "reach_last = 1 + 0 * sp.floor(", "only the last Q block"),
    Mutant("flash grid (work items)", F, "work_items=groups * q_blocks * splits", "work_items=groups * (q_blocks + 1) * splits", "+1 block a head"),
    Mutant("flash tiles (fill unit)", F, "tiles=groups * tiles_per_group", "tiles=2 * groups * tiles_per_group", "x2"),
    Mutant("GQA K/V re-read (forward)", F, "programs_per_kv_head = q_blocks * h / (h_kv * pack)", "programs_per_kv_head = q_blocks / pack", "h/h_kv -> 1"),
    Mutant("flash SRAM stages (paper model)", F, "KV_STAGES = 2", "KV_STAGES = 3", "2 -> 3"),
    Mutant("flash accumulators", F, "+ block_q * d + 2 * block_q", "+ block_q * d + 3 * block_q", "2 -> 3 statistics a row"),
    Mutant("flash SRAM of a launch", F, "SRAM_BYTES = (block_q + kv_stages * 2 * block_k)", "SRAM_BYTES = (block_q + kv_stages * 3 * block_k)", "K and V -> 3 tiles", LAUNCH_TESTS),
    Mutant("split-combine FLOPs", F, "vector_flops=3 * rows * splits * (d + 2)", "vector_flops=4 * rows * splits * (d + 2)", "3 -> 4 a value", LAUNCH_TESTS),
    Mutant("split partial bytes", F, "splits * (d + 2) * F32 if split", "splits * (d + 3) * F32 if split", "d+2 -> d+3"),
    Mutant("block-table entry bytes", F, "TABLE_ENTRY_BYTES = 4", "TABLE_ENTRY_BYTES = 8", "4 -> 8", LAUNCH_TESTS),
    # --- backward -------------------------------------------------------------------
    Mutant("dS FLOPs per score", BW, "DS_FLOPS_PER_SCORE = 3", "DS_FLOPS_PER_SCORE = 4", "3 -> 4", LAUNCH_TESTS),
    # --- masks (costs/masks.py, the masked forms, the models' window layers) -----------
    Mutant("mask: window's left edge", M, "lo = np.maximum(lo, at - left)", "lo = np.maximum(lo, at - left + 1)", "one key fewer", MASK_TESTS),
    Mutant("mask: window's right edge", M, "hi = np.minimum(hi, at + right)", "hi = np.minimum(hi, at + right + 1)", "one key more", MASK_TESTS),
    Mutant("mask: decode queries' positions", M, "return m - n if align == WindowAlign.BOTTOM_RIGHT else 0", "return 0", "queries first, not last", MASK_TESTS),
    Mutant("mask: documents' ends", M, "lo = np.maximum(lo, ends[doc] - np.asarray(mask.segments)[doc])", "lo = np.maximum(lo, ends[doc] - np.asarray(mask.segments)[doc] + 1)", "a document's first key dropped", MASK_TESTS),
    Mutant("mask: documents of one length", M, "hi = np.minimum(hi, start + mask.doc_length - 1)", "hi = np.minimum(hi, start + mask.doc_length)", "one key into the next", MASK_TESTS),
    Mutant("mask: scores of the visited tiles", M, "scores=float(pack * (rows @ width))", "scores=float(pack * (rows @ width) + 1)", "+1", MASK_TESTS),
    Mutant("mask: distinct K/V rows", M, "start = np.maximum(lo, covered + 1)", "start = np.maximum(lo, covered)", "overlap counted twice", MASK_TESTS),
    Mutant("mask: waves reading a K block", M, "first, last = (g + a) // resident, (g + b) // resident", "first, last = (g + a) // resident, (g + b + 1) // resident", "one wave more", MASK_TESTS),
    Mutant("mask: readers of a K block (backward)", M, 'np.searchsorted(lo, j, side="right") - 1', 'np.searchsorted(lo, j, side="left") - 1', "right -> left", MASK_TESTS),
    Mutant("mask: forward K/V DRAM rows", F, "rows = sp.Piecewise((mask_kv_touched, fits), (mask_kv_wave_rows, True))", "rows = sp.Piecewise((mask_kv_rows, fits), (mask_kv_wave_rows, True))", "touched -> streamed", MASK_TESTS),
    Mutant("mask: backward Q DRAM rows", BW, "rows_read = sp.Piecewise((mask_q_touched, fits), (mask_q_wave_rows, True))", "rows_read = sp.Piecewise((mask_q_rows, fits), (mask_q_wave_rows, True))", "touched -> streamed", MASK_TESTS),
    Mutant("mask: backward dQ K/V past L2", BW, "(b * h * 2 * mask_kv_wave_rows * d * s, True)", "(b * h_kv * 2 * mask_kv_wave_rows * d * s, True)", "per query head -> per K/V head", MASK_TESTS),
    Mutant("mask: backward's two walks", BW, "return mask_scores, mask_q_rows, mask_kv_rows, mask_tiles", "return mask_scores, mask_kv_rows, mask_q_rows, mask_tiles", "Q and K/V rows swapped", MASK_TESTS),
    Mutant("window layers: tokens kept", KV, "return m if window is None else sp.Min(m, window + 1)", "return m if window is None else sp.Min(m, window)", "one token fewer", WINDOW_TESTS),
    Mutant("window layers: pages spanned", KV, "span = sp.floor((m - 1) / page) - sp.floor(start / page) + 1", "span = sp.ceiling((window + 1) / page)", "aligned to pages", WINDOW_TESTS),
    # --- the launch -------------------------------------------------------------------
    Mutant("threads per warp", L, "WARP = 32", "WARP = 16", "32 -> 16", LAUNCH_TESTS),
    Mutant("producer registers", L, "PRODUCER_REGISTERS = 32", "PRODUCER_REGISTERS = 24", "32 -> 24", LAUNCH_TESTS),
    Mutant("register bytes (spills)", L, "REGISTER_BYTES = 4", "REGISTER_BYTES = 8", "4 -> 8", LAUNCH_TESTS),
    Mutant("spill traffic (write and read)", L, "spill_bytes_per_tile=2 * REGISTER_BYTES", "spill_bytes_per_tile=1 * REGISTER_BYTES", "2 -> 1", LAUNCH_TESTS),
    Mutant("blocks per SM by SRAM", L, "np.floor_divide(hw.sram_per_sm_bytes, np.maximum(smem, 1))", "np.floor_divide(hw.sram_per_sm_bytes, np.maximum(smem, 1)) + 1", "+1", LAUNCH_TESTS),
    Mutant("registers per block capped", L, "np.minimum(registers, cap) * threads", "registers * threads", "no cap", LAUNCH_TESTS),
    Mutant("threads per SM", L, "np.floor_divide(most_threads, threads + producers)", "np.floor_divide(most_threads, threads)", "producers left out", LAUNCH_TESTS),
    Mutant("K/V bytes in flight", L, "(stages if family.producer_warps else 1.0)", "(stages if family.producer_warps else 2.0)", "1 -> 2 stages without a producer", LAUNCH_TESTS),
    Mutant("GQA packing (when_short)", L, "n / up(n) < 0.9 * (n * group) / up(n * group)", "n / up(n) <= 0.9 * (n * group) / up(n * group)", "< -> <=", LAUNCH_TESTS),
    Mutant("GQA packing (decode)", L, "packed = (n == 1) & (group > 1)", "packed = (n <= 2) & (group > 1)", "n = 1 -> n <= 2", LAUNCH_TESTS),
    Mutant("split slots", L, "return int(hw.sm_count * family.split_sm_factor)", "return int(hw.sm_count)", "factor dropped", LAUNCH_TESTS),
    Mutant("split threshold", L, "small = grid < 0.8 * slots", "small = grid < 0.9 * slots", "0.8 -> 0.9", LAUNCH_TESTS),
    Mutant("FA-3 short K/V skip", L, "small = small & (kv_blocks > 4)", "small = small & (kv_blocks > 3)", "4 -> 3", LAUNCH_TESTS),
    Mutant("split within 85% of the best", L, "eff >= 0.85 * best", "eff >= 0.8 * best", "0.85 -> 0.8", LAUNCH_TESTS),
    Mutant("floor split limit (fill the SMs)", L, "fill = xp.ceil(hw.sm_count / xp.maximum(grid, 1.0))", "fill = xp.floor(hw.sm_count / xp.maximum(grid, 1.0))", "ceil -> floor", LAUNCH_TESTS),
    Mutant("K/V blocks walked (splits and their limit)", L, "        return xp.ceil(m / block_k)\n", "        return xp.floor(m / block_k) + 1\n", "ceil -> floor+1", LAUNCH_TESTS),
    Mutant("floor split search", L, "left = t_lower_at(at, pack[at], mid) <= t_lower_at(at, pack[at], mid + 1)", "left = t_lower_at(at, pack[at], mid) >= 0", "always left", LAUNCH_TESTS),
    # --- the estimate's effects -------------------------------------------------------
    Mutant("spills effect", E, "return t._replace(serial=k.spill_s)", "return t._replace(serial=0.0)", "dropped", LAUNCH_TESTS),
    Mutant("waves effect", E, "return t._replace(times=k.estimate)", "return t._replace(times=k.floor)", "dropped", LAUNCH_TESTS),
    Mutant("exposed latency effect", E, "wait = unpipelined * k.latency_s", "wait = 0.0 * k.latency_s", "no wait per step", LAUNCH_TESTS),
    Mutant("prologue effect (memory latency)", E, "return t._replace(fixed=t.fixed + k.prologue_latency_s + load)", "return t._replace(fixed=t.fixed + load)", "latency dropped", LAUNCH_TESTS),
    Mutant("prologue waves", E, "waves = xp.ceil(work_items / resident)", "waves = xp.floor(work_items / resident) + 1", "ceil -> floor+1", LAUNCH_TESTS),
    Mutant("pad copies effect (launch gaps)", E, "return t._replace(fixed=t.fixed + load + k.pad_copies * (c.launch_s + k.first_load_s))", "return t._replace(fixed=t.fixed + load)", "gaps dropped", LAUNCH_TESTS),
    Mutant("XLA glue effect", E, "return t._replace(fixed=t.fixed + k.xla_kernels * (c.launch_s + k.first_load_s))", "return t._replace(fixed=t.fixed + k.xla_kernels * c.launch_s)", "first load dropped", TRUTH_TESTS),
    Mutant("imbalance effect", E, "scaled = {r: v * k.imbalance if r in _COMPUTE else v for r, v in t.times.items()}", "scaled = {r: v for r, v in t.times.items()}", "dropped", TRUTH_TESTS),
    Mutant("latency from idle to loaded", E, "return idle + (loaded - idle) * share", "return loaded", "always loaded", TRUTH_TESTS),
    Mutant("first load of an untiled kernel", E, "return (latency_at(hw, 0.0), 0.0)", "return (0.0, 0.0)", "no wait", TRUTH_TESTS),
    Mutant("schedule imbalance (balanced waves)", L, "balanced = math.ceil(programs / slots) * total / programs", "balanced = (programs / slots) * total / programs", "ceil dropped", TRUTH_TESTS),
    Mutant("causal imbalance, closed form (busiest SM)", L, "busiest = last * one + ratio * (turns(blocks) + dealt - blocks * one)", "busiest = last * one + ratio * (turns(blocks) + dealt - (blocks - 1) * one)", "T -> T-1", TRUTH_TESTS),
    Mutant("causal imbalance, all blocks (turns per entry)", L, "weights=steps * (turns(rank + 1) - turns(rank))", "weights=steps * (turns(rank + 2) - turns(rank + 1))", "entry shifted", TRUTH_TESTS),
    Mutant("causal imbalance, floor sum", L, "total[at] += (count - 1) * count // 2 * whole + count * more", "total[at] += count * count // 2 * whole + count * more", "(n-1)n -> n^2", TRUTH_TESTS),
    Mutant("XLA kernels of a split", L, "out = xp.where(splits >= fewest, float(kernels), out)", "out = xp.where(splits > fewest, float(kernels), out)", ">= -> >", TRUTH_TESTS),
    Mutant("kernel launch effect", E, "return t._replace(fixed=c.launch_s)", "return t._replace(fixed=0.0)", "dropped", ROOF_TESTS),
    Mutant("memory reach (bytes in flight per latency)", E, "per_sm = low(per_sm, resident * onchip.bytes_in_flight / latency)", "per_sm = low(per_sm, 2 * resident * onchip.bytes_in_flight / latency)", "x2", LAUNCH_TESTS),
    Mutant("per-SM L2 port share", E, "per_sm: Num = hw.l2_bandwidth_bytes_per_s / hw.sm_count", "per_sm: Num = 2 * hw.l2_bandwidth_bytes_per_s / hw.sm_count", "x2", LAUNCH_TESTS),
    # --- roofline factors -------------------------------------------------------------
    Mutant("roof time (work / rate)", R, "out[roof] = w / rate", "out[roof] = w * 1.1 / rate", "x1.1", ROOF_TESTS),
    Mutant("kernel floor (max of roofs)", R, "all are floats\n        return max(values)", "all are floats\n        return sum(values)", "max -> sum", ROOF_TESTS),
    Mutant("derating (roof / efficiency)", R, "{roof: t / efficiency[roof] for", "{roof: t / efficiency[roof] ** 2 for", "eff -> eff^2", ROOF_TESTS),
    Mutant("compute overlap", R, "pick(0 * busiest, rest - compute_overlap * busiest)", "pick(0 * busiest, rest - 1.1 * compute_overlap * busiest)", "x1.1", ROOF_TESTS),
    Mutant("fill stretch applied", R, "memory.append((overlapped + serial) * fill_stretch)", "memory.append(overlapped + serial)", "dropped", ROOF_TESTS),
    Mutant("busy fraction", R, "share = work_items / units", "share = work_items / (units + 1)", "units+1", ROOF_TESTS),
    Mutant("wave efficiency", R, "items / (ceil(items / units) * units)", "items / (ceil((items + 1) / units) * units)", "items+1 in the wave count", ROOF_TESTS),
    Mutant("arithmetic intensity", R, "return flops / bytes_moved", "return 1.1 * flops / bytes_moved", "x1.1", ROOF_TESTS),
    Mutant("per-block fill stretch", E, "1 + c.calibration.block_overhead_tiles * k.blocks_per_tile", "1 + 1.1 * c.calibration.block_overhead_tiles * k.blocks_per_tile", "x1.1", ROOF_TESTS),
    Mutant("launch overhead", E, "total = total + time + state.fixed", "total = total + time + 1.1 * state.fixed", "x1.1", ROOF_TESTS),
    Mutant("host dispatch", E, "fitted * kernels if fitted", "fitted * (kernels + 1) if fitted", "+1 kernel", ROOF_TESTS),
    Mutant("vector and exp rates", E, "Roof.VECTOR: hw.vector_fp32_flops_per_s,\n        Roof.EXP: hw.exp_per_s,", "Roof.VECTOR: hw.exp_per_s,\n        Roof.EXP: hw.vector_fp32_flops_per_s,", "swapped", ROOF_TESTS),
    Mutant("L2 capacity symbol", E, 'values["l2_capacity"] = hw.l2_bytes or 0', 'values["l2_capacity"] = (hw.l2_bytes or 0) * 11 // 10', "x1.1", ROOF_TESTS),
    Mutant("resident blocks symbol", E, 'values["resident_ctas"] = hw.sm_count * blocks_per_sm', 'values["resident_ctas"] = hw.sm_count * blocks_per_sm + 1', "+1", ROOF_TESTS),
    Mutant("matmul rate at the floor", R, "return matmul_flops / t_lower", "return 1.1 * matmul_flops / t_lower", "x1.1", ROOF_TESTS),
    Mutant("ridge point", H, "return self.peak(dtype) / self.hbm_bandwidth_bytes_per_s", "return 1.1 * self.peak(dtype) / self.hbm_bandwidth_bytes_per_s", "x1.1", ROOF_TESTS),
)
# fmt: on


def _tree(dest: Path) -> None:
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "HEAD"], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)


def run(mutant: Mutant, base: Path) -> tuple[str, str, float]:
    """(outcome, killed by, seconds) for one mutant, in a fresh copy of ``base``."""
    with tempfile.TemporaryDirectory(prefix="mutant-") as tmp:
        work = Path(tmp)
        subprocess.run(["cp", "-a", f"{base}/.", str(work)], check=True)
        # perfmodel.specs inside the copy, so that an editable install of the checkout
        # cannot hand the tests its (possibly uncommitted) spec files instead.
        (work / "perfmodel" / "specs").symlink_to("../specs")
        target = work / mutant.path
        text = target.read_text()
        if text.count(mutant.old) != 1:
            return "stale", f"text found {text.count(mutant.old)} times", 0.0
        target.write_text(text.replace(mutant.old, mutant.new))
        env = {**os.environ, "PYTHONPATH": str(work)}
        start = time.perf_counter()
        argv = ["-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-o", "addopts="]
        proc = subprocess.run(
            [sys.executable, *argv, *mutant.tests],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
        )
        seconds = time.perf_counter() - start
    if proc.returncode == 0:
        return "survived", "", seconds
    failed = re.findall(r"^FAILED (\S+)", proc.stdout, flags=re.M)
    if not failed:  # an import or collection error: the mutant broke the module outright
        return "killed", "(error: " + proc.stdout.strip().splitlines()[-1][:60] + ")", seconds
    return "killed", failed[0].split(" ")[0], seconds


def _head() -> str:
    """The checkout's commit, for the table's heading."""
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        )
    except FileNotFoundError:
        return "a copy of the tree"
    return f"commit {out.stdout.strip()}" if out.returncode == 0 else "a copy of the tree"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--only", default="", help="comma-separated parts of mutant names")
    p.add_argument(
        "--without-pinned",
        action="store_true",
        help="leave out tests/test_*_pinned.py (what the other tests alone catch)",
    )
    p.add_argument("--write", default=None, help="markdown file to write the table to")
    p.add_argument("--jobs", type=int, default=1, help="mutants run at once")
    p.add_argument("--label", default="", help="what the table is of (default: the commit)")
    p.add_argument(
        "--worktree", action="store_true", help="mutate the files as they are, not git HEAD"
    )
    args = p.parse_args(argv)
    wanted = [w.strip().lower() for w in args.only.split(",") if w.strip()]
    mutants = [m for m in MUTANTS if not wanted or any(w in m.name.lower() for w in wanted)]
    if args.without_pinned:
        mutants = [
            replace(m, tests=tuple(t for t in m.tests if not t.endswith("_pinned.py")))
            for m in mutants
        ]
    with tempfile.TemporaryDirectory(prefix="mutate-base-") as base:
        if args.worktree:  # a checkout without its git folder (a copy on another machine)
            subprocess.run(["cp", "-a", f"{ROOT}/perfmodel", f"{ROOT}/specs", f"{ROOT}/tests",
                            f"{ROOT}/pyproject.toml", base], check=True)  # fmt: skip
            (Path(base) / "perfmodel" / "specs").unlink(missing_ok=True)
        else:
            _tree(Path(base))

        def one(m: Mutant) -> str:
            outcome, by, seconds = run(m, Path(base))
            row = f"| {m.name} | `{m.path.removeprefix('perfmodel/')}` | {m.what} | {outcome} | {by} |"
            print(row, f"({seconds:.0f} s)", file=sys.stderr, flush=True)
            return row

        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            rows = list(pool.map(one, mutants))  # each mutant in its own copy and process
    bad = sum("| killed |" not in row for row in rows)
    head = (
        "git "
        + subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
    )
    table = "\n".join(
        [
            "| term or factor | file | mutation | outcome | killed by (first failing test) |",
            "|---|---|---|---|---|",
            *rows,
            "",
            f"{len(rows) - bad} of {len(rows)} mutants killed.",
        ]
    )
    print(table)
    if args.write:
        from perfmodel.atomic import write_text

        scope = f" --only '{args.only}'" if args.only else ""
        every = (
            f"the {len(rows)} of the {len(MUTANTS)} mutants whose names contain one of "
            "`--only`'s parts"
            if args.only
            else f"every one of the {len(MUTANTS)} mutants"
        )
        write_text(
            Path(args.write),
            "# Mutation run\n\n"
            f"Written by `python3 tools/mutate_terms.py{scope} --write {args.write}` at {head} "
            f"({every}): each "
            "mutant changes one term, launch rule, effect or roofline factor that `predict()` "
            "and `sweep()` run, in a copy of the committed tree, and runs the tests that pin "
            "it (`pytest -x`). Regenerate it with the same command; do not edit by hand.\n\n"
            f"{table}\n",
        )
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
