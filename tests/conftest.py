from __future__ import annotations

import shutil
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
SAMPLES = Path(__file__).resolve().parents[1] / "samples" / "ecog_en"


def shared_path(*parts: str) -> Path:
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is absent (../shared is only beside CI and developer checkouts)")
    return path


def _layouts() -> list:
    from avstack.tasks import all_layouts

    return all_layouts()


LAYOUTS = _layouts()  # the registered tasks' folder layouts (EcoG's 指令N), as the CLI passes them
needs_espeak = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng is not installed")


@pytest.fixture(scope="session")
def sample_root() -> Path:
    return SAMPLES


@pytest.fixture(scope="session")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled sample set, prepared once with full anchors (tiny.en ASR)."""
    from avstack.prepare import PrepareSettings, prepare

    out = tmp_path_factory.mktemp("prepared")
    report = prepare(SAMPLES, out, PrepareSettings(), workers=1, layouts=LAYOUTS)
    assert not report.failed, report.failed
    return out


def manifest_dicts(prepared: Path) -> list[dict]:
    """The manifest's records as the JSON objects they are written as."""
    from avstack.manifest import load_manifest

    return [r.to_json() for r in load_manifest(prepared)]
