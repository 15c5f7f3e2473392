"""avstack as a native inspect_ai task: the real `inspect_ai.eval` over the sample set, through
inspect's own providers (mockllm; openai-api against a local chat-completions server), with the
same requests and the same per-clip scores as `avstack run`."""

from __future__ import annotations

import base64
import json
import sys
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
from fake_http import JsonHandler

from avstack.manifest import load_manifest
from avstack.prompting.stacks import make_stack
from avstack.tasks.ecog.inputs import EcogInputs
from avstack.tasks.ecog.runs import requests_for

inspect_ai = pytest.importorskip("inspect_ai", reason="inspect_ai is not installed (pip install 'avstack[inspect]')")

STACKS = [("full", []), ("full", ["frame_ts"]), ("full", ["word_ts"]), ("full", ["asr"]), ("video", []), ("text", [])]


REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def outside_the_checkout(tmp_path, monkeypatch):
    """Run as a user does, away from the source tree: inspect names the tasks of an installed
    package `avstack/ecog` by reading its metadata, and a build's `avstack.egg-info` left in the
    checkout (on sys.path under `python -m pytest`) would shadow the installed one."""
    from inspect_ai._util import package

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if Path(p or ".").resolve() != REPO])
    package.get_package_direct_url.cache_clear()


@pytest.fixture()
def offline_token_count(monkeypatch):
    """inspect's token estimate (mockllm) fetches a tiktoken table from the network: count
    characters instead (the estimate plays no part in what is tested)."""
    import inspect_ai.model._model as model

    monkeypatch.setattr(model, "count_text_tokens", lambda text: max(1, len(text) // 4))


def _ours(req):
    """avstack's request as (kind, payload) items: the system prompt, then the user parts."""
    items = [("system", req.system)]
    for p in req.parts:
        kind = type(p).__name__.lower()
        if kind == "text":
            items.append(("text", p.text))
        elif kind == "image":
            items.append(("image", base64.b64encode(req.path_of(p).read_bytes()).decode()))
        else:  # inspect carries a video as data too
            items.append(("video", base64.b64encode(req.path_of(p).read_bytes()).decode()))
    return items


def _theirs(sample):
    from inspect_ai.log import resolve_sample_attachments

    sample = resolve_sample_attachments(sample)
    items = [("system", sample.input[0].content)]
    for c in sample.input[1].content:
        if c.type == "text":
            items.append(("text", c.text))
        elif c.type == "image":
            items.append(("image", c.image.split(",", 1)[1]))
        else:
            items.append(("video", c.video.split(",", 1)[1] if c.video.startswith("data:") else c.video))
    return items


def test_samples_carry_avstacks_requests_for_every_stack(prepared, offline_token_count, tmp_path):
    from inspect_ai import eval as inspect_eval

    for variant, drop in STACKS:
        stack = make_stack(variant, drop)
        logs = inspect_eval(
            "avstack/ecog",
            model="mockllm/model",
            task_args={"prepared": str(prepared), "variant": variant, "drop": ",".join(drop)},
            log_dir=str(tmp_path / "logs"),
            display="none",
        )
        log = logs[0]
        assert log.status == "success", (stack.name, log.error)
        pairs, _ = requests_for(prepared, stack, EcogInputs())
        ours = {rec.clip_id: _ours(req) for rec, req in pairs}
        theirs = {s.id: _theirs(s) for s in log.samples}
        assert theirs == ours, stack.name
        metrics = log.results.scores[0].metrics
        assert {"mean", "stderr"} <= set(metrics)


class ChatServer(JsonHandler):
    """A chat-completions server: per clip (found by its marker) a fixed answer."""

    protocol_version = "HTTP/1.1"
    answers: dict = {}

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        content = body["messages"][-1]["content"]
        if isinstance(content, list):
            content = " ".join(c.get("text", "") for c in content if isinstance(c, dict))
        texts = content
        clip = next(c for c in self.answers if f"say {c}" in texts)
        self.send_json(
            200,
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", "m"),
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": self.answers[clip]},
                    }
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            },
        )


def test_inspect_eval_scores_each_clip_as_avstack_run_does(prepared, tmp_path, monkeypatch):
    from inspect_ai import eval as inspect_eval
    from test_run import _with_markers

    from avstack.runs.sending.engine import Asking, RunSettings
    from avstack.tasks import backend_for
    from avstack.tasks.ecog.baselines import Chance, Oracle
    from avstack.tasks.ecog.runs import run, score_run

    prep = _with_markers(prepared, tmp_path)
    recs = load_manifest(prep)
    pairs, _ = requests_for(prep, make_stack("full"), EcogInputs())
    reqs = {r.clip_id: q for r, q in pairs}
    # oracle answers for half the clips, chance for the rest: per-clip scores that differ
    ChatServer.answers = {
        r.clip_id: (
            Oracle().answer(None, {"eval_gt": r.eval_gt, "width": r.width, "height": r.height}).text
            if i % 2 == 0
            else Chance(seed=3).answer(reqs[r.clip_id]).text
        )
        for i, r in enumerate(recs)
    }
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), ChatServer)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_port}/v1"
    monkeypatch.setenv("AVLOCAL_BASE_URL", url)
    monkeypatch.setenv("AVLOCAL_API_KEY", "local-key-123")
    try:
        for drop in ([], ["frame_ts"]):
            stack = make_stack("full", drop)
            out = tmp_path / f"run-{stack.name}"
            run(
                prep,
                stack,
                out,
                Asking(backend_for("ecog", "openai:m", base_url=url), settings=RunSettings(concurrency=2)),
            )
            ours = {
                c["video_name"]: {k: c[k] for k in ("acc_cls", "acc_s", "acc_t", "acc_eco", "acc_seq")}
                for c in score_run(prep, out)["per_clip"]
            }
            logs = inspect_eval(
                "avstack/ecog",
                model="openai-api/avlocal/m",
                task_args={"prepared": str(prep), "drop": ",".join(drop)},
                log_dir=str(tmp_path / "logs"),
                display="none",
            )
            assert logs[0].status == "success", logs[0].error
            theirs = {s.id: s.scores["ecog_scorer"].value for s in logs[0].samples}
            assert theirs == ours, stack.name
            assert 0 < sum(v["acc_cls"] for v in ours.values()) < len(ours)  # mixed answers, not all alike
    finally:
        httpd.shutdown()


def test_videoqa_in_inspect_scores_each_question_as_avstack_run_does(tmp_path, monkeypatch):
    """`avstack/videoqa` through inspect's openai-api provider against the request-reading server:
    per question the same correct / iou as `avstack run --task videoqa` against the same server."""
    from avstack_cli.app import app
    from inspect_ai import eval as inspect_eval
    from test_videoqa import RED, ReadingModel, _write_clip
    from typer.testing import CliRunner

    root = tmp_path / "videos"
    root.mkdir()
    for name, red in RED.items():
        _write_clip(root / name, red, np.zeros(8 * 16000, np.float32))
    rows = [
        {"id": f"{n}-when", "video": n, "question": "When is the red square on screen?", "answer_span": list(r)}
        for n, r in RED.items()
    ]
    rows += [
        {
            "id": f"{n}-colour",
            "video": n,
            "question": "What colour is the square?",
            "options": ["blue", "red"],
            "answer": "red",
        }
        for n in RED
    ]
    questions = tmp_path / "q.jsonl"
    questions.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    prep = tmp_path / "prep"
    assert CliRunner().invoke(app, ["prepare", str(root), "--out", str(prep), "--anchors", "frames"]).exit_code == 0
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), ReadingModel)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_port}/v1"
    monkeypatch.setenv("AVLOCAL_BASE_URL", url)
    monkeypatch.setenv("AVLOCAL_API_KEY", "local-key-123")
    monkeypatch.setenv("OPENAI_API_KEY", "local-key-123")
    try:
        for drop in ([], ["frame_ts"]):
            out = tmp_path / f"run{len(drop)}"
            args = [
                "run",
                str(prep),
                "--task",
                "videoqa",
                "--questions",
                str(questions),
                "--model",
                "openai:reader",
                "--base-url",
                url,
                "--out",
                str(out),
                *sum((["--drop", d] for d in drop), []),
            ]
            res = CliRunner().invoke(app, args)
            assert res.exit_code == 0, res.output
            import csv

            ours = {
                r["item_id"]: (float(r["correct"]), float(r["iou"] or 0))
                for r in csv.DictReader((out / "per_item.csv").read_text().splitlines())
            }
            logs = inspect_eval(
                "avstack/videoqa",
                model="openai-api/avlocal/reader",
                task_args={"prepared": str(prep), "questions": str(questions), "drop": ",".join(drop)},
                log_dir=str(tmp_path / "logs"),
                display="none",
            )
            assert logs[0].status == "success", logs[0].error
            theirs = {
                s.id: (s.scores["videoqa_scorer"].value["correct"], s.scores["videoqa_scorer"].value["iou"])
                for s in logs[0].samples
            }
            assert theirs == ours and len(ours) == 4
        assert sum(c for c, _ in ours.values()) == 2  # without frame times only the colour questions are right
    finally:
        httpd.shutdown()
