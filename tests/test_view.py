"""`avstack view` in a real headless Chromium (the distribution's chromium and chromedriver, driven
by Selenium): frames at their true pts along the axis, words, strokes, markers, no JS errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from avstack_cli.app import app
from typer.testing import CliRunner

from avstack.manifest import load_manifest

SHOTS = Path(__file__).resolve().parents[1] / "out" / "screenshots"


@pytest.fixture(scope="module")
def site(prepared, tmp_path_factory):
    out = tmp_path_factory.mktemp("view")
    abl = out / "abl"
    drops = ["--drop", "frame_ts", "--drop", "word_ts"]
    res = CliRunner().invoke(app, ["ablate", str(prepared), "--model", "deixis", *drops, "--out", str(abl)])
    assert res.exit_code == 0, res.output
    runs = [abl / "full", abl / "full-no_frame_ts", abl / "full-no_word_ts"]
    res = CliRunner().invoke(app, ["view", str(prepared), *map(str, runs), "--out", str(out / "site")])
    assert res.exit_code == 0, res.output
    return out / "site", runs


def _errors(driver):
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def test_index_links_every_clip_and_filters(browser, site, prepared):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    folder, _ = site
    browser.get((folder / "index.html").as_uri())
    links = browser.find_elements(By.CSS_SELECTOR, "a[data-clip-id]")
    assert sorted(a.get_attribute("data-clip-id") for a in links) == sorted(r.clip_id for r in load_manifest(prepared))
    Select(browser.find_element(By.CSS_SELECTOR, "[data-filter=level]")).select_by_value("L1")
    shown = [r for r in browser.find_elements(By.CSS_SELECTOR, "tr[data-clip-row]") if r.is_displayed()]
    assert shown and all(r.get_attribute("data-level") == "L1" for r in shown)
    browser.find_element(By.CSS_SELECTOR, "[data-sort=disagreement]").click()
    assert "Δ acc_t" in browser.page_source and not _errors(browser)
    SHOTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(SHOTS / "index.png"))


def test_clip_page_is_true_to_the_millisecond(browser, site, prepared):
    from selenium.webdriver.common.by import By

    folder, runs = site
    rec = next(r for r in load_manifest(prepared) if r.clip_id == "指令3/l3_put.MOV")
    browser.get((folder / "index.html").as_uri())
    browser.find_element(By.CSS_SELECTOR, f"a[data-clip-id='{rec.clip_id}']").click()
    axis = browser.find_element(By.CSS_SELECTOR, "[data-axis-start-ms]")
    start, end = float(axis.get_attribute("data-axis-start-ms")), float(axis.get_attribute("data-axis-end-ms"))
    ax = axis.rect
    frames = browser.find_elements(By.CSS_SELECTOR, "[data-pts-ms]")
    assert [int(f.get_attribute("data-pts-ms")) for f in frames] == [f.pts_ms for f in rec.frames]
    xs = [f.rect["x"] - ax["x"] for f in frames]
    assert all(b > a for a, b in zip(xs, xs[1:]))
    for f, x in zip(rec.frames, xs):
        assert abs(x - (f.pts_ms - start) / (end - start) * ax["width"]) <= 2, (f.pts_ms, x)
    words = browser.find_elements(By.CSS_SELECTOR, "[data-begin-ms][data-end-ms]")
    assert len(words) == len(rec.asr.to_ecog()["words"]) > 0
    assert [int(w.get_attribute("data-begin-ms")) for w in words] == [
        w["begin_time"] for w in rec.asr.to_ecog()["words"]
    ]
    referents = [a for a in rec.eval_gt["answer"] if a.get("choice")]
    strokes = browser.find_elements(By.CSS_SELECTOR, "[data-stroke-begin-ms]")
    assert [int(s.get_attribute("data-stroke-end-ms")) for s in strokes] == [a["stroke_end_time"] for a in referents]
    markers = browser.find_elements(By.CSS_SELECTOR, ".pred[data-stack][data-pred-ms]")
    by_stack: dict[str, int] = {}
    for m in markers:
        by_stack[m.get_attribute("data-stack")] = by_stack.get(m.get_attribute("data-stack"), 0) + 1
    assert len(by_stack) == len(runs) and set(by_stack.values()) == {len(referents)}
    assert browser.find_element(By.ID, "video") and browser.find_elements(By.CSS_SELECTOR, ".lastframe circle")
    assert not _errors(browser)
    SHOTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(SHOTS / "clip.png"))
    assert (SHOTS / "clip.png").stat().st_size > 10_000


def test_egogap_items_page(browser, tmp_path):
    from selenium.webdriver.common.by import By
    from test_egogap import cli_runs

    runs = cli_runs(tmp_path)
    res = CliRunner().invoke(app, ["view", *map(str, runs), "--out", str(tmp_path / "site")])
    assert res.exit_code == 0, res.output
    browser.get((tmp_path / "site" / "index.html").as_uri())
    items = browser.find_elements(By.CSS_SELECTOR, ".item[data-uid]")
    assert len(items) == 8
    first = items[0]
    assert len(first.find_elements(By.CSS_SELECTOR, ".opt-correct")) == 1
    assert [li.get_attribute("data-run") for li in first.find_elements(By.CSS_SELECTOR, "li[data-run]")] == [
        "oracle default-image",
        "chance default-image",
    ]
    assert "(correct)" in first.find_element(By.CSS_SELECTOR, "li[data-run]").text
    assert first.find_element(By.TAG_NAME, "img").get_attribute("naturalWidth") != "0"  # the image loads
    assert not _errors(browser)
