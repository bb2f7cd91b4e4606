"""The ceilings script's kernels compute what they count (Pallas interpreter, CPU)."""

from __future__ import annotations

import tomllib

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

from pallas_kernels import ceilings  # noqa: E402


@pytest.mark.parametrize("streamed", [False, True])
def test_the_tile_kernel_keeps_every_product(streamed):
    fn, sets, flops = ceilings.triton_mma(
        16, 16, 32, 4, jnp.float32, iters=3, programs=2, streamed=streamed, interpret=True,
        n_tiles=2,
    )  # fmt: skip
    a, b = (np.asarray(x, np.float64) for x in sets[0])
    out = np.asarray(fn(*sets[0]))
    for p in range(2):
        tiles = [(p + i) % 2 for i in range(3)] if streamed else [0, 0, 0]
        want = sum(a[p % 8] @ b[16 * t : 16 * (t + 1)].T for t in tiles)
        np.testing.assert_allclose(out[p], want, rtol=1e-4, atol=1e-4)
    assert flops == 2 * 16 * 16 * 32 * 3 * 2


@pytest.mark.parametrize("op", ["read", "write", "copy"])
def test_the_streaming_kernels_touch_every_byte(op):
    n_bytes = 64 << 10
    fn, moved = ceilings.stream_fn(op, n_bytes, programs=2, interpret=True)
    rows = n_bytes // (2 * ceilings.TILE_COLS)
    x = jax.random.normal(jax.random.key(0), (rows, ceilings.TILE_COLS), jnp.bfloat16)
    assert moved == n_bytes * (2 if op == "copy" else 1)
    if op == "read":
        out = np.asarray(fn(x), np.float64).sum()
        np.testing.assert_allclose(out, np.asarray(x, np.float64).sum(), rtol=1e-3, atol=1.0)
    elif op == "write":
        out = np.asarray(fn(), np.float64)
        np.testing.assert_array_equal(out[: rows // 2], 0.0)
        np.testing.assert_array_equal(out[rows // 2 :], 1.0)  # program 1 writes 1s
    else:
        np.testing.assert_array_equal(np.asarray(fn(x)), np.asarray(x + 1))


def test_the_file_is_toml_with_finite_numbers_only():
    doc = {"a": 1, "t": {"x": 2.5, "skip": float("nan"), "n": {"v": 1e12}}, "r": [{"k": "s"}]}
    back = tomllib.loads(ceilings.to_toml(doc))
    assert back == {"a": 1, "t": {"x": 2.5, "n": {"v": 1e12}}, "r": [{"k": "s"}]}


@pytest.mark.parametrize("sharing", [1, 2])
def test_the_atomic_kernel_adds_every_tile_it_counts(sharing):
    rows, cols = ceilings.ATOMIC_TILE
    ws, programs, per = 8 * rows * cols * 4, 4, 3  # 8 tiles
    fn, moved = ceilings.atomic_fn(ws, programs, per, sharing, interpret=True, start=True)
    x = jnp.ones((rows, cols), jnp.float32)
    out = np.asarray(fn(x, jnp.zeros((8 * rows, cols), jnp.float32)))
    groups = programs // sharing
    want = np.zeros(8)
    for p in range(programs):
        first = (p // sharing) * (8 // groups)
        for i in range(per):
            want[(first + i) % 8] += 1
    got = out.reshape(8, rows, cols)
    np.testing.assert_array_equal(got, np.broadcast_to(want[:, None, None], got.shape))
    assert moved == programs * per * rows * cols * 4
