"""The bill before paying it: image-token rules against the providers' own worked examples, the
plan of a real ablation (every image of every request counted, repeats and cached answers
apart), and --max-cost refusing to start."""

from __future__ import annotations

import json
import math
import threading
from http.server import ThreadingHTTPServer

import cv2
import numpy as np
import pytest
from avstack_cli.app import app
from fake_http import JsonHandler
from typer.testing import CliRunner

from avstack.runs.ablation.arms import AblationSpec, stacks_to_run
from avstack.runs.planning import cost
from avstack.tasks.ecog.runs import requests_for


def test_openai_tiles_match_openais_worked_examples():
    assert cost.openai_tiles(1024, 1024) == 765  # scaled to 768 x 768: 4 tiles
    assert cost.openai_tiles(2048, 4096) == 1105  # 1024 x 2048, then 768 x 1536: 6 tiles
    assert cost.openai_tiles(4096, 8192, detail="low") == 85
    assert cost.image_tokens(1024, 1024, "openai:gpt-4o") == 765
    assert cost.image_tokens(1024, 1024, "openai:gpt-4o-mini") == 2833 + 4 * 5667


def test_openai_patches_match_openais_worked_examples():
    assert cost.openai_patches(1024, 1024, 1.0) == 1024  # 32 x 32 patches
    assert cost.openai_patches(1800, 2400, 1.0) == 1452  # shrunk to 1056 x 1408: 33 x 44 patches
    assert cost.image_tokens(1024, 1024, "openai:gpt-4.1-mini") == math.ceil(1024 * 1.62)


def test_gemini_claude_and_qwen_rules_by_hand():
    assert cost.gemini(384, 384) == 258  # both sides at most 384: one image, 258
    assert cost.gemini(1920, 1080) == 258 * 3 * 2  # 768 px tiles
    assert cost.claude(1092, 1092) == 1590  # Anthropic's table: 1092 x 1092 is about 1590 tokens
    assert cost.claude(200, 200) == 54  # 200 * 200 / 750 = 53.3
    # Qwen2.5-VL smart_resize: 1920 x 1080 -> 1932 x 1092 (multiples of 28) -> 69 x 39 tokens
    assert cost.qwen25_vl(1920, 1080) == 69 * 39
    assert cost.qwen25_vl(20, 20) == 2 * 2  # raised to min_pixels (4 blocks of 28 x 28)
    assert cost.image_tokens(640, 480, "local:some-unknown-model") is None


def test_the_open_model_families_rules_by_hand():
    # Qwen2-VL / 2.5-VL: the blocks and <|vision_start|>, <|vision_end|> (a 360 x 640 frame:
    # 13 x 23 blocks of 28 px; llama-server counted 301 for it, tests/test_llama_vision.py)
    assert cost.image_tokens(360, 640, "openai:Qwen2-VL-2B-Instruct") == 13 * 23 + 2
    assert cost.image_tokens(360, 640, "openai:qwen2.5-vl-7b") == 13 * 23 + 2
    # 4000 x 3000 is 143 x 107 blocks, over llama.cpp's 4096: scaled to sqrt(12e6 / (4096 * 784)) ...
    beta = math.sqrt(4000 * 3000 / (4096 * 784))
    blocks = math.floor(4000 / beta / 28) * math.floor(3000 / beta / 28)
    assert blocks <= 4096 and cost.image_tokens(4000, 3000, "x", chosen="qwen2-vl-llama.cpp") == blocks + 2
    assert cost.image_tokens(4000, 3000, "x", chosen="qwen2-vl") == 143 * 107 + 2  # within HF's 16384
    # Qwen3-VL: 32 px blocks (16 px patches merged 2 x 2), at least 64 of them
    assert cost.image_tokens(640, 640, "openai:Qwen3-VL-8B-Instruct") == 20 * 20 + 2
    assert cost.image_tokens(64, 64, "openai:qwen3-vl") == 8 * 8 + 2  # raised to 65,536 pixels
    # InternVL: 1024 x 768 is aspect 4:3 -> a 4 x 3 grid of 448 px tiles, and the thumbnail
    assert cost.internvl_tiles(1024, 768) == 4 * 3 + 1
    assert cost.internvl_tiles(448, 448) == 1  # one tile, no thumbnail
    assert cost.image_tokens(1024, 768, "openai:OpenGVLab/InternVL3-8B") == 13 * 256 + 2
    # LLaVA-OneVision at 384 x 384: the base 729, a 1 x 1 grid of 27 x 27 and 27 newlines
    assert cost.image_tokens(384, 384, "openai:llava-onevision-qwen2-7b-ov") == 729 + 27 * 27 + 27
    # Gemma 3: every image 256 tokens between <start_of_image> and <end_of_image>
    assert cost.image_tokens(4000, 100, "gemini:gemma-3-27b-it") == 258
    assert cost.image_rule("openai:my-model", "internvl") == "internvl"
    with pytest.raises(ValueError, match="--image-rule: expected one of"):
        cost.image_rule("openai:my-model", "qwen9")


def test_image_size_reads_jpeg_and_png_headers(tmp_path):
    img = np.zeros((37, 53, 3), np.uint8)
    for ext in (".jpg", ".png"):
        cv2.imwrite(str(tmp_path / f"a{ext}"), img)
        assert cost.image_size(tmp_path / f"a{ext}") == (53, 37)
    (tmp_path / "b.jpg").write_bytes(b"not an image")
    with pytest.raises(ValueError, match="not a JPEG or PNG"):
        cost.image_size(tmp_path / "b.jpg")


def test_dry_run_plans_every_image_and_sends_nothing(prepared, tmp_path):
    out = tmp_path / "abl"
    args = ["ablate", str(prepared), "--model", "openai:gpt-4o", "--drop", "word_ts", "--out", str(out), "--dry-run"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    plan = json.loads((out / "plan.json").read_text())
    assert sorted(p.name for p in out.iterdir()) == ["plan.json"]  # no run folder: nothing was asked
    # the same requests, counted here independently: every image's size from OpenCV, the tile rule
    for stack in stacks_to_run(AblationSpec(("word_ts",))):
        reqs = [req for _, req in requests_for(prepared, stack)[0]]
        images = [req.path_of(p) for req in reqs for p in req.parts if type(p).__name__ == "Image"]
        sizes = [cv2.imread(str(p)).shape[:2] for p in images]
        bill = plan["stacks"][stack.name]
        assert bill["requests"] == len(reqs) > 0 and bill["images"] == len(images) > 0
        assert bill["image_tokens"] == sum(cost.openai_tiles(w, h) for h, w in sizes)
    full, no_words = plan["stacks"]["full"], plan["stacks"]["full-no_word_ts"]
    # a clip with no words asks the same request without word times: paid once, in full
    assert no_words["repeats"] == no_words["requests"] - no_words["to_pay_requests"]
    assert plan["total"]["input_tokens"] == full["to_pay_input_tokens"] + no_words["to_pay_input_tokens"]
    usd = plan["total"]["usd_at_most"]
    assert usd["batch"] == pytest.approx(usd["online"] / 2, abs=1e-3)


def test_max_cost_refuses_to_start_above_the_plan(prepared, tmp_path):
    out = tmp_path / "abl"
    args = ["ablate", str(prepared), "--model", "openai:gpt-4o", "--out", str(out), "--max-cost", "0.01"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code != 0 and "--max-cost 0.01 USD: the plan may cost up to" in res.output
    assert sorted(p.name for p in out.iterdir()) == ["plan.json"]


def test_max_cost_lets_a_run_within_it_go_on(prepared, tmp_path):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"read_on": "test", "models": {"deixis": {"input": 0.0, "output": 0.0}}}))
    out = tmp_path / "abl"
    args = ["ablate", str(prepared), "--model", "deixis", "--out", str(out), "--max-cost", "1", "--prices", str(prices)]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert (out / "full" / "predictions.jsonl").exists() and (out / "plan.json").exists()


def test_until_decided_stops_after_a_round_and_every_stack_holds_the_same_clips(prepared, tmp_path):
    """The stop mechanics on the sample set: a precision every interval meets stops after the
    first round; every stack answered exactly that round's clips; the record says what was saved."""
    from avstack.io import read_jsonl_objects as read_jsonl

    out = tmp_path / "seq"
    args = ["ablate", str(prepared), "--model", "deixis", "--drop", "word_ts", "--drop", "frame_ts", "--out", str(out)]
    res = CliRunner().invoke(app, [*args, "--until", "decided", "--round", "2", "--precision", "2.5"])
    assert res.exit_code == 0, res.output
    stop = json.loads((out / "sequential.json").read_text())
    assert stop["decided"] and stop["why"] == "precision reached" and stop["stopped_at_clips"] == 2
    assert stop["requests_saved"] == (stop["clips"] - 2) * 3 and stop["requests_asked"] == 6
    asked = [sorted(r["video_name"] for r in read_jsonl(out / s / "predictions.jsonl")) for s in
             ("full", "full-no_word_ts", "full-no_frame_ts")]  # fmt: skip
    assert asked[0] == asked[1] == asked[2] and len(asked[0]) == 2
    assert "## Sequential stop" in (out / "report.md").read_text()
    # asked again without the early stop, the same folders resume: nothing answered is asked twice
    res = CliRunner().invoke(app, [*args, "--until", "decided", "--round", "2"])
    assert res.exit_code == 0, res.output
    stop = json.loads((out / "sequential.json").read_text())
    assert stop["stopped_at_clips"] == stop["clips"] and stop["why"] == "clips ran out"
    rows = list(read_jsonl(out / "full" / "predictions.jsonl"))
    assert len(rows) == len({r["video_name"] for r in rows}) == stop["clips"]


class UsageServer(JsonHandler):
    """Chat completions that answer nothing useful and report a large usage per request."""

    calls: list = []

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.calls.append(1)
        usage = {"prompt_tokens": 100_000, "completion_tokens": 0}
        self.send_json(200, {"choices": [{"message": {"role": "assistant", "content": "{}"}}], "usage": usage})


def test_max_cost_stops_on_the_servers_reported_usage_and_a_rerun_goes_on(prepared, tmp_path):
    """Each answer costs 0.10 USD by the server's usage (100,000 input tokens at 1 USD per 1M): with
    --max-cost 0.25 the third answer reaches it and nothing more is asked; a rerun with room
    asks only what is missing (the two requests full-no_word_ts shares with full come from the cache)."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), UsageServer)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    UsageServer.calls = []
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"read_on": "test", "models": {"m": {"input": 1.0, "output": 0.0}}}))
    out = tmp_path / "abl"
    url = f"http://127.0.0.1:{httpd.server_port}/v1"
    args = ["ablate", str(prepared), "--model", "openai:m", "--base-url", url, "--out", str(out), "--drop", "word_ts"]
    args += ["--prices", str(prices), "--concurrency", "1"]
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("OPENAI_API_KEY", "sk-test")
            res = CliRunner().invoke(app, [*args, "--max-cost", "0.25"])
            assert res.exit_code == 2 and "--max-cost 0.25 USD reached" in res.output, res.output
            assert len(UsageServer.calls) == 3
            assert len((out / "full" / "predictions.jsonl").read_text().splitlines()) == 3
            res = CliRunner().invoke(app, [*args, "--max-cost", "5"])
            assert res.exit_code == 0, res.output
    finally:
        httpd.shutdown()
    plan = json.loads((out / "plan.json").read_text())  # the rerun's plan: the 3 answers are cached
    assert plan["total"]["cached"] >= 3 and len(UsageServer.calls) == 3 + plan["total"]["to_pay_requests"]
    # the report puts the plan beside the usage the server reported (100,000 input tokens an answer)
    section = (out / "report.md").read_text().split("## Plan and usage")[1]
    row = next(r for r in section.splitlines() if r.startswith("| full |"))
    sent, reported = int(row.split("|")[3]), int(row.split("|")[5])
    assert sent > 0 and reported == 100_000 * sent


def test_run_dry_run_plans_one_stack(prepared, tmp_path):
    out = tmp_path / "run"
    res = CliRunner().invoke(
        app, ["run", str(prepared), "--model", "gemini:gemini-2.0-flash", "--out", str(out), "--dry-run"]
    )
    assert res.exit_code == 0, res.output
    plan = json.loads((out / "plan.json").read_text())
    assert list(plan["stacks"]) == ["full"] and plan["image_rule"] == "gemini"
    assert plan["stacks"]["full"]["image_tokens"] == 258 * plan["stacks"]["full"]["images"]  # frames under 768 px
    assert sorted(p.name for p in out.iterdir()) == ["plan.json"]


class VllmTokenizer(JsonHandler):
    """vLLM's routes the plan asks: /version (what the server is) and /tokenize with chat messages,
    here counting a token per word of the text parts, keeping every body."""

    api = "vllm"
    bodies: list = []

    def do_GET(self):
        if self.path == "/version":
            return self.send_json(200, {"version": "0.11.0"})
        self.send_json(404, {"detail": "Not Found"})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        VllmTokenizer.bodies.append((self.path, body))
        if self.path != "/tokenize":
            return self.send_json(404, {"detail": "Not Found"})
        words = sum(len(_text(m).split()) for m in body["messages"])
        self.send_json(200, {"count": words, "max_model_len": 32768, "tokens": list(range(words))})


def _text(message: dict) -> str:
    content = message["content"]
    return content if isinstance(content, str) else " ".join(p["text"] for p in content if p["type"] == "text")


def test_the_plan_counts_text_with_a_vllm_servers_tokenizer_and_sends_no_request(prepared, tmp_path, monkeypatch):
    from avstack.prompting.messages import to_openai
    from avstack.prompting.stacks import make_stack
    from avstack.tasks.ecog.inputs import EcogInputs

    monkeypatch.setenv("AVSTACK_CACHE", str(tmp_path / "cache"))  # the counts kept on disk: this test's own
    VllmTokenizer.bodies = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), VllmTokenizer)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_port}/v1"
    try:
        out = tmp_path / "run"
        args = ["run", str(prepared), "--model", "openai:Qwen/Qwen2.5-VL-7B-Instruct", "--base-url", url]
        res = CliRunner().invoke(app, [*args, "--out", str(out), "--dry-run"])
        counted = len(VllmTokenizer.bodies)
        # planned again: every text's count is on disk by the server's identity, nothing asked again
        again = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "again"), "--dry-run"])
    finally:
        httpd.shutdown()
    assert again.exit_code == 0 and len(VllmTokenizer.bodies) == counted > 0, again.output
    assert (tmp_path / "again" / "plan.json").read_text() == (out / "plan.json").read_text()
    assert res.exit_code == 0, res.output
    plan = json.loads((out / "plan.json").read_text())
    assert plan["text_tokens"].startswith("the server's tokenizer (vLLM /tokenize") and plan["image_rule"] == "qwen2-vl"
    pairs, _ = requests_for(prepared, make_stack("full"), EcogInputs())
    words = sum(len(_text(m).split()) for _, req in pairs for m in to_openai(req, "path"))
    assert plan["stacks"]["full"]["text_tokens"] == words
    assert {path for path, _ in VllmTokenizer.bodies} == {"/tokenize"}  # nothing asked of the model
    sent = [m for _, body in VllmTokenizer.bodies for m in body["messages"]]
    assert not any(p.get("type") != "text" for m in sent if isinstance(m["content"], list) for p in m["content"])


def test_run_dry_run_plans_what_the_run_sends(prepared, tmp_path):
    """`run --dry-run` plans with the run's own inputs: `--asr source` plans the annotations'
    words (the plan took Whisper's: it dropped --asr and --coord-order, and --audio-as from the
    back-end's options, so the bill was not for the requests sent)."""
    planned = {}
    for extra in ([], ["--asr", "source"]):
        out = tmp_path / f"run{len(extra)}"
        args = ["run", str(prepared), "--model", "openai:gpt-4o", "--out", str(out), "--dry-run", *extra]
        res = CliRunner().invoke(app, args)
        assert res.exit_code == 0, res.output
        planned[" ".join(extra)] = json.loads((out / "plan.json").read_text())["stacks"]["full"]["text_tokens"]
    assert planned["--asr source"] != planned[""], planned
