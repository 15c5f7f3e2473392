"""Each option declared once (#76): its flag, default, help and panel stand beside its field on
the record it sets; the CLI is built from those declarations, the library folds the same names
into the same records, and the door's errors say the flags."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest
import typer
from avstack_cli.app import app
from avstack_cli.declared import argument, takes
from typer.testing import CliRunner

import avstack
from avstack.options import Flag, declared, flag_of, fold, option

CLI = Path(__file__).resolve().parents[1] / "cli"


@dataclasses.dataclass(frozen=True)
class Knobs:
    """A record made here: one line per option is all a command needs."""

    level: int = option(3, "How loud")
    names: tuple[str, ...] = option((), "A name (repeatable)", many=True, name="name")
    axes: tuple[str, ...] = option(
        ("a",),
        "Comma list",
        text=str,
        default_text="a",
        parse=lambda t: tuple(t.split(",") if isinstance(t, str) else t),
    )
    quiet: bool = option(False, "Say nothing", switch=True)
    hidden: int = 7  # a setting, not a flag


def test_a_field_declared_once_is_a_flag_and_comes_back_as_its_record():
    made = typer.Typer()
    seen = []

    @made.command()
    @takes([argument("where", Path, "A folder")], knobs=Knobs)
    def knob(**given):
        seen.append(given)

    res = CliRunner().invoke(made, ["x", "--level", "5", "--name", "p", "--name", "q", "--axes", "b,c", "--quiet"])
    assert res.exit_code == 0, res.output
    assert seen == [{"where": Path("x"), "knobs": Knobs(5, ("p", "q"), ("b", "c"), True)}]
    res = CliRunner().invoke(made, ["y"])
    assert seen[-1]["knobs"] == Knobs()  # every default is the field's
    shown = CliRunner().invoke(made, ["--help"], terminal_width=200).output
    assert "--level" in shown and "How loud" in shown and "--no-quiet" in shown and "--hidden" not in shown


def test_the_library_folds_the_same_names_into_the_same_record():
    keywords = {"name": ["p"], "axes": "b,c", "level": 5, "other": 1}
    assert fold(Knobs, keywords) == Knobs(5, ("p",), ("b", "c"))
    assert keywords == {"other": 1}  # what is not the record's is left for another
    assert fold(Knobs, {"names": ("z",), "axes": ("x", "y")}) == Knobs(names=("z",), axes=("x", "y"))
    assert fold(Knobs, {}, Knobs(level=1)) == Knobs(level=1)
    assert flag_of(Knobs, "names") == "--name"


def test_fps_and_max_frames_set_one_field():
    choice = fold(avstack.StackChoice, {"fps": "1", "max_frames": 8, "pack": True})
    assert (choice.budget.fps, choice.budget.max_frames, choice.packed) == (1.0, 8, True)
    assert flag_of(avstack.StackChoice, "budget") == "--fps/--max-frames"
    assert flag_of(avstack.StackChoice, "packed") == "--pack"


def test_tasks_that_share_an_option_share_its_declaration():
    by_name: dict[str, list[tuple[str, Flag, object]]] = {}
    for record in avstack.api.task_input_records():
        for f, said in declared(record):
            by_name.setdefault(f.name, []).append((record.__name__, said.flags, f.default))
    shared = {n: v for n, v in by_name.items() if len(v) > 1}
    assert "prompt" in shared
    for name, seen in shared.items():
        assert len({(flags, default) for _, flags, default in seen}) == 1, (name, seen)


def test_no_command_declares_an_option_of_a_record_again():
    """cli/ writes no Typer option for a field of the records its commands take: the flags of
    every record come from their declarations only."""
    fields = {
        flag.flag(f.name)
        for record in (
            avstack.PrepareSettings,
            avstack.api.PrepareJob,
            avstack.StackChoice,
            avstack.BackendOptions,
            avstack.Costing,
            avstack.api.Sending,
            avstack.api.Ablating,
            avstack.api.ExportOptions,
            avstack.api.TranscribeOptions,
            *SIMPLE_RECORDS,
            *avstack.api.task_input_records(),
        )
        for f, said in declared(record)
        for flag in said.flags
    }
    written = set()
    for path in CLI.glob("*.py"):
        for call in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(call, ast.Call) and getattr(call.func, "attr", getattr(call.func, "id", "")) in (
                "Option",
                "flag",
            ):
                said = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
                written |= {s.split("/")[0] for s in said if s.startswith("--")}
    # a command's own flag of the same name and another meaning: --out (where a run or its
    # requests go; export's is ExportOptions', a report's Reporting's), --model (the back-end;
    # export's names the model in batch bodies)
    assert written & fields == {"--out", "--model"}, written & fields


def test_no_command_writes_an_option_of_its_own_but_the_head_flags():
    """Every option of every command is a record's declaration, but the few a command names
    before its records (--model, --out, --task: what it asks, where it writes, which task): no
    command's signature holds a typer.Option, and cli/ names no other flag by hand."""
    inline, head = [], set()
    for path in CLI.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef) and n.decorator_list):
            for call in (c for a in fn.args.kwonlyargs + fn.args.args for c in ast.walk(a) if isinstance(c, ast.Call)):
                if getattr(call.func, "attr", "") == "Option" and fn.name != "_root":  # _root: --version
                    inline.append(f"{path.name}:{fn.name}")
        for call in (c for c in ast.walk(tree) if isinstance(c, ast.Call) and getattr(c.func, "id", "") == "flag"):
            head |= {a.value for a in call.args if isinstance(a, ast.Constant) and str(a.value).startswith("--")}
    assert inline == [] and head == {"--model", "--out", "--task"}, (inline, head)


SIMPLE_RECORDS = (
    avstack.api.Scoring,
    avstack.api.Reporting,
    avstack.api.Viewing,
    avstack.api.SynthOptions,
    avstack.api.GroundTruthOptions,
    avstack.api.EgoGapPrompting,
    avstack.api.EgoGapExporting,
)
COMMAND_RECORDS = {
    "prepare": [avstack.PrepareSettings, avstack.api.PrepareJob],
    "run": [avstack.StackChoice, avstack.BackendOptions, avstack.Costing, avstack.api.Sending],
    "ablate": [avstack.api.Ablating, avstack.BackendOptions, avstack.Costing, avstack.api.Sending],
    "export": [avstack.StackChoice, avstack.api.ExportOptions],
    "stacks": [avstack.StackChoice, avstack.api.Rendering],
    "transcribe": [avstack.api.TranscribeOptions],
    "score": [avstack.api.Scoring],
    "report": [avstack.api.Reporting],
    "view": [avstack.api.Viewing],
    "synth": [avstack.api.SynthOptions],
    "ecog gt": [avstack.api.GroundTruthOptions],
    "egogap prompts": [avstack.api.EgoGapPrompting],
    "egogap export": [avstack.api.EgoGapExporting],
}


@pytest.mark.parametrize("command", sorted(COMMAND_RECORDS))
def test_every_declared_flag_is_offered(command):
    shown = CliRunner().invoke(app, [*command.split(), "--help"], terminal_width=400).output
    records = COMMAND_RECORDS[command]
    missing = [
        flag.flag(f.name)
        for r in records
        for f, said in declared(r)
        for flag in said.flags
        if flag.flag(f.name) not in shown
    ]
    assert missing == []


def test_the_door_says_the_flags():
    from avstack.errors import UsageError

    with pytest.raises(UsageError, match=r"--task egogap takes no --fps/--max-frames"):
        avstack.run(model="chance", out="unused", task="egogap", bundles="b.jsonl", max_frames=4)
    with pytest.raises(UsageError, match="prepare takes no colour"):
        avstack.prepare("in", "out", colour=True)
    with pytest.raises(UsageError, match=r"--coord-order: expected xy or yx; found 'zx'"):
        avstack.run(model="chance", out="unused", coord_order="zx", dry_run=True)
    res = CliRunner().invoke(app, ["run", "--model", "chance", "-o", "unused", "--coord-order", "zx", "--dry-run"])
    assert res.exit_code == 2 and "--coord-order: expected xy or yx; found 'zx'" in res.output


def test_a_required_option_is_named_when_missing_and_a_stray_keyword_refused(tmp_path):
    """A record field without a default is a required flag (egogap export's --out): the library
    names it as the command line does; a keyword no record declares is refused by name."""
    from avstack.errors import UsageError

    with pytest.raises(UsageError, match=r"expected --out; found none given"):
        avstack.api.egogap_export(tmp_path / "b.bundles.jsonl")
    res = CliRunner().invoke(app, ["egogap", "export", str(tmp_path / "b.bundles.jsonl")])
    assert res.exit_code == 2 and "--out" in res.output
    with pytest.raises(UsageError, match=r"report takes no colour; it takes cluster, out"):
        avstack.report([tmp_path], colour=True)
    with pytest.raises(UsageError, match=r"view takes no port_number; it takes out, port, serve"):
        avstack.view(tmp_path, port_number=1)
