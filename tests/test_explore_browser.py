"""perfmodel explore in a real browser: headless Chromium (Debian's chromium and
chromium-driver) driven by Selenium loads the page, sets its controls like a user and
checks every number shown against predict() bit for bit (at grid points; an n between
them is shown at the nearest), the n→∞ limit and the sentence against conclusions().

Skips with a reason when Selenium, chromium or chromedriver is missing. Run by hand:

    apt-get install -y chromium chromium-driver && pip install -e ".[test,browser]"
    python3 -m pytest tests/test_explore_browser.py -q -s   # 12 random configs (CI)
    PERFMODEL_BROWSER_CONFIGS=30 python3 -m pytest tests/test_explore_browser.py -q -s
    python3 tests/test_explore_browser.py --screenshot docs/explore.png   # the README's picture
    python3 tests/test_explore_browser.py --time perfmodel-explore.html   # open and update times
"""

from __future__ import annotations

import math
import os
import random
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from perfmodel import load_hardware, predict
from perfmodel.errors import PerfmodelError
from perfmodel.report import explore
from perfmodel.report.conclusions import conclusions
from perfmodel.shape import Shape

CONFIGS = int(os.environ.get("PERFMODEL_BROWSER_CONFIGS", "12"))

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.support.ui import Select  # noqa: E402

try:  # the page's own test helpers: the test grids, random settings, predict() by column
    import test_explore as helpers
except ImportError:  # run as a script
    from tests import test_explore as helpers

MEASUREMENTS, expected, same = helpers.MEASUREMENTS, helpers.expected, helpers.same
page_data, mask_page_data = helpers.page_data, helpers.mask_page_data
predict_args, random_config = helpers.predict_args, helpers.random_config

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
    yield from _open(tmp_path_factory, page_data())


@pytest.fixture(scope="module")
def mask_page(tmp_path_factory):
    """The page of the mask grid: several windows and documents of one length."""
    yield from _open(tmp_path_factory, mask_page_data())


def _open(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("explore") / "page.html"
    path.write_text(explore.page_html(data))
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
    """As a user would: pick from the lists, type n, tick the box."""
    driver.execute_script("document.body.dataset.state = 'busy'")
    Select(driver.find_element("id", "hw")).select_by_value(cfg["hw"])
    for key in ("dtype", "calibration", "naive", "mode", "kernel", "d", "batch"):
        Select(driver.find_element("id", key)).select_by_value(str(cfg[key]))
    Select(driver.find_element("id", "heads")).select_by_value(f"{cfg['h']}:{cfg['h_kv']}")
    box = driver.find_element("id", "n")
    box.clear()
    box.send_keys(str(cfg["n"]))
    tick = driver.find_element("id", "causal")
    if tick.is_selected() != cfg["causal"]:
        tick.click()
    # the window control, the mask picker and the block-mask picker
    for key in ("window", "documents", "prefix_lm"):
        choice = cfg.get(key)
        Select(driver.find_element("id", key)).select_by_value(
            "none" if choice is None else str(choice)
        )


def shown(driver, element_id: str) -> str:
    return driver.find_element("id", element_id).get_attribute("textContent")


def value(driver, element_id: str) -> float:
    """A number cell's exact value (its data-value)."""
    return float(driver.find_element("id", element_id).get_attribute("data-value"))


def shown_values(driver) -> dict[str, str]:
    """Every ``val-*`` cell's exact value (its data-value), in one round trip."""
    return driver.execute_script(
        "const out = {}; for (const e of document.querySelectorAll('[id^=val-]')) "
        "out[e.id] = e.dataset.value; return out;"
    )


def parse(text: str | None):
    """A cell's data-value as Python reads the number or label it holds."""
    if text is None or text == "NaN":
        return None
    if text in ("true", "false"):
        return text == "true"
    try:
        return float(text)
    except ValueError:
        return text


def check_numbers(driver, cfg: dict, p, data: dict | None = None) -> int:
    """Every cell equals predict() bit for bit; returns how many were compared."""
    data = data or page_data()
    cells = shown_values(driver)
    count = 0
    for a in ("naive", "flash"):
        for name, want in expected(data, a, p).items():
            got = parse(cells.get(f"val-{a}-{name}"))
            assert same(got, want), (cfg, a, name, got, want)
            count += 1
    assert float(cells["val-speedup"]) == p.speedup, cfg
    return count + 1


#: The page's opening setting but for device, dtype, n and causality: where it shows
#: the chapter's sentence and the n→∞ limit (explore.headlines).
OPENING = dict(
    mode="forward",
    naive="minimal",
    calibration="default",
    kernel="auto",
    d=128,
    h=1,
    h_kv=1,
    batch=1,
)


def opening_shape(cfg: dict) -> Shape | None:
    """The Shape conclusions() was run for where cfg is a page's opening setting."""
    if any(cfg[k] != v for k, v in OPENING.items()):
        return None
    if cfg["dtype"] != page_data()["devices"][cfg["hw"]]["opening_dtype"]:
        return None
    kernel = explore.auto_kernel(load_hardware(cfg["hw"]), None).get("kernel")
    if kernel is None:  # no default family on the device: no headline
        return None
    return Shape(dtype=cfg["dtype"], causal=cfg["causal"], kernel=kernel)


def test_page_loads_offline_and_shows_predict(page):
    assert shown(page, "error") == ""
    p = predict(n=4096, hw="h200")
    assert value(page, "val-flash-time_s") == p.flash.time_s
    assert shown(page, "conclusion") == conclusions("h200").headline()
    c = conclusions("h200")
    assert value(page, "val-asymptote") == c.asymptote.value
    logs = [e for e in page.get_log("browser") if e["level"] == "SEVERE"]
    assert logs == []


def test_random_configs_equal_predict(page):
    data = page_data()
    rng = random.Random(2026)
    checked = errors = values = headlines = off_grid = 0
    seconds = 0.0
    openings = [
        random_config(rng, data) | OPENING | dict(hw=hw, dtype=dev["opening_dtype"])
        for hw, dev in data["devices"].items()
    ]
    # one setting predict() refuses: a profile fitted for another kernel family
    openings.insert(0, openings[0] | dict(hw="H200 SXM", calibration="h200-cudnn", kernel="fa2"))
    total = CONFIGS + len(openings)
    while checked < total:
        cfg = openings.pop() if openings else random_config(rng, data)
        if checked % 4 == 3:  # an n between grid points: shown at the nearest
            i = data["n"].index(cfg["n"])
            if i > 0 and data["n"][i] - data["n"][i - 1] > 2:
                cfg = cfg | {"n": data["n"][i] - 1}
                off_grid += 1
        t0 = time.monotonic()
        set_controls(page, cfg)
        state = wait(page)
        seconds += time.monotonic() - t0
        shown_n = min(data["n"], key=lambda n: abs(math.log(n / cfg["n"])))  # ties: the smaller
        try:
            p = predict(**predict_args(cfg | {"n": shown_n}))
        except PerfmodelError as e:
            assert state == "error" and shown(page, "error") == str(e), cfg
            errors += 1
            checked += 1
            continue
        assert state == "ready" and shown(page, "error") == "", (cfg, shown(page, "error"))
        assert (f"n={shown_n:,}" in shown(page, "where")) and (
            (shown_n == cfg["n"]) == ("nearest grid point" not in shown(page, "where"))
        )
        values += check_numbers(page, cfg, p)
        shape = opening_shape(cfg)
        if shape is not None:
            c = conclusions(cfg["hw"], shape)
            assert shown(page, "conclusion") == c.headline(), cfg
            assert value(page, "val-asymptote") == c.asymptote.value
            headlines += 1
        checked += 1
    print(
        f"\n{checked} settings: {values} values equal predict() bit for bit, {errors} refused "
        f"with predict()'s message, {off_grid} off the grid shown at the nearest point, "
        f"{headlines} sentences and n→∞ limits; {seconds:.1f} s in the browser"
    )
    assert headlines >= 2 and values > 0 and errors >= 1
    # how responsive: one update (every lookup, table and chart) in the page's own clock
    ms = page.execute_script(
        "const t0 = performance.now(); for (let i = 0; i < 20; i++) update(); "
        "return (performance.now() - t0) / 20;"
    )
    print(f"one update of the page: {ms:.1f} ms")


def shown_as_predict(driver, cfg: dict, data: dict) -> int | None:
    """Set the controls to ``cfg``: the numbers shown equal predict()'s bit for bit (how
    many were compared), or predict() refuses and the page shows its message (None)."""
    set_controls(driver, cfg)
    state = wait(driver)
    try:
        p = predict(**predict_args(cfg))
    except PerfmodelError as e:
        assert state == "error" and shown(driver, "error") == str(e), cfg
        return None
    assert state == "ready", (cfg, shown(driver, "error"))
    return check_numbers(driver, cfg, p, data)


def test_fp8_as_run_choice_equals_predict(page):
    """A user picks "fp8 as run" in the dtype select: every number shown equals
    predict(dtype="fp8", fp8_as_run=True) bit for bit (or its refusal, as for
    mode="backward")."""
    data = page_data()
    rng = random.Random(8)
    checked = values = refused = 0
    while checked < 8:
        cfg = random_config(rng, data) | dict(hw="H200 SXM", dtype="fp8 as run")
        compared = shown_as_predict(page, cfg, data)
        if compared is None:
            refused += 1
            continue
        values += compared
        checked += 1
    assert "fp8 as run" in [
        e.get_attribute("value") for e in page.find_elements("css selector", "#dtype option")
    ]
    print(f"\n{checked} FP8-as-run settings: {values} values equal predict(), {refused} refused")


def test_window_control_and_mask_picker_equal_predict(mask_page):
    """A user picks a sliding window, packed documents and a prefix-LM block mask: every
    number shown equals predict(window=W, segments=L, block_mask=PrefixLM(P)) bit for
    bit; no measured point (of unmasked attention) and no chapter sentence is shown under
    a mask."""
    data = mask_page_data()
    labels = [
        e.get_attribute("textContent")
        for e in mask_page.find_elements("css selector", "#window option")
    ]
    assert labels == ["none", "255 keys", "4,095 keys"]
    picker = [
        e.get_attribute("textContent")
        for e in mask_page.find_elements("css selector", "#documents option")
    ]
    assert picker == ["none", "documents of 2,048 tokens"]
    blocks = [
        e.get_attribute("textContent")
        for e in mask_page.find_elements("css selector", "#prefix_lm option")
    ]
    assert blocks == ["none", "prefix LM, 1,024-token prefix"]
    rng = random.Random(24)
    checked = values = 0
    while checked < max(8, CONFIGS):
        cfg = random_config(rng, data) | dict(window=rng.choice([None, 255, 4095]))
        cfg["documents"] = rng.choice(data["axes"]["documents"])
        cfg["prefix_lm"] = 1024 if cfg["window"] is None else rng.choice([None, 1024])
        compared = shown_as_predict(mask_page, cfg, data)
        if compared is None:
            continue
        values += compared
        assert "computed at the opening setting" in shown(mask_page, "conclusion")
        checked += 1
    print(f"\n{checked} masked settings: {values} values equal predict() bit for bit")


def screenshot(png: str) -> None:
    """docs/explore.png: the H200 page at n=16384, bf16, 32 heads sharing 8 K/V heads."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "page.html"
        explore.write_page(path, MEASUREMENTS, explore.Grid(hw=("h200",)))
        driver = start_browser()
        try:
            driver.get(path.as_uri())
            wait(driver)
            setting = dict(hw="H200 SXM", dtype="bf16", n=16384, h=32, h_kv=8, causal=False)
            set_controls(driver, OPENING | setting)
            wait(driver)
            driver.save_screenshot(png)
        finally:
            driver.quit()
    print(f"wrote {png}")


def timing(page: str, loads: int = 3) -> None:
    """How long a built page takes to open (tables inflated, first update drawn) and to
    update once, in headless Chromium on this machine."""
    driver = start_browser()
    try:
        for _ in range(loads):
            t0 = time.monotonic()
            driver.get(Path(page).resolve().as_uri())
            state = wait(driver, 120)
            ready = time.monotonic() - t0
            ms = driver.execute_script(
                "const t0 = performance.now(); for (let i = 0; i < 20; i++) update(); "
                "return (performance.now() - t0) / 20;"
            )
            print(f"{page}: {state} {ready:.2f} s after opening; one update {ms:.1f} ms")
    finally:
        driver.quit()


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--screenshot", metavar="PNG", help="write the README's picture")
    parser.add_argument("--time", metavar="PAGE", help="time opening and updating a page")
    args = parser.parse_args()
    if args.screenshot:
        screenshot(args.screenshot)
    if args.time:
        timing(args.time)
