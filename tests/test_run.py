import json
import threading
import time
from http.server import ThreadingHTTPServer

import pytest
from avstack_cli.app import app
from fake_http import JsonHandler
from typer.testing import CliRunner

from avstack.api import ablate
from avstack.prompting.stacks import make_stack
from avstack.runs.sending.engine import Asking, RunSettings
from avstack.tasks import backend_for
from avstack.tasks.ecog.report import write_report
from avstack.tasks.ecog.runs import load_run, run, score_run

SECRET = "sk-test-SECRET-do-not-leak-123"


def test_oracle_scores_100_on_every_variant(prepared, tmp_path):
    for variant, drop in [("full", []), ("full", ["frame_ts"]), ("full", ["word_ts"]), ("video", []), ("text", [])]:
        out = tmp_path / f"{variant}-{'-'.join(drop)}"
        run(prepared, make_stack(variant, drop), out, Asking(backend_for("ecog", "oracle")))
        res = score_run(prepared, out)
        assert res["overall"]["acc_seq"] == 1.0 and res["counts"]["clips"] == 7, (variant, drop, res["per_clip"])


def test_ablate_deixis_shows_word_timing_matters(prepared, tmp_path):
    out = tmp_path / "abl"
    res = CliRunner().invoke(
        app,
        ["ablate", str(prepared), "--model", "deixis", "--drop", "frame_ts", "--drop", "word_ts", "--out", str(out)],
    )
    assert res.exit_code == 0, res.output
    full = json.loads((out / "full" / "score.json").read_text())
    no_word = json.loads((out / "full-no_word_ts" / "score.json").read_text())
    assert no_word["overall"]["acc_t"] < full["overall"]["acc_t"]
    assert "Δ Acc_t" in (out / "report.md").read_text()
    assert (out / "bottlenecks.png").stat().st_size > 1000 and (out / "timestamp_errors.png").is_file()
    # identical requests are answered once: the cache holds fewer answers than requests made
    assert len(list((out / "cache").glob("*.json"))) <= 3 * 7


def test_ablate_from_python_is_the_command(prepared, tmp_path):
    """`avstack.ablate(...)` and `avstack ablate ...` write the same delta.csv, report.md (paths
    aside) and plan.json: the command is that one library call."""
    a, b = tmp_path / "A", tmp_path / "B"
    done = ablate(prepared, model="deixis", drop=["frame_ts", "word_ts"], out=a)
    args = ["ablate", str(prepared), "--model", "deixis", "--drop", "frame_ts", "--drop", "word_ts", "--out", str(b)]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert done.path == a / "report.md" and done.summary.splitlines()[0] in res.output
    assert (a / "delta.csv").read_bytes() == (b / "delta.csv").read_bytes()
    assert json.loads((a / "plan.json").read_text()) == json.loads((b / "plan.json").read_text())
    mine, theirs = ((x / "report.md").read_text().replace(str(x), "OUT") for x in (a, b))
    assert mine == theirs and "full-no_frame_ts" in mine


def test_report_is_byte_reproducible(prepared, tmp_path):
    out = tmp_path / "abl"
    ablate(prepared, model="chance", out=out, drop=["word_ts"])
    runs = [load_run(out / "full"), load_run(out / "full-no_word_ts")]
    write_report(runs, tmp_path / "r1")
    write_report(runs, tmp_path / "r2")
    for name in ("report.md", "delta.csv", "bottlenecks.png", "timestamp_errors.png"):
        assert (tmp_path / "r1" / name).read_bytes() == (tmp_path / "r2" / name).read_bytes(), name


# --------------------------------------------------------------------------- a real local HTTP server

ORACLE_TEXT = {}


class FaultyOpenAI(JsonHandler):
    """Speaks chat-completions; the first attempts per clip fail in a chosen way."""

    faults: dict = {}
    seen_auth: list = []
    calls: dict = {}
    lock = threading.Lock()

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen_auth.append(self.headers.get("Authorization"))
        user = body["messages"][1]["content"][0]["text"]
        clip = next(c for c in ORACLE_TEXT if ORACLE_TEXT[c]["marker"] in user)
        with self.lock:
            n = self.calls[clip] = self.calls.get(clip, 0) + 1
        fault = self.faults.get(clip, [])
        kind = fault[n - 1] if n <= len(fault) else "ok"
        if kind == "429":
            self._send(429, b'{"error": "slow down"}', {"Retry-After": "0.05"})
        elif kind == "500":
            self._send(500, b'{"error": "boom"}')
        elif kind == "slow":
            time.sleep(1.5)
            self._send(200, self._completion(ORACLE_TEXT[clip]["text"]))
        elif kind == "drop":
            self.connection.close()
        elif kind == "halfjson":
            self._send(200, b'{"choices": [{"message": {"content": "{\\"selected')
        elif kind == "prose":
            self._send(200, self._completion("I think it is the cup."))
        else:
            self._send(200, self._completion(ORACLE_TEXT[clip]["text"]))

    def _completion(self, text):
        return json.dumps(
            {
                "choices": [{"message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5},
            }
        ).encode()

    def _send(self, code, data, headers=None):
        self.send_json(code, data, headers)


@pytest.fixture()
def server(prepared):
    from avstack.manifest import load_manifest
    from avstack.tasks.ecog.baselines import Oracle

    ORACLE_TEXT.clear()
    for rec in load_manifest(prepared):
        truth = {"eval_gt": rec.eval_gt, "width": rec.width, "height": rec.height}
        ORACLE_TEXT[rec.clip_id] = {
            "text": "```json\n" + Oracle().answer(None, truth).text + "\n```",
            "marker": rec.clip_id,
        }
    FaultyOpenAI.calls, FaultyOpenAI.seen_auth = {}, []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), FaultyOpenAI)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_port}/v1"
    httpd.shutdown()


def _with_markers(prepared, tmp_path):
    """A copy of the manifest whose instruction carries the clip id, so the server knows the clip."""
    import shutil

    from avstack.manifest import load_manifest

    dst = tmp_path / "prep"
    shutil.copytree(prepared, dst)
    lines = []
    for rec in (r.to_json() for r in load_manifest(prepared)):
        rec["asr"] = dict(rec["asr"] or {}, text=f"say {rec['clip_id']}")
        rec["task_template"] = "指令2" if rec["task_template"] == "指令1" else rec["task_template"]
        lines.append(json.dumps(rec, ensure_ascii=False))
    (dst / "manifest.jsonl").write_text("\n".join(lines) + "\n")
    return dst


def test_fault_injecting_server_one_final_answer_each_and_no_key_leak(prepared, server, tmp_path, monkeypatch):
    prep = _with_markers(prepared, tmp_path)
    clips = sorted(ORACLE_TEXT)
    FaultyOpenAI.faults = {
        clips[0]: ["429", "429"],
        clips[1]: ["500", "500"],
        clips[2]: ["slow"],
        clips[3]: ["drop"],
        clips[4]: ["halfjson"],
        clips[5]: ["prose"],
    }
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    backend = backend_for("ecog", "openai:test-model", base_url=server, timeout=0.5)
    out = tmp_path / "run"
    run(prep, make_stack("full"), out, Asking(backend, settings=RunSettings(concurrency=3, retries=3, backoff_s=0.01)))
    preds = [json.loads(x) for x in (out / "predictions.jsonl").read_text().splitlines()]
    assert sorted(p["video_name"] for p in preds) == clips  # exactly one final answer per clip
    by = {p["video_name"]: p for p in preds}
    assert by[clips[0]]["attempts"] == 3 and by[clips[0]]["error"] is None
    assert by[clips[5]]["parse_error"].startswith("answer is not JSON")
    res = score_run(prep, out)
    assert res["counts"]["parse_errors"] == 1
    assert res["overall"]["acc_seq"] == pytest.approx(6 / 7)
    assert all(a == f"Bearer {SECRET}" for a in FaultyOpenAI.seen_auth)
    for f in out.rglob("*"):
        if f.is_file():
            assert SECRET not in f.read_text(errors="ignore"), f


def test_killed_run_resumes_to_the_same_predictions(prepared, server, tmp_path):
    prep = _with_markers(prepared, tmp_path)
    FaultyOpenAI.faults = {}
    backend = backend_for("ecog", "openai:m", base_url=server)
    full = tmp_path / "full"
    run(prep, make_stack("full"), full, Asking(backend, settings=RunSettings(concurrency=2)))
    part = tmp_path / "part"
    run(prep, make_stack("full"), part, Asking(backend, settings=RunSettings(concurrency=2)))
    lines = (part / "predictions.jsonl").read_text().splitlines()
    # as if killed: three answers kept, the fourth cut mid-line
    (part / "predictions.jsonl").write_text("\n".join(lines[:3]) + "\n" + lines[3][:40])
    before = dict(FaultyOpenAI.calls)
    run(prep, make_stack("full"), part, Asking(backend, settings=RunSettings(concurrency=2)))
    asked = sum(FaultyOpenAI.calls.values()) - sum(before.values())
    assert asked == 4  # only the clips without a final answer

    def final(d):
        return {
            p["video_name"]: (p["raw"], p["prediction"])
            for p in map(json.loads, (d / "predictions.jsonl").read_text().splitlines())
        }

    assert final(part) == final(full)
    assert len((part / "predictions.jsonl").read_text().splitlines()) == 7
