"""Claude through Anthropic's Messages API (`anthropic:MODEL`, #58), against a local server that
answers only the routes Anthropic documents (fake_http.DOCUMENTED) and checks every request body
against the official `anthropic` SDK's own request types: every clip answered, each frame a
base64 image block after its time tag, the system prompt at the top level; `omni` refused before
sending; 429 (with retry-after), 529 and 5xx retried; a 400 or 413 final, recorded with the limit
the server named; the key sent only in its header, never written."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from avstack_cli.app import app
from fake_http import JsonHandler, serving
from typer.testing import CliRunner

from avstack.manifest import load_manifest

anthropic = pytest.importorskip("anthropic", reason="no anthropic SDK (pip install 'avstack[anthropic]')")

KEY = "sk-ant-test-0123456789"
MODEL = "anthropic:claude-sonnet-4-5"


def _check_against_sdk_types(body: dict) -> None:
    """The body is a MessageCreateParamsNonStreaming as the SDK types it: pydantic validates the
    TypedDict (blocks, sources, roles), and no key is one the type does not have."""
    from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
    from pydantic import TypeAdapter

    TypeAdapter(MessageCreateParamsNonStreaming).validate_python(body)
    allowed = MessageCreateParamsNonStreaming.__required_keys__ | MessageCreateParamsNonStreaming.__optional_keys__
    assert set(body) <= allowed, set(body) - allowed
    assert {"model", "max_tokens", "messages"} <= set(body)
    for message in body["messages"]:
        for block in message["content"]:
            assert block["type"] in ("text", "image") and (block["type"] != "text" or block["text"])


class Messages(JsonHandler):
    """POST /v1/messages: a Messages API answer with usage, after checking the body; per clip (its
    first frame's bytes) a scripted list of statuses to answer before the 200."""

    api = "anthropic"
    bodies: list = []
    headers_seen: list = []
    script: dict = {}  # clip marker -> [status, ...] answered first
    lock = threading.Lock()

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path != "/v1/messages":
            return self.send_json(404, {"type": "error", "error": {"type": "not_found_error", "message": "Not found"}})
        with Messages.lock:
            Messages.bodies.append(body)
            Messages.headers_seen.append({k.lower(): v for k, v in self.headers.items()})
        _check_against_sdk_types(body)
        key = _key([b["source"]["data"] for b in body["messages"][0]["content"] if b["type"] == "image"])
        with Messages.lock:
            queue = Messages.script.get(key, [])
            status = queue.pop(0) if queue else 200
        if status == 429:
            error = {"type": "rate_limit_error", "message": "Number of request tokens has exceeded your rate limit"}
            return self.send_json(429, {"type": "error", "error": error}, {"retry-after": "0"})
        if status == 529:
            error = {"type": "overloaded_error", "message": "Overloaded"}
            return self.send_json(529, {"type": "error", "error": error})
        if status == 400:
            message = "image dimensions exceed max allowed size for many-image requests: 2000 pixels"
            error = {"type": "invalid_request_error", "message": message}
            return self.send_json(400, {"type": "error", "error": error})
        images = sum(b["type"] == "image" for b in body["messages"][0]["content"])
        self.send_json(
            200,
            {
                "id": "msg_01", "type": "message", "role": "assistant", "model": body["model"],
                "content": [{"type": "text", "text": json.dumps({"answer": [], "images_seen": images})}],
                "stop_reason": "end_turn", "stop_sequence": None,
                "usage": {"input_tokens": 1000 + images, "output_tokens": 12, "cache_read_input_tokens": 0,
                          "cache_creation_input_tokens": 0},
            },
        )  # fmt: skip


def _key(images: list[str]) -> str:
    return hashlib.sha256("".join(images).encode()).hexdigest()


def _frames_key(prepared: Path, rec) -> str:
    """What the fake knows a clip's request by: all of its frames (some clips share their first)."""
    return _key([base64.b64encode((prepared / f.path).read_bytes()).decode() for f in rec.frames])


@pytest.fixture()
def fresh():
    Messages.bodies, Messages.headers_seen, Messages.script = [], [], {}


def _host(url: str) -> str:
    return url.removesuffix("/v1")  # the SDK takes the host and adds /v1 itself


def test_an_ablation_on_claude_answers_every_clip_with_sdk_typed_bodies(prepared, tmp_path, monkeypatch, fresh):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    out = tmp_path / "abl"
    with serving(Messages) as url:
        args = ["ablate", str(prepared), "--model", MODEL, "--base-url", _host(url), "--drop", "frame_ts"]
        res = CliRunner().invoke(app, [*args, "--variants", "omni", "--concurrency", "2", "--out", str(out)])
    assert res.exit_code == 1, res.output  # omni refused: a failed stack, named
    assert "omni" in res.output and "takes no audio input" in res.output
    clips = [r for r in load_manifest(prepared) if r.ok]
    for stack in ("full", "full-no_frame_ts"):
        rows = [json.loads(line) for line in (out / stack / "predictions.jsonl").read_text().splitlines()]
        assert len(rows) == len(clips) and all(r["error"] is None and r["raw"] for r in rows), rows
        assert all(r["usage"]["input_tokens"] > 1000 for r in rows if not r["cached"])
    omni = [json.loads(line) for line in (out / "omni" / "predictions.jsonl").read_text().splitlines()]
    assert all(r["attempts"] == 0 and "takes no audio input" in r["error"] for r in omni)
    assert not any("audio" in json.dumps(b) for b in Messages.bodies)  # nothing of omni was sent
    body = next(b for b in Messages.bodies if "<timestamp_ms>" in json.dumps(b))  # a full stack's request
    assert body["system"] and body["model"] == "claude-sonnet-4-5"
    from avstack.runs.sending.runners.anthropic import _takes

    assert body.get("temperature") == (0 if _takes("temperature") else None)  # only where the SDK types it
    content = body["messages"][0]["content"]
    tags = [content[i - 1].get("text", "") for i, b in enumerate(content) if b["type"] == "image"]
    assert all(t.startswith("<timestamp_ms>") for t in tags)  # each frame after its time tag (full)
    # the key only in the auth header the SDK uses (x-api-key; Bearer since the SDK's 2026 releases)
    seen = Messages.headers_seen
    sent_keys = [(h.get("x-api-key"), h.get("authorization", "").removeprefix("Bearer ")) for h in seen]
    assert all(KEY in pair for pair in sent_keys)
    assert all(h.get("anthropic-version") for h in Messages.headers_seen)
    for path in out.rglob("*"):  # the key never reaches a file
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
    assert KEY not in res.output


def test_claude_retries_as_anthropic_says_and_a_named_limit_is_final(prepared, tmp_path, monkeypatch, fresh):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    keys = {r.clip_id: _frames_key(prepared, r) for r in load_manifest(prepared) if r.ok}
    unique = [c for c, k in keys.items() if list(keys.values()).count(k) == 1]  # frames no other clip has
    clips = [c for c in unique[:2]]
    Messages.script = {keys[clips[0]]: [429, 529], keys[clips[1]]: [400]}
    out = tmp_path / "run"
    with serving(Messages) as url:
        args = ["run", str(prepared), "--model", MODEL, "--base-url", _host(url), "--concurrency", "1"]
        res = CliRunner().invoke(app, [*args, "--out", str(out)])
    assert res.exit_code == 1, res.output  # one clip failed: named, counted
    rows = {r["video_name"]: r for r in map(json.loads, (out / "predictions.jsonl").read_text().splitlines())}
    assert rows[clips[0]]["attempts"] == 3 and rows[clips[0]]["error"] is None
    bad = rows[clips[1]]
    assert bad["attempts"] == 1 and "2000 pixels" in bad["error"] and "invalid_request_error" in bad["error"]


def test_the_plan_counts_claudes_images_and_prices_it(prepared, tmp_path):
    out = tmp_path / "plan"
    res = CliRunner().invoke(app, ["run", str(prepared), "--model", MODEL, "--out", str(out), "--dry-run"])
    assert res.exit_code == 0, res.output  # no key needed to plan
    plan = json.loads((out / "plan.json").read_text())
    from avstack.runs.planning import cost

    assert plan["image_rule"] == "claude" and plan["price_usd_per_1m"] == {"input": 3.0, "output": 15.0}
    frames = [f for r in load_manifest(prepared) if r.ok for f in r.frames]
    sizes = [cost.image_size(prepared / f.path) for f in frames]
    assert plan["stacks"]["full"]["image_tokens"] == sum(cost.claude(w, h) for w, h in sizes)


# --------------------------------------------------------------------------- Message Batches


class Batches(Messages):
    """Message Batches as Anthropic documents them (create, list newest first, retrieve, results
    as JSONL at the batch's results_url), each request's params checked against the SDK's types;
    a batch ends after `polls_to_finish` retrieves. `kill_on_create`: a pid killed once after a
    batch is created, before the reply (the window where a second batch could be made)."""

    batches: dict = {}
    online: list = []
    polls_to_finish = 1
    kill_on_create: int | None = None

    def _batch(self, bid: str) -> dict:
        b = self.batches[bid]
        n, ended = len(b["requests"]), b["polls"] >= self.polls_to_finish
        host = f"http://{self.headers['Host']}"
        return {
            "id": bid, "type": "message_batch", "processing_status": "ended" if ended else "in_progress",
            "request_counts": {"processing": 0 if ended else n, "succeeded": n if ended else 0, "errored": 0,
                               "canceled": 0, "expired": 0},
            "created_at": b["created_at"], "expires_at": b["created_at"],
            "ended_at": b["created_at"] if ended else None,
            "archived_at": None, "cancel_initiated_at": None,
            "results_url": f"{host}/v1/messages/batches/{bid}/results" if ended else None,
        }  # fmt: skip

    def do_POST(self):
        if self.path == "/v1/messages":
            Batches.online.append(self.path)
            return super().do_POST()
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path != "/v1/messages/batches":
            return self.send_json(404, {"type": "error", "error": {"type": "not_found_error", "message": "Not found"}})
        for r in body["requests"]:
            _check_against_sdk_types(r["params"])
            assert len(r["custom_id"]) <= 64
        with Messages.lock:
            bid = f"msgbatch_{len(self.batches) + 1:03d}"
            created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            self.batches[bid] = {"requests": body["requests"], "polls": 0, "created_at": created}
            victim, Batches.kill_on_create = Batches.kill_on_create, None
        if victim is not None:  # the batch exists; the client dies before it hears of it
            os.kill(victim, signal.SIGKILL)
        self.send_json(200, self._batch(bid))

    def do_GET(self):
        path = self.path.split("?")[0]
        if path == "/v1/messages/batches":
            data = [self._batch(b) for b in reversed(list(self.batches))]
            first, last = (data[0]["id"], data[-1]["id"]) if data else (None, None)
            return self.send_json(200, {"data": data, "has_more": False, "first_id": first, "last_id": last})
        bid = path.removeprefix("/v1/messages/batches/").removesuffix("/results")
        if bid not in self.batches:
            return self.send_json(404, {"type": "error", "error": {"type": "not_found_error", "message": "Not found"}})
        if path.endswith("/results"):
            lines = []
            for r in self.batches[bid]["requests"]:
                images = sum(b["type"] == "image" for b in r["params"]["messages"][0]["content"])
                message = {"id": "msg_b", "type": "message", "role": "assistant", "model": r["params"]["model"],
                           "content": [{"type": "text", "text": json.dumps({"answer": [], "images_seen": images})}],
                           "stop_reason": "end_turn", "stop_sequence": None,
                           "usage": {"input_tokens": 1000 + images, "output_tokens": 12}}  # fmt: skip
                result = {"type": "succeeded", "message": message}
                lines.append(json.dumps({"custom_id": r["custom_id"], "result": result}))
            return self.send_json(200, ("\n".join(lines) + "\n").encode())
        self.batches[bid]["polls"] += 1
        self.send_json(200, self._batch(bid))


def _answers(out: Path) -> dict:
    rows = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    return {r["video_name"]: r["raw"] for r in rows}


def _run_cli(prepared: Path, url: str, out: Path, *extra: str) -> subprocess.Popen:
    code = "from avstack_cli.app import main; main()"
    args = ["run", str(prepared), "--model", MODEL, "--base-url", _host(url), "--out", str(out), *extra]
    env = {**os.environ, "ANTHROPIC_API_KEY": KEY}
    return subprocess.Popen([sys.executable, "-c", code, *args], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip


def test_claude_batch_killed_between_create_and_record_is_adopted_not_paid_twice(prepared, tmp_path, fresh):
    Batches.batches, Batches.online, Batches.kill_on_create = {}, [], None
    with serving(Batches) as url:
        online = _run_cli(prepared, url, tmp_path / "online")
        assert online.wait(timeout=300) == 0, online.stderr.read()
        reference = _answers(tmp_path / "online")
        Batches.online.clear()
        out, extra = tmp_path / "batch", ("--batch", "--batch-poll", "0.05")
        proc = _run_cli(prepared, url, out, *extra)
        Batches.kill_on_create = proc.pid  # the kill falls between the batch's creation and its record
        proc.wait(timeout=300)
        assert proc.returncode == -signal.SIGKILL and len(Batches.batches) == 1, proc.stderr.read()
        again = _run_cli(prepared, url, out, *extra)
        assert again.wait(timeout=300) == 0, again.stderr.read()
    assert len(Batches.batches) == 1  # adopted, not created again
    assert Batches.online == []  # every answer came from the batch
    assert _answers(out) == reference
    state = json.loads((out / "batches.json").read_text())
    assert [b["batch_id"] for b in state["batches"]] == ["msgbatch_001"]
