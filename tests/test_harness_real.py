"""The harnesses people run, for real, on our exports (#57): lmms-eval's own command line loads
`avstack export --to lmms-eval` output and runs it through its OpenAI-compatible model class, and
`inspect eval avstack/ecog` runs through inspect's openai-api provider, both against the
multimodal llama-server (the tiny Qwen2-VL, one slot, temperature 0) that `avstack run` asks.
Each gives `avstack run`'s answers, clip by clip, read from the harness's own results (lmms-eval
can fail and still exit 0), and the requests that reached the server are the same.

lmms-eval runs in a venv of its own (`make lmms-venv`: its pins, av<16 and torchvision, do not
install beside ours); AVSTACK_LMMS_PYTHON names another. lmms-eval re-encodes every image as PNG
from PIL's decode, and llama-server decodes a JPEG with stb_image, which differs from libjpeg by
up to 3 levels in about 1% of the pixels (measured on the samples' frames): enough to change a
random model's later tokens. So the lmms-eval check runs on the sample clips prepared with
lossless frames (PNG), where both paths give the server the same pixels; inspect sends our JPEG
bytes as they are."""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from avstack_cli.app import app
from llama_servers import vision_server
from typer.testing import CliRunner

from avstack.tasks.ecog.metrics import METRICS

REPO = Path(__file__).resolve().parents[1]
TOKENS = 16


@pytest.fixture(scope="module")
def vision(tmp_path_factory):
    # no prompt cache: a request that reuses an earlier one's cached prefix is computed in other
    # chunks, which moves a random model's logits enough to change its answer (measured: one clip
    # of seven when the harnesses asked in other orders); each request from scratch is the same math
    with vision_server(tmp_path_factory.mktemp("vision") / "server.log", "--no-cache-prompt") as served:
        yield served


def lmms_python() -> Path | None:
    named = os.environ.get("AVSTACK_LMMS_PYTHON")
    path = Path(named) if named else REPO / ".venv-lmms" / "bin" / "python"
    return path if path.is_file() else None


def lossless(prepared: Path, out: Path) -> Path:
    """The prepared folder with every frame stored as PNG (PIL's decode of the JPEG): what any
    decoder reads back is the same pixels."""
    from PIL import Image

    shutil.copytree(prepared, out)
    lines = []
    for line in (out / "manifest.jsonl").read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        for frame in [*(rec.get("frames") or []), rec.get("last_frame")]:
            if frame and frame["path"].endswith(".jpg"):
                png = frame["path"][: -len(".jpg")] + ".png"
                if not (out / png).exists():
                    Image.open(out / frame["path"]).convert("RGB").save(out / png)
                frame["path"] = png
        lines.append(json.dumps(rec, ensure_ascii=False))
    (out / "manifest.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


def _run(prepared: Path, base: str, out: Path) -> dict[str, dict]:
    """`avstack run` of the full stack as a harness sends it (no JSON mode): per clip its record."""
    args = ["run", str(prepared), "--model", "openai:qwen2-vl-tiny", "--base-url", base, "--no-json-mode"]
    res = CliRunner().invoke(app, [*args, "--max-tokens", str(TOKENS), "--concurrency", "1", "--out", str(out)])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    return {r["video_name"]: r for r in rows}


def _pixels(url: str) -> bytes:
    from PIL import Image

    return Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).convert("RGB").tobytes()


def _as_sent(body: dict) -> list:
    """A request body as the server reads it: each message's text parts and image pixels, in order."""
    out = []
    for m in body["messages"]:
        content = m["content"] if isinstance(m["content"], list) else [{"type": "text", "text": m["content"]}]
        parts = [p["text"] if p["type"] == "text" else _pixels(p["image_url"]["url"]) for p in content]
        out.append((m["role"], parts))
    return out


def test_lmms_evals_own_cli_runs_our_export_with_avstack_runs_answers(prepared, vision, tmp_path):
    python = lmms_python()
    if python is None:
        pytest.skip("lmms-eval is not installed in a venv of its own (make lmms-venv, or AVSTACK_LMMS_PYTHON)")
    clips = lossless(prepared, tmp_path / "prepared-png")
    export = tmp_path / "lmms"
    res = CliRunner().invoke(app, ["export", str(clips), "--to", "lmms-eval", "--out", str(export)])
    assert res.exit_code == 0, res.output
    proxy = vision["proxy"]
    start = len(proxy.bodies)
    ours = _run(clips, vision["base"], tmp_path / "run")
    mine = [_as_sent(b) for b, _, _ in proxy.bodies[start:]]
    start = len(proxy.bodies)
    env = dict(os.environ, HF_HOME=str(tmp_path / "hf"), HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1")
    env.pop("PYTHONPATH", None)
    cmd = [str(python), "-m", "lmms_eval", "eval", "--model", "openai", "--model_args",
           f"model_version=qwen2-vl-tiny,base_url={vision['base']},api_key=none", "--tasks", "avstack_ecog_full",
           "--include_path", str(export), "--gen_kwargs", f"max_new_tokens={TOKENS}", "--batch_size", "1",
           "--output_path", str(tmp_path / "lmms-out"), "--log_samples"]  # fmt: skip
    done = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    log = (done.stdout + done.stderr)[-3000:]
    # lmms-eval's own files, not its exit code (it exits 0 after some failures)
    (samples_file,) = (tmp_path / "lmms-out").rglob("*_samples_avstack_ecog_full.jsonl") or pytest.fail(log)
    (results_file,) = (tmp_path / "lmms-out").rglob("*_results.json")
    samples = [json.loads(line) for line in samples_file.read_text().splitlines()]
    assert len(samples) == len(ours), log
    import datasets

    docs = datasets.load_dataset("parquet", data_files={"test": str(export / "test-*.parquet")}, split="test")
    theirs = {}
    for s in samples:
        answer = s["filtered_resps"] if isinstance(s["filtered_resps"], str) else s["filtered_resps"][0]
        assert not answer.startswith("[LMMS_EVAL_REQUEST_FAILED"), answer
        theirs[docs[s["doc_id"]]["id"]] = (answer, s["token_counts"][0]["input_tokens"], {m: s[m] for m in METRICS})
    # lmms-eval strips the answer's ends; avstack keeps the text as the server sent it
    assert {c: a for c, (a, _, _) in theirs.items()} == {c: r["raw"].strip() for c, r in ours.items()}
    assert len({r["raw"] for r in ours.values()}) > 1  # the model answers each clip its own way
    assert {c: n for c, (_, n, _) in theirs.items()} == {c: r["usage"]["prompt_tokens"] for c, r in ours.items()}
    # the same scores: lmms-eval's per sample and aggregated, and avstack's own
    per_clip = json.loads((tmp_path / "run" / "score.json").read_text())["per_clip"]
    assert {c["video_name"]: {m: c[m] for m in METRICS} for c in per_clip} == {c: s for c, (_, _, s) in theirs.items()}
    results = json.loads(results_file.read_text())["results"]["avstack_ecog_full"]
    overall = json.loads((tmp_path / "run" / "score.json").read_text())["overall"]
    assert all(abs(results[f"{m},none"] - overall[m]) < 1e-9 for m in METRICS), (results, overall)
    # and what reached the server is our request: every text part, and the pixels of every frame
    sent = [_as_sent(b) for b, code, _ in proxy.bodies[start:] if code == 200]
    assert len(sent) == len(mine) and all(request in mine for request in sent)


def _lmms_eval(python: Path, base: str, export: Path, task: str, out: Path) -> tuple[list[dict], str]:
    """lmms-eval's own command line on an export, against the server; its samples and its log."""
    env = dict(os.environ, HF_HOME=str(out / "hf"), HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1")
    env.pop("PYTHONPATH", None)
    cmd = [str(python), "-m", "lmms_eval", "eval", "--model", "openai", "--model_args",
           f"model_version=qwen2-vl-tiny,base_url={base},api_key=none", "--tasks", task,
           "--include_path", str(export), "--gen_kwargs", f"max_new_tokens={TOKENS}", "--batch_size", "1",
           "--output_path", str(out / "lmms-out"), "--log_samples"]  # fmt: skip
    done = subprocess.run(cmd, env=env, cwd=out, capture_output=True, text=True, timeout=600)
    log = (done.stdout + done.stderr)[-3000:]
    (samples_file,) = (out / "lmms-out").rglob(f"*_samples_{task}.jsonl") or pytest.fail(log)
    return [json.loads(line) for line in samples_file.read_text().splitlines()], log


def _videoqa_through_lmms_eval(clips: Path, questions: Path, base: str, tmp_path: Path) -> tuple[list[float], dict]:
    """A videoqa export run by lmms-eval's own command line and `avstack run` against the same
    server: per question the same answer and the same score (asserted); lmms-eval's `correct`
    values and avstack's score.json."""
    import csv

    import datasets

    python = lmms_python()
    if python is None:
        pytest.skip("lmms-eval is not installed in a venv of its own (make lmms-venv, or AVSTACK_LMMS_PYTHON)")
    export = tmp_path / "lmms"
    qa = ["--task", "videoqa", "--questions", str(questions)]
    res = CliRunner().invoke(app, ["export", str(clips), *qa, "--to", "lmms-eval", "--out", str(export)])
    assert res.exit_code == 0, res.output
    run = tmp_path / "run"
    args = ["run", str(clips), *qa, "--model", "openai:qwen2-vl-tiny", "--base-url", base, "--no-json-mode"]
    res = CliRunner().invoke(app, [*args, "--max-tokens", str(TOKENS), "--concurrency", "1", "--out", str(run)])
    assert res.exit_code == 0, res.output
    ours = {r["id"]: r for r in map(json.loads, (run / "predictions.jsonl").read_text().splitlines())}
    samples, log = _lmms_eval(python, base, export, "avstack_videoqa_full", tmp_path)
    assert len(samples) == len(ours), log
    docs = datasets.load_dataset("parquet", data_files={"test": str(export / "test-*.parquet")}, split="test")
    scored = {r["item_id"]: float(r["correct"]) for r in csv.DictReader((run / "per_item.csv").open())}
    theirs = []
    for s in samples:
        qid = docs[s["doc_id"]]["id"]
        answer = s["filtered_resps"] if isinstance(s["filtered_resps"], str) else s["filtered_resps"][0]
        assert answer == ours[qid]["raw"].strip() and s["correct"] == scored[qid], (qid, answer, log)
        theirs.append(s["correct"])
    return theirs, json.loads((run / "score.json").read_text())


def test_lmms_eval_runs_a_videoqa_export_with_avstack_runs_answers(prepared, questions, vision, tmp_path):
    """Your own videos and questions (videoqa), exported to lmms-eval and run by its own command
    line against the server `avstack run` asks: the same answer and the same score per question."""
    if lmms_python() is None:
        pytest.skip("lmms-eval is not installed in a venv of its own (make lmms-venv, or AVSTACK_LMMS_PYTHON)")
    _videoqa_through_lmms_eval(lossless(prepared, tmp_path / "prepared-png"), questions, vision["base"], tmp_path)


def test_inspect_eval_on_the_vision_server_gives_avstack_runs_answers(prepared, vision, tmp_path, monkeypatch):
    from inspect_ai import eval as inspect_eval

    ours = _run(prepared, vision["base"], tmp_path / "run")
    monkeypatch.setenv("AVLOCAL_BASE_URL", vision["base"])
    monkeypatch.setenv("AVLOCAL_API_KEY", "none")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if Path(p or ".").resolve() != REPO])
    logs = inspect_eval(
        "avstack/ecog",
        model="openai-api/avlocal/qwen2-vl-tiny",
        task_args={"prepared": str(prepared)},
        log_dir=str(tmp_path / "logs"),
        display="none",
        temperature=0,
        max_tokens=TOKENS,
        max_connections=1,
    )
    assert logs[0].status == "success", logs[0].error
    theirs = {s.id: s.output.completion for s in logs[0].samples}
    assert theirs == {c: r["raw"] for c, r in ours.items()}
    assert len(set(theirs.values())) > 1


@pytest.mark.parametrize("benchmark", ["videomme2", "worldsense"])
def test_lmms_eval_runs_an_audiovisual_benchmarks_export_with_avstack_runs_answers(benchmark, vision, tmp_path):
    """Video-MME-v2 and WorldSense in their shipped shapes (tests/test_audiovisual.py's sets),
    exported to lmms-eval and run by its own command line against the server `avstack run` asks:
    the same answer per question, scored by the benchmark's own extraction on both sides, and the
    same accuracy (Video-MME-v2's Avg Acc)."""
    from test_audiovisual import _mme2, _worldsense

    import avstack
    from avstack.preparation.driver import prepare
    from avstack.preparation.settings import PrepareSettings
    from avstack.synthetic import synth

    if lmms_python() is None:
        pytest.skip("lmms-eval is not installed in a venv of its own (make lmms-venv, or AVSTACK_LMMS_PYTHON)")
    root = tmp_path / "data"
    (root / "videos").mkdir(parents=True)
    spec = synth.ClipSpec(width=160, height=90, fps=5, duration_s=3.0)
    questions = _mme2(root, avstack.sample_root()) if benchmark == "videomme2" else _worldsense(root, synth, spec)
    report = prepare(root, tmp_path / "prepared", PrepareSettings(anchors=("frames",), fps=1.0), workers=1)
    assert not report.failed, report.failed
    clips = lossless(tmp_path / "prepared", tmp_path / "prepared-png")
    theirs, score = _videoqa_through_lmms_eval(clips, questions, vision["base"], tmp_path)
    assert 100 * sum(theirs) / len(theirs) == pytest.approx(score["overall"]["accuracy"], abs=1e-4)
    if benchmark == "videomme2":
        assert score["videomme2"]["Avg Acc"] == pytest.approx(score["overall"]["accuracy"], abs=1e-4)
        # the group score too, aggregated by lmms-eval over the answers it collected
        (results,) = (tmp_path / "lmms-out").rglob("*_results.json")
        theirs_non_lin = json.loads(results.read_text())["results"]["avstack_videoqa_full"]["non_lin_score,none"]
        assert theirs_non_lin == pytest.approx(score["videomme2"]["Non-Lin Score"], abs=1e-4)
