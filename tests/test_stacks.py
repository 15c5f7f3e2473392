import json
import os
from pathlib import Path

import pytest

from avstack.manifest import ClipRecord
from avstack.prompting.messages import Image, Text, Video, render, to_gemini, to_hf, to_openai
from avstack.prompting.stacks import make_stack
from avstack.tasks.ecog.inputs import EcogInputs
from avstack.tasks.ecog.prompt import build_request

SNAPSHOTS = Path(__file__).parent / "snapshots"
UPDATE = os.environ.get("AVSTACK_UPDATE_SNAPSHOTS") == "1"  # set to 1 to accept a deliberate prompt change

RECORD = {
    "clip_id": "指令3/put.mp4",
    "video": "指令3/put.mp4",
    "task_template": "指令3",
    "lang": "en",
    "frames": [
        {"index": 0, "pts_ms": 0, "path": "frames/k/000000.jpg"},
        {"index": 14, "pts_ms": 467, "path": "frames/k/000014.jpg"},
        {"index": 29, "pts_ms": 1001, "path": "frames/k/000029.jpg"},
    ],
    "last_frame": {"index": 29, "pts_ms": 1001, "path": "frames/k/000029.jpg"},
    "asr": {
        "text": "put this there",
        "words": [
            {"text": "put", "begin_time": 100, "end_time": 300, "prob": 0.9},
            {"text": "this", "begin_time": 320, "end_time": 500, "prob": 0.9},
            {"text": "there", "begin_time": 700, "end_time": 950, "prob": 0.8},
        ],
    },
    "source_asr": {"text": "put this there", "words": []},
    "eval_gt": {"object_choices": ["A. red cup", "B. blue box"], "space_choices": ["a. left of the cup"]},
}
STACKS = {
    "full": ("full", []),
    "no_frame_ts": ("full", ["frame_ts"]),
    "no_word_ts": ("full", ["word_ts"]),
    "no_asr": ("full", ["asr"]),
    "video": ("video", []),
    "text": ("text", []),
}


def _req(name, record=RECORD):
    variant, drop = STACKS[name]
    return build_request(ClipRecord.from_json(record), make_stack(variant, drop), "/prep", data_root="/data")


def _flat(req):
    lines = ["[system]", req.system, "[user]"]
    for p in req.parts:
        lines.append(p.text if isinstance(p, Text) else f"<{type(p).__name__.lower()} {p.path}>")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("name", list(STACKS))
def test_prompt_snapshots(name):
    path = SNAPSHOTS / f"ecog_en_{name}.txt"
    text = _flat(_req(name))
    if UPDATE or not path.exists():
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
        if not UPDATE:
            pytest.fail(f"snapshot {path.name} was missing and has been written; rerun")
    assert text == path.read_text(encoding="utf-8")


def test_full_has_true_pts_before_every_image():
    parts = _req("full").parts
    images = [i for i, p in enumerate(parts) if isinstance(p, Image)]
    assert len(images) == 3
    for i, f in zip(images, RECORD["frames"]):
        assert parts[i - 1] == Text(f"<timestamp_ms>{f['pts_ms']}")
        assert parts[i].pts_ms == f["pts_ms"]


def test_drop_frame_ts_removes_only_timestamps():
    full, drop = _req("full"), _req("no_frame_ts")
    assert not any(isinstance(p, Text) and p.text.startswith("<timestamp_ms>") for p in drop.parts)
    kept = [p for p in full.parts if not (isinstance(p, Text) and p.text.startswith("<timestamp_ms>"))]
    assert tuple(kept) == drop.parts and full.system == drop.system


def test_drop_word_ts_keeps_text_removes_every_time():
    user = _req("no_word_ts").parts[0].text
    block = json.loads(user.split("<asr_data>\n")[1].split("\n")[0])
    assert block == {"text": "put this there"}
    assert 'begin_time":' not in user and 'end_time":' not in user
    full_block = json.loads(_req("full").parts[0].text.split("<asr_data>\n")[1].split("\n")[0])
    assert [w["begin_time"] for w in full_block["words"]] == [100, 320, 700]


def test_drop_asr_video_and_text_variants():
    assert "<asr_data>" not in _req("no_asr").parts[0].text
    video = _req("video")
    assert [type(p) for p in video.parts] == [Text, Video] and video.parts[1].path == "/data/指令3/put.mp4"
    assert "<asr_data>" not in video.parts[0].text
    text = _req("text")
    assert all(isinstance(p, Text) for p in text.parts)


def test_silent_level1_uses_did_not_speak_sentence():
    rec = dict(RECORD, task_template="指令1", asr={"text": "", "words": []})
    assert "did not speak" in _req("full", rec).parts[0].text
    zh = dict(rec, lang="zh")
    assert "没有说话" in _req("full", zh).parts[0].text


def test_english_and_chinese_share_structure():
    en, zh = _req("full"), _req("full", dict(RECORD, lang="zh"))
    assert [type(p) for p in en.parts] == [type(p) for p in zh.parts]
    for tag in ("<instruction>", "</instruction>", "<asr_data>", "</asr_data>"):
        assert tag in en.parts[0].text and tag in zh.parts[0].text
    assert en.system.count("\n\n") == zh.system.count("\n\n")


def test_asr_source_choice():
    rec = dict(RECORD)
    src = build_request(ClipRecord.from_json(rec), make_stack("full"), "/p", EcogInputs(asr="source"))
    assert '"words": []' in src.parts[0].text


def test_renderers_only_format(tmp_path):
    img = tmp_path / "frames" / "k"
    img.mkdir(parents=True)
    for f in RECORD["frames"]:
        (tmp_path / f["path"]).write_bytes(b"\xff\xd8fakejpeg")
    req = build_request(ClipRecord.from_json(RECORD), make_stack("full"), str(tmp_path))
    oa = to_openai(req)
    content = oa[1]["content"]
    assert oa[0] == {"role": "system", "content": req.system}
    assert [c["type"] for c in content].count("image_url") == 3
    assert content[[c["type"] for c in content].index("image_url")]["image_url"]["url"].startswith("data:image/jpeg")
    gem = to_gemini(req)
    assert sum("inline_data" in p for p in gem["contents"][0]["parts"]) == 3
    hf = to_hf(req)
    assert [c["type"] for c in hf[1]["content"]].count("image") == 3
    assert render(req, "neutral")["parts"][2] == {"type": "text", "text": "<timestamp_ms>0"}
