"""The tree is a map: each part imports only what its package docstring allows ("May import:"),
the core knows no benchmark, no import circles, no private name crosses a module, modules stay
small, and importing the core loads no task."""

import ast
import re
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "avstack"
# the shared modules directly under avstack/ and what each may import (the subpackages say theirs)
SHARED = {
    "avstack.io": set(),
    "avstack.limits": set(),
    "avstack.lifeline": set(),
    "avstack.profiling": set(),
    "avstack.manifest": {"avstack.io", "avstack.asr.types"},  # a clip's words: the Transcript transcribe gives
    "avstack.features": {"avstack.io", "avstack.manifest"},
    "avstack.version": set(),
    "avstack.errors": set(),
    "avstack.options": {"avstack.errors"},
}
# may import anything: it calls the registered tasks (avstack.api: the commands as library calls)
FRONT_DOOR = {"avstack", "avstack.api"}
MAX_LINES = 400
# what every part may import: the error root it raises and the declarations its records' options use
FOUNDATIONS = ("avstack.errors", "avstack.options")
# version.py among them: the version in a module of its own (#56); errors.py and options.py, the
# error root and the options' declarations every record uses (#76)
MAX_SHARED_MODULES = 10


def _module(path: Path) -> str:
    return ("avstack." + path.relative_to(SRC).with_suffix("").as_posix().replace("/", ".")).removesuffix(".__init__")


MODULES = {_module(p): p for p in sorted(SRC.rglob("*.py"))}
FRONT_DOOR |= {m for m in MODULES if m.startswith("avstack.api.")}


def _imports(path: Path) -> list[str]:
    """Absolute names of every module a file imports, anywhere in it (relative imports resolved;
    `from avstack.x import y` counts avstack.x and, where y is a module, avstack.x.y)."""
    package = ["avstack", *path.relative_to(SRC).parent.parts]
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            mod = ".".join([*base, node.module] if node.module else base)
            names += [mod] + [f"{mod}.{a.name}" for a in node.names if f"{mod}.{a.name}" in MODULES]
    return names


def _part(module: str) -> str:
    """The unit a rule is about: the innermost package whose docstring states a rule (asr.evaluation
    has its own, asr.models follows asr's), or a shared module."""
    packages = sorted({m for m, p in MODULES.items() if p.name == "__init__.py"}, key=len, reverse=True)
    for unit in packages:
        if unit != "avstack" and (module == unit or module.startswith(unit + ".")) and _states_a_rule(unit):
            return unit
    return module


def _states_a_rule(unit: str) -> bool:
    return "May import:" in (ast.get_docstring(ast.parse(MODULES[unit].read_text(encoding="utf-8"))) or "")


def _allowed(unit: str) -> set[str]:
    if unit in SHARED:
        return SHARED[unit]
    doc = ast.get_docstring(ast.parse(MODULES[unit].read_text(encoding="utf-8"))) or ""
    found = re.search(r"May import:(.*?)(?:\n\n|$)", doc, re.S)
    assert found, f"{unit}: its __init__ docstring does not say what it may import ('May import: ...')"
    rule = found.group(1)
    if "any part of avstack" in rule:
        return {m for m in MODULES if m not in FRONT_DOOR}
    return set(re.findall(r"avstack(?:\.\w+)+", rule))


def _covered(name: str, allowed: set[str]) -> bool:
    return any(name == a or name.startswith(a + ".") for a in allowed)


def test_each_part_imports_only_what_it_may():
    offenders = {}
    for module, path in MODULES.items():
        if module in FRONT_DOOR:
            continue
        unit = _part(module)
        allowed = _allowed(unit) | {unit, *FOUNDATIONS}
        if unit.startswith("avstack.asr.evaluation"):
            allowed |= _allowed("avstack.asr") | {"avstack.asr"}  # a part of asr may use asr
        bad = [n for n in _imports(path) if n.startswith("avstack.") and not _covered(n, allowed)]
        if bad:
            offenders[module] = sorted(set(bad))
    assert offenders == {}


def test_the_core_never_imports_tasks():
    core = [m for m in MODULES if m not in FRONT_DOOR and not m.startswith("avstack.tasks")]
    assert len(core) > 40
    offenders = {m: [n for n in _imports(MODULES[m]) if n.startswith("avstack.tasks")] for m in core}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_no_import_circle():
    graph = {m: {_owner(n) for n in _imports(p)} - {None, m} for m, p in MODULES.items()}
    seen: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(m: str, path: list[str]) -> None:
        seen[m] = 1
        for n in sorted(graph.get(m, ())):
            if n in FRONT_DOOR or n.startswith(m + "."):  # a package's __init__ gathers its own modules
                continue
            assert seen.get(n) != 1, " -> ".join([*path, m, n])
            if n not in seen:
                visit(n, [*path, m])
        seen[m] = 2

    for m in MODULES:
        if m not in seen:
            visit(m, [])


def _owner(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def test_no_private_name_crosses_a_module():
    offenders = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        aliases = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("avstack"):
                for a in node.names:
                    if a.name.startswith("_") and not a.name.startswith("__"):
                        offenders.append(f"{module}: from {node.module} import {a.name}")
                    if f"{node.module}.{a.name}" in MODULES:
                        aliases.add(a.asname or a.name)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                offenders.append(f"{module}: {node.value.id}.{node.attr}")
    assert offenders == []


def test_modules_stay_small_and_few_sit_at_the_top():
    big = {m: n for m, p in MODULES.items() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert {m: n for m, n in big.items() if not m.startswith("avstack.tasks")} == {}
    cli = Path(__file__).resolve().parents[1] / "cli"
    assert {p.name: n for p in cli.glob("*.py") if (n := len(p.read_text().splitlines())) > MAX_LINES} == {}
    top = [p.name for p in SRC.glob("*.py")]
    assert len(top) <= MAX_SHARED_MODULES, top


def test_the_checks_see_what_they_check(tmp_path):
    """Each check fails on a made offence: a private import, a relative import of tasks."""
    fake = SRC / "runs" / "_probe_for_layering_test.py"
    fake.write_text("from ..tasks.ecog import score\nfrom avstack.media.decode import _hidden\n")
    try:
        assert "avstack.tasks.ecog" in _imports(fake)
        MODULES["avstack.runs._probe_for_layering_test"] = fake
        try:
            for check in (test_the_core_never_imports_tasks, test_no_private_name_crosses_a_module):
                try:
                    check()
                except AssertionError:
                    continue
                raise AssertionError(f"{check.__name__} missed the offence")
        finally:
            del MODULES["avstack.runs._probe_for_layering_test"]
    finally:
        fake.unlink()


def test_importing_the_core_loads_no_task():
    mods = [m for m in MODULES if m not in FRONT_DOOR and not m.startswith("avstack.tasks")]
    mods = [m for m in mods if not m.startswith(("avstack.asr.evaluation", "avstack.preparation.executors.ray"))]
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
    from avstack.synthetic import synth

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


def _calls(tree: ast.AST) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call)]


def test_records_travel_whole_through_the_tasks():
    """A task passes the engine's Asking on whole: none builds one again (the front door makes it
    once, with the back-end made once), and none reads a record's fields out to pass them on as
    positional arguments of another call (`run(x.backend, ..., x.settings)`)."""
    rebuilt, unpacked = [], []
    for path in sorted((SRC / "tasks").rglob("*.py")):
        for call in _calls(ast.parse(path.read_text())):
            name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
            if name == "Asking":
                rebuilt.append(f"{path.name}:{call.lineno}")
            fields = {a.attr for a in call.args if isinstance(a, ast.Attribute)}
            if len(fields & {"backend", "backend_id", "cache_dir", "settings", "progress"}) >= 2:
                unpacked.append(f"{path.name}:{call.lineno}")
    assert rebuilt == [] and unpacked == [], (rebuilt, unpacked)
