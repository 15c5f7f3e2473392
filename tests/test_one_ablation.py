"""One ablation for every task (avstack.runs.ablation.arms): the same options mean the same on every
task or are refused naming the option; a stack whose requests failed exits non-zero naming it, in
every mode; `run` exits non-zero when items failed, on every task."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from avstack_cli.app import app
from conftest import shared_path
from fake_http import JsonHandler, serving
from typer.testing import CliRunner

from avstack.runs.ablation.arms import AblationSpec, UnsupportedOption, refuse_unhonoured_options, stacks_to_run


class Refusing(JsonHandler):
    """An OpenAI-protocol server that refuses every chat completion with a 400 (final: never
    retried), keeping each request body it was sent."""

    bodies: list[dict] = []
    lock = threading.Lock()

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with Refusing.lock:
            Refusing.bodies.append(body)
        error = {"message": "this test server answers nothing", "type": "invalid_request_error"}
        self.send_json(400, {"error": error})


def _ablate(prepared: Path, questions: Path, url: str, out: Path, *extra: str):
    args = ["ablate", str(prepared), "--task", "videoqa", "--questions", str(questions), "--model", "openai:gpt-4o"]
    args += ["--base-url", url, "--drop", "frame_ts", "--variants", "omni", "--out", str(out), *extra]
    return CliRunner().invoke(app, args)


@pytest.mark.parametrize("until", ["all", "decided"])
def test_videoqa_failed_stacks_exit_nonzero_and_omni_runs(prepared, questions, tmp_path, until):
    Refusing.bodies = []
    with serving(Refusing) as url:
        res = _ablate(prepared, questions, url, tmp_path / "out", "--until", until)
    assert res.exit_code == 1, res.output
    stacks = ["full", "full-no_frame_ts", "omni", "omni-no_frame_ts"]
    assert all((tmp_path / "out" / s).is_dir() for s in stacks)  # --variants omni was run, not dropped
    for s in stacks:
        assert f"openai:gpt-4o {s}: " in res.output and "requests failed" in res.output
    assert "--retry-failed" in res.output
    report = (tmp_path / "out" / "report.md").read_text()
    assert "omni [FAILED:" in report and "Request failures" in report
    # the omni requests carried the clip's sound; the frame stacks none
    with_audio = [b for b in Refusing.bodies if "input_audio" in json.dumps(b)]
    assert with_audio and len(with_audio) < len(Refusing.bodies)
    if until == "decided":
        stop = json.loads((tmp_path / "out" / "sequential.json").read_text())
        assert set(stop["contrasts"]) == {f"full - {s}" for s in stacks[1:]}  # variants ride in the rounds too


def test_an_option_a_task_cannot_honour_is_refused_naming_it():
    class Narrow:
        name, metrics, unit, honours = "narrow", ("correct",), "items", frozenset({"variants"})

    with pytest.raises(
        UnsupportedOption, match=r"--task narrow cannot honour --drop, --cluster, --until: it takes --variants"
    ):
        refuse_unhonoured_options(Narrow(), AblationSpec(("word_ts",), cluster="scene", until="decided"))  # type: ignore[arg-type]
    refuse_unhonoured_options(Narrow(), AblationSpec((), ("omni",)))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="variant: expected one of"):
        stacks_to_run(AblationSpec(("word_ts",), ("omnii",)))
    with pytest.raises(ValueError, match=r"until decided\) needs a dropped cue or a variant"):
        AblationSpec(until="decided")


def test_time_formats_and_variants_give_the_same_stacks_on_every_task():
    spec = AblationSpec(("frame_ts",), ("omni",), ts_formats=("ms", "index"))
    names = [s.name for s in stacks_to_run(spec)]
    assert names == ["full", "full@index", "full-no_frame_ts", "full-no_frame_ts@index", "omni", "omni-no_frame_ts"]


def test_inputs_a_task_does_not_take_exit_2(prepared, questions, tmp_path):
    res = CliRunner().invoke(app, ["ablate", str(prepared), "--task", "egogap", "--model", "chance", "-o", "x"])
    assert res.exit_code == 2 and "--task egogap reads --bundles and --images, not a PREPARED folder" in res.output
    args = ["ablate", str(prepared), "--questions", str(questions), "--model", "chance", "-o", str(tmp_path / "o")]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2 and "--task ecog takes no --questions" in res.output


def test_egogap_run_with_a_wrong_image_folder_exits_nonzero(tmp_path):
    bundles = shared_path("egogapbench", "wikimedia_default.bundles.jsonl")
    args = ["run", "--task", "egogap", "--bundles", str(bundles), "--images", str(tmp_path / "nowhere")]
    res = CliRunner().invoke(app, [*args, "--model", "chance", "--out", str(tmp_path / "run")])
    assert res.exit_code == 1, res.output
    assert "107 of 107 items failed" in res.output and "--retry-failed" in res.output


def test_the_commands_ask_the_task_not_its_name(prepared, questions, tmp_path):
    """stacks, score and run --dry-run look the task up: what it lacks is said, exit 2."""
    res = CliRunner().invoke(app, ["stacks", str(prepared), "--task", "egogap", "-o", str(tmp_path / "s.jsonl")])
    assert res.exit_code == 2 and "--task egogap has no requests over a prepared folder" in res.output
    res = CliRunner().invoke(app, ["stacks", str(prepared), "--coord-order", "yx", "--task", "videoqa"]
                             + ["--questions", str(questions), "-o", str(tmp_path / "s.jsonl")])  # fmt: skip
    assert res.exit_code == 2 and "--task videoqa takes no --coord-order" in res.output
    res = CliRunner().invoke(app, ["score", "--task", "videoqa", "--pred", str(tmp_path / "p.jsonl")])
    assert res.exit_code == 2 and "--questions and --pred are required for --task videoqa" in res.output
    out = tmp_path / "plan"
    args = ["run", str(prepared), "--task", "videoqa", "--questions", str(questions), "--model", "openai:gpt-4o"]
    res = CliRunner().invoke(app, [*args, "--variant", "omni", "--out", str(out), "--dry-run"])
    assert res.exit_code == 0, res.output
    plan = json.loads((out / "plan.json").read_text())
    assert list(plan["stacks"]) == ["omni"] and plan["stacks"]["omni"]["requests"] == 7


def test_every_task_places_the_clips_sound_where_ecog_does(prepared, questions):
    """The parts shared by the tasks come from one place (prompting.shared_parts): the clip's sound right
    after the first text, before the frames, in EcoG's and videoqa's requests alike."""
    from avstack.prompting.messages import Audio, Image, Text
    from avstack.prompting.stacks import make_stack
    from avstack.tasks import get_task

    omni = make_stack("omni")
    for task, given in (("ecog", {}), ("videoqa", {"questions": questions})):
        chosen = get_task(task)
        requests = chosen.ablation(prepared, chosen.inputs(**given)).requests(omni)
        assert requests, task
        for req in requests:
            kinds = [type(p) for p in req.parts]
            assert kinds[:2] == [Text, Audio] and kinds.count(Audio) == 1, (task, kinds)
            assert Image in kinds[2:]


@pytest.mark.parametrize("task", ["ecog", "videoqa"])
def test_the_prepared_folder_is_opened_once_per_ablation(prepared, questions, tmp_path, monkeypatch, task):
    """One manifest read for the whole ablation (every stack's requests, runs and scores), where
    a videoqa ablation once read it about three times per stack."""
    import avstack.manifest as manifest
    from avstack import ablate

    reads = []
    real = manifest.load_manifest
    monkeypatch.setattr(manifest, "load_manifest", lambda p: reads.append(p) or real(p))
    extra = {"questions": questions} if task == "videoqa" else {}
    out = tmp_path / "out"
    done = ablate(prepared, model="chance", out=out, drop=["word_ts", "frame_ts"], variants="text", task=task, **extra)
    assert not done.failed and (tmp_path / "out" / "text-no_word_ts" / "predictions.jsonl").is_file()
    assert len(reads) == 1, reads


def _score_of(out: Path) -> dict:
    return json.loads((out / "score.json").read_text())


@pytest.mark.parametrize("model", ["chance", "chance:7"])
def test_egogap_conditions_as_one_ablation_give_what_run_gives(tmp_path, model):
    """EgoGap's image variants, option formats and shuffles as stacks of one ablation: per stack
    the accuracies and n4 error rates of a plain `run` of that condition, the paired deltas
    against the baseline, each stack's error rates in the report."""
    from test_egogap import _bundles, _images

    bundles, images = _bundles(tmp_path / "b.jsonl"), _images(tmp_path / "img")
    out = tmp_path / "abl"
    args = ["ablate", "--task", "egogap", "--bundles", str(bundles), "--images", str(images), "--model", model]
    res = CliRunner().invoke(app, [*args, "--variants", "vflip,n3,shuffle3,egoplan", "--out", str(out)])
    assert res.exit_code == 0, res.output
    conditions = {"default-image": [], "default-vflip": ["--variant", "vflip"], "default-image-n3": ["--options", "n3"]}
    conditions |= {"default-image-shuffle3": ["--shuffle-seed", "3"], "egoplan-image": ["--style", "egoplan"]}
    for name, extra in conditions.items():
        alone = tmp_path / f"run-{name}"
        run = ["run", "--task", "egogap", "--bundles", str(bundles), "--images", str(images), "--model", model]
        done = CliRunner().invoke(app, [*run, *extra, "--out", str(alone)])
        assert done.exit_code == 0, done.output
        mine, theirs = _score_of(out / name), _score_of(alone)
        assert mine["groups"] == theirs["groups"] and mine["n4_errors"] == theirs["n4_errors"], name
    report = (out / "report.md").read_text()
    assert "## Deltas vs" in report and "motor intrusion (n4)" in report and (out / "delta.csv").is_file()
    assert set((out / "delta.csv").read_text().split("\n")[0].split(",")) >= {"run", "metric", "delta"}


def test_egogap_ablation_refuses_what_it_cannot_do_and_names_failed_stacks(tmp_path):
    from test_egogap import _bundles

    bundles = _bundles(tmp_path / "b.jsonl")
    base = ["ablate", "--task", "egogap", "--bundles", str(bundles), "--model", "chance", "--out", str(tmp_path / "o")]
    res = CliRunner().invoke(app, [*base, "--drop", "word_ts"])
    assert res.exit_code == 2 and "--task egogap cannot honour --drop" in res.output
    res = CliRunner().invoke(app, [*base, "--variants", "sideways"])
    assert res.exit_code == 2 and "egogap variant: expected full" in res.output
    res = CliRunner().invoke(app, [*base, "--variant", "text", "--variants", "vflip", "--images", str(tmp_path / "no")])
    assert res.exit_code == 1 and "default-vflip [FAILED: 8 of 8 requests]" in res.output  # marked in the table
    assert "chance default-vflip: 8 of 8 requests failed" in res.output and "--retry-failed" in res.output


def test_egogap_ablation_on_the_shared_coco_bundles_matches_run(tmp_path):
    """The benchmark's own COCO bundles (no images here: the text condition as the baseline), with
    the offline chance baseline: each stack's accuracies are those of a plain run."""
    bundles = shared_path("egogapbench", "coco_default.bundles.jsonl")
    out = tmp_path / "abl"
    args = ["ablate", "--task", "egogap", "--bundles", str(bundles), "--model", "chance", "--variant", "text"]
    res = CliRunner().invoke(app, [*args, "--variants", "n3,shuffle1", "--out", str(out)])
    assert res.exit_code == 0, res.output
    for name, extra in (("default-text", []), ("default-text-n3", ["--options", "n3"])):
        alone = tmp_path / name
        run = ["run", "--task", "egogap", "--bundles", str(bundles), "--model", "chance", "--variant", "text"]
        assert CliRunner().invoke(app, [*run, *extra, "--out", str(alone)]).exit_code == 0
        mine, theirs = _score_of(out / name), _score_of(alone)
        assert mine["groups"] == theirs["groups"] and mine["n4_errors"] == theirs["n4_errors"], name
        assert mine["counts"]["items"] > 800
    assert "Deltas vs `chance default-text`" in (out / "report.md").read_text()


def test_run_refuses_what_the_task_has_no_use_for(prepared, tmp_path):
    """`run`'s options travel as typed records (TaskInputs, StackChoice); a task refuses, by flag,
    what it cannot use instead of ignoring it."""
    from test_egogap import _bundles

    bundles = _bundles(tmp_path / "b.jsonl")
    out = ["--model", "chance", "--out", str(tmp_path / "r")]
    res = CliRunner().invoke(app, ["run", str(prepared), "--bundles", str(bundles), *out])
    assert res.exit_code == 2 and "--task ecog takes no --bundles" in res.output
    res = CliRunner().invoke(app, ["run", str(prepared), "--shuffle-seed", "3", *out])
    assert res.exit_code == 2 and "--task ecog takes no --shuffle-seed" in res.output
    res = CliRunner().invoke(app, ["run", "--task", "egogap", "--bundles", str(bundles), "--drop", "asr", *out])
    assert res.exit_code == 2 and "--task egogap takes no --drop" in res.output
    res = CliRunner().invoke(app, ["run", "--task", "egogap", "--bundles", str(bundles), "--variant", "text", *out])
    assert res.exit_code == 0, res.output  # what it takes runs
