"""One door, one contract (#76): every CLI command is one call into avstack.api, and cli/ imports
nothing else of avstack; the command and the library give the same words on a clip whose audio
starts late; an option a back-end does not honour is refused, never dropped; the CLI maps the
door's one error root, and only it, to an exit code."""

from __future__ import annotations

import ast
import json
from fractions import Fraction
from pathlib import Path

import pytest
from avstack_cli.app import app
from conftest import SAMPLES
from typer.testing import CliRunner

import avstack
from avstack.io import DataError

CLI = Path(__file__).resolve().parents[1] / "cli"


def _commands(tree: ast.Module) -> list[ast.FunctionDef]:
    """The functions a Typer app registers (`@app.command()`, `@ecog_app.command("gt")`, ...)."""
    found = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            for deco in node.decorator_list:
                call = deco.func if isinstance(deco, ast.Call) else deco
                if isinstance(call, ast.Attribute) and call.attr == "command":
                    found.append(node)
    return found


def _door_calls(body: list[ast.stmt]) -> list[str]:
    """The door's functions a body calls (door.run(...)); its records (door.TranscribeOptions) are
    values, not calls of the door."""
    calls = [n for stmt in body for n in ast.walk(stmt) if isinstance(n, ast.Call)]
    return [
        c.func.attr
        for c in calls
        if isinstance(c.func, ast.Attribute)
        and isinstance(c.func.value, ast.Name)
        and c.func.value.id == "door"
        and not c.func.attr[:1].isupper()
    ]


def test_every_command_is_one_call_into_the_door():
    bodies = {}
    for path in sorted(CLI.glob("*.py")):
        for fn in _commands(ast.parse(path.read_text(encoding="utf-8"))):
            bodies[f"{path.name}:{fn.name}"] = fn
    assert len(bodies) == 14, sorted(bodies)  # every command (egogap prompts and export among them)
    offenders = {}
    for name, fn in bodies.items():
        calls = _door_calls(fn.body)
        imports = [n for stmt in fn.body for n in ast.walk(stmt) if isinstance(n, (ast.Import, ast.ImportFrom))]
        if len(calls) != 1 or imports:
            offenders[name] = (calls, len(imports))
    assert offenders == {}


def test_cli_imports_nothing_of_avstack_but_the_door():
    imported = set()
    for path in sorted(CLI.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {a.name for a in node.names if a.name.startswith("avstack")}
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("avstack"):
                imported |= {f"{node.module}.{a.name}" for a in node.names}
    assert imported == {"avstack.api"}


def test_the_checks_catch_a_command_that_reaches_past_the_door():
    made = ast.parse(
        "@app.command()\ndef score(x):\n    from avstack.tasks import get_task\n    get_task(x).score()\n"
        "@app.command()\ndef twice(x):\n    door.score(x)\n    door.report(x)\n"
    )
    (one, two) = _commands(made)
    assert _door_calls(one.body) == [] and _door_calls(two.body) == ["score", "report"]


# --------------------------------------------------------------------------- one clock, one answer


def _with_late_audio(src: Path, out: Path, delay_s: float) -> Path:
    """`src` remuxed (no re-encode) with its audio track `delay_s` later than its video, as
    `ffmpeg -i f -itsoffset D -i f -map 0:v -map 1:a -c copy` writes it."""
    import av

    with av.open(str(src)) as inp, av.open(str(out), "w") as dst:
        v_in, a_in = inp.streams.video[0], inp.streams.audio[0]
        v_out, a_out = dst.add_stream_from_template(v_in), dst.add_stream_from_template(a_in)
        shift = int(Fraction(delay_s) / a_in.time_base)
        for packet in inp.demux(v_in, a_in):
            if packet.dts is None:
                continue
            if packet.stream is a_in:
                packet.pts, packet.dts = packet.pts + shift, packet.dts + shift
                packet.stream = a_out
            else:
                packet.stream = v_out
            dst.mux(packet)
    return out


def _words(transcript: dict) -> list[tuple[str, int, int]]:
    return [(w["text"], w["begin_time"], w["end_time"]) for w in transcript["words"]]


def test_transcribe_the_command_the_library_and_prepare_agree_on_late_audio(tmp_path):
    """The issue's case: the sample clip with its audio 0.5 s late. The command printed "Put"
    where the audio track's own clock has it; the library and prepare, on the clip's clock."""
    clip = SAMPLES / "指令4" / "l3_left.mp4"
    folder = tmp_path / "clips"
    folder.mkdir()
    late = _with_late_audio(clip, folder / "late.mp4", 0.5)
    res = CliRunner().invoke(app, ["transcribe", str(late), str(clip)])
    assert res.exit_code == 0, res.output
    said_late, said_clip = (json.loads(line) for line in res.stdout.splitlines())
    library = avstack.transcribe(late).to_ecog()
    assert _words(said_late) == _words(library) and len(library["words"]) >= 3
    avstack.prepare(folder, tmp_path / "prepared", workers=1)
    (record,) = avstack.open_prepared(tmp_path / "prepared")
    assert _words(record.asr.to_ecog()) == _words(library)
    # on the clip's clock the first word is about 0.5 s later than in the clip as recorded
    shift = library["words"][0]["begin_time"] - said_clip["words"][0]["begin_time"]
    assert said_clip["words"][0]["text"] == library["words"][0]["text"] == "Put"
    assert 400 <= shift <= 600, (said_clip["words"][:2], library["words"][:2])


def test_transcribe_refuses_a_bad_option_before_reading_and_names_a_bad_file(tmp_path):
    res = CliRunner().invoke(app, ["transcribe", str(SAMPLES / "指令4" / "l3_left.mp4"), "--compute", "int4"])
    assert res.exit_code == 2 and "--compute: expected one of" in res.output and res.stdout == ""
    missing = tmp_path / "none.mp4"
    res = CliRunner().invoke(app, ["transcribe", str(missing)])
    assert res.exit_code == 1
    assert json.loads(res.stdout)["error"]["message"] == f"{missing}: expected a media file, found nothing"


# ------------------------------------------------------------------ back-ends honour or refuse


@pytest.mark.parametrize(
    ("model", "flags", "named"),
    [
        ("gemini:gemini-2.5-flash", ["--audio-as", "audio_url"], "--audio-as"),
        (
            "anthropic:claude-sonnet-4-5",
            ["--audio-as", "audio_url", "--audio-format", "pcm16"],
            "--audio-as, --audio-format",
        ),
        ("anthropic:claude-sonnet-4-5", ["--no-json-mode"], "--json-mode"),
        ("hf:Qwen/Qwen2.5-VL-3B-Instruct", ["--base-url", "http://127.0.0.1:9/v1"], "--base-url"),
        ("hf:Qwen/Qwen2.5-VL-3B-Instruct", ["--timeout", "5"], "--timeout"),
        ("replay:answers.jsonl", ["--temperature", "0.5"], "--temperature"),
    ],
)
@pytest.mark.parametrize("command", ["run", "ablate"])
def test_an_option_a_back_end_does_not_honour_is_refused_before_anything(
    prepared, tmp_path, model, flags, named, command
):
    out = tmp_path / "out"
    res = CliRunner().invoke(app, [command, str(prepared), "--model", model, "--out", str(out), *flags, "--dry-run"])
    kind = model.partition(":")[0]
    assert res.exit_code == 2, res.output
    assert f"--model {model}: the {kind} back-end cannot honour {named}; it takes" in res.output
    assert not out.exists()  # nothing planned, nothing sent
    with pytest.raises(avstack.AvstackError, match=f"cannot honour {named}"):
        getattr(avstack, command)(
            prepared, model=model, out=out, backend=_options(flags), costing=avstack.Costing(dry_run=True)
        )


def _options(flags: list[str]) -> avstack.BackendOptions:
    values = dict(zip(flags[::2], flags[1::2]))
    said = {
        "--audio-as": ("audio_as", str),
        "--audio-format": ("audio_format", str),
        "--base-url": ("base_url", str),
        "--timeout": ("timeout", float),
        "--temperature": ("temperature", float),
    }
    kw = {said[f][0]: said[f][1](v) for f, v in values.items()}
    if "--no-json-mode" in flags:
        kw["json_mode"] = False
    return avstack.BackendOptions(**kw)


def test_a_default_is_not_given(prepared, tmp_path):
    """The same back-ends with no option given plan as before: a default value is not "given"."""
    for model in ("anthropic:claude-sonnet-4-5", "gemini:gemini-2.5-flash"):
        out = tmp_path / model.partition(":")[0]
        res = CliRunner().invoke(app, ["run", str(prepared), "--model", model, "--out", str(out), "--dry-run"])
        assert res.exit_code == 0, res.output
        assert (out / "plan.json").is_file()


# ------------------------------------------------------------------------------- one error root


def test_the_cli_maps_the_error_root_and_a_bug_keeps_its_traceback(monkeypatch, tmp_path):
    from avstack.errors import AvstackError, UsageError

    res = CliRunner().invoke(app, ["run", "--model", "chance", "--out", str(tmp_path / "r"), "--task", "nope"])
    assert res.exit_code == 2 and res.output.startswith("error: task must be one of")
    assert issubclass(UsageError, AvstackError) and issubclass(UsageError, ValueError)

    def broken(*args, **kwargs):
        raise KeyError("internal")

    # a KeyError inside the library is a bug: not a one-line "missing field", a traceback
    monkeypatch.setattr("avstack.tasks.get_task", broken)
    res = CliRunner().invoke(app, ["score", "--gt", str(tmp_path), "--pred", str(tmp_path)])
    assert res.exit_code == 1 and isinstance(res.exception, KeyError)


def test_a_long_cause_is_cut_at_a_word_and_keeps_its_advice():
    from avstack.runs.sending.causes import CAUSE_CHARS, cause_of

    advice = "(the request's sound was sent as WAV (IEEE float32); --audio-format pcm16 sends 16-bit PCM)"
    error = "HTTP 400: Failed to load audio file: " + "the decoder gave up on a chunk header, " * 5 + advice
    cause = cause_of(error)
    assert len(cause) <= CAUSE_CHARS < len(error) and cause.endswith(" … " + advice)
    kept = cause.removesuffix(" … " + advice)
    assert error.startswith(kept) and error[len(kept)] in " ,"  # cut between words, never inside one
    assert cause_of("HTTP 500: short") == "HTTP 500: short"


# ------------------------------------------------------------------ a clip's words, typed


def test_a_clips_words_are_a_transcript_and_its_json_is_unchanged(prepared):
    """ClipRecord.asr is the Transcript of Words that `transcribe` gives; the manifest's JSON of it
    is what it was (read back and written again, byte for byte)."""
    from avstack.asr.types import Transcript, Word
    from avstack.manifest import ClipRecord

    lines = (prepared / "manifest.jsonl").read_text(encoding="utf-8").splitlines()
    for line in lines:
        rec = ClipRecord.from_json(json.loads(line))
        assert isinstance(rec.asr, Transcript) and all(isinstance(w, Word) for w in rec.asr.words)
        assert json.dumps(rec.to_json(), ensure_ascii=False) == json.dumps(json.loads(line), ensure_ascii=False)
    silent = ClipRecord.from_json(json.loads(next(x for x in lines if "no audio track" in x)))
    assert silent.asr.words == () and silent.asr.note == "clip has no audio track"


def test_a_folder_prepared_by_the_previous_format_opens_and_runs(prepared, tmp_path):
    """A folder today's main wrote (format 2: the same manifest, `asr` a plain object) opens and
    runs to the same score; a word the file holds wrongly is named, not guessed."""
    import shutil

    from avstack.errors import AvstackError

    old = tmp_path / "old"
    shutil.copytree(prepared, old, ignore=shutil.ignore_patterns("cache"))
    meta = json.loads((old / "prepare.json").read_text())
    (old / "prepare.json").write_text(json.dumps(meta | {"format": 2}))
    now = avstack.run(prepared, model="deixis", out=tmp_path / "now")
    then = avstack.run(old, model="deixis", out=tmp_path / "then")
    assert then.result == now.result
    bad = [json.loads(x) for x in (old / "manifest.jsonl").read_text().splitlines()]
    spoken = next(r for r in bad if r["asr"]["words"])
    spoken["asr"]["words"][0]["begin_time"] = "0.3 s"
    (old / "manifest.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in bad))
    with pytest.raises(AvstackError, match=rf"clip '{spoken['clip_id']}': asr: words\[0\]: expected"):
        avstack.run(old, model="deixis", out=tmp_path / "bad")


# --------------------------------------------------------------------- typed predictions


def test_each_failure_has_its_kind_where_it_happens_and_only_giving_up_is_asked_again(tmp_path):
    """A Prediction per item, its Failure set by the engine where the failure happened (no input,
    refused before sending, rejected by the server, a limit it named, gave up after retries): the
    kinds are recorded, read back as untrusted input, and a rerun asks again only what gave up."""
    from avstack.prompting.messages import Request, Text
    from avstack.runs.sending.engine import Asking, RunSettings, WorkItem, run_items
    from avstack.runs.sending.predictions import Failure, Prediction
    from avstack.runs.sending.runners import Answer, Backend, TransientError

    class Moody(Backend):
        asked: list[str] = []

        def refuses(self, request):
            return "no sound here" if request.meta["id"] == "refused" else None

        def answer(self, request, truth=None):
            said = request.meta["id"]
            self.asked.append(said)
            if said == "rejected":
                raise RuntimeError("HTTP 400: bad image")
            if said == "limit":
                raise RuntimeError("HTTP 400: this model's maximum context length is 8192 tokens")
            if said == "gave_up":
                raise TransientError("HTTP 503")
            return Answer("{}")

    def item(name: str, **kw) -> WorkItem:
        return WorkItem(name, Request("s", (Text(name),), meta={"id": name}), **kw)

    items = [item(n) for n in ("ok", "refused", "rejected", "limit", "gave_up")] + [item("input", error="no frame")]
    asking = Asking(Moody(), "moody", settings=RunSettings(retries=1, backoff_s=0.0))
    path = run_items(items, tmp_path, lambda text, it: ({}, None), {"stack": "s"}, asking, "id")
    lines = {
        p.item_id: p for p in (Prediction.from_json(json.loads(x), "id", "t") for x in path.read_text().splitlines())
    }
    kinds = {k: p.failure for k, p in lines.items()}
    assert kinds == {
        "ok": None,
        "refused": Failure.REFUSED,
        "rejected": Failure.REJECTED,
        "limit": Failure.LIMIT,
        "gave_up": Failure.GAVE_UP,
        "input": Failure.INPUT,
    }
    assert (
        lines["limit"].limit and not lines["gave_up"].final and all(p.final for k, p in lines.items() if k != "gave_up")
    )
    assert [json.loads(x) for x in path.read_text().splitlines()] == [p.to_json() for p in lines.values()]
    Moody.asked.clear()
    run_items(items, tmp_path, lambda text, it: ({}, None), {"stack": "s"}, asking, "id")
    assert set(Moody.asked) == {"gave_up"}  # the rest stand
    with pytest.raises(DataError, match=r"t: item 'x': unknown failure kind 'oops'"):
        Prediction.from_json({"id": "x", "raw": None, "failure": "oops"}, "id", "t")
    legacy = Prediction.from_json({"id": "y", "raw": None, "error": "transient: gave up after 6 attempts"}, "id", "t")
    assert legacy.failure is None and not legacy.final  # a line from before the kinds: by its message


def test_the_cli_starts_light():
    """The command line is built from the records' declarations at its start: that reads each
    task's inputs record, not the task (no numpy, PyAV, OpenCV, nor a scorer or a back-end SDK)."""
    import subprocess
    import sys

    heavy = ("numpy", "av", "cv2", "soundfile", "openai", "avstack.tasks.ecog.task", "avstack.tasks.ecog.metrics")
    code = f"import sys, avstack_cli.app; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_light_inputs_registry_is_the_tasks_own():
    from avstack.tasks import all_tasks, task_input_records

    assert task_input_records() == [t.inputs for t in all_tasks()]
