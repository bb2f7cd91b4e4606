"""Context-parallel attention on a CPU mesh of N fake devices, against float64 numpy.

The device count is fixed when jax starts (``XLA_FLAGS=--xla_force_host_platform_device_count``)
and this session's jax has already started, so each N runs in a subprocess: this file
run as a script (``python tests/test_context_parallel.py N``) prints one JSON line per
case, and the tests below read them. Odd N (3) included. Kernels run in interpret mode.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("jax")

ROOT = Path(__file__).resolve().parents[1]
#: float32 inputs, f32 accumulation in the kernel, merged in f32: error against float64.
TOLERANCE = 2e-5


def _heads(devices: int) -> tuple[int, int]:
    """(h, h_kv) for the GQA cases: h divisible by N for Ulysses; h_kv = 2 makes Ulysses
    replicate K/V heads whenever N does not divide 2."""
    return 2 * devices if devices < 8 else devices, 2


def _cases(devices: int):
    """Every scheme x (non-causal, causal contiguous, causal zig-zag); at 8 devices only
    the zig-zag cases and the non-causal ring (CI has 2 cores)."""
    h, h_kv = _heads(devices)
    for scheme in ("ring", "allgather", "ulysses"):
        if devices < 8 or scheme == "ring":
            yield dict(scheme=scheme, causal=False, balance="contiguous", h=h, h_kv=h)
        if devices < 8:
            yield dict(scheme=scheme, causal=True, balance="contiguous", h=h, h_kv=h_kv)
        yield dict(scheme=scheme, causal=True, balance="zigzag", h=h, h_kv=h_kv)
    if devices == 2:  # GQA without the causal mask, and a larger batch, once per scheme
        for scheme in ("ring", "allgather", "ulysses"):
            yield dict(scheme=scheme, causal=False, balance="contiguous", h=h, h_kv=h_kv, b=2)


def _run_case(mesh, devices, case):
    import jax
    import numpy as np

    from pallas_kernels.context_parallel import context_parallel_attention
    from pallas_kernels.reference import attention_float64

    b, d = case.get("b", 1), 16
    n = 2 * devices * 16  # two 16-row chunks per device: zig-zag's smallest shape
    keys = jax.random.split(jax.random.PRNGKey(devices), 3)
    q = jax.random.normal(keys[0], (b, n, case["h"], d), "float32")
    k = jax.random.normal(keys[1], (b, n, case["h_kv"], d), "float32")
    v = jax.random.normal(keys[2], (b, n, case["h_kv"], d), "float32")
    o, lse = context_parallel_attention(
        q,
        k,
        v,
        mesh=mesh,
        axis="sp",
        scheme=case["scheme"],
        causal=case["causal"],
        balance=case["balance"],
        return_lse=True,
        interpret=True,
    )
    o_ref, lse_ref = attention_float64(q, k, v, causal=case["causal"])
    return {
        "o_err": float(np.max(np.abs(np.asarray(o, np.float64) - o_ref))),
        "lse_err": float(np.max(np.abs(np.asarray(lse, np.float64) - lse_ref))),
    }


def _bad_inputs(mesh, devices):
    """Each bad input's error message (they must name the value)."""
    import jax.numpy as jnp

    from pallas_kernels.context_parallel import context_parallel_attention

    run = functools.partial(context_parallel_attention, mesh=mesh, interpret=True)
    q = jnp.ones((1, 2 * devices * 16 + 1, devices, 16))  # n not divisible
    q_even = jnp.ones((1, 2 * devices * 16, devices + 1, 16))  # heads not divisible
    tries = {
        "n": lambda: run(q, q, q, axis="sp"),
        "axis": lambda: run(q_even, q_even, q_even, axis="tp"),
        "scheme": lambda: run(q_even, q_even, q_even, axis="sp", scheme="tree"),
        "heads": lambda: run(q_even, q_even, q_even, axis="sp", scheme="ulysses"),
    }
    out = {}
    for name, call in tries.items():
        try:
            call()
            out[name] = None
        except ValueError as e:
            out[name] = str(e)
    return out


def main(devices: int) -> None:
    """Run every case on ``devices`` fake CPU devices; one JSON line per case."""
    import jax

    assert len(jax.devices()) == devices, jax.devices()
    mesh = jax.sharding.Mesh(jax.devices(), ("sp",))
    for case in _cases(devices):
        print(json.dumps({"case": case, **_run_case(mesh, devices, case)}), flush=True)
    print(json.dumps({"bad_inputs": _bad_inputs(mesh, devices)}), flush=True)


DEVICE_COUNTS = [2, 3, 4, 8]


@functools.cache
def _processes() -> dict:
    """Start one subprocess per device count, all at once (each is mostly one core of
    XLA compilation, so two cores finish them in about half the time of one by one)."""
    env = dict(os.environ)
    env["JAX_PLATFORMS"] = "cpu"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    procs = {}
    for devices in DEVICE_COUNTS:
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
        procs[devices] = subprocess.Popen(
            [sys.executable, __file__, str(devices)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(env),
            cwd=ROOT,
        )
    return procs


@functools.cache
def _results(devices: int) -> list[dict]:
    proc = _processes()[devices]
    out, err = proc.communicate(timeout=1500)
    assert proc.returncode == 0, err[-4000:]
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


@pytest.mark.parametrize("devices", DEVICE_COUNTS)
def test_matches_float64_reference(devices):
    rows = [r for r in _results(devices) if "case" in r]
    assert len(rows) == len(list(_cases(devices)))
    bad = [r for r in rows if r["o_err"] > TOLERANCE or r["lse_err"] > TOLERANCE]
    assert not bad, bad


@pytest.mark.parametrize("devices", [2, 3])
def test_bad_input_names_the_value(devices):
    (errors,) = [r["bad_inputs"] for r in _results(devices) if "bad_inputs" in r]
    n = 2 * devices * 16 + 1
    assert errors["n"] is not None and f"n={n}" in errors["n"]
    assert errors["axis"] is not None and "'tp'" in errors["axis"]
    assert errors["scheme"] is not None and "'tree'" in errors["scheme"]
    assert errors["heads"] is not None and f"h={devices + 1}" in errors["heads"]


def test_zigzag_order_round_trip():
    import jax.numpy as jnp

    from pallas_kernels.context_parallel import from_zigzag, to_zigzag, zigzag_order

    assert zigzag_order(12, 3).tolist() == [0, 1, 10, 11, 2, 3, 8, 9, 4, 5, 6, 7]
    x = jnp.arange(24).reshape(1, 24)
    assert (from_zigzag(to_zigzag(x, 3), 3) == x).all()


if __name__ == "__main__":
    main(int(sys.argv[1]))
