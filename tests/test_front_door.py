"""One front door (#68): each command is one library call. The call and the command give the same
files; a failure the command exits 1 for is CommandFailed from Python, after everything is
written; every command's options are grouped by topic in --help."""

from __future__ import annotations

import pytest
from avstack_cli.app import app
from conftest import SAMPLES
from typer.testing import CliRunner

import avstack


def _cli(*args: str) -> str:
    res = CliRunner().invoke(app, [str(a) for a in args])
    assert res.exit_code == 0, res.output
    return res.output


def test_run_export_and_view_from_python_are_the_commands(prepared, questions, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    qa = {"task": "videoqa", "questions": questions}
    done = avstack.run(prepared, model="chance", out=a / "run", **qa)
    _cli("run", prepared, "--model", "chance", "--out", b / "run", "--task", "videoqa", "--questions", questions)
    assert (a / "run" / "score.json").read_text() == (b / "run" / "score.json").read_text()
    assert done.summary and done.result["counts"]["items"] == 7
    avstack.export(prepared, to="openai-batch", out=a / "x", drop=["word_ts"], **qa)
    _cli("export", prepared, "--to", "openai-batch", "--out", b / "x", "--drop", "word_ts", "--task", "videoqa",
         "--questions", questions)  # fmt: skip
    assert (a / "x" / "batch.jsonl").read_bytes() == (b / "x" / "batch.jsonl").read_bytes()
    site = avstack.view(prepared, [a / "run"], out=a / "site")
    _cli("view", prepared, a / "run", "--out", b / "site")
    assert site.path.read_text().replace(str(a), "") == (b / "site" / "index.html").read_text().replace(str(b), "")


def test_prepare_from_python_is_the_command(tmp_path):
    flags = ["--anchors", "frames,audio", "--fps", "1", "--max-side", "160", "--workers", "1", "--lang", "auto"]
    _cli("prepare", SAMPLES, "--out", tmp_path / "b", *flags)
    avstack.prepare(SAMPLES, tmp_path / "a", anchors="frames,audio", fps=1, max_side=160, workers=1, lang="auto")
    assert (tmp_path / "a" / "manifest.jsonl").read_bytes() == (tmp_path / "b" / "manifest.jsonl").read_bytes()


def test_a_failed_run_is_command_failed_after_it_wrote_everything(tmp_path):
    from test_egogap import _bundles

    bundles = _bundles(tmp_path / "b.jsonl")
    with pytest.raises(avstack.CommandFailed) as failed:
        # the image variant with no image folder: every item fails, each recorded
        avstack.run(model="chance", out=tmp_path / "r", task="egogap", bundles=bundles)
    assert failed.value.code == 1 and "items failed" in str(failed.value)
    assert len((tmp_path / "r" / "predictions.jsonl").read_text().splitlines()) == 8
    with pytest.raises(ValueError, match="--task egogap takes no --coord-order"):
        avstack.run(model="chance", out=tmp_path / "r2", task="egogap", bundles=bundles, coord_order="yx")


@pytest.mark.parametrize("command", ["prepare", "run", "ablate", "export"])
def test_options_are_grouped_by_topic_in_help(command):
    out = CliRunner().invoke(app, [command, "--help"], terminal_width=200).output
    panels = [line for line in out.splitlines() if line.startswith("╭─ ")]
    assert len(panels) >= 4, out  # beside Arguments and Options: the topics


def test_the_api_names_the_commands():
    assert {"run", "ablate", "export", "view", "prepare"} <= set(avstack.__all__)
    assert avstack.BackendOptions(temperature=0.5).given() == ["temperature"]  # a plain record
