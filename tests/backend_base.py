"""What every flash forward backend must do, written once.

Each backend's test module subclasses ``BackendContract`` and says how to run its kernel
(``forward``: O and the log-sum-exp through the backend's test hooks, which shift the
causal diagonal so that rows see no key at all). The contract: O and lse equal the
float64 reference (``reference.attention_float64``) on odd lengths, cross attention,
GQA and MQA, a head dim the backend pads (96); logits of order 10^3 stay finite; fully
masked rows give O = 0 and lse = -inf; ``jax.grad`` through ``flash_attention`` with the
backend forced equals the float64 gradients (lse cotangent included).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pallas_kernels import flash_attention
from pallas_kernels.reference import attention_float64, attention_grads_float64

DTYPES = {"float32": jnp.float32, "float16": jnp.float16, "bfloat16": jnp.bfloat16}
#: ‖out − ref‖ / ‖ref‖ allowed per input dtype (float32 allows the GPU's tf32 dots).
TOLERANCE = {"float32": 2e-3, "float16": 4e-3, "bfloat16": 2e-2}
#: ‖grad − ref‖ / ‖ref‖ per input dtype.
GRAD_TOLERANCE = {"float32": 2e-3, "float16": 1e-2, "bfloat16": 3e-2}

#: (batch, n, kv_len, heads, kv_heads, head_dim, causal, dtype)
CASES = [
    (1, 100, 100, 4, 2, 64, True, "bfloat16"),  # GQA 2:1, n not a tile multiple
    (2, 77, 130, 3, 1, 64, False, "float16"),  # MQA, cross attention, both odd
    (1, 65, 65, 2, 2, 96, True, "bfloat16"),  # a head dim both backends pad
    (1, 1, 1, 2, 2, 64, True, "float16"),  # one row
    (1, 150, 150, 8, 1, 128, False, "bfloat16"),  # a group of 8
]


#: (batch, n, kv_len, heads, kv_heads, head_dim, causal, window, dtype): sliding windows
#: smaller and larger than a tile, causal and two-sided, one-sided, cross attention (rows
#: past kv_len + left see no key), GQA groups of 1, 3 and 4.
WINDOW_CASES = [
    (1, 100, 100, 4, 2, 64, True, 17, "bfloat16"),  # causal, window < a tile
    (1, 300, 300, 3, 1, 64, True, 100, "float16"),  # odd group: the consumers' ranges differ
    (1, 260, 260, 2, 2, 64, False, 40, "bfloat16"),  # two-sided (40, 40)
    (1, 333, 333, 4, 1, 128, False, (5, 150), "float16"),  # asymmetric, group 4
    (1, 200, 200, 2, 1, 64, False, (None, 10), "bfloat16"),  # right side only
    (1, 200, 200, 2, 1, 64, False, (70, None), "bfloat16"),  # left side only
    (2, 230, 90, 2, 1, 64, False, (20, 20), "float16"),  # cross: rows >= 110 see nothing
]


def rel_err(out, ref) -> float:
    out = np.asarray(out, np.float64)
    return float(np.linalg.norm(out - ref) / np.linalg.norm(ref))


def random_inputs(seed, b, n, kv_len, h, h_kv, d, dtype, scale=1.0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((b, n, h, d)) * scale
    k = rng.standard_normal((b, kv_len, h_kv, d))
    v = rng.standard_normal((b, kv_len, h_kv, d))
    return tuple(jnp.asarray(x, DTYPES[dtype]) for x in (q, k, v))


class BackendContract:
    """Subclass as ``TestXBackend`` and set ``backend`` and ``forward``."""

    #: the ``backend=`` of ``flash_attention``
    backend: str = ""
    #: ``interpret=`` for ``flash_attention`` (the Triton kernel on CPU)
    interpret: bool = False
    #: the dtype of the large-logit and gradient cases (float32 where the backend runs it)
    wide_dtype: str = "bfloat16"

    def forward(self, q, k, v, *, causal, diagonal_offset=0, window=None):
        """``(O, lse)`` from the backend's test entry point."""
        raise NotImplementedError

    def check(self, q, k, v, *, causal, window=None, **options):
        o, lse = self.forward(q, k, v, causal=causal, window=window, **options)
        assert o.shape == q.shape and o.dtype == q.dtype
        assert lse.shape == (q.shape[0], q.shape[2], q.shape[1]) and lse.dtype == jnp.float32
        assert np.isfinite(np.asarray(o, np.float32)).all(), "unwritten (NaN) or non-finite"
        ref_o, ref_lse = attention_float64(q, k, v, causal=causal, window=window)
        assert rel_err(o, ref_o) < TOLERANCE[q.dtype.name], rel_err(o, ref_o)
        np.testing.assert_allclose(np.asarray(lse), ref_lse, rtol=1e-3, atol=1e-2)

    @pytest.mark.parametrize("case", WINDOW_CASES, ids=lambda c: "-".join(map(str, c)))
    def test_sliding_window_matches_float64_reference(self, case):
        *shape, causal, window, dtype = case
        q, k, v = random_inputs(sum(shape) + 1, *shape, dtype)
        self.check(q, k, v, causal=causal, window=window)

    @pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
    def test_matches_float64_reference(self, case):
        *shape, causal, dtype = case
        q, k, v = random_inputs(sum(shape), *shape, dtype)
        self.check(q, k, v, causal=causal)

    @pytest.mark.parametrize("causal", [False, True])
    def test_large_logits_stay_finite(self, causal):
        # scores of order 1e3-1e4: exp overflows without the running row max
        q, k, v = random_inputs(5, 1, 80, 80, 2, 2, 64, self.wide_dtype, scale=300.0)
        _, ref_lse = attention_float64(q, k, v, causal=causal)
        assert np.abs(ref_lse).max() > 1e3
        self.check(q, k, v, causal=causal)

    def test_fully_masked_rows_give_zero_and_no_nan(self):
        # the diagonal shifted down by 37: rows 0..36 see no key at all
        q, k, v = random_inputs(6, 1, 100, 100, 4, 2, 64, "bfloat16")
        o, lse = self.forward(q, k, v, causal=True, diagonal_offset=-37)
        o, lse = np.asarray(o, np.float32), np.asarray(lse)
        assert not np.isnan(o).any() and not np.isnan(lse).any()
        assert (o[:, :37] == 0).all() and (lse[:, :, :37] == -np.inf).all()
        ref_o, ref_lse = attention_float64(q[:, 37:], k[:, :63], v[:, :63], causal=True)
        assert rel_err(o[:, 37:], ref_o) < TOLERANCE["bfloat16"]
        np.testing.assert_allclose(lse[:, :, 37:], ref_lse, rtol=1e-3, atol=1e-2)

    @pytest.mark.parametrize(
        ("causal", "window"), [(False, None), (True, None), (True, 20), (False, (9, 30))]
    )
    def test_gradients_match_float64(self, causal, window):
        """jax.grad through flash_attention with this backend's forward: GQA 2:1, odd n,
        a loss that uses the log-sum-exp too; sliding windows causal and two-sided."""
        b, n, h, h_kv, d = 1, 70, 4, 2, 64
        q, k, v = random_inputs(7, b, n, n, h, h_kv, d, self.wide_dtype)
        rng = np.random.default_rng(8)
        do = jnp.asarray(rng.standard_normal((b, n, h, d)), jnp.float32)
        w = jnp.asarray(rng.standard_normal((b, h, n)), jnp.float32)

        def loss(q, k, v):
            o, lse = flash_attention(
                q,
                k,
                v,
                causal=causal,
                window=window,
                backend=self.backend,
                return_lse=True,
                interpret=self.interpret,
            )
            return jnp.sum(o.astype(jnp.float32) * do) + jnp.sum(lse * w)

        grads = jax.grad(loss, argnums=(0, 1, 2))(q, k, v)
        ref = attention_grads_float64(q, k, v, do, causal=causal, dlse=w, window=window)
        for name, g, r in zip(("dq", "dk", "dv"), grads, ref, strict=True):
            assert g.dtype == q.dtype, name
            assert rel_err(g, r) < GRAD_TOLERANCE[self.wide_dtype], (name, rel_err(g, r))
