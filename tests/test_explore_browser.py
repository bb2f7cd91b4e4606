"""perfmodel explore in a real browser: headless Chromium (Debian's chromium and
chromium-driver) driven by Selenium loads the page, sets its controls like a user and
checks every number shown against predict() (1e-9 relative), the n→∞ limit against
asymptotic_speedup and the sentence against conclusions().

Skips with a reason when Selenium, chromium or chromedriver is missing. Run by hand:

    apt-get install -y chromium chromium-driver && pip install -e ".[test,browser]"
    python3 -m pytest tests/test_explore_browser.py -q -s   # 12 random configs (CI)
    PERFMODEL_BROWSER_CONFIGS=30 python3 -m pytest tests/test_explore_browser.py -q -s
    python3 tests/test_explore_browser.py --screenshot docs/explore.png   # the README's picture
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from perfmodel import predict
from perfmodel.analysis.asymptotics import asymptotic_speedup
from perfmodel.errors import PerfmodelError
from perfmodel.report import explore
from perfmodel.report.conclusions import conclusions
from perfmodel.shape import Shape

ROOT = Path(__file__).resolve().parent.parent
MEASUREMENTS = [ROOT / "specs/measurements/h200-devtime-2026-11-30.json"]
CONFIGS = int(os.environ.get("PERFMODEL_BROWSER_CONFIGS", "12"))
TOLERANCE = 1e-9

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.support.ui import Select  # noqa: E402

try:  # the page's own test helpers: random configs and predict()'s numbers by column
    from test_explore import expected, predict_args, random_config, rel
except ImportError:  # run as a script
    from tests.test_explore import expected, predict_args, random_config, rel

BROWSER = next(
    (shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)),
    None,
)
DRIVER = shutil.which("chromedriver")


def start_browser():
    if BROWSER is None or DRIVER is None:
        pytest.skip(
            f"needs chromium and chromedriver on PATH (found {BROWSER}, {DRIVER}): "
            "apt-get install -y chromium chromium-driver"
        )
    options = webdriver.ChromeOptions()
    for arg in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={tempfile.mkdtemp(prefix='perfmodel-chromium-')}",
        "--window-size=1400,1450",
    ):
        options.add_argument(arg)
    options.binary_location = BROWSER
    # The driver given explicitly: Selenium Manager never tries to download one.
    return webdriver.Chrome(service=Service(DRIVER), options=options)


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    path = tmp_path_factory.mktemp("explore") / "page.html"
    explore.write_page(path, MEASUREMENTS)
    driver = start_browser()
    try:
        driver.get(path.as_uri())
        wait(driver)
        yield driver
    finally:
        driver.quit()


def wait(driver, timeout: float = 30.0) -> str:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        state = driver.execute_script("return document.body.dataset.state")
        if state in ("ready", "error"):
            return state
        time.sleep(0.05)
    raise TimeoutError("the page did not finish updating")


def set_controls(driver, cfg: dict) -> None:
    """As a user would: pick from the lists, type the numbers, tick the box."""
    Select(driver.find_element("id", "hw")).select_by_value(explore.load_hardware(cfg["hw"]).name)
    for key in ("dtype", "calibration", "naive", "mode", "kernel"):
        Select(driver.find_element("id", key)).select_by_value(cfg[key])
    for key in ("n", "kv_len", "d", "h", "h_kv", "batch", "block_q", "block_k", *BLANKABLE):
        box = driver.find_element("id", key)
        box.clear()
        if cfg.get(key) is not None:  # blank: the kernel family's own
            box.send_keys(str(cfg[key]))
    tick = driver.find_element("id", "causal")
    if tick.is_selected() != cfg["causal"]:
        tick.click()


#: Controls left blank unless a config names them.
BLANKABLE = ("warps", "splits", "page_tokens")


def shown(driver, element_id: str) -> str:
    return driver.find_element("id", element_id).get_attribute("textContent")


def shown_values(driver) -> dict[str, str]:
    """Every ``val-*`` cell's text, in one round trip."""
    return driver.execute_script(
        "const out = {}; for (const e of document.querySelectorAll('[id^=val-]')) "
        "out[e.id] = e.textContent; return out;"
    )


def check_numbers(driver, cfg: dict, p) -> float:
    cells = shown_values(driver)
    worst = 0.0
    for a in ("naive", "flash"):
        for name, want in expected(cfg, a, p).items():
            cell = cells.get(f"val-{a}-{name}")
            if want is None:  # a roof this device lacks, or no L2 level: not shown
                assert cell is None, (cfg, a, name)
                continue
            got = float(cell)
            worst = max(worst, rel(got, want))
            assert rel(got, want) <= TOLERANCE, (cfg, a, name, got, want)
        ap = getattr(p, a)
        assert cells[f"val-{a}-bound"] == ap.bound
        assert cells[f"val-{a}-binding_roof"] == ap.binding_roof
    got = float(cells["val-speedup"])
    assert rel(got, p.speedup) <= TOLERANCE
    return max(worst, rel(got, p.speedup))


def shape_of(cfg: dict) -> Shape:
    keys = ("d", "h", "h_kv", "batch", "dtype", "causal", "block_q", "block_k")
    kernel = explore.auto_kernel(None)["kernel"] if cfg["kernel"] == "auto" else cfg["kernel"]
    return Shape(**{k: cfg[k] for k in keys}, kernel=kernel)


def test_page_loads_offline_and_shows_predict(page):
    assert shown(page, "error") == ""
    p = predict(n=4096, hw="h200")
    assert rel(float(shown(page, "val-flash-time_s")), p.flash.time_s) <= TOLERANCE
    assert shown(page, "conclusion") == conclusions("h200").headline()
    logs = [e for e in page.get_log("browser") if e["level"] == "SEVERE"]
    assert logs == []


def test_random_configs_equal_predict(page):
    rng = random.Random(2026)
    checked = errors = headlines = limits = 0
    worst = 0.0
    timing = {"browser": 0.0, "python": 0.0}
    while checked < CONFIGS:
        cfg = random_config(rng)
        if cfg["kv_len"] != cfg["n"] and rng.random() < 0.7:
            cfg["kv_len"] = cfg["n"]
        t0 = time.monotonic()
        set_controls(page, cfg)
        state = wait(page)
        timing["browser"] += time.monotonic() - t0
        try:
            p = predict(**predict_args(cfg))
        except PerfmodelError as e:
            assert state == "error" and shown(page, "error") == str(e), cfg
            errors += 1
            continue
        assert state == "ready" and shown(page, "error") == "", (cfg, shown(page, "error"))
        worst = max(worst, check_numbers(page, cfg, p))
        plain = (cfg["mode"], cfg["naive"], cfg["calibration"]) == ("forward", "minimal", "default")
        plain = plain and all(cfg.get(k) is None for k in BLANKABLE)
        if plain and cfg["kv_len"] == cfg["n"]:
            t0 = time.monotonic()
            lim = asymptotic_speedup(cfg["hw"], shape=shape_of(cfg)).value
            assert rel(float(shown(page, "val-asymptote")), lim) <= TOLERANCE
            limits += 1
            if headlines < 3:
                want = conclusions(cfg["hw"], shape_of(cfg)).headline()
                assert shown(page, "conclusion") == want
                headlines += 1
            timing["python"] += time.monotonic() - t0
        checked += 1
    print(
        f"\n{checked} random configs equal predict() (max relative error {worst:.2e}); "
        f"{errors} refused with predict()'s message; {limits} n→∞ limits, {headlines} "
        f"sentences; seconds {timing}"
    )


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--screenshot", required=True, help="PNG to write")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "page.html"
        explore.write_page(path, MEASUREMENTS)
        driver = start_browser()
        try:
            driver.get(path.as_uri())
            wait(driver)
            set_controls(
                driver,
                dict(
                    hw="h200",
                    dtype="bf16",
                    calibration="default",
                    naive="minimal",
                    mode="forward",
                    n=16384,
                    kv_len=16384,
                    d=128,
                    h=16,
                    h_kv=16,
                    batch=1,
                    block_q=None,  # the kernel family's tile
                    block_k=None,
                    causal=False,
                    kernel="auto",
                ),
            )
            wait(driver)
            driver.save_screenshot(args.screenshot)
        finally:
            driver.quit()
    print(f"wrote {args.screenshot}")
