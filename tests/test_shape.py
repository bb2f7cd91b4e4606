"""The one shape type: what predict() takes, what it returns, and what a measured point timed."""

import numpy as np
import pytest

from perfmodel import predict
from perfmodel.catalog.hardware import load_hardware
from perfmodel.launch import launch_of
from perfmodel.shape import Shape
from perfmodel.validation.measured import Point


def test_tokens_rule_fixes_the_batch_at_each_n():
    s = Shape(h=8, tokens=16384)
    assert [s.at(n).batch for n in (1024, 4096, 16384, 65536)] == [16, 4, 1, 1]
    assert s.batch_at(np.array([1024, 65536])).tolist() == [16, 1]
    assert s.at(4096).tokens is None and s.at(4096).n == 4096


def test_kwargs_name_only_what_is_set():
    assert Shape(n=2048).kwargs() == dict(
        n=2048,
        d=128,
        h=1,
        h_kv=None,
        batch=1,
        dtype="fp16",
        causal=False,
        block_q=None,
        block_k=None,
        kernel="fa2",
    )
    named = Shape(n=2048, kv_len=512, warps=8, splits=2, mode="train").kwargs()
    assert (named["kv_len"], named["warps"], named["splits"], named["mode"]) == (512, 8, 2, "train")
    assert "n" not in Shape(n=2048, tokens=8192).kwargs(1024)
    assert Shape(tokens=8192).kwargs(1024)["batch"] == 8


def test_sizes_fill_kv_len_and_h_kv_and_give_bytes():
    sizes = Shape(n=1000, d=64, h=32, batch=2, dtype="bf16").sizes()
    assert sizes == dict(n=1000, m=1000, d=64, h=32, h_kv=32, b=2, s=2)
    assert Shape(n=1, kv_len=4096, h=32, h_kv=8, dtype="fp32").sizes()["m"] == 4096


def test_predict_returns_the_shape_it_costed_resolved():
    p = predict(n=4096, hw="h200", h=16, h_kv=4, dtype="bf16", kernel="fa3")
    c = p.config
    assert isinstance(c, Shape)
    assert (c.kv_len, c.h_kv, c.kernel, c.tokens) == (4096, 4, "fa3", None)
    launch = launch_of(c, load_hardware("h200"))
    assert (c.block_q, c.block_k, c.warps, c.splits, c.pack) == (
        launch.block_q,
        launch.block_k,
        launch.warps,
        launch.splits,
        launch.pack,
    )
    # the shape predicts itself again: same numbers
    again = predict(hw="h200", **c.kwargs())
    assert again.flash.time_s == p.flash.time_s
    assert "tokens" not in p.model_dump(mode="json")["config"]


@pytest.mark.parametrize("dtype, model", [("bfloat16", "bf16"), ("float16", "fp16")])
def test_a_measured_point_knows_its_shape(dtype, model):
    p = Point(
        implementation="pallas_flash",
        n=3000,
        kv_len=3000,
        d=128,
        h=32,
        h_kv=8,
        batch=2,
        dtype=dtype,
        causal=True,
        block_q=64,
        block_k=32,
        num_warps=4,
        family="pallas-triton",
        status="ok",
        median_s=1e-3,
    )
    s = p.shape()
    assert (s.n, s.h_kv, s.dtype, s.block_q, s.block_k, s.warps, s.kernel) == (
        3000,
        8,
        model,
        64,
        32,
        4,
        "pallas-triton",
    )
