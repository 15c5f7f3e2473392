"""--batch against a real local HTTP server speaking OpenAI's Files and Batches protocol (upload,
create, retrieve, output and error files, an expired batch): the same predictions as the online
path, one batch even when the process is killed while it is in flight, failed and expired lines
asked online."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from email.parser import BytesParser
from http.server import ThreadingHTTPServer

import pytest
from fake_http import JsonHandler, page

ENV = {"OPENAI_API_KEY": "sk-test-batch-0123456789"}


def _answer(body: dict) -> str:
    """The server's deterministic answer to a chat body, the same online and in a batch."""
    digest = hashlib.sha256(json.dumps(body["messages"], sort_keys=True).encode()).hexdigest()[:12]
    return f"answer {digest}"


def _completion(body: dict) -> dict:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", "m"),
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": _answer(body)}}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14},
    }


class BatchServer(JsonHandler):
    files: dict = {}
    batches: dict = {}
    chat_calls: list = []
    creates: list = []
    release = threading.Event()  # batches stay in progress until set
    fail_first = 0  # this many lines of each batch go to the error file
    expire = False  # the batch expires with only half its lines answered
    names: dict = {}  # file id -> the name it was uploaded under
    polls_to_finish = 0  # with release set: retrieves of a batch before it completes
    kill_on_create: int | None = None  # a pid killed once, after a batch is created, before the reply
    chat_delay_s = 0.0
    lock = threading.Lock()

    def do_POST(self):
        data = self.rfile.read(int(self.headers["Content-Length"]))
        if self.path.endswith("/chat/completions"):
            body = json.loads(data)
            self.chat_calls.append(body)
            time.sleep(self.chat_delay_s)  # a model's latency: requests are in flight when a kill comes
            return self.send_json(200, _completion(body))
        if self.path.endswith("/files"):
            msg = BytesParser().parsebytes(
                b"Content-Type: " + self.headers["Content-Type"].encode() + b"\r\n\r\n" + data
            )
            part = next(p for p in msg.get_payload() if p.get_param("name", header="content-disposition") == "file")
            with self.lock:
                fid = f"file-{len(self.files) + 1}"
                self.files[fid] = part.get_payload(decode=True)
                self.names[fid] = part.get_filename()
            return self.send_json(200, _file(fid, len(self.files[fid]), self.names[fid]))
        if self.path.endswith("/batches"):
            body = json.loads(data)
            with self.lock:
                bid = f"batch_{len(self.batches) + 1}"
                self.creates.append(bid)
                self.batches[bid] = {
                    "input": body["input_file_id"], "status": "validating", "metadata": body.get("metadata"), "polls": 0
                }  # fmt: skip
                victim, BatchServer.kill_on_create = BatchServer.kill_on_create, None
            if victim is not None:  # the batch exists; the client dies before it hears of it
                os.kill(victim, signal.SIGKILL)
            return self.send_json(200, self._batch(bid))
        self.send_json(404, {"error": "no such path"})

    def do_GET(self):
        path = self.path.split("?")[0]
        query = self.path.partition("?")[2]
        if path.endswith("/batches"):  # newest first, paged as the real API pages (limit 20, after)
            data = [self._batch(bid) for bid in reversed(list(self.batches))]
            return self.send_json(200, page(data, query))
        if path.endswith("/files"):  # paged too (limit 10,000 by default)
            data = [_file(fid, len(self.files[fid]), self.names.get(fid, "out.jsonl")) for fid in self.files]
            return self.send_json(200, page(data, query, default_limit=10_000))
        if "/batches/" in self.path:
            bid = self.path.rsplit("/", 1)[-1]
            b = self.batches[bid]
            if b["status"] not in ("completed", "expired"):
                b["status"] = "in_progress"
                b["polls"] += 1
                if self.release.is_set() and b["polls"] > self.polls_to_finish:
                    self._finish(bid)
            return self.send_json(200, self._batch(bid))
        if self.path.endswith("/content"):
            fid = self.path.split("/")[-2]
            data = self.files[fid]
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return None
        self.send_json(404, {"error": "no such path"})

    def _finish(self, bid: str) -> None:
        b = self.batches[bid]
        lines = [json.loads(x) for x in self.files[b["input"]].decode().splitlines()]
        kept = lines[: len(lines) // 2] if self.expire else lines
        out, err = [], []
        for i, line in enumerate(kept):
            if i < self.fail_first:
                err.append({"id": f"r{i}", "custom_id": line["custom_id"], "response": None, "error": {"code": "x"}})
            else:
                resp = {"status_code": 200, "request_id": f"q{i}", "body": _completion(line["body"])}
                out.append({"id": f"r{i}", "custom_id": line["custom_id"], "response": resp, "error": None})
        for name, rows in (("output_file_id", out), ("error_file_id", err)):
            if rows:
                fid = f"file-{len(self.files) + 1}"
                self.files[fid] = "".join(json.dumps(r) + "\n" for r in rows).encode()
                b[name] = fid
        b["status"] = "expired" if self.expire else "completed"

    def _batch(self, bid: str) -> dict:
        b = self.batches[bid]
        extra = {k: b[k] for k in ("output_file_id", "error_file_id") if k in b}
        return {
            "id": bid,
            "object": "batch",
            "endpoint": "/v1/chat/completions",
            "input_file_id": b["input"],
            "completion_window": "24h",
            "created_at": 0,
            "status": b["status"],
            "metadata": b.get("metadata"),
            **extra,
        }


def _file(fid: str, size: int, name: str = "b.jsonl") -> dict:
    return {
        "id": fid,
        "object": "file",
        "bytes": size,
        "created_at": 0,
        "filename": name,
        "purpose": "batch",
        "status": "processed",
    }


@pytest.fixture()
def server():
    BatchServer.files, BatchServer.batches, BatchServer.chat_calls, BatchServer.creates = {}, {}, [], []
    BatchServer.release = threading.Event()
    BatchServer.fail_first, BatchServer.expire = 0, False
    BatchServer.names, BatchServer.polls_to_finish, BatchServer.kill_on_create = {}, 0, None
    BatchServer.chat_delay_s = 0.0
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), BatchServer)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_port}/v1"
    httpd.shutdown()


def _run(prepared, url, out, *extra, wait=True):
    code = "from avstack_cli.app import main; main()"
    args = ["run", str(prepared), "--model", "openai:m", "--base-url", url, "--out", str(out), *extra]
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *args],
        env={**os.environ, **ENV},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    if wait:
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stderr
    return proc


def _predictions(out) -> dict:
    keep = ("raw", "prediction", "parse_error", "error", "usage")
    rows = [json.loads(x) for x in (out / "predictions.jsonl").read_text().splitlines()]
    return {r["video_name"]: {k: r[k] for k in keep} for r in rows}


def test_a_batch_gives_the_online_predictions(prepared, server, tmp_path):
    _run(prepared, server, tmp_path / "online")
    online_calls = len(BatchServer.chat_calls)
    BatchServer.release.set()
    _run(prepared, server, tmp_path / "batch", "--batch", "--batch-poll", "0.05")
    assert len(BatchServer.creates) == 1 and len(BatchServer.chat_calls) == online_calls  # none online
    assert _predictions(tmp_path / "batch") == _predictions(tmp_path / "online") and online_calls > 0
    state = json.loads((tmp_path / "batch" / "batches.json").read_text())
    assert state["batches"][0]["status"] == "completed" and len(state["batches"][0]["keys"]) == online_calls
    assert ENV["OPENAI_API_KEY"] not in (tmp_path / "batch" / "batches.json").read_text()


def test_a_malformed_state_file_is_dropped_not_trusted(prepared, server, tmp_path):
    """batches.json is read back from disk: entries of another shape are dropped (their requests
    go into a new batch) and an answer that is not {raw, usage} is never recorded."""
    _run(prepared, server, tmp_path / "online")
    (tmp_path / "batch").mkdir()
    junk = {"batches": [{"batch_id": 7, "keys": "x"}, "nonsense"], "answers": {"k": 5, "j": {"raw": 1}}}
    (tmp_path / "batch" / "batches.json").write_text(json.dumps(junk))
    BatchServer.release.set()
    _run(prepared, server, tmp_path / "batch", "--batch", "--batch-poll", "0.05")
    assert BatchServer.creates == ["batch_1"]
    assert _predictions(tmp_path / "batch") == _predictions(tmp_path / "online")


def test_a_run_killed_while_its_batch_is_in_flight_resumes_polling_it(prepared, server, tmp_path):
    _run(prepared, server, tmp_path / "online")
    proc = _run(prepared, server, tmp_path / "batch", "--batch", "--batch-poll", "0.05", wait=False)
    state = tmp_path / "batch" / "batches.json"
    deadline = time.time() + 120
    while not (state.exists() and BatchServer.creates) and time.time() < deadline:
        time.sleep(0.05)
    assert BatchServer.creates, "the batch was never submitted"
    time.sleep(0.3)  # polling
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    BatchServer.release.set()
    _run(prepared, server, tmp_path / "batch", "--batch", "--batch-poll", "0.05")
    assert BatchServer.creates == ["batch_1"]  # one batch submitted, not two
    assert _predictions(tmp_path / "batch") == _predictions(tmp_path / "online")


def test_failed_and_expired_lines_are_asked_online(prepared, server, tmp_path):
    _run(prepared, server, tmp_path / "online")
    online_calls = len(BatchServer.chat_calls)
    BatchServer.release.set()
    BatchServer.expire, BatchServer.fail_first = True, 1
    _run(prepared, server, tmp_path / "batch", "--batch", "--batch-poll", "0.05")
    answered_in_batch = online_calls // 2 - 1  # half the lines reached before it expired, one of them failed
    assert len(BatchServer.chat_calls) - online_calls == online_calls - answered_in_batch
    assert _predictions(tmp_path / "batch") == _predictions(tmp_path / "online")


# --------------------------------------------------------------------------- Gemini's batch mode


def _gemini_answer(contents: list) -> dict:
    digest = hashlib.sha256(json.dumps(contents, sort_keys=True).encode()).hexdigest()[:12]
    return {
        "candidates": [{"content": {"role": "model", "parts": [{"text": f"answer {digest}"}]}}],
        "usageMetadata": {"promptTokenCount": 11, "candidatesTokenCount": 3, "totalTokenCount": 14},
    }


class GeminiBatchServer(JsonHandler):
    api = "gemini"
    jobs: dict = {}
    display: dict = {}
    online: list = []
    kill_on_create: int | None = None

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if ":generateContent" in self.path:
            self.online.append(1)
            return self.send_json(200, _gemini_answer(body["contents"]))
        if ":batchGenerateContent" in self.path:
            name = f"batches/b{len(self.jobs) + 1}"
            self.jobs[name] = body["batch"]["inputConfig"]["requests"]["requests"]
            self.display[name] = body["batch"].get("displayName")
            victim, GeminiBatchServer.kill_on_create = GeminiBatchServer.kill_on_create, None
            if victim is not None:  # the job exists; the client dies before it hears of it
                os.kill(victim, signal.SIGKILL)
            meta = {"state": "BATCH_STATE_PENDING", "displayName": self.display[name]}
            return self.send_json(200, {"name": name, "metadata": meta})
        self.send_json(404, {"error": {"code": 404, "message": self.path}})

    def _job(self, name: str) -> dict:
        responses = [
            {"response": _gemini_answer(item["request"]["contents"]), "metadata": item.get("metadata")}
            for item in self.jobs[name]
        ]
        output = {"inlinedResponses": {"inlinedResponses": responses}}
        meta = {"state": "BATCH_STATE_SUCCEEDED", "output": output, "displayName": self.display.get(name)}
        return {"name": name, "metadata": meta}

    def do_GET(self):
        path = self.path.split("?")[0]
        if path.endswith("/batches"):
            return self.send_json(200, {"operations": [self._job(n) for n in reversed(list(self.jobs))]})
        self.send_json(200, self._job("batches/" + path.split("batches/", 1)[1]))


def test_gemini_batch_mode_gives_the_online_predictions(prepared, tmp_path):
    pytest.importorskip("google.genai", reason="the gemini back-end needs avstack[gemini]")
    GeminiBatchServer.jobs, GeminiBatchServer.online, GeminiBatchServer.display = {}, [], {}
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), GeminiBatchServer)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_port}"
    env = {**os.environ, "GEMINI_API_KEY": "gm-test-key-0123456789"}
    code = "from avstack_cli.app import main; main()"

    def run(out, *extra):
        args = ["run", str(prepared), "--model", "gemini:gemini-x", "--base-url", url, "--out", str(out), *extra]
        res = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stderr

    try:
        run(tmp_path / "online")
        online = len(GeminiBatchServer.online)
        run(tmp_path / "batch", "--batch", "--batch-poll", "0.05")
    finally:
        httpd.shutdown()
    assert len(GeminiBatchServer.jobs) == 1 and len(GeminiBatchServer.online) == online > 0  # none asked online
    assert _predictions(tmp_path / "batch") == _predictions(tmp_path / "online")


# --------------------------------------------------------------------------- killed at any instant


def _ablate(prepared, url, out, *extra) -> subprocess.Popen:
    code = "from avstack_cli.app import main; main()"
    args = ["ablate", str(prepared), "--model", "openai:m", "--base-url", url, "--out", str(out), "--drop", "word_ts"]
    return subprocess.Popen(
        [sys.executable, "-c", code, *args, *extra],
        env={**os.environ, **ENV},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def _kill_at(proc: subprocess.Popen, delay: float) -> bool:
    """SIGKILL after `delay` s unless it ended; whether it was killed."""
    try:
        proc.wait(timeout=delay)
        return False
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        return True


def _stack_predictions(out) -> dict:
    """Per stack: each item's lines (to count) and its answer."""
    got = {}
    for path in sorted(out.glob("*/predictions.jsonl")):
        rows = [json.loads(x) for x in path.read_text().splitlines()]
        names = [r["video_name"] for r in rows]
        got[path.parent.name] = {"once": len(names) == len(set(names)), "answers": _predictions(path.parent)}
    return got


KILL_AT_S = (0.8, 1.6, 2.2, 2.8, 3.4, 4.0, 5.0)  # spread over start-up, planning, upload, create, polling


def test_a_batch_ablation_killed_at_any_instant_creates_each_batch_once(prepared, server, tmp_path, capsys):
    """#44: killed inside the create-to-record window (the server kills the client after creating
    the batch, before replying) and at instants spread over the run, then rerun until done: no
    part is submitted twice (the rerun adopts the batch tagged with the part's key), every item
    is answered exactly once, nothing is asked online."""
    online = _ablate(prepared, server, tmp_path / "online")
    assert online.wait(timeout=300) == 0, online.stderr.read()
    reference = _stack_predictions(tmp_path / "online")
    BatchServer.chat_calls.clear()
    BatchServer.release.set()
    BatchServer.polls_to_finish = 6  # about 0.3 s in flight at --batch-poll 0.05
    out, extra = tmp_path / "batch", ("--batch", "--batch-poll", "0.05")
    proc = _ablate(prepared, server, out, *extra)
    BatchServer.kill_on_create = proc.pid  # forced: the kill falls between create and record
    proc.wait(timeout=300)
    assert proc.returncode == -signal.SIGKILL and BatchServer.creates, "the create-window kill never came"
    kills = 1 + sum(_kill_at(_ablate(prepared, server, out, *extra), t) for t in KILL_AT_S)
    last = _ablate(prepared, server, out, *extra)
    assert last.wait(timeout=300) == 0, last.stderr.read()
    tags = [b["metadata"]["avstack_part"] for b in BatchServer.batches.values()]
    with capsys.disabled():
        print(f"\n  batch kill test: {kills} kills, {len(BatchServer.creates)} batches created for "
              f"{len(set(tags))} parts, {len(BatchServer.chat_calls)} online requests")  # fmt: skip
    assert len(tags) == len(set(tags)) == len(reference), (tags, BatchServer.creates)  # one batch per stack
    assert BatchServer.chat_calls == []
    got = _stack_predictions(out)
    assert all(g["once"] for g in got.values()) and {k: g["answers"] for k, g in got.items()} == {
        k: r["answers"] for k, r in reference.items()
    }


def test_gemini_batch_killed_between_create_and_record_is_adopted(prepared, tmp_path):
    """The same window on Gemini's batch mode: the job is found by its display name on the rerun."""
    pytest.importorskip("google.genai", reason="the gemini back-end needs avstack[gemini]")
    GeminiBatchServer.jobs, GeminiBatchServer.online, GeminiBatchServer.display = {}, [], {}
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), GeminiBatchServer)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_port}"
    env = {**os.environ, "GEMINI_API_KEY": "gm-test-key-0123456789"}
    code = "from avstack_cli.app import main; main()"
    args = ["run", str(prepared), "--model", "gemini:gemini-x", "--base-url", url, "--out", str(tmp_path / "b")]
    args += ["--batch", "--batch-poll", "0.05"]
    try:
        proc = subprocess.Popen([sys.executable, "-c", code, *args], env=env, stderr=subprocess.PIPE, text=True)
        GeminiBatchServer.kill_on_create = proc.pid
        proc.wait(timeout=300)
        assert proc.returncode == -signal.SIGKILL and len(GeminiBatchServer.jobs) == 1
        res = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stderr
    finally:
        httpd.shutdown()
    assert len(GeminiBatchServer.jobs) == 1 and GeminiBatchServer.online == []  # adopted, not created again
    rows = [json.loads(x) for x in (tmp_path / "b" / "predictions.jsonl").read_text().splitlines()]
    assert rows and all(r["raw"].startswith("answer ") for r in rows)


def test_an_online_ablation_killed_at_any_instant_pays_at_most_what_was_in_flight(prepared, server, tmp_path, capsys):
    """Online: an answer is on disk the moment it arrives, so a rerun never asks it again; what a
    kill can cost twice is the requests in flight (at most --concurrency per kill)."""
    online = _ablate(prepared, server, tmp_path / "online")
    assert online.wait(timeout=300) == 0, online.stderr.read()
    reference, unique = _stack_predictions(tmp_path / "online"), len(BatchServer.chat_calls)
    BatchServer.chat_calls.clear()
    BatchServer.chat_delay_s = 0.4
    out, concurrency = tmp_path / "again", 2
    kills = sum(_kill_at(_ablate(prepared, server, out, "--concurrency", str(concurrency)), t) for t in KILL_AT_S)
    last = _ablate(prepared, server, out, "--concurrency", str(concurrency))
    assert last.wait(timeout=300) == 0, last.stderr.read()
    bodies = [json.dumps(b, sort_keys=True) for b in BatchServer.chat_calls]
    twice = len(bodies) - len(set(bodies))
    with capsys.disabled():
        print(f"\n  online kill test: {kills} kills, {len(bodies)} requests for {len(set(bodies))} distinct, "
              f"{twice} paid twice (bound {kills * concurrency})")  # fmt: skip
    assert len(set(bodies)) == unique and twice <= kills * concurrency
    got = _stack_predictions(out)
    assert all(g["once"] for g in got.values()) and {k: g["answers"] for k, g in got.items()} == {
        k: r["answers"] for k, r in reference.items()
    }
