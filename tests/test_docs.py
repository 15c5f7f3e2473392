"""The public API and the documentation site: every public name documented and typed, the CLI and
the API giving the same manifest, the docs' examples executed, the site built with --strict and
opened from file:// in a real headless Chromium without console errors."""

from __future__ import annotations

import inspect
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import LAYOUTS, SAMPLES

import avstack

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def test_every_public_name_is_documented_and_typed():
    import avstack.api

    assert len(avstack.__all__) >= 12 and avstack.__all__ == avstack.api.__all__
    for name in avstack.__all__:
        obj = getattr(avstack, name)
        assert inspect.getdoc(obj), f"avstack.{name} has no docstring"
        if inspect.isfunction(obj):
            sig = inspect.signature(obj)
            untyped = [p for p in sig.parameters.values() if p.annotation is inspect.Parameter.empty]
            assert not untyped and sig.return_annotation is not inspect.Signature.empty, (name, untyped)


def test_help_shows_the_public_api():
    out = subprocess.run(
        [sys.executable, "-c", "import avstack; help(avstack)"],
        capture_output=True,
        text=True,
        check=True,
        env=os.environ | {"PAGER": "cat"},
    ).stdout
    for name in ("prepare", "open_prepared", "sample_frames", "transcribe", "render", "score", "ClipRecord"):
        assert re.search(rf"\b{name}\b", out), name


def test_import_avstack_is_light():
    code = "import sys, avstack; print(sorted(m for m in sys.modules if m.startswith(('av.', 'cv2', 'avstack.'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['avstack.api']"  # the door's name table alone (it imports nothing of avstack)


def test_the_cli_and_the_api_give_the_same_manifest(tmp_path):
    from avstack_cli.app import app
    from typer.testing import CliRunner

    res = CliRunner().invoke(
        app, ["prepare", str(SAMPLES), "--out", str(tmp_path / "cli"), "--lang", "en", "--workers", "1"]
    )
    assert res.exit_code == 0, res.output
    report = avstack.prepare(SAMPLES, tmp_path / "api", lang="en", workers=1)
    assert report.count == 7 and not report.failed
    assert (tmp_path / "cli" / "manifest.jsonl").read_bytes() == (tmp_path / "api" / "manifest.jsonl").read_bytes()
    opened = avstack.open_prepared(tmp_path / "api")
    assert len(opened) == 7 and {r.clip_id for r in opened} == {r.clip_id for r in report.records}
    assert LAYOUTS  # the EcoG layout is what both recognised


def _examples(page: Path) -> list[str]:
    """The code blocks a page marks as examples (`<!-- example -->` before a python block)."""
    return re.findall(r"<!-- example -->\s*```python\n(.*?)```", page.read_text(encoding="utf-8"), re.S)


def test_pages_with_examples_have_them():
    assert len(_examples(DOCS / "python-api.md")) == 5


@pytest.mark.parametrize("page", sorted(p.name for p in DOCS.glob("*.md") if _examples(p)))
def test_the_examples_of_a_page_run(page, tmp_path):
    script = "\n".join(_examples(DOCS / page))
    res = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]


def test_the_readme_is_a_front_page_and_every_page_is_in_the_site():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < 150
    assert readme.splitlines()[2:6] and "make demo" in readme and "make test" in readme
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for page in DOCS.glob("*.md"):
        assert page.name in nav, f"{page.name} is not in the site's nav"
        assert f"docs/{page.name}" in readme or page.name == "index.md", f"the README does not link {page.name}"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    if shutil.which("mkdocs", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("mkdocs is not installed (the dev extra installs it)")
    out = tmp_path_factory.mktemp("site")
    res = subprocess.run(
        [str(Path(sys.executable).parent / "mkdocs"), "build", "--strict", "--quiet", "-d", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=os.environ | {"NO_MKDOCS_2_WARNING": "1"},
    )
    assert res.returncode == 0, res.stderr
    return out


def test_the_site_builds_strict_and_opens_from_file(browser, site):
    from selenium.webdriver.common.by import By

    for page, expect in (
        ("index.html", "A first real ablation"),
        ("api.html", "sample_frames"),
        ("python-api.html", "open_prepared"),
    ):
        browser.get((site / page).as_uri())
        assert expect in browser.find_element(By.TAG_NAME, "body").text, page
        errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        assert not errors, (page, errors)
    links = browser.find_elements(By.CSS_SELECTOR, "nav a[href$='.html']")
    assert len(links) >= 14  # every page is reachable from the navigation
