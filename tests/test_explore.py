"""perfmodel explore: the page's program equals predict(), and the page knows predict()'s
arguments. The same program runs in a browser in tests/test_explore_browser.py."""

from __future__ import annotations

import random

import pytest

from perfmodel import predict
from perfmodel.catalog.hardware import known_names, load_hardware
from perfmodel.errors import PerfmodelError
from perfmodel.evaluate import model_key, shape_values
from perfmodel.prediction import calibration_profiles
from perfmodel.report import explore
from perfmodel.vocabulary import bytes_per_element

ROOF_COLUMNS = {f"t_{r}_s": r for r in explore.ROOFS}


def random_config(rng: random.Random) -> dict:
    """A random predict() call over every control of the page."""
    hw = rng.choice(known_names())
    spec = load_hardware(hw)
    h_kv = rng.choice([1, 2, 4, 8])
    causal = rng.random() < 0.5
    n = rng.choice([rng.randint(1, 300), rng.randint(300, 70_000)])
    profiles = list(explore.profile_names(spec))
    return dict(
        n=n,
        hw=hw,
        d=rng.choice([32, 64, 80, 128, 256]),
        h=h_kv * rng.choice([1, 2, 4]),
        h_kv=h_kv,
        batch=rng.randint(1, 16),
        dtype=rng.choice(explore.dtypes(spec)),
        causal=causal,
        block_q=rng.choice([16, 32, 64, 128]),
        block_k=rng.choice([16, 32, 64, 128]),
        kv_len=n if causal or rng.random() < 0.5 else rng.randint(1, 70_000),
        calibration=rng.choice(profiles),
        naive=rng.choice(["minimal", "xla"]),
        mode=rng.choice(["forward", "backward", "train"]),
    )


def predict_args(cfg: dict) -> dict:
    return {**cfg, "calibration": None if cfg["calibration"] == "default" else cfg["calibration"]}


def expected(cfg: dict, algorithm: str, p) -> dict:
    """predict()'s numbers under the page's column names."""
    a = getattr(p, algorithm)
    out = {}
    for name in explore.program(model_key(algorithm), False, True).outputs:
        if name in ROOF_COLUMNS:
            out[name] = a.roof_times_s.get(ROOF_COLUMNS[name])
        elif name == "bound_compute":
            out[name] = 1.0 if a.bound == "compute" else 0.0
        elif name == "fits_memory":
            out[name] = float(a.fits_memory)
        else:
            out[name] = getattr(a, name)
    return out


def rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-300)


def test_page_has_a_control_for_every_predict_argument():
    assert explore.check_controls() == []


def test_page_shows_every_column_predict_reports():
    """A column added to AlgorithmPrediction must reach the page (or be listed here)."""
    from perfmodel.results import AlgorithmPrediction

    shown = set(explore.program("flash", False, True).outputs)
    # bound and binding_roof: the page names them from bound_compute and the t_<roof>_s
    # columns; roof_times_s: the t_<roof>_s columns; calibration: the profile control.
    derived = {"bound", "binding_roof", "roof_times_s", "calibration"}
    assert set(AlgorithmPrediction.model_fields) - derived <= shown


@pytest.mark.parametrize(
    "split", [dict(cp=2), dict(tp=2), dict(cp=2, cp_scheme="allgather"), dict(cp=4, tp=2)]
)
def test_arguments_left_out_leave_naive_and_flash_as_they_are(split):
    assert set(split) <= set(explore.NOT_SHOWN)
    base = predict(n=16384, hw="h200", h=16, dtype="bf16")
    other = predict(n=16384, hw="h200", h=16, dtype="bf16", **split)
    assert other.parallel is not None
    assert other.naive == base.naive and other.flash == base.flash


def test_program_equals_predict_on_random_configs():
    """The straight-line program the page runs (here printed to Python) against predict()."""
    rng = random.Random(17)
    checked, worst = 0, 0.0
    while checked < 120:
        cfg = random_config(rng)
        try:
            p = predict(**predict_args(cfg))
        except PerfmodelError:
            continue
        spec = load_hardware(cfg["hw"])
        profiles = calibration_profiles(predict_args(cfg)["calibration"], spec)
        shape = dict(
            n=cfg["n"],
            m=cfg["kv_len"],
            d=cfg["d"],
            h=cfg["h"],
            h_kv=cfg["h_kv"],
            b=cfg["batch"],
            block_q=cfg["block_q"],
            block_k=cfg["block_k"],
        )
        values = shape_values(spec, s=bytes_per_element(cfg["dtype"]), **shape)
        for a in ("naive", "flash"):
            key = model_key(a, cfg["naive"], cfg["mode"])
            inputs = explore.device_inputs(spec, cfg["dtype"], profiles[a])
            got = explore.evaluate_program(key, cfg["causal"], spec, values, inputs)
            for name, want in expected(cfg, a, p).items():
                if want is None:  # a roof the device lacks, or no L2 level
                    assert name == "l2_bytes" or got[name] == 0.0, (cfg, a, name)
                    continue
                worst = max(worst, rel(got[name], want))
                assert rel(got[name], want) <= 1e-9, (cfg, a, name, got[name], want)
        checked += 1
    print(f"\n{checked} random configs: largest relative error {worst:.2e}")
    assert worst <= 1e-9


def test_asymptote_expression_equals_asymptotic_speedup():
    from perfmodel.analysis.asymptotics import RATE, Shape, asymptotic_speedup

    spec = load_hardware("h200")
    code = explore.asymptote_expressions("h200")
    shape = Shape(h=16, dtype="bf16", causal=True, block_q=64)
    want = asymptotic_speedup(spec, shape=shape).value
    inputs = explore.device_inputs(spec, "bf16", calibration_profiles(None, spec)["flash"])
    env = {f"R_{r}": inputs[f"rate_{r}"] * inputs[f"eff_{r}"] for r in RATE}
    env |= shape_values(spec, d=128, h=16, h_kv=16, b=1, s=2, block_q=64, block_k=128)
    expr = code["1"]
    got = float(expr.subs({x: env[str(x)] for x in expr.free_symbols}))
    assert rel(got, want) <= 1e-12


def test_cli_writes_one_offline_page(tmp_path, capsys):
    from perfmodel.cli import main

    out = tmp_path / "page.html"
    assert main(["explore", "--out", str(out)]) == 0
    text = out.read_text()
    assert "const MODELS" in text and "const DATA" in text
    # offline: nothing loaded from elsewhere (the SVG namespace is a name, not a fetch)
    assert "<script src" not in text and "<link" not in text and "https:" not in text
    assert main(["explore", "--out", str(tmp_path), "--measurements", "nope.json"]) == 2
