"""perfmodel explore: the page's program equals predict(), and the page knows predict()'s
arguments. The same program runs in a browser in tests/test_explore_browser.py."""

from __future__ import annotations

import random

import pytest

from perfmodel import predict
from perfmodel.catalog.hardware import known_names, load_hardware
from perfmodel.errors import PerfmodelError
from perfmodel.evaluate import shape_values
from perfmodel.prediction import calibration_profiles
from perfmodel.report import explore

ROOF_COLUMNS = {f"t_{r}_s": r for r in explore.ROOFS}


def random_config(rng: random.Random) -> dict:
    """A random predict() call over every control of the page."""
    hw = rng.choice(known_names())
    spec = load_hardware(hw)
    h_kv = rng.choice([1, 2, 4, 8])
    causal = rng.random() < 0.5
    n = rng.choice([rng.randint(1, 300), rng.randint(300, 70_000)])
    profiles = list(explore.profile_names(spec))
    cfg = dict(
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
        kernel=rng.choice(["auto", "auto", *explore.flash_families()]),
    )
    if rng.random() < 0.5:  # the family's own tiles
        cfg["block_q"] = cfg["block_k"] = None
    if rng.random() < 0.2:
        cfg["warps"] = rng.choice([4, 8])
    if rng.random() < 0.2:
        cfg["splits"] = rng.choice([1, 2, 3, 8])
    if rng.random() < 0.2 and not causal:
        cfg["page_tokens"] = rng.choice([16, 64, 256])
    return cfg


def predict_args(cfg: dict) -> dict:
    out = {**cfg, "calibration": None if cfg["calibration"] == "default" else cfg["calibration"]}
    return out | {"kernel": None if cfg["kernel"] == "auto" else cfg["kernel"]}


def expected(cfg: dict, algorithm: str, p) -> dict:
    """predict()'s numbers under the page's column names."""
    a = getattr(p, algorithm)
    out = {}
    for name in explore.columns():
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

    shown = set(explore.columns())
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
    """The straight-line program the page runs (here printed to Python), through the
    page's steps (explore.page_columns), against predict()."""
    rng = random.Random(17)
    checked, refused, worst = 0, 0, 0.0
    while checked < 120:
        cfg = random_config(rng)
        try:
            p = predict(**predict_args(cfg))
        except PerfmodelError as e:  # the page refuses it with the same words
            with pytest.raises(PerfmodelError) as page_error:
                explore.page_columns(cfg)
            assert str(page_error.value) == str(e)
            refused += 1
            continue
        got_all = explore.page_columns(cfg)
        for a in ("naive", "flash"):
            got = got_all[a]
            for name, want in expected(cfg, a, p).items():
                if want is None:  # a roof the device lacks, no L2 level, no call latency
                    value = got.get(name)
                    absent = value is None or value != value or value == 0.0
                    assert absent or name == "l2_bytes", (cfg, a, name, value)
                    continue
                worst = max(worst, rel(got[name], want))
                assert rel(got[name], want) <= 1e-9, (cfg, a, name, got[name], want)
        checked += 1
    print(f"\n{checked} random configs: largest relative error {worst:.2e}; {refused} refused")
    assert worst <= 1e-9


@pytest.mark.parametrize("kernel", ["fa2", "fa3"])
def test_asymptote_expression_equals_asymptotic_speedup(kernel):
    from perfmodel.analysis.asymptotics import asymptotic_speedup
    from perfmodel.catalog.kernels import load_kernel
    from perfmodel.kernel_config import resolve
    from perfmodel.onchip import effective_overlap
    from perfmodel.shape import Shape

    spec = load_hardware("h200")
    code = explore.asymptote_expressions("h200")
    shape = Shape(h=16, dtype="bf16", causal=True, block_q=64, kernel=kernel)
    want = asymptotic_speedup(spec, shape=shape).value
    family = load_kernel(kernel)
    profiles = calibration_profiles(None, spec, family)
    sizes = dict(n=4096, m=4096, d=128, h=16, h_kv=16, b=1, s=2)
    config = resolve(family, spec, **sizes, causal=True, block_q=64)
    env = {}
    for a in ("naive", "flash"):
        inputs = explore.device_inputs(spec, "bf16", profiles[a])
        blocks = config.blocks_per_sm if a == "flash" else 1
        env[f"overlap_{a}"] = effective_overlap(inputs["compute_overlap"], blocks)
        env |= {f"R_{a}_{r}": inputs[f"rate_{r}"] * inputs[f"eff_{r}"] for r in explore.ROOFS}
    env |= shape_values(spec, **sizes, block_q=64, block_k=config.block_k)
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


def test_page_launch_equals_kernel_config_resolve():
    """page.js's copy of kernel_config.resolve (tiles, on-chip fit, GQA packing, splits),
    run by Node.js, against resolve() on random shapes: same launch or same error."""
    import json
    import shutil
    import subprocess
    from pathlib import Path

    from perfmodel.catalog.kernels import load_kernel
    from perfmodel.evaluate import onchip_of
    from perfmodel.kernel_config import resolve
    from perfmodel.vocabulary import bytes_per_element

    node = shutil.which("node")
    if node is None:
        pytest.skip("needs Node.js on PATH to run page.js's launch code")
    script = (Path(explore.__file__).parent / "explore_page" / "page.js").read_text()
    start = script.index("// --- the kernel family's launch")
    code = script[start : script.index("// --- evaluation", start)]
    rng = random.Random(10)
    cases, want = [], []
    for i in range(1500):
        cfg = random_config(rng)
        if i % 3 == 0:  # short queries, where packing and split-KV decide
            cfg["n"] = rng.choice([1, 1, 2, 16, 64, 200])
            cfg["kv_len"] = cfg["n"] if cfg["causal"] else rng.randint(1, 70_000)
        spec = load_hardware(cfg["hw"])
        family = explore.flash_families()[rng.randrange(len(explore.flash_families()))]
        st = {k: cfg.get(k) for k in ("d", "causal", "dtype", "block_q", "block_k", "warps")}
        sizes = dict(n=cfg["n"], m=cfg["kv_len"], h=cfg["h"], b=cfg["batch"])
        cases.append(dict(st=st, hw=spec.name, family=family, h_kv=cfg["h_kv"], **sizes))
        try:
            c = resolve(
                load_kernel(family),
                spec,
                **sizes,
                d=cfg["d"],
                h_kv=cfg["h_kv"],
                s=bytes_per_element(cfg["dtype"]),
                causal=cfg["causal"],
                block_q=cfg["block_q"],
                block_k=cfg["block_k"],
                warps=cfg.get("warps"),
            )
        except PerfmodelError as e:
            want.append({"error": str(e)})
            continue
        on = onchip_of(c)
        want.append(
            dict(
                block_q=c.block_q,
                block_k=c.block_k,
                warps=c.warps,
                blocks_per_sm=c.blocks_per_sm,
                spill_bytes_per_tile=on.spill_bytes_per_tile,
                bytes_in_flight=on.bytes_in_flight,
                pack=c.pack,
                splits=c.splits,
            )
        )
    data = {"devices": explore.device_table(), "families": explore.family_table()}
    driver = """
const out = [];
for (const c of CASES) {
  const dev = DATA.devices[c.hw], fam = DATA.families[c.family];
  const st = Object.assign({}, c.st, { h: c.h });
  try {
    const l = launchTiles(st, dev, fam);
    const pack = gqaPack(fam.gqa_packing, c.n, c.h / c.h_kv, l.block_q);
    out.push({ block_q: l.block_q, block_k: l.block_k, warps: l.warps,
      blocks_per_sm: l.blocks_per_sm, spill_bytes_per_tile: l.onchip.spill_bytes_per_tile,
      bytes_in_flight: l.onchip.bytes_in_flight, pack: pack,
      splits: kvSplits(fam, dev, c.n, c.m, c.st.d, c.h, pack, c.b, l.block_q) });
  } catch (e) { out.push({ error: e.message }); }
}
console.log(JSON.stringify(out));
"""
    source = (
        f"const DATA = {json.dumps(data)};\nconst CASES = {json.dumps(cases)};\n{code}\n{driver}"
    )
    run = subprocess.run([node], input=source, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout)
    errors = sum("error" in w for w in want)
    assert 0 < errors < len(want)
    for case, g, w in zip(cases, got, want, strict=True):
        assert g.keys() == w.keys(), (case, g, w)
        for k, v in w.items():
            assert g[k] == (v if isinstance(v, str) else float(v)), (case, k, g[k], v)
