"""The plan is the run (#68): for every task, every request a run or an ablation sent reached a
recording server exactly as planned. plan.json holds each planned request's digest, of the body
the back-end sends for it (runs.counting.sent_digest); the server digests each JSON body it got.
Option by option: whose words (--asr), the point order (--coord-order), how a sound is sent
(--audio-as), the frame budget, the layout, packing, the model's settings, EgoGap's conditions."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from avstack_cli.app import app
from fake_http import JsonHandler, chat_completion, serving
from typer.testing import CliRunner

from avstack.runs.planning.counting import body_digest


class Recorder(JsonHandler):
    """An OpenAI-compatible server that keeps every chat body it gets and answers each."""

    bodies: list = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).bodies.append(body)
        self.send_json(200, chat_completion('{"answer": "A"}', {"prompt_tokens": 10, "completion_tokens": 2}))


def _sent_as_planned(args: list[str], out, url: str) -> tuple[list, list]:
    Recorder.bodies = []
    res = CliRunner().invoke(app, [*args, "--model", "openai:gpt-4o", "--base-url", url, "--out", str(out)])
    assert res.exit_code == 0, res.output
    planned = [d for stack in json.loads((out / "plan.json").read_text())["sent"].values() for d in stack.values()]
    return planned, [body_digest(b) for b in Recorder.bodies]


CASES = {
    "ecog": [
        [],
        ["--asr", "source"],
        ["--coord-order", "yx"],
        ["--max-frames", "3", "--layout", "shared-first"],
        ["--variant", "omni", "--audio-as", "audio_url"],
        ["--temperature", "0.5", "--max-tokens", "64", "--no-json-mode"],
        ["--ts-format", "seconds", "--word-ts-format", "srt", "--drop", "frame_ts"],
    ],
    "videoqa": [[], ["--pack"], ["--variant", "text"]],
    "egogap": [[], ["--variant", "vflip", "--style", "egoplan"], ["--options", "n3", "--shuffle-seed", "2"]],
}


@pytest.fixture()
def inputs(prepared, questions, tmp_path):
    from test_egogap import _bundles, _images

    bundles, images = _bundles(tmp_path / "b.jsonl"), _images(tmp_path / "img")
    return {
        "ecog": [str(prepared)],
        "videoqa": [str(prepared), "--task", "videoqa", "--questions", str(questions)],
        "egogap": ["--task", "egogap", "--bundles", str(bundles), "--images", str(images)],
    }


@pytest.mark.parametrize("task", list(CASES))
def test_each_run_sends_what_it_planned(task, inputs, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with serving(Recorder) as url:
        for k, extra in enumerate(CASES[task]):
            planned, sent = _sent_as_planned(["run", *inputs[task], *extra], tmp_path / f"run{k}", url)
            assert sent and Counter(sent) == Counter(planned), extra  # every item's request, once


ABLATIONS = {
    "ecog": ["--drop", "frame_ts", "--drop", "word_ts", "--max-frames", "4,8", "--aa"],
    "videoqa": ["--drop", "word_ts", "--pack", "off,on"],
    "egogap": ["--variants", "n3,shuffle2,hflip"],
}


@pytest.mark.parametrize("task", list(ABLATIONS))
def test_each_ablation_sends_what_it_planned(task, inputs, tmp_path, monkeypatch):
    """Every arm's requests: those the arms share are sent once (the answer cache), the A/A arm's
    again; each one sent was planned, and each planned one was sent."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with serving(Recorder) as url:
        planned, sent = _sent_as_planned(["ablate", *inputs[task], *ABLATIONS[task]], tmp_path / "abl", url)
    assert set(sent) == set(planned) and len(set(planned)) <= len(sent) <= len(planned), (len(sent), len(planned))
