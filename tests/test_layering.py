"""The core knows no benchmark: no module of avstack/*.py, avstack/runners/ or avstack/asr/ imports
avstack.tasks, statically or by importing it."""

import ast
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "avstack"
# api.py is the front door (like the CLI): it calls the registered tasks, importing them inside its
# functions only, so importing avstack (or any core module) still loads no task (checked below)
CORE = sorted(
    p for p in [*SRC.glob("*.py"), *(SRC / "runners").glob("*.py"), *(SRC / "asr").glob("*.py")] if p.name != "api.py"
)


def _imports(path: Path) -> list[str]:
    """Absolute names of every module a file imports (relative imports resolved)."""
    package = ["avstack", *path.relative_to(SRC).parent.parts]
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            mod = ".".join([*base, node.module] if node.module else base)
            names += [mod] + [f"{mod}.{a.name}" for a in node.names]
    return names


def test_core_modules_never_import_tasks():
    assert len(CORE) > 15

    def of_tasks(name: str) -> bool:
        return name == "avstack.tasks" or name.startswith("avstack.tasks.")

    offenders = {p.relative_to(SRC).as_posix(): [n for n in _imports(p) if of_tasks(n)] for p in CORE}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_check_sees_a_relative_import_of_tasks(tmp_path):
    fake = SRC / "runners" / "_probe_for_layering_test.py"
    fake.write_text("from ..tasks.ecog import score\n")
    try:
        assert "avstack.tasks.ecog" in _imports(fake)
    finally:
        fake.unlink()


def test_importing_the_core_loads_no_task():
    mods = [f"avstack.{p.relative_to(SRC).with_suffix('').as_posix().replace('/', '.')}" for p in CORE]
    mods = [m.removesuffix(".__init__") for m in mods]
    code = "import sys\nimport avstack.api\n" + "".join(f"import {m}\n" for m in mods)
    code += "print(sorted(m for m in sys.modules if m.startswith('avstack.tasks')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_light_layout_registry_is_the_tasks_own():
    from avstack.tasks import all_layouts, all_tasks

    assert all_layouts() == [layout for t in all_tasks() for layout in t.layouts]


def test_a_frames_jobs_driver_loads_no_decoder_or_opencv(tmp_path):
    """The driver discovers, schedules and writes the manifest; decoding happens in the workers,
    so the driver's start-up stays short: PyAV, OpenCV and soundfile are never imported."""
    from avstack import synth

    clips = tmp_path / "clips"
    clips.mkdir()
    for i in range(2):
        synth.write_clip(clips / f"c{i}.mp4", synth.ClipSpec(duration_s=1.0, fps=10))
    code = (
        "import sys; from avstack.api import prepare; "
        f"r = prepare({str(clips)!r}, {str(tmp_path / 'out')!r}, anchors='frames', workers=2); "
        "assert r.count == 2 and not r.failed, r.failed; "
        "print(sorted(m for m in ('av', 'cv2', 'soundfile') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
