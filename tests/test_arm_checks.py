"""Each arm differs from its baseline by its cue alone (#66): the requests held to each other part by
part before sending (runs.integrity), the server's own count held to the plan after (runs.reconcile,
on every back-end's usage fields), and the A/A arm's noise floor (runs.noise), on the bundled
samples, on a real multimodal llama-server with two slots, and through a proxy that drops a frame."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import pytest
from avstack_cli.app import app
from typer.testing import CliRunner

from avstack.prompting.messages import Image, Request, Text
from avstack.prompting.stacks import CUE_CHANGES, REPEAT, make_stack
from avstack.runs.ablation.integrity import Arm, ArmMismatch, arms_of, check_arms
from avstack.runs.ablation.noise import wilson
from avstack.runs.ablation.reconcile import reconcile, reported_input
from avstack.runs.planning.plan_record import Plan
from avstack.tasks.ecog.prompt import BUILTIN

MODEL = "openai:qwen2-vl-tiny"


def _invoke(args: list[str]):
    return CliRunner().invoke(app, [str(a) for a in args])


def _jpegs(tmp_path: Path, n: int) -> list[str]:
    """n different little JPEGs (real files: the check compares bytes)."""
    import cv2
    import numpy as np

    paths = []
    for k in range(n):
        img = np.full((16, 16, 3), 40 * k, np.uint8)
        path = tmp_path / f"f{k}.jpg"
        cv2.imwrite(str(path), img)
        paths.append(str(path))
    return paths


# ------------------------------------------------------------------------------------ integrity


def _frames_request(paths: list[str], tagged: bool, clip: str = "c1", extra: tuple = ()) -> Request:
    parts: list = [Text("<instruction>\nput this there\n</instruction>")]
    for k, p in enumerate(paths):
        if tagged:
            parts.append(Text(f"<timestamp_ms>{500 * k}"))
        parts += [Image(p), Text("\n")]
    return Request("system", (*parts, *extra), meta={"clip_id": clip})


def test_the_untagged_arm_passes_and_is_counted_and_a_swapped_frame_is_named(tmp_path):
    paths = _jpegs(tmp_path, 3)
    arm = Arm("full-no_frame_ts", "full", CUE_CHANGES["frame_ts"])
    full = {"full": [_frames_request(paths, True)], "full-no_frame_ts": [_frames_request(paths, False)]}
    (counts,) = check_arms([arm], full)
    assert (counts.items, counts.tags_removed, counts.images_removed, counts.lines_removed) == (1, 3, 0, 0)
    assert "3 tags removed over 1 item; images" in counts.said()
    swapped = [paths[1], paths[0], paths[2]]
    with pytest.raises(ArmMismatch) as err:
        check_arms([arm], {"full": full["full"], "full-no_frame_ts": [_frames_request(swapped, False)]})
    assert err.value.item == "c1" and err.value.arm == "full-no_frame_ts" and "(image)" in str(err.value)
    # an extra sentence the cue does not account for
    said = _frames_request(paths, False, extra=(Text("Note: the frames carry no times."),))
    with pytest.raises(ArmMismatch, match="part 7 \\(text 'Note: the frames carry no times.'\\) added"):
        check_arms([arm], {"full": full["full"], "full-no_frame_ts": [said]})
    # the A/A arm may change nothing at all
    with pytest.raises(ArmMismatch, match="by more than aa"):
        check_arms([Arm("full-aa", "full", REPEAT)], {"full": full["full"], "full-aa": [said]})


def test_every_stack_of_an_ablation_finds_its_parent():
    stacks = [make_stack("full"), make_stack("full", ["frame_ts"]), make_stack("full", ["word_ts"]),
              make_stack("full", ["frame_ts", "word_ts"]), make_stack("full", ts_format="seconds"),
              make_stack("full", layout="shared-first"), make_stack("omni")]  # fmt: skip
    from dataclasses import replace

    stacks.append(replace(stacks[0], repeat=True))
    found = {a.name: (a.parent, a.changes.cue) for a in arms_of(stacks)}
    assert found == {
        "full-no_frame_ts": ("full", "frame_ts"),
        "full-no_word_ts": ("full", "word_ts"),
        "full-no_frame_ts-no_word_ts": ("full-no_word_ts", "frame_ts"),
        "full@seconds": ("full", "ts_format ms -> seconds"),
        "full@shared-first": ("full", "layout benchmark -> shared-first"),
        "omni": ("full", "variant omni"),
        "full-aa": ("full", "aa"),
    }


def _template_moving_asr(folder: Path) -> Path:
    """The shipped EN templates, but the untimed ASR block goes after the frames: one arm's part moved."""
    shutil.copytree(BUILTIN, folder)
    user = folder / "en" / "user.j2"
    text = user.read_text()
    start, end = text.index("{% if asr_shown %}"), text.index("{% if visual ==")
    block = text[start:end]
    moved = text[:start] + block.replace("{% if asr_shown %}", "{% if asr_shown and word_times %}") + text[end:]
    moved += block.replace("{% if asr_shown %}", "{% if asr_shown and not word_times %}")
    user.write_text(moved)
    return folder


def test_a_template_that_moves_a_part_in_one_arm_stops_the_plan_naming_clip_arm_and_part(prepared, tmp_path):
    prompts = _template_moving_asr(tmp_path / "prompts")
    out = tmp_path / "abl"
    args = ["ablate", prepared, "--model", "deixis", "--drop", "word_ts", "--prompt", prompts, "--out", out]
    res = _invoke([*args, "--dry-run"])
    assert res.exit_code == 2, res.output
    assert "arm full-no_word_ts differs from full by more than word_ts" in res.output
    assert "item '" in res.output and "part " in res.output
    assert not (out / "plan.json").exists()  # nothing planned, nothing sent
    res = _invoke(args)  # the run itself refuses too, before any request
    assert res.exit_code == 2 and not (out / "full").exists()
    # the shipped templates pass, and the report says what each arm changed
    ok = tmp_path / "ok"
    res = _invoke(["ablate", prepared, "--model", "deixis", "--drop", "frame_ts", "--drop", "word_ts", "--out", ok])
    assert res.exit_code == 0, res.output
    report = (ok / "report.md").read_text()
    assert "## What each arm changes" in report
    plan = json.loads((ok / "plan.json").read_text())
    frame_arm = next(a for a in plan["arms"] if a["arm"] == "full-no_frame_ts")
    frames = sum(len(r["frames"]) for r in map(json.loads, (prepared / "manifest.jsonl").read_text().splitlines()))
    assert frame_arm["tags_removed"] == frames and frame_arm["images_removed"] == frame_arm["lines_added"] == 0
    assert f"`full-no_frame_ts` against `full` (frame_ts): {frames} tags removed over" in report


def test_videoqa_and_egogap_arms_are_checked_too(prepared, questions, tmp_path):
    from test_egogap import _bundles, _images

    out = tmp_path / "qa"
    args = ["ablate", prepared, "--task", "videoqa", "--questions", questions, "--model", "chance"]
    res = _invoke([*args, "--drop", "frame_ts", "--drop", "asr", "--pack", "off,on", "--dry-run", "--out", out])
    assert res.exit_code == 0, res.output
    arms = {a["arm"]: a for a in json.loads((out / "plan.json").read_text())["arms"]}
    assert arms["full-no_frame_ts"]["tags_removed"] > 0 and arms["full-no_frame_ts"]["images_removed"] == 0
    assert arms["full@packed"]["cue"] == "packed False -> True"  # its own request: a video's questions at once
    bundles, images = _bundles(tmp_path / "b.jsonl"), _images(tmp_path / "img")
    eg = tmp_path / "eg"
    res = _invoke(["ablate", "--task", "egogap", "--bundles", bundles, "--images", images, "--model", "chance",
                   "--variants", "vflip,n3", "--aa", "--dry-run", "--out", eg])  # fmt: skip
    assert res.exit_code == 0, res.output
    arms = {a["arm"]: a for a in json.loads((eg / "plan.json").read_text())["arms"]}
    assert arms["default-vflip"]["images_replaced"] == arms["default-vflip"]["items"] > 0
    assert arms["default-vflip"]["lines_added"] == arms["default-vflip"]["lines_removed"] == 0
    assert arms["default-image-aa"]["cue"] == "aa"


# ------------------------------------------------------------------------------------ what the server saw


def _usage_shapes(tokens: int) -> dict[str, dict]:
    """One request's usage as each back-end reports `tokens` of input (Anthropic counts its cache apart)."""
    third = tokens // 3
    return {
        "openai": {"prompt_tokens": tokens, "completion_tokens": 5, "total_tokens": tokens + 5},
        "openai-responses": {"input_tokens": tokens, "output_tokens": 5},
        "anthropic": {
            "input_tokens": tokens - 2 * third,
            "cache_read_input_tokens": third,
            "cache_creation_input_tokens": third,
            "output_tokens": 5,
        },  # fmt: skip
        "gemini": {"prompt_token_count": tokens, "candidates_token_count": 5, "cached_content_token_count": third},
        "llama.cpp": {
            "prompt_tokens": tokens,
            "completion_tokens": 5,
            "timings": {"cache_n": third, "prompt_n": tokens - third},
        },  # fmt: skip
        "vllm": {"prompt_tokens": tokens, "completion_tokens": 5, "prompt_tokens_details": None},
    }


@pytest.mark.parametrize("shape", list(_usage_shapes(100)))
def test_a_server_that_drops_a_frame_is_caught_on_every_back_ends_usage_fields(prepared, tmp_path, shape):
    """The plan for gpt-4o (its tile rule, tiktoken's text with its stated error); the server's
    count as each back-end reports it: `full` as planned, `-frame_ts` one picture short."""
    from avstack.runs.planning.cost import image_size, image_tokens

    out = tmp_path / "abl"
    res = _invoke(["ablate", prepared, "--model", "openai:gpt-4o", "--drop", "frame_ts", "--dry-run", "--out", out])
    assert res.exit_code == 0, res.output
    plan = json.loads((out / "plan.json").read_text())
    records = {json.loads(x)["clip_id"]: json.loads(x) for x in (prepared / "manifest.jsonl").read_text().splitlines()}
    for stack, short in (("full", False), ("full-no_frame_ts", True)):
        lines = []
        for clip, (planned, _) in plan["inputs"][stack].items():
            frame = prepared / records[clip]["frames"][-1]["path"]
            got = planned - (image_tokens(*image_size(frame), "openai:gpt-4o") if short else 0)
            lines.append({"video_name": clip, "raw": "{}", "usage": _usage_shapes(got)[shape], "cached": False})
        (out / stack).mkdir()
        (out / stack / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    predictions = {s: out / s / "predictions.jsonl" for s in plan["stacks"]}
    arms = {a.arm: a for a in reconcile(Plan.from_json(plan), predictions)}
    assert not arms["full"].flagged and arms["full"].departure == 0
    dropped = arms["full-no_frame_ts"]
    assert dropped.flagged and dropped.departure < -dropped.uncertainty < 0
    assert dropped.departing == dropped.requests == len(records)
    assert "counted less than was sent" in dropped.cause


def test_reported_input_reads_each_shape_whole():
    for shape, usage in _usage_shapes(99).items():
        assert reported_input(usage) == 99, shape
    assert reported_input({"completion_tokens": 3}) is None and reported_input("nonsense") is None


# ------------------------------------------------------------------------------------ the A/A arm


def test_the_aa_arm_is_planned_and_billed_like_any_arm_and_asks_again(prepared, tmp_path):
    base = ["ablate", prepared, "--model", "openai:gpt-4o", "--drop", "frame_ts", "--dry-run"]
    assert _invoke([*base, "--out", tmp_path / "plain"]).exit_code == 0
    res = _invoke([*base, "--aa", "--out", tmp_path / "aa"])
    assert res.exit_code == 0, res.output
    plain = json.loads((tmp_path / "plain" / "plan.json").read_text())
    plan = json.loads((tmp_path / "aa" / "plan.json").read_text())
    full, again = plan["stacks"]["full"], plan["stacks"]["full-aa"]
    # the same requests, yet none is a repeat: each is asked and paid again
    assert again["to_pay_requests"] == full["to_pay_requests"] == full["requests"] and again["repeats"] == 0
    assert again["to_pay_input_tokens"] == full["to_pay_input_tokens"]
    assert again["cache_read_tokens"] == 0  # past the provider's prompt cache, as planned
    usd = plan["total"]["usd_at_most"]["online"] - plain["total"]["usd_at_most"]["online"]
    assert usd == pytest.approx(plain["total"]["usd_at_most"]["online"] * full["to_pay_input_tokens"]
                                / plain["total"]["input_tokens"], rel=0.25)  # fmt: skip
    # run offline: the A/A arm answers every clip afresh (the answer cache is not read) and the report says so
    out = tmp_path / "run"
    res = _invoke(["ablate", prepared, "--model", "deixis", "--drop", "frame_ts", "--aa", "--out", out])
    assert res.exit_code == 0, res.output
    rows = [json.loads(x) for x in (out / "full-aa" / "predictions.jsonl").read_text().splitlines()]
    assert rows and not any(r["cached"] for r in rows) and all(r["error"] is None for r in rows)
    figures = json.loads((out / "aa.json").read_text())
    assert figures["flips"] == 0 and figures["items"] == len(rows)  # an offline baseline is deterministic
    assert "## Noise floor (A/A)" in (out / "report.md").read_text() and "A/A: `full-aa`" in res.output


def test_wilson_interval_agrees_with_scipy():
    stats = pytest.importorskip("scipy.stats")
    for k, n in ((0, 7), (1, 7), (3, 10), (10, 10), (17, 811)):
        ci = stats.binomtest(k, n).proportion_ci(method="wilson")
        assert wilson(k, n) == pytest.approx((ci.low, ci.high), abs=1e-12)


# ------------------------------------------------------------------------------------ a real server


def _images_of(body: dict) -> list[bytes]:
    return [base64.b64decode(p["image_url"]["url"].split(",", 1)[1])
            for p in body["messages"][-1]["content"] if p["type"] == "image_url"]  # fmt: skip


def _tagged(body: dict) -> bool:
    return "<timestamp_ms>" in json.dumps(body["messages"][-1]["content"])


@pytest.fixture(scope="module")
def two_slots(tmp_path_factory):
    from llama_servers import vision_server

    with vision_server(tmp_path_factory.mktemp("two") / "server.log", "-np", "2") as served:
        yield served


def test_on_a_real_server_with_two_slots_every_arm_sees_what_was_planned(prepared, two_slots, tmp_path):
    out = tmp_path / "abl"
    args = ["ablate", prepared, "--model", MODEL, "--base-url", two_slots["base"], "--concurrency", "2",
            "--drop", "frame_ts", "--drop", "word_ts", "--aa", "--strict-inputs", "--max-tokens", "16",
            "--out", out]  # fmt: skip
    res = _invoke(args)
    assert res.exit_code == 0, res.output
    seen = {a["arm"]: a for a in json.loads((out / "inputs.json").read_text())["reported"]}
    assert set(seen) == {"full", "full-no_frame_ts", "full-no_word_ts", "full-aa"}
    for arm in seen.values():
        assert arm["requests"] > 0 and abs(arm["departure"]) <= 0.02 * arm["planned"], arm
    bodies = [b for b, code, _ in two_slots["proxy"].bodies if code == 200]
    tagged = [_images_of(b) for b in bodies if _tagged(b)]
    untagged = [_images_of(b) for b in bodies if not _tagged(b)]
    assert untagged and all(images in tagged for images in untagged)  # a tagged request's pictures, in order
    rows = [json.loads(x) for x in (out / "full-aa" / "predictions.jsonl").read_text().splitlines()]
    assert rows and all(r["error"] is None for r in rows)
    assert "A/A: `full-aa` asked the baseline's requests again" in (out / "report.md").read_text()


def _drop_last_image_untagged(body: dict) -> dict:
    content = body["messages"][-1]["content"]
    if not _tagged(body):
        last = max((k for k, p in enumerate(content) if p["type"] == "image_url"), default=None)
        if last is not None:
            del content[last]
    return body


def test_a_proxy_that_drops_a_frame_of_untagged_requests_fails_strict_inputs(prepared, tmp_path_factory, tmp_path):
    from llama_servers import vision_server

    log = tmp_path_factory.mktemp("faulty") / "server.log"
    with vision_server(log, "-np", "2", rewrite=_drop_last_image_untagged) as served:
        out = tmp_path / "abl"
        args = ["ablate", prepared, "--model", MODEL, "--base-url", served["base"], "--concurrency", "2",
                "--drop", "frame_ts", "--aa", "--strict-inputs", "--max-tokens", "8", "--out", out]  # fmt: skip
        res = _invoke(args)
    assert res.exit_code == 1, res.output
    line = next(x for x in res.output.splitlines() if x.startswith("full-no_frame_ts: input departs"))
    assert "input tokens reported against" in line and "failed" not in line
    assert "(--strict-inputs): full-no_frame_ts" in res.output and "full-aa" not in res.output.split("--strict")[-1]
    report = (out / "report.md").read_text()
    assert "full-no_frame_ts [INPUT -" in report  # beside its delta, in the report's tables
