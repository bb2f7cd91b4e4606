"""perfmodel explore: the page's tables, read by its own table reader (tables.js, run by
Node.js), equal predict() at every grid point bit for bit, an n between grid points is
shown at the nearest one, and the page knows predict()'s arguments. The same page runs in a
browser in tests/test_explore_browser.py; its server is tested at the end."""

from __future__ import annotations

import functools
import json
import math
import random
import re
import shutil
import subprocess
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from perfmodel import predict
from perfmodel.costs.masks import PrefixLM
from perfmodel.errors import PerfmodelError
from perfmodel.report import explore
from perfmodel.report.explore_grid import Grid
from perfmodel.results import AlgorithmPrediction

ROOT = Path(__file__).resolve().parent.parent
MEASUREMENTS = [ROOT / "specs/measurements/h200-devtime-2026-11-30.json"]
#: A small grid (three devices, one with calibration profiles, one without an L2 level or
#: fp16) that the tests build once per process.
GRID = Grid(
    hw=("h200", "a100", "tpu-v5p"),
    dtypes=("fp16", "bf16", "fp8"),
    d=(64, 128, 256),
    heads=((1, 1), (32, 8)),
    batch=(1, 4),
    windows=(None,),
    documents=(None,),
    prefixes=(None,),
)
#: The window control and the mask picker on a smaller grid (each mask is another table
#: row for every setting: the product of the grid times the masks).
MASK_GRID = Grid(
    hw=("h200",),
    dtypes=("bf16",),
    d=(128,),
    heads=((1, 1), (32, 8)),
    batch=(1,),
    windows=(None, 255, 4095),
    documents=(None, 2048),
    prefixes=(None, 1024),
    steps_per_octave=1,
)
#: Launch facts the flash side reports in predict()'s config rather than its columns.
CONFIG_COLUMNS = ("block_q", "block_k", "splits", "pack")


@functools.cache
def page_data() -> dict:
    """The test grid's data (built once: both test modules use it)."""
    return explore.build_data(GRID, MEASUREMENTS)


@functools.cache
def mask_page_data() -> dict:
    """The mask grid's data (built once)."""
    return explore.build_data(MASK_GRID)


def random_config(rng: random.Random, data: dict) -> dict:
    """A random setting of the page's controls (``n`` a grid point)."""
    hw = rng.choice(list(data["devices"]))
    dev = data["devices"][hw]
    h, h_kv = rng.choice(data["axes"]["heads"])
    return dict(
        n=rng.choice(data["n"]),
        hw=hw,
        d=rng.choice(data["axes"]["d"]),
        h=h,
        h_kv=h_kv,
        batch=rng.choice(data["axes"]["batch"]),
        dtype=rng.choice(dev["dtypes"]),
        causal=rng.random() < 0.5,
        calibration=rng.choice(dev["calibrations"]),
        naive=rng.choice(data["naive"]),
        mode=rng.choice(data["modes"]),
        kernel=rng.choice(["auto", "auto", *data["kernels"]]),
        window=rng.choice(data["axes"]["window"]),
        documents=rng.choice(data["axes"]["documents"]),
        prefix_lm=rng.choice(data["axes"]["prefix_lm"]),
    )


def predict_args(cfg: dict) -> dict:
    skip = ("calibration", "kernel", "documents", "prefix_lm")
    out = {k: v for k, v in cfg.items() if k not in skip}
    out["calibration"] = None if cfg["calibration"] == "default" else cfg["calibration"]
    out["segments"] = cfg.get("documents")  # the mask picker: documents of L tokens
    if cfg.get("prefix_lm") is not None:  # the block-mask picker: attention-gym's prefix LM
        out["block_mask"] = PrefixLM(cfg["prefix_lm"])
    if cfg["dtype"] == "fp8 as run":  # the dtype select's FP8 as the family runs it
        out |= dict(dtype="fp8", fp8_as_run=True)
    return out | {"kernel": None if cfg["kernel"] == "auto" else cfg["kernel"]}


def expected(data: dict, side: str, p) -> dict:
    """predict()'s numbers under the page's column names (None: not reported there).
    sweep() reports the launch's pack and splits for a forward launch only."""
    a = getattr(p, side)
    out = {}
    for name in data["columns"][side]:
        roof = name[2:-2] if name.startswith("t_") and name.endswith("_s") else None
        effect = name[7:-2] if name.startswith("effect_") and name.endswith("_s") else None
        if name in AlgorithmPrediction.model_fields:
            out[name] = getattr(a, name)
        elif roof in explore.ROOF_NAMES:
            out[name] = a.roof_times_s.get(roof)
        elif effect is not None:  # the estimate's named effects, one column each
            out[name] = a.effects_s.get(effect)
        elif side == "flash" and name in CONFIG_COLUMNS:
            if p.config.mode != "forward" and name in ("pack", "splits"):
                continue
            out[name] = float(getattr(p.config, name))
    return out


def run_tables(data: dict, cases: list[dict]) -> list[dict]:
    """tables.js's ``Tables.at`` for each case, in Node.js (values as exact floats)."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("needs Node.js on PATH to run the page's table reader")
    driver = """
(async () => {
  const t = await Tables.open(DATA);
  const out = [];
  for (const c of CASES) {
    try { out.push(Tables.at(t, c, c.n)); } catch (e) { out.push({ error: e.message }); }
  }
  process.stdout.write(JSON.stringify(out));
})().catch((e) => { console.error(e); process.exit(1); });
"""
    source = "\n".join(
        [
            (explore.ASSETS / "tables.js").read_text(),
            f"const DATA = {json.dumps(data)};",
            f"const CASES = {json.dumps(cases)};",
            driver,
        ]
    )
    run = subprocess.run([node], input=source, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout)


def same(got, want) -> bool:
    """Bit-equal floats (None: NaN or absent on the page), equal flags and labels."""
    if want is None:
        return got is None
    if isinstance(want, bool):
        return got is want
    if isinstance(want, float):
        return isinstance(got, int | float) and not isinstance(got, bool) and float(got) == want
    return got == want


def rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-300)


def test_page_has_a_control_for_every_predict_argument():
    assert explore.check_controls() == []


def test_page_shows_every_column_predict_reports():
    """A column added to AlgorithmPrediction must reach the page (or be listed here)."""
    data = page_data()
    shown = set(data["columns"]["naive"]) | set(data["columns"]["flash"])
    # bound/binding_roof are shown as labels; roof_times_s as the t_<roof>_s columns,
    # effects_s as the effect_<name>_s columns; calibration is the control.
    # call_latency_s: sweep() does not report it.
    derived = {"roof_times_s", "effects_s", "calibration"}
    not_in_sweep = {"call_latency_s"}
    missing = set(AlgorithmPrediction.model_fields) - derived - shown
    assert missing == not_in_sweep


@pytest.mark.parametrize(
    "split", [dict(cp=2), dict(tp=2), dict(cp=2, cp_scheme="allgather"), dict(cp=4, tp=2)]
)
def test_arguments_left_out_leave_naive_and_flash_as_they_are(split):
    assert set(split) <= set(explore.NOT_SHOWN)
    base = predict(n=16384, hw="h200", h=16, dtype="bf16")
    other = predict(n=16384, hw="h200", h=16, dtype="bf16", **split)
    assert other.parallel is not None
    assert other.naive == base.naive and other.flash == base.flash


def test_page_equals_predict_at_grid_points():
    """Every column of both sides and the speedup, bit for bit, on random settings; a
    setting predict() refuses shows predict()'s message."""
    data = page_data()
    rng = random.Random(17)
    cases = [random_config(rng, data) for _ in range(400)]
    equal, refused, columns = check_against_predict(data, cases)
    checked = len(equal)
    print(f"\n{checked} settings equal predict() bit for bit ({columns} values), {refused} refused")
    assert checked > 200 and refused > 0


def check_against_predict(data: dict, cases: list[dict]) -> tuple[list[dict], int, int]:
    """tables.js at each case against predict(): every column of both sides and the
    speedup bit for bit, a refused setting with predict()'s message. Returns the cases
    checked, how many were refused and how many values were compared."""
    equal, refused, columns = [], 0, 0
    for cfg, got in zip(cases, run_tables(data, cases), strict=True):
        try:
            p = predict(**predict_args(cfg))
        except PerfmodelError as e:
            assert got == {"error": str(e)}, cfg
            refused += 1
            continue
        assert "error" not in got, (cfg, got)
        assert got["shown_n"] == cfg["n"], cfg
        for side in ("naive", "flash"):
            for name, want in expected(data, side, p).items():
                assert same(got[side][name], want), (cfg, side, name, got[side][name], want)
                columns += 1
        assert got["speedup"] == p.speedup, cfg
        equal.append(cfg)
    return equal, refused, columns


def test_window_control_and_mask_picker_equal_predict_at_grid_points():
    """The page's windows, documents of L tokens and prefix-LM block masks: every column
    of both sides, bit for bit, against predict(window=W, segments=L,
    block_mask=PrefixLM(P)), every mode and kernel family."""
    data = mask_page_data()
    assert data["axes"]["window"] == [None, 255, 4095]
    assert data["axes"]["documents"] == [None, 2048]
    assert data["axes"]["prefix_lm"] == [None, 1024]
    rng = random.Random(23)
    cases = [random_config(rng, data) for _ in range(400)]
    equal, refused, columns = check_against_predict(data, cases)
    masked = {(cfg["window"], cfg["documents"], cfg["prefix_lm"], cfg["mode"]) for cfg in equal}
    print(f"\n{len(equal)} masked settings equal predict() ({columns} values), {refused} refused")
    assert len(equal) > 200 and len(masked) == 3 * 2 * 2 * 3  # every mask in every mode
    # the prefix LM narrows the work: about half the scores at n = 65536, prefix 1024
    cfg = cases[0] | dict(n=2**16, d=128, h=32, h_kv=8, causal=False, mode="forward")
    cfg |= dict(calibration="default", kernel="fa2", window=None, documents=None, prefix_lm=1024)
    lm, dense = run_tables(data, [cfg, cfg | {"prefix_lm": None}])
    assert 0.45 < lm["flash"]["matmul_flops"] / dense["flash"]["matmul_flops"] < 0.55
    # a window narrows the work: the same setting without one computes more scores
    cfg = cases[0] | dict(n=2**16, d=128, h=32, h_kv=8, causal=True, mode="forward")
    cfg |= dict(calibration="default", kernel="fa2", window=255, documents=None)
    narrow, wide = run_tables(data, [cfg, cfg | {"window": None}])
    assert narrow["flash"]["matmul_flops"] < wide["flash"]["matmul_flops"] / 50


def test_fp8_as_run_is_a_dtype_choice_equal_to_predict():
    """The dtype select's "fp8 as run" on a device with FP8: predict(dtype="fp8",
    fp8_as_run=True) bit for bit (settings drawn from that choice), and for a family
    with an FP8 kernel (fa3: P in FP8, O in BF16) other numbers than the plain FP8 model."""
    data = page_data()
    assert data["devices"]["H200 SXM"]["dtypes"][-2:] == ["fp8", "fp8 as run"]
    assert "fp8 as run" not in data["devices"]["A100 SXM 80GB"]["dtypes"]  # no FP8 peak
    rng = random.Random(29)
    cases = [random_config(rng, data) | dict(hw="H200 SXM", dtype="fp8 as run") for _ in range(80)]
    equal, _, _ = check_against_predict(data, cases)
    assert len(equal) > 30
    cfg = cases[0] | dict(n=8192, mode="forward", kernel="fa3", calibration="default")
    as_run, plain = run_tables(data, [cfg, cfg | {"dtype": "fp8"}])
    assert as_run["flash"]["hbm_bytes"] > plain["flash"]["hbm_bytes"]  # O written in BF16


def test_between_grid_points_the_nearest_point_is_shown():
    """An n off the grid shows the nearest grid point's numbers (in log n), exactly as
    at that point, and says which point; never an interpolated value."""
    data = page_data()
    ns = data["n"]
    rng = random.Random(5)
    cases, nearest = [], []
    while len(nearest) < 240:
        cfg = random_config(rng, data)
        i = rng.randrange(len(ns) - 1)
        if ns[i + 1] - ns[i] < 2:
            continue
        n = rng.randint(ns[i] + 1, ns[i + 1] - 1)
        near = ns[i] if math.log(n / ns[i]) <= math.log(ns[i + 1] / n) else ns[i + 1]
        cases += [cfg | {"n": n}, cfg | {"n": near}]
        nearest.append(near)
    got = run_tables(data, cases)
    shown = 0
    for k, near in enumerate(nearest):
        off, at = got[2 * k], got[2 * k + 1]
        assert off == at if "error" in at else off == at | {"shown_n": near}
        shown += "error" not in at
    assert shown > 150
    assert run_tables(data, [cases[0] | {"n": 2**21}])[0]["error"].startswith(
        "n=2097152 is outside"
    )


def test_grid_n_has_powers_of_two_and_the_reference():
    for k in (1, 2, 3, 4, 8):
        ns = Grid(steps_per_octave=k).n()
        assert ns[0] == 1 and ns[-1] == 2**20 and ns == sorted(set(ns))
        assert all(2**e in ns for e in range(21)) and explore.N_REFERENCE in ns


@pytest.mark.parametrize(
    "grid, message",
    [
        (Grid(d=(0,)), "d=[0] must be positive integers"),
        (Grid(batch=()), "batch=[] must be positive integers"),
        (Grid(heads=((8, 3),)), "heads=[(8, 3)] must be (h, h_kv) pairs"),
        (Grid(steps_per_octave=0), "steps_per_octave=0 must be in 1..64"),
        (Grid(dtypes=("fp17",)), "dtypes=['fp17'] must be among"),
        (Grid(hw=("nope",)), "nope"),
        (Grid(windows=(1023,)), "windows=[1023] must be positive integers and None"),
        (Grid(documents=(None, 0)), "documents=[None, 0] must be positive integers"),
    ],
)
def test_bad_grid_is_one_error(grid, message):
    with pytest.raises(PerfmodelError, match=re.escape(message)):
        grid.check()


def test_no_model_rule_in_the_page_scripts():
    """Issue 25: the page once copied these rules into JavaScript; none is defined there
    (the scripts define display and table lookup only)."""
    copied = (
        "tile_for|tileFor|_block|block_of|footprint|capacity|gqa_pack|gqaPack|kv_splits|"
        "kvSplits|wave_efficiency|waveEfficiency|call_latency|callLatency|forward_then_backward|"
        "forwardThenBackward|launchTiles|runFlash|values|model|evaluate"
    )
    for script in explore.SCRIPTS:
        text = (explore.ASSETS / script).read_text()
        defined = re.findall(r"function\s+(\w+)", text)
        assert not [f for f in defined if re.fullmatch(copied, f, flags=re.I)], script
        assert "MODELS" not in text, script  # the old page's printed cost models


def test_cli_writes_one_offline_page(tmp_path, capsys):
    from perfmodel.cli import main

    out = tmp_path / "page.html"
    args = ["explore", "--out", str(out), "--hw", "h200", "--d", "128", "--heads", "1"]
    assert main([*args, "--dtype", "fp16", "--steps-per-octave", "1"]) == 0
    said = capsys.readouterr().out
    assert re.fullmatch(
        rf"wrote {re.escape(str(out))} \([\d.]+ [kM]B: [\d,]+ column vectors of 21 n, [\d,]+ table "
        r"rows, 1 device\)\n",
        said,
    ), said
    text = out.read_text()
    assert "const DATA" in text and "Tables.open(DATA)" in text
    # offline: nothing loaded from elsewhere (the SVG namespace is a name, not a fetch)
    assert "<script src" not in text and "<link" not in text and "https:" not in text
    assert main(["explore", "--out", str(tmp_path), "--measurements", "nope.json"]) == 2
    assert main(["explore", "--out", str(out), "--heads", "8:3"]) == 2
    assert "--heads '8:3' must be H or H:H_KV" in capsys.readouterr().err


def test_cli_takes_the_window_control_and_mask_picker_values(tmp_path, capsys):
    from perfmodel.cli import main

    out = tmp_path / "page.html"
    args = ["explore", "--out", str(out), "--hw", "h200", "--d", "128", "--heads", "1"]
    small = [*args, "--dtype", "bf16", "--steps-per-octave", "1"]
    argv = [*small, "--windows", "255", "none", "--documents", "none", "--prefix-lm", "none"]
    assert main(argv) == 0
    text = out.read_text()
    assert '"window": [null, 255]' in text and '"documents": [null]' in text
    assert '"prefix_lm": [null]' in text
    # a page built from the command line holds predict()'s messages, spelled as the API
    # (its controls are not the command's options)
    assert main(["explore", "--out", str(out), "--hw", "tpu-v5p", *small[5:]]) == 0
    assert "kernel=None on TPU v5p" in out.read_text()
    capsys.readouterr()
    assert main([*small, "--windows", "-4"]) == 2
    assert "--windows '-4' must be positive integers (or none)" in capsys.readouterr().err
    assert main([*small, "--documents", "1k"]) == 2
    assert "--documents '1k' must be positive integers" in capsys.readouterr().err


# --- the server (perfmodel explore --serve) ----------------------------------------------
@pytest.fixture
def served(tmp_path):
    from perfmodel.commands.explore import page_server

    folder = tmp_path / "out"
    folder.mkdir()
    page = folder / "explore.html"
    page.write_text("<!doctype html><title>page</title>")
    (folder / "other.txt").write_text("not for the server")
    (tmp_path / "secret.txt").write_text("outside the folder")
    server = page_server(page)  # loopback, any free port
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server, page
    finally:
        server.shutdown()
        server.server_close()


def _get(server, path: str, method: str = "GET") -> tuple[int, bytes]:
    host, port = server.server_address[:2]
    req = urllib.request.Request(f"http://{host}:{port}{path}", method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, b""


def _raw(server, line: bytes) -> bytes:
    """A request line sent as is (no client normalises the path)."""
    import socket

    with socket.create_connection(server.server_address[:2], timeout=10) as s:
        s.sendall(line + b"\r\nHost: x\r\n\r\n")
        answer = b""
        while chunk := s.recv(4096):  # to the end: the server closes after one answer
            answer += chunk
        return answer


def test_server_listens_on_loopback_and_serves_the_page(served):
    server, page = served
    assert server.server_address[0] == "127.0.0.1"
    for path in ("/", f"/{page.name}"):
        assert _get(server, path) == (200, page.read_bytes())
    assert _get(server, f"/{page.name}", "HEAD") == (200, b"")


@pytest.mark.parametrize(
    "path",
    [
        "/other.txt",  # another file in the page's folder
        "/../secret.txt",
        "/%2e%2e/secret.txt",
        "/..%2fsecret.txt",
        "//etc/passwd",
        "/etc/passwd",
        "/explore.html/",
        "/explore.html?x=1",
        "/EXPLORE.HTML",
        "/explore.html%00",
    ],
)
def test_server_refuses_every_other_path(served, path):
    server, _ = served
    assert _get(server, path)[0] == 404


@pytest.mark.parametrize(
    "line", [b"GET ../secret.txt HTTP/1.0", b"GET /../../secret.txt HTTP/1.0", b"GET * HTTP/1.0"]
)
def test_server_refuses_raw_traversal(served, line):
    server, _ = served
    assert _raw(server, line).startswith(b"HTTP/1.0 404")


def test_server_refuses_other_methods(served):
    server, page = served
    assert _get(server, f"/{page.name}", "POST")[0] == 501
    assert _get(server, f"/{page.name}", "PUT")[0] == 501


def test_serve_says_where_it_listens(tmp_path, capsys, monkeypatch):
    import http.server
    import webbrowser

    from perfmodel.cli import main

    opened = []
    monkeypatch.setattr(webbrowser, "open", opened.append)

    def stop(self, *a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(http.server.ThreadingHTTPServer, "serve_forever", stop)
    out = tmp_path / "p.html"
    args = ["explore", "--out", str(out), "--hw", "h200", "--d", "128", "--heads", "1"]
    assert (
        main([*args, "--dtype", "fp16", "--steps-per-octave", "1", "--serve", "--port", "0"]) == 0
    )
    printed = capsys.readouterr().out.splitlines()[-1]
    match = re.fullmatch(
        r"serving (http://127\.0\.0\.1:(\d+)/p\.html) \(this page only; .*\)", printed
    )
    assert match and int(match[2]) > 0 and opened == [match[1]]
    assert main([*args, "--serve", "--port", "70000"]) == 2
