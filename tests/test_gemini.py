"""The gemini back-end against a local server speaking Gemini's REST surface (generateContent and the
resumable File API), with a 429 and a 503 on the way."""

import hashlib
import json
import threading
from http.server import ThreadingHTTPServer

import pytest
from fake_http import JsonHandler

from avstack.prompting.stacks import make_stack
from avstack.runs.sending.engine import Asking, RunSettings
from avstack.runs.sending.runners import make_backend
from avstack.tasks.ecog.runs import run, score_run

pytest.importorskip("google.genai", reason="the gemini back-end needs avstack[gemini]")
SECRET = "gm-SECRET-key-never-written"


class FakeGemini(JsonHandler):
    api = "gemini"
    answers: dict = {}
    by_sha: dict = {}  # video sha256 -> clip id
    log: list = []
    files: dict = {}
    polls: dict = {}
    fail_first: list = []
    lock = threading.Lock()

    def _send(self, code, obj, headers=None):
        self.send_json(code, obj, headers)

    def _body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def do_POST(self):
        body = self._body()
        with self.lock:
            self.log.append(("POST", self.path, self.headers.get("x-goog-api-key")))
        if self.path.startswith("/upload/") and self.headers.get("X-Goog-Upload-Command") == "start":
            host = self.headers["Host"]
            return self._send(200, {}, {"X-Goog-Upload-URL": f"http://{host}/session/{len(self.files)}"})
        if self.path.startswith("/session/"):
            name = f"files/f{self.path.rsplit('/', 1)[1]}"
            with self.lock:
                self.files[name] = self.by_sha.get(hashlib.sha256(body).hexdigest())
                self.polls[name] = 0
            file = {"name": name, "uri": f"https://fake/{name}", "mimeType": "video/mp4", "state": "PROCESSING"}
            return self._send(200, {"file": file}, {"X-Goog-Upload-Status": "final"})
        if ":generateContent" in self.path:
            req = json.loads(body)
            with self.lock:
                if self.fail_first:
                    code = self.fail_first.pop(0)
                    return self._send(code, {"error": {"code": code, "message": "try later", "status": "UNAVAILABLE"}})
            parts = req["contents"][0]["parts"]
            text = " ".join(p.get("text", "") for p in parts)
            files = [p.get("fileData") or p.get("file_data") for p in parts if "fileData" in p or "file_data" in p]
            uris = [f.get("fileUri") or f.get("file_uri") for f in files]
            with self.lock:
                named = [self.files.get(u.split("https://fake/", 1)[1]) for u in uris]
            clip = named[0] if named else next(c for c in self.answers if c in text)
            out = {
                "candidates": [{"content": {"role": "model", "parts": [{"text": self.answers[clip]}]}}],
                "usageMetadata": {"promptTokenCount": 11, "candidatesTokenCount": 7, "totalTokenCount": 18},
            }
            with self.lock:
                for p in parts:
                    if "inlineData" in p:
                        p["inlineData"]["data"] = len(p["inlineData"]["data"])
                self.log.append(("GEN", json.dumps(req), None))
            return self._send(200, out)
        self._send(404, {"error": {"code": 404, "message": self.path}})

    def do_GET(self):
        with self.lock:
            self.log.append(("GET", self.path, self.headers.get("x-goog-api-key")))
        name = "files/" + self.path.split("files/", 1)[1].split("?")[0]
        with self.lock:
            self.polls[name] += 1
            state = "ACTIVE" if self.polls[name] >= 2 else "PROCESSING"
        self._send(200, {"name": name, "uri": f"https://fake/{name}", "mimeType": "video/mp4", "state": state})

    def do_DELETE(self):
        name = "files/" + self.path.split("files/", 1)[1].split("?")[0]
        with self.lock:
            self.files.pop(name, None)
        self._send(200, {})


@pytest.fixture()
def gemini_server(prepared, monkeypatch):
    from conftest import manifest_dicts

    from avstack.tasks.ecog.baselines import Oracle

    FakeGemini.answers, FakeGemini.by_sha = {}, {}
    for rec in manifest_dicts(prepared):
        FakeGemini.by_sha[rec["sha256"]] = rec["clip_id"]
        truth = {"eval_gt": rec["eval_gt"], "width": rec["width"], "height": rec["height"]}
        FakeGemini.answers[rec["clip_id"]] = Oracle().answer(None, truth).text
    FakeGemini.log, FakeGemini.files, FakeGemini.polls = [], {}, {}
    FakeGemini.fail_first = [429, 503]
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), FakeGemini)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    monkeypatch.setenv("GEMINI_API_KEY", SECRET)
    yield f"http://127.0.0.1:{httpd.server_port}"
    httpd.shutdown()


def test_gemini_frames_and_native_video(prepared, gemini_server, tmp_path):
    from test_run import _with_markers

    prep = _with_markers(prepared, tmp_path)
    backend = make_backend("gemini:gemini-test", base_url=gemini_server, poll_s=0.01)
    settings = RunSettings(concurrency=2, retries=3, backoff_s=0.01)
    out = tmp_path / "frames"
    run(prep, make_stack("full"), out, Asking(backend, settings=settings))
    assert score_run(prep, out)["overall"]["acc_seq"] == 1.0
    gen = [json.loads(x[1]) for x in FakeGemini.log if x[0] == "GEN"]
    assert any("inlineData" in p or "inline_data" in p for p in gen[0]["contents"][0]["parts"])
    assert "application/json" in json.dumps(gen[0].get("generationConfig", {}))

    video = tmp_path / "video"
    backend = make_backend("gemini:gemini-test", base_url=gemini_server, poll_s=0.01)
    run(prep, make_stack("video"), video, Asking(backend, settings=settings))
    assert score_run(prep, video)["overall"]["acc_seq"] == 1.0
    uploads = [x for x in FakeGemini.log if x[0] == "POST" and x[1].startswith("/upload/")]
    assert len(uploads) == 7  # one per distinct video file, reused on retries
    assert FakeGemini.files == {}  # deleted when the run closed the back-end
    assert all(key == SECRET for _, _, key in FakeGemini.log if key is not None)
    for d in (out, video):
        for f in d.rglob("*"):
            assert f.is_dir() or SECRET not in f.read_text(errors="ignore")


def test_missing_clients_name_the_extra(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "google.genai", None)
    with pytest.raises(ImportError, match=r"pip install 'avstack\[gemini\]'"):
        make_backend("gemini:gemini-2.5-flash")
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(ImportError, match=r"pip install 'avstack\[torch\]'"):
        make_backend("hf:Qwen/Qwen2.5-VL-3B-Instruct")
