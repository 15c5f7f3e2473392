"""No silent zeros (#52): a stack whose requests fail is marked failed in every table, counted with
its causes, and `ablate` exits non-zero naming it and the command that asks only those clips
again; an error that names an input the server cannot take is final and stops the stack's other
requests before they are sent. Against a local server that answers as llama-server does without
a vision projector (HTTP 500, "image input is not supported - hint: ... provide the mmproj")."""

from __future__ import annotations

import json
import threading

import pytest
from avstack_cli.app import app
from fake_http import JsonHandler, chat_completion, serving
from typer.testing import CliRunner

from avstack.runs.sending.runners.openai_compat import unsupported_input

# llama-server's own words, as it answered a text-only model's image request
LLAMA_NO_IMAGES = "image input is not supported - hint: if this is unexpected, you may need to provide the mmproj"


class TextOnly(JsonHandler):
    """Chat completions like llama-server serving a text-only GGUF."""

    posts: list = []
    lock = threading.Lock()

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        parts = body["messages"][-1]["content"]
        has_image = any(isinstance(p, dict) and p.get("type") == "image_url" for p in parts)
        with self.lock:
            self.posts.append({"image": has_image, "max_tokens": body.get("max_tokens"), "t": body.get("temperature")})
        if has_image:
            self.send_json(500, {"error": {"code": 500, "message": LLAMA_NO_IMAGES, "type": "server_error"}})
            return
        answer = json.dumps({"selected_options": ["A"], "point_list": [{"point": [500, 500], "timestamp": 1000}]})
        usage = {"prompt_tokens": 300, "completion_tokens": 20, "total_tokens": 320}
        self.send_json(200, chat_completion(answer, usage))


@pytest.fixture()
def text_only():
    pytest.importorskip("openai")
    TextOnly.posts = []
    with serving(TextOnly) as url:
        yield url


def test_the_servers_words_name_the_input_it_cannot_take():
    assert unsupported_input(LLAMA_NO_IMAGES) == "image"
    assert unsupported_input('{"error": "audio input is not supported"}') == "audio"
    assert unsupported_input("This model does not support video") == "video"
    assert unsupported_input("boom") is None and unsupported_input("rate limited, try again") is None


def test_a_stack_that_got_no_answer_is_marked_failed_and_ablate_says_so(prepared, text_only, tmp_path):
    out = tmp_path / "abl"
    args = ["ablate", str(prepared), "--model", "openai:smollm2", "--base-url", text_only, "--concurrency", "1"]
    res = CliRunner().invoke(app, [*args, "--variants", "text", "--max-tokens", "300", "--out", str(out)])
    assert res.exit_code == 1, res.output
    # the first image request was refused by the server, once; every later one before it was sent
    image_posts = [p for p in TextOnly.posts if p["image"]]
    assert len(image_posts) == 1, TextOnly.posts
    assert all(p["max_tokens"] == 300 and p["t"] == 0.0 for p in TextOnly.posts)
    score = json.loads((out / "full" / "score.json").read_text())
    answers = score["answers"]
    assert answers["request_failures"] == answers["clips"] == 7 and answers["answered"] == 0
    assert any("image" in cause for cause in answers["causes"]), answers
    text = json.loads((out / "text" / "score.json").read_text())["answers"]
    assert text["request_failures"] == 0 and text["answered"] == text["clips"]
    report = (out / "report.md").read_text()
    marked = "openai:smollm2 full [FAILED: 7 of 7 requests]"
    assert report.count(marked) >= 3, report  # the Δ table, the answers section, every analysis table
    assert "## Answers per stack" in report and "takes no image input" in report
    # named, with the command that asks only those again
    assert "full [FAILED" in res.output and "--retry-failed" in res.output
    predictions = [json.loads(line) for line in (out / "full" / "predictions.jsonl").read_text().splitlines()]
    assert sum(p["attempts"] for p in predictions) == 1  # sent once, not retried; the rest refused unsent
    # the retry asks only the failed clips (the server still cannot take images: the same outcome)
    TextOnly.posts = []
    again = CliRunner().invoke(
        app, [*args, "--variants", "text", "--max-tokens", "300", "--out", str(out), "--retry-failed"]
    )
    assert again.exit_code == 1 and len(TextOnly.posts) == 1 and TextOnly.posts[0]["image"], TextOnly.posts


def test_a_text_stack_and_its_ablation_exit_zero_with_every_clip_recorded(prepared, text_only, tmp_path):
    out = tmp_path / "abl"
    args = ["ablate", str(prepared), "--model", "openai:smollm2", "--base-url", text_only]
    res = CliRunner().invoke(app, [*args, "--variant", "text", "--drop", "word_ts", "--out", str(out)])
    assert res.exit_code == 0, res.output
    for stack in ("text", "text-no_word_ts"):
        rows = (out / stack / "predictions.jsonl").read_text().splitlines()
        assert len(rows) == 7, stack
    assert not [p for p in TextOnly.posts if p["image"]]
    assert "FAILED" not in (out / "report.md").read_text()


def test_max_tokens_and_temperature_are_recorded_and_key_the_answers(prepared, text_only, tmp_path):
    out = tmp_path / "abl"
    args = ["ablate", str(prepared), "--model", "openai:smollm2", "--base-url", text_only, "--variant", "text"]
    assert CliRunner().invoke(app, [*args, "--max-tokens", "64", "--out", str(out)]).exit_code == 0
    meta = json.loads((out / "text" / "run.json").read_text())
    assert meta["backend_settings"]["max_tokens"] == 64 and meta["backend_settings"]["temperature"] == 0.0
    sent = len(TextOnly.posts)
    # the same settings again (the run's record gone, the answer cache kept): every answer from the
    # cache; another max-tokens and temperature: asked anew
    (out / "text" / "predictions.jsonl").unlink()
    assert CliRunner().invoke(app, [*args, "--max-tokens", "64", "--out", str(out)]).exit_code == 0
    assert len(TextOnly.posts) == sent
    (out / "text" / "predictions.jsonl").unlink()
    res = CliRunner().invoke(app, [*args, "--max-tokens", "65", "--temperature", "0.5", "--out", str(out)])
    assert res.exit_code == 0 and len(TextOnly.posts) == sent + 7
    assert {p["t"] for p in TextOnly.posts[sent:]} == {0.5}
