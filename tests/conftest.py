from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from avstack.synthetic import synth

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
SAMPLES = Path(__file__).resolve().parents[1] / "samples" / "ecog_en"


def shared_path(*parts: str) -> Path:
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is absent (../shared is only beside CI and developer checkouts)")
    return path


# the reference files the tests read, shipped with the tests (gzip -9n of ../shared's copies), so a
# clone on its own runs them; tests/test_docs.py checks they equal ../shared's where it is there
REFERENCE = Path(__file__).resolve().parent / "data" / "reference"


def reference_file(*parts: str) -> Path:
    """tests/data/reference/<parts>, unpacked once into a cache folder beside the tests' own."""
    import gzip

    packed = REFERENCE.joinpath(*parts).with_name(parts[-1] + ".gz")
    if not packed.exists():
        raise FileNotFoundError(f"{packed}: expected a shipped reference file, found none")
    out = Path(__file__).resolve().parent / ".reference-cache" / Path(*parts)
    if not out.exists() or out.stat().st_mtime < packed.stat().st_mtime:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(out.suffix + ".tmp")
        tmp.write_bytes(gzip.decompress(packed.read_bytes()))
        tmp.replace(out)
    return out


def _layouts() -> list:
    from avstack.tasks import all_layouts

    return all_layouts()


LAYOUTS = _layouts()  # the registered tasks' folder layouts (EcoG's 指令N), as the CLI passes them
needs_espeak = pytest.mark.skipif(
    not synth.espeak_available(),
    reason="eSpeak NG is not installed (pip install espeakng-loader: the dev extra has it)",
)


@pytest.fixture(scope="session")
def sample_root() -> Path:
    return SAMPLES


@pytest.fixture(scope="session")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled sample set, prepared once with full anchors (tiny.en ASR)."""
    from avstack.preparation.driver import prepare
    from avstack.preparation.settings import PrepareSettings

    out = tmp_path_factory.mktemp("prepared")
    report = prepare(SAMPLES, out, PrepareSettings(), workers=1, layouts=LAYOUTS)
    assert not report.failed, report.failed
    return out


@pytest.fixture()
def questions(prepared, tmp_path) -> Path:
    """One multiple-choice question per prepared sample clip (videoqa on the samples)."""
    import json

    from avstack.manifest import load_manifest

    path = tmp_path / "qa.jsonl"
    rows = [
        {"id": f"q{i}", "video": r.video, "question": "What is pointed at?", "options": ["A. cup", "B. book"]}
        | {"answer": "A"}
        for i, r in enumerate(r for r in load_manifest(prepared) if r.ok)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def manifest_dicts(prepared: Path) -> list[dict]:
    """The manifest's records as the JSON objects they are written as."""
    from avstack.manifest import load_manifest

    return [r.to_json() for r in load_manifest(prepared)]


# a real headless Chromium (the distribution's chromium and chromedriver, driven by Selenium)
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


@pytest.fixture(scope="module")
def browser():
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install selenium)")
    if not CHROMIUM or not CHROMEDRIVER:
        pytest.skip("chromium and chromedriver are not installed (apt-get install chromium chromium-driver)")
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--no-first-run",
        "--disable-sync",
        "--allow-file-access-from-files",
        "--window-size=1300,1400",
    ):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    yield driver
    driver.quit()


def pytest_sessionfinish(session, exitstatus):
    """A fake that answered a route the real API does not document fails the run (fake_http)."""
    import fake_http

    if fake_http.UNDOCUMENTED and exitstatus == 0:
        print(f"\nfakes answered undocumented routes: {sorted(set(fake_http.UNDOCUMENTED))}")
        session.exitstatus = 1
