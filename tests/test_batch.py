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
from fake_http import JsonHandler

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

    def do_POST(self):
        data = self.rfile.read(int(self.headers["Content-Length"]))
        if self.path.endswith("/chat/completions"):
            body = json.loads(data)
            self.chat_calls.append(body)
            return self.send_json(200, _completion(body))
        if self.path.endswith("/files"):
            msg = BytesParser().parsebytes(
                b"Content-Type: " + self.headers["Content-Type"].encode() + b"\r\n\r\n" + data
            )
            part = next(p for p in msg.get_payload() if p.get_param("name", header="content-disposition") == "file")
            fid = f"file-{len(self.files) + 1}"
            self.files[fid] = part.get_payload(decode=True)
            return self.send_json(200, _file(fid, len(self.files[fid])))
        if self.path.endswith("/batches"):
            body = json.loads(data)
            bid = f"batch_{len(self.batches) + 1}"
            self.creates.append(bid)
            self.batches[bid] = {"input": body["input_file_id"], "status": "validating"}
            return self.send_json(200, self._batch(bid))
        self.send_json(404, {"error": "no such path"})

    def do_GET(self):
        if "/batches/" in self.path:
            bid = self.path.rsplit("/", 1)[-1]
            b = self.batches[bid]
            if b["status"] not in ("completed", "expired"):
                b["status"] = "in_progress"
                if self.release.is_set():
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
            **extra,
        }


def _file(fid: str, size: int) -> dict:
    return {
        "id": fid,
        "object": "file",
        "bytes": size,
        "created_at": 0,
        "filename": "b.jsonl",
        "purpose": "batch",
        "status": "processed",
    }


@pytest.fixture()
def server():
    BatchServer.files, BatchServer.batches, BatchServer.chat_calls, BatchServer.creates = {}, {}, [], []
    BatchServer.release = threading.Event()
    BatchServer.fail_first, BatchServer.expire = 0, False
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
    jobs: dict = {}
    online: list = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if ":generateContent" in self.path:
            self.online.append(1)
            return self.send_json(200, _gemini_answer(body["contents"]))
        if ":batchGenerateContent" in self.path:
            name = f"batches/b{len(self.jobs) + 1}"
            self.jobs[name] = body["batch"]["inputConfig"]["requests"]["requests"]
            return self.send_json(200, {"name": name, "metadata": {"state": "BATCH_STATE_PENDING"}})
        self.send_json(404, {"error": {"code": 404, "message": self.path}})

    def do_GET(self):
        name = "batches/" + self.path.split("batches/", 1)[1].split("?")[0]
        responses = [
            {"response": _gemini_answer(item["request"]["contents"]), "metadata": item.get("metadata")}
            for item in self.jobs[name]
        ]
        output = {"inlinedResponses": {"inlinedResponses": responses}}
        self.send_json(200, {"name": name, "metadata": {"state": "BATCH_STATE_SUCCEEDED", "output": output}})


def test_gemini_batch_mode_gives_the_online_predictions(prepared, tmp_path):
    pytest.importorskip("google.genai", reason="the gemini back-end needs avstack[gemini]")
    GeminiBatchServer.jobs, GeminiBatchServer.online = {}, []
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
