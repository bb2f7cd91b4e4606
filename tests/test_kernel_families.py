"""Kernel families as data: every fact sourced, tiles per head dim, the split rules."""

import numpy as np
import pytest

from perfmodel.catalog.frameworks import call_latency_of, load_framework
from perfmodel.catalog.hardware import load_hardware
from perfmodel.catalog.kernels import known_kernels, load_kernel
from perfmodel.errors import PerfmodelError
from perfmodel.launch import split_rule

REQUIRED = {"fa2", "fa3", "cudnn", "pallas-triton", "pallas-mosaic", "xla-naive", "flash-decoding"}


def test_the_required_families_ship():
    assert set(known_kernels()) >= REQUIRED


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_every_stated_fact_has_a_source(name):
    family = load_kernel(name)
    labels = {"name", "aliases", "description", "algorithm", "sources", "assumed"}
    stated = family.model_fields_set - labels - {"backward"}  # sourced in its own table
    assert stated <= set(family.sources), stated - set(family.sources)
    assert all(family.sources[k].strip() for k in stated)
    if family.backward is not None:
        bwd = family.backward
        facts = bwd.model_fields_set - {"sources", "assumed"}
        assert facts <= set(bwd.sources), facts - set(bwd.sources)
        assert all(bwd.sources[k].strip() for k in facts)


def test_each_backward_is_the_family_that_runs():
    # on Hopper our forwards are differentiated by the Mosaic backward to d = 256 (the
    # split kernels above 128), by the Triton backward elsewhere (choose_backward)
    for forward in ("pallas-mosaic", "pallas-triton"):
        for d in (64, 128, 192, 256):
            assert load_kernel(forward).backward_as_run(d).name == "pallas-mosaic"
            assert load_kernel(forward).backward_as_run(d, arch="sm80").name == "pallas-triton"
    dq = {f: load_kernel(f).backward_view()[1] for f in ("fa2", "fa3", "cudnn", "pallas-triton")}
    assert dq == {"fa2": "atomic", "fa3": "atomic", "cudnn": "atomic", "pallas-triton": "two_pass"}
    # FA-3's backward tiles (hopper/flash_bwd_launch_template.h): 80 x 128 at d = 128
    view, _ = load_kernel("fa3").backward_view()
    assert view.tile_for(128, causal=False, arch="sm90").block_q == 80
    assert view.tile_for(128, causal=True, arch="sm90").block_q == 64
    # cuDNN's structure is assumed, and says so
    assert "dq" in load_kernel("cudnn").backward.assumed


def test_softmax_placement_sets_the_compute_overlap():
    assert load_kernel("fa2").compute_overlap == 0.0  # softmax between the matmuls
    # ping-pong warpgroups: part of the softmax hides under the matmuls (the family's
    # softmax_overlap, as cuDNN's measured share)
    assert load_kernel("fa3").compute_overlap == load_kernel("cudnn").compute_overlap == 0.3


def test_tiles_follow_the_sources():
    fa3 = load_kernel("fa3")
    # hopper/tile_size.h: 128 x 176 at d=128 non-causal, 128 x 128 causal, 128 x 80 at d=256
    assert (fa3.tile_for(128, causal=False, arch="sm90").block_k) == 176
    assert (fa3.tile_for(128, causal=True, arch="sm90").block_k) == 128
    assert (fa3.tile_for(256, causal=False, arch="sm90").block_k) == 80
    fa2 = load_kernel("fa2")
    # flash_fwd_launch_template.h: d=256 takes 64 x 64 on H100 (2 CTAs per SM), 128 x 64 on A100
    assert fa2.tile_for(256, causal=False, arch="sm90").block_q == 64
    assert fa2.tile_for(256, causal=False, arch="sm80").block_q == 128
    with pytest.raises(PerfmodelError, match="d=512"):
        fa2.tile_for(512, causal=False, arch="sm90")


def _splits(family, programs, kv_blocks, hw="h100", factor=None):
    fam = load_kernel(family)
    if factor is not None:
        fam = fam.model_copy(update={"split_sm_factor": factor})
    spec = load_hardware(hw)
    return int(split_rule(fam, spec, np.array([float(programs)]), np.array([float(kv_blocks)]))[0])


def test_split_rule_reproduces_the_sources_example():
    # flash_api.cpp: "batch * n_heads = 48 and 108 SMs: 2 splits (efficiency 0.89)":
    # 108 slots, an A100's SMs at one block each
    assert _splits("fa2", 48, 64, hw="a100", factor=1) == 2
    # grids that nearly fill the slots do not split
    assert _splits("fa2", 100, 64, hw="a100", factor=1) == 1
    # FA-3 never splits 4 or fewer K/V blocks
    assert _splits("fa3", 8, 4) == 1


def test_decode_families_split_a_small_grid():
    assert _splits("flash-decoding", 8, 1024) > 1
    # cuDNN splits too (assumed FlashAttention-2's rule from the development decode sets)
    assert _splits("cudnn", 8, 1024) > 1
    assert _splits("pallas-triton", 8, 1024) == 1


def test_unknown_family_lists_the_known_ones():
    with pytest.raises(PerfmodelError, match="fa3"):
        load_kernel("fa9")


def test_frameworks_give_call_latency_only_where_measured():
    assert 1e-5 < call_latency_of("jax") < 1e-3
    assert load_framework("pytorch").call_latency_s is None


def test_cli_lists_and_shows_families(capsys):
    from perfmodel.cli import main

    assert main(["kernels", "list"]) == 0
    assert "fa3" in capsys.readouterr().out
    assert main(["kernels", "show", "cudnn"]) == 0
    assert "ASSUMED" in capsys.readouterr().out
    assert main(["kernels", "show", "fa9"]) == 2
