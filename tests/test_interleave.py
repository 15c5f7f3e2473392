"""One clip's stacks go out together (#58, avstack.runs.sending.interleave): an ablation sends every stack's
request for a clip before the next clip's, through one pool of --concurrency; nothing else
changes: each stack's answers and files are those its own `run` gives, a request two stacks share
is paid once, a killed ablation resumes, and the sequential rounds hold."""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path

import pytest
from avstack_cli.app import app
from fake_http import JsonHandler, chat_completion, serving
from typer.testing import CliRunner

from avstack.runs.sending.interleave import ClipMajor


class Recording(JsonHandler):
    """Chat completions answering each request by its content (a hash), keeping the order the
    clips (their frames) arrived in."""

    order: list = []
    lock = threading.Lock()

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        content = body["messages"][-1]["content"]
        frames = "".join(p["image_url"]["url"] for p in content if p["type"] == "image_url")
        clip = hashlib.sha256(frames.encode()).hexdigest()[:8]
        with Recording.lock:
            Recording.order.append(clip)
        answer = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:12]
        self.send_json(200, chat_completion(answer, {"prompt_tokens": 10, "completion_tokens": 2}))


STACKS = ["--drop", "frame_ts", "--drop", "asr", "--drop", "word_ts"]


def _raw(folder: Path) -> dict:
    rows = [json.loads(line) for line in (folder / "predictions.jsonl").read_text().splitlines()]
    return {r["video_name"]: r["raw"] for r in rows}


def _blocks(order: list) -> int:
    return 1 + sum(a != b for a, b in zip(order, order[1:], strict=False))


def test_an_ablation_sends_a_clips_stacks_together_and_answers_as_each_run_does(prepared, tmp_path):
    Recording.order = []
    with serving(Recording) as url:
        base = ["--model", "openai:m", "--base-url", url, "--concurrency", "1"]
        res = CliRunner().invoke(app, ["ablate", str(prepared), *base, *STACKS, "--out", str(tmp_path / "abl")])
        assert res.exit_code == 0, res.output
        interleaved = list(Recording.order)
        runs = {}
        for name, drop in (("full", []), ("full-no_frame_ts", ["frame_ts"]), ("full-no_asr", ["asr"]),
                           ("full-no_word_ts", ["word_ts"])):  # fmt: skip
            args = ["run", str(prepared), *base, "--out", str(tmp_path / name)]
            assert CliRunner().invoke(app, [*args, *sum((["--drop", d] for d in drop), [])]).exit_code == 0
            runs[name] = _raw(tmp_path / name)
    # each clip's requests in one block (clips with the same frames share theirs), not one per stack
    assert _blocks(interleaved) == len(set(interleaved)), interleaved
    for name, answers in runs.items():
        assert _raw(tmp_path / "abl" / name) == answers, name  # the same answer per clip as its own run
    rows = [json.loads(x) for s in runs for x in (tmp_path / "abl" / s / "predictions.jsonl").read_text().splitlines()]
    sent = sum(not r["cached"] for r in rows)
    assert len(interleaved) == sent  # a request two stacks share went out once (the other: cached)


def test_the_pool_keeps_clip_major_order_and_pays_a_shared_request_once():
    pool = ClipMajor(concurrency=1, lanes=2)
    done: list = []
    a, b = pool.lane(0), pool.lane(1)
    futures = [a.submit(rank, lambda r=rank: done.append(("full", r))) for rank in range(3)]
    assert done == []  # nothing starts before every lane has queued
    a.ready()
    futures += [b.submit(rank, lambda r=rank: done.append(("drop", r))) for rank in range(3)]
    b.ready()
    for f in futures:
        f.result(timeout=5)
    assert done == [("full", 0), ("drop", 0), ("full", 1), ("drop", 1), ("full", 2), ("drop", 2)]
    pool.close()
    held, order = threading.Event(), []
    pool = ClipMajor(concurrency=2, lanes=1)

    def ask(tag: str) -> None:
        with pool.only_one("same-request"):
            order.append(f"{tag} in")
            held.wait(0.2)
            order.append(f"{tag} out")

    fs = [pool.lane(0).submit(0, lambda: ask("x")), pool.lane(0).submit(1, lambda: ask("y"))]
    pool.ready(0)
    for f in fs:
        f.result(timeout=5)
    assert order in (["x in", "x out", "y in", "y out"], ["y in", "y out", "x in", "x out"])  # never both at once
    pool.close()


@pytest.mark.parametrize("until", ["decided"])
def test_sequential_rounds_hold_when_stacks_interleave(prepared, tmp_path, until):
    Recording.order = []
    with serving(Recording) as url:
        args = ["ablate", str(prepared), "--model", "openai:m", "--base-url", url, "--drop", "frame_ts"]
        res = CliRunner().invoke(app, [*args, "--until", until, "--round", "3", "--out", str(tmp_path / "abl")])
    assert res.exit_code == 0, res.output
    stop = json.loads((tmp_path / "abl" / "sequential.json").read_text())
    asked = {s: set(_raw(tmp_path / "abl" / s)) for s in ("full", "full-no_frame_ts")}
    assert asked["full"] == asked["full-no_frame_ts"] and len(asked["full"]) == stop["stopped_at_clips"], stop


def test_the_shared_first_layout_moves_what_a_clips_stacks_share_to_the_front(prepared):
    from avstack.manifest import opened
    from avstack.prompting.messages import Image, Text
    from avstack.prompting.stacks import make_stack, parse_stack_name
    from avstack.tasks.ecog.task import EcogAblation

    task = EcogAblation(opened(prepared))
    for drop in ([], ["word_ts"], ["asr"]):
        bench = task.requests(make_stack("full", drop))
        shared = task.requests(make_stack("full", drop, layout="shared-first"))
        for b, s in zip(bench, shared, strict=True):
            assert s.parts == b.parts[1:] + b.parts[:1] and s.system == b.system  # the same parts, moved
            assert isinstance(s.parts[-1], Text) and "<instruction>" in s.parts[-1].text
    # full, -word_ts and -asr of a clip now begin alike up to the instruction: their frames and tags
    heads = [task.requests(make_stack("full", d, layout="shared-first"))[2].parts for d in ([], ["word_ts"], ["asr"])]
    images = sum(isinstance(p, Image) for p in heads[0])
    assert images and heads[0][:-1] == heads[1][:-1] == heads[2][:-1]
    stack = make_stack("full", ["frame_ts"], "seconds", "srt", "shared-first")
    assert stack.name == "full-no_frame_ts@seconds@words-srt@shared-first" and parse_stack_name(stack.name) == stack
    with pytest.raises(ValueError, match="--layout takes benchmark, shared-first"):
        make_stack("full", layout="frames-last")


def test_layout_is_an_axis_of_the_ablation_with_its_own_delta(prepared, tmp_path):
    out = tmp_path / "abl"
    args = ["ablate", str(prepared), "--model", "deixis", "--drop", "frame_ts", "--layout", "benchmark,shared-first"]
    res = CliRunner().invoke(app, [*args, "--out", str(out)])
    assert res.exit_code == 0, res.output
    names = sorted(p.name for p in out.iterdir() if (p / "predictions.jsonl").exists())
    assert names == ["full", "full-no_frame_ts", "full-no_frame_ts@shared-first", "full@shared-first"]
    assert "full@shared-first" in (out / "report.md").read_text()  # its paired delta against full
    egogap = ["ablate", "--task", "egogap", "--bundles", str(tmp_path / "b.jsonl"), "--model", "chance"]
    res = CliRunner().invoke(app, [*egogap, "--layout", "shared-first", "--out", str(tmp_path / "e")])
    assert res.exit_code == 2 and "--layout" in res.output  # a task that cannot lay out refuses it, by name
