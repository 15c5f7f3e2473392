"""The audio-visual benchmarks read as they ship (#77; shared/videoqa/AUDIOVISUAL.md): small sets in
Video-MME-v2's, WorldSense's, Daily-Omni's, AV-SpeakerBench's and EgoLifeQA's own shapes (their
field names, media layouts and the quoted records' shapes) over our clips, Video-MME-v2's on two
real recordings with their verified word timing. Each is read (a bad row named, the rest read),
run with the offline baselines and scored; every score is held to a computation written here from
the document alone (the non-linear score by brute force over every answer pattern of each group
structure). The given words become the ASR block (`--asr source`); the benchmarks' own prompts
and files are arms of their own; a question asked at a moment sees nothing after it."""

from __future__ import annotations

import itertools
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from avstack_cli.app import app
from fake_http import recording_handler, serving
from typer.testing import CliRunner

import avstack
from avstack.tasks.videoqa.data import detect_format, load_questions
from avstack.tasks.videoqa.protocols import EXTRACT, group_score

LETTERS8 = "ABCDEFGH"
MME2_WORDS = {"001": "指令4", "002": "指令5"}  # Video-MME-v2's videos: two real clips, with their verified words
MME2_STRUCTURE = {"001": ("relevance", "[1, 2, 3, 4]"), "002": ("logic", "[1, [2, 3], 4]")}
EGO_CLIPS = ("11210000", "11210400")  # one wearer's clips, each 4 s, named by their start (HHMMSSFF)


def _tone(seconds: float, rate: int = 16_000, hz: float = 440.0) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (0.2 * np.sin(2 * np.pi * hz * t)).astype(np.float32)


def _mme2(root: Path, samples: Path) -> Path:
    (root / "subtitle").mkdir()
    rows = []
    for vid, folder in MME2_WORDS.items():
        (clip,) = [p for p in (samples / folder).iterdir() if p.suffix.lower() in (".mp4", ".mov")]
        shutil.copy(clip, root / "videos" / f"{vid}.mp4")
        (note,) = json.loads((samples / folder / "annotations.json").read_text())
        lines = [json.dumps({"text": w["text"], "start_time": w["begin_time"] / 1000, "end_time": w["end_time"] / 1000})
                 for w in note["asr_result"]["words"]]  # fmt: skip
        (root / "subtitle" / f"{vid}.jsonl").write_text("\n".join(lines) + "\n")
        gtype, structure = MME2_STRUCTURE[vid]
        for k in range(1, 5):
            row = {"video_id": vid, "url": f"https://example.org/{vid}", "group_type": gtype,
                   "group_structure": structure, "question_id": f"{vid}-{k}",
                   "question": f"What is said in video {vid}, question {k}?",
                   "options": "\n".join(f"{c}. option {c} of {k}" for c in LETTERS8),
                   "answer": "B" if (vid, k) in (("001", 2), ("002", 1)) else LETTERS8[(k + int(vid)) % 8],
                   "level": None, "second_head": None, "third_head": None}  # fmt: skip
            if k == 4:  # the group's level and heads: on its last question only
                row |= {"level": str(int(vid)), "second_head": f"head2-{vid}", "third_head": "head3"}
            rows.append(row)
    rows.append(dict(rows[0], question_id="001-9"))  # a bad row: its place is not 1-4
    path = root / "test.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _worldsense(root: Path, synth, spec) -> Path:
    (root / "subtitles").mkdir()
    for vid in ("ws1", "ws2"):
        synth.write_clip(root / "videos" / f"{vid}.mp4", spec)
    (root / "subtitles" / "ws1.srt").write_text(
        "1\n00:00:00,500 --> 00:00:01,500\n<font color=white>the cup</font>\n\n"
        "2\n00:00:02,000 --> 00:00:03,000\nis red\n"
    )
    task = lambda q, a, ttype: {"question": q, "candidates": ["A. red", "B. blue", "C. green", "D. black"],  # noqa: E731
                                "answer": a, "task_domain": "Recognition", "task_type": ttype}  # fmt: skip
    data = {
        "ws1": {"duration": "<1min", "domain": "Daily Life", "sub_category": "Cooking", "video_caption": "a cup",
                "audio_class": ["Speech", "Event"], "task0": task("Which colour?", "A", "Attribute Recognition"),
                "task1": task("Which colour is said?", "A", "Speech Recognition")},
        "ws2": {"duration": "1-2min", "domain": "Sports", "sub_category": "Ball", "video_caption": "a ball",
                "audio_class": ["Music"], "task0": task("Which ball?", "C", "Attribute Recognition"),
                "task1": task("A broken one", "E", "Counting")},  # a bad row: E is not one of A-D
    }  # fmt: skip
    path = root / "worldsense_qa.json"
    path.write_text(json.dumps(data))
    return path


def _dailyomni(root: Path, synth, spec) -> Path:
    rows = []
    for k, vid in enumerate(("d1", "d2")):
        folder = root / "Videos" / vid
        folder.mkdir(parents=True)
        synth.write_clip(folder / f"{vid}_video.mp4", spec)
        sf.write(folder / f"{vid}_audio.wav", _tone(spec.duration_s, hz=300 + 200 * k), 16_000)
        for q, qtype in enumerate(("Event Sequence", "AV Event Alignment")):
            rows.append({"Question": f"What happens in {vid}, {q}?", "Choice": ["A. a", "B. b", "C. c", "D. d"],
                         "Answer": "ABCD"[(k + q) % 4], "video_id": vid, "Type": qtype,
                         "content_parent_category": "Lifestyle", "content_fine_category": None,
                         "video_category": "Howto & Style", "video_duration": "30s"})  # fmt: skip
    rows.append({"Question": "no choices", "Answer": "A", "video_id": "d1"})  # a bad row
    path = root / "qa.json"
    path.write_text(json.dumps(rows))
    return path


def _avspeaker(root: Path, synth, spec) -> Path:
    from dataclasses import replace

    for folder in ("av", "visual", "audio"):
        (root / folder).mkdir()
    rows = []
    for k in (1, 2):
        synth.write_clip(root / "av" / f"s{k}.mp4", replace(spec, audio=_tone(spec.duration_s)))
        synth.write_clip(root / "visual" / f"s{k}.mp4", spec)
        sf.write(root / "audio" / f"s{k}.wav", _tone(spec.duration_s, hz=600), 16_000)
        rows.append({"question_id": f"q{k}", "question": f"Who speaks first in clip {k}?",
                     "choices": str(["A. the man", "B. the woman", "C. the child", "D. nobody"]),
                     "answer": "B" if k == 1 else "D", "task_id": f"task{k}",
                     "audio_visual_path": f"av/s{k}.mp4", "visual_path": f"visual/s{k}.mp4",
                     "audio_path": f"audio/s{k}.wav"})  # fmt: skip
    rows.append({"question_id": "q3", "question": "no silent copy", "choices": ["A. x", "B. y"], "answer": "A",
                 "task_id": "task1", "audio_visual_path": "av/s1.mp4", "audio_path": "audio/s1.wav"})  # fmt: skip
    path = root / "avspeaker.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _egolife(root: Path, synth, spec) -> Path:
    (root / "A1_JAKE").mkdir()
    for start in EGO_CLIPS:
        synth.write_clip(root / "A1_JAKE" / f"DAY1_A1_JAKE_{start}.mp4", spec)
    record = lambda i, time, qtype, answer: {  # noqa: E731
        "ID": str(i), "query_time": {"date": "DAY1", "time": time}, "type": qtype, "need_audio": False,
        "need_name": True, "last_time": False, "trigger": "The table was filled with various tools and parts",
        "question": f"Who used the screwdriver first? ({i})", "choice_a": "Tasha", "choice_b": "Alice",
        "choice_c": "Shure", "choice_d": "Lucia", "answer": answer,
        "target_time": {"date": "DAY1", "time": "11152408"}, "keywords": "use screwdriver",
        "reason": "Saw Alice tightening screws with a screwdriver"}  # fmt: skip
    rows = [
        record(1, "11210250", "EntityLog", "B"),
        record(2, "11210400", "EventRecall", "A"),  # on a boundary
        record(3, "11210600", "EntityLog", "C"),
        record(4, "09000000", "TaskMaster", "A"),
    ]  # 4: before any clip
    path = root / "egolife.json"
    path.write_text(json.dumps(rows))
    return path


@pytest.fixture(scope="module")
def av(tmp_path_factory):
    """Every benchmark's files under one data root, prepared once (frames at 1 fps, the sound)."""
    from avstack.preparation.driver import prepare
    from avstack.preparation.settings import PrepareSettings
    from avstack.synthetic import synth

    root = tmp_path_factory.mktemp("av")
    spec = synth.ClipSpec(width=160, height=90, fps=5, duration_s=4.0)
    (root / "videos").mkdir(exist_ok=True)
    files = {
        "videomme2": _mme2(root, avstack.sample_root()),
        "worldsense": _worldsense(root, synth, spec),
        "dailyomni": _dailyomni(root, synth, spec),
        "avspeaker": _avspeaker(root, synth, spec),
        "egolife": _egolife(root, synth, spec),
    }
    out = tmp_path_factory.mktemp("av_prepared")
    report = prepare(root, out, PrepareSettings(anchors=("frames", "audio"), fps=1.0), workers=1)
    assert not report.failed, report.failed
    return root, out, files


# ------------------------------------------------------------------------------------ read as shipped

BAD = {
    "videomme2": r"test\.jsonl:9: question_id '001-9' is not '001-1' \.\. '001-4'",
    "worldsense": r"worldsense_qa\.json: video ws2: task1: answer 'E' is not one of the option letters ABCD",
    "dailyomni": r"qa\.json: question #4: 'Choice' must be a list",
    "avspeaker": r"avspeaker\.jsonl:3: 'visual_path' must be a non-empty text",
    "egolife": r"egolife\.json: question #3 \(ID 4\): no clip under the data root starts before its query time",
}
COUNTS = {"videomme2": 8, "worldsense": 3, "dailyomni": 4, "avspeaker": 2, "egolife": 3}


@pytest.mark.parametrize("name", list(BAD))
def test_each_is_read_as_shipped_found_by_its_shape_and_a_bad_row_is_named(av, name):
    root, _, files = av
    assert detect_format(files[name]) == name
    items, errors = load_questions(files[name], "auto", root)
    assert len(items) == COUNTS[name] and all(it.protocol == name for it in items)
    assert len(errors) == 1 and re.search(BAD[name], errors[0]), errors


def test_the_media_each_benchmark_ships_is_where_it_puts_it(av):
    root, _, files = av
    items = {it.id: it for name in files for it in load_questions(files[name], name, root)[0]}
    assert items["001-1"].video == "videos/001.mp4" and items["001-1"].subtitles == "subtitle/001.jsonl"
    assert items["ws1_task0"].subtitles == "subtitles/ws1.srt" and items["ws2_task0"].subtitles is None
    assert items["ws1_task0"].groups["audio_class"] == "Event, Speech"
    assert items["d1_0"].video == "Videos/d1/d1_video.mp4" and items["d1_0"].media == {
        "sound": "Videos/d1/d1_audio.wav"
    }
    assert items["q1"].video == "av/s1.mp4" and items["q1"].media == {
        "silent": "visual/s1.mp4",
        "sound": "audio/s1.wav",
    }
    # EgoLifeQA: the clip that holds the query time, seen up to it; at a clip's very start, the clip before, whole
    assert (items["1"].video, items["1"].until_s) == ("A1_JAKE/DAY1_A1_JAKE_11210000.mp4", 2.5)
    assert (items["2"].video, items["2"].until_s) == ("A1_JAKE/DAY1_A1_JAKE_11210000.mp4", 4.0)
    assert (items["3"].video, items["3"].until_s) == ("A1_JAKE/DAY1_A1_JAKE_11210400.mp4", 2.0)


# ------------------------------------------------------------------------------------ extraction


@pytest.mark.parametrize(
    "protocol,reply,letter",
    [
        ("videomme2", "The best answer is F.", "F"),
        ("videomme2", "Based on the frames, C", "B"),  # the official first [A-H]: "Based" gives B
        ("videomme2", "i cannot tell from these frames what happens here at all sorry", None),
        ("worldsense", "Based on the video, C", "C"),  # the first standalone A-D, not lmms-eval's B
        ("worldsense", '{"answer": "D"}', "D"),
        ("dailyomni", "I think so. Answer: B", "B"),
        ("dailyomni", "no letter here", None),
        ("avspeaker", "Based on what I hear, a", "A"),  # any case: the article reads as A, as the official code
        ("avspeaker", "The answer is (C).", "C"),
        ("avspeaker", "nothing", "A"),  # the official default
        ("egolife", "It was B, Alice.", "B"),
        ("egolife", "Alice did it", None),
    ],
)
def test_each_benchmark_reads_a_reply_as_its_official_code_does(protocol, reply, letter):
    assert EXTRACT[protocol](reply, list("ABCDEFGH"[: 8 if protocol == "videomme2" else 4])) == letter


# ------------------------------------------------------------------------------------ Video-MME-v2's score


def _k_by_order(structure: str, right: dict[int, bool]) -> int:
    """The document's rule as a partial order: a question counts when it and every question a step
    before it are right ([1, [2, 3], 4]: 2 and 3 each need 1; 4 needs 1, 2, 3)."""
    steps = json.loads(structure)
    steps = [s if isinstance(s, list) else [s] for s in steps]
    before: dict[int, set[int]] = {}
    seen: set[int] = set()
    for step in steps:
        for q in step:
            before[q] = set(seen)
        seen |= set(step)
    return sum(1 for q in before if right[q] and all(right[p] for p in before[q]))


LOGIC_MAPS = {"[1, 2, 3, 4]": [0, 6.25, 25, 56.25, 100], "[1, [2, 3], 4]": [0, 100 / 12, 400 / 12, 700 / 12, 100],
              "[[1, 2], 3, 4]": [0, 10, 20, 50, 100]}  # fmt: skip


def test_the_non_linear_score_equals_brute_force_over_every_answer_pattern():
    for structure, values in LOGIC_MAPS.items():
        for pattern in itertools.product((False, True), repeat=4):
            right = dict(zip((1, 2, 3, 4), pattern))
            assert group_score("logic", structure, right) == values[_k_by_order(structure, right)], (structure, pattern)
            assert group_score("relevance", structure, right) == [0, 6.25, 25, 56.25, 100][sum(pattern)]
    # the script's own way (evaluation/test_video_mme_v2.py, cal_logic): the index of the last
    # right answer of the leading run, moved on by one in each structure's special case
    for structure, values in LOGIC_MAPS.items():
        for pattern in itertools.product((False, True), repeat=4):
            last = next((i for i, ok in enumerate(pattern) if not ok), 4) - 1
            if structure == "[1, [2, 3], 4]" and last == 0 and pattern[2]:
                last += 1
            if structure == "[[1, 2], 3, 4]" and last == -1 and pattern[1]:
                last += 1
            right = dict(zip((1, 2, 3, 4), pattern))
            assert group_score("logic", structure, right) == values[last + 1], (structure, pattern)
    # the document's two worked cases
    assert _k_by_order("[1, [2, 3], 4]", {1: True, 2: False, 3: True, 4: True}) == 2
    assert _k_by_order("[[1, 2], 3, 4]", {1: False, 2: True, 3: True, 4: True}) == 1


# ------------------------------------------------------------------------------------ runs, scored


def _run(prepared: Path, questions: Path, model: str, out: Path, *more: str) -> dict:
    args = ["run", str(prepared), "--task", "videoqa", "--questions", str(questions), "--model", model]
    res = CliRunner().invoke(app, [*args, "--out", str(out), *more])
    assert res.exit_code == 0, res.output
    return json.loads((out / "score.json").read_text())


def _answers(out: Path) -> dict[str, str | None]:
    lines = [json.loads(x) for x in (out / "predictions.jsonl").read_text().splitlines() if x.strip()]
    got = {}
    for line in lines:  # the chance baseline answers {"answer": "X"}: the letter, read here by hand
        m = re.search(r'"answer": "([A-H])"', line.get("raw") or "")
        got[str(line["id"])] = m.group(1) if m and not line.get("error") else None
    return got


def _mme2_expected(path: Path, answers: dict[str, str | None]) -> dict:
    rows = [json.loads(x) for x in path.read_text().splitlines()][:8]  # the bad row left out, as it is named
    groups: dict[str, dict] = {}
    for r in rows:
        g = groups.setdefault(r["video_id"], {"right": {}})
        g["type"], g["structure"] = r["group_type"], r["group_structure"]
        g["right"][int(r["question_id"][-1])] = answers.get(r["question_id"]) == r["answer"]
        if r["level"]:
            g["level"] = r["level"]
    score = {}
    for vid, g in groups.items():
        n = sum(g["right"].values())
        values = LOGIC_MAPS[g["structure"]] if g["type"] == "logic" else [0, 6.25, 25, 56.25, 100]
        score[vid] = values[_k_by_order(g["structure"], g["right"]) if g["type"] == "logic" else n]
    acc = 100 * sum(answers.get(r["question_id"]) == r["answer"] for r in rows) / len(rows)
    return {"nonlin": sum(score.values()) / len(score), "acc": acc,
            "level": {groups[v]["level"]: s for v, s in score.items()}}  # fmt: skip


@pytest.mark.parametrize("model", ["oracle", "chance:3"])
def test_videomme2_runs_and_scores_as_computed_by_hand(av, tmp_path, model):
    root, prepared, files = av
    got = _run(prepared, files["videomme2"], model, tmp_path / "o")
    expected = _mme2_expected(files["videomme2"], _answers(tmp_path / "o"))
    mme2 = got["videomme2"]
    assert mme2["Non-Lin Score"] == pytest.approx(expected["nonlin"], abs=1e-4)
    assert mme2["Avg Acc"] == pytest.approx(expected["acc"], abs=1e-4) == got["overall"]["accuracy"]
    assert mme2["level"] == pytest.approx(expected["level"], abs=1e-4)
    assert "scored as wrong" in mme2["note"] and "-1" in mme2["note"]
    if model == "oracle":
        assert mme2["Non-Lin Score"] == 100.0 and mme2["relevance"] == mme2["logic"] == 100.0


def test_the_lmms_eval_export_aggregates_the_non_lin_score_as_score_json(av, tmp_path):
    """The lmms-eval task folder's own hooks (the generated utils.py, as lmms-eval calls them:
    process_results per answer, then the YAML's aggregation per metric) give Video-MME-v2's
    Non-Lin Score that `avstack run` writes, and the hand computation."""
    import importlib.util

    import datasets

    root, prepared, files = av
    got = _run(prepared, files["videomme2"], "chance:3", tmp_path / "o")
    qa = ["--task", "videoqa", "--questions", str(files["videomme2"])]
    res = CliRunner().invoke(app, ["export", str(prepared), *qa, "--to", "lmms-eval", "--out", str(tmp_path / "x")])
    assert res.exit_code == 0, res.output
    yaml_text = (tmp_path / "x" / "avstack_videoqa_full.yaml").read_text()
    aggregations = dict(re.findall(r"- metric: (\w+)\n    aggregation: !function utils\.(\w+)", yaml_text))
    assert aggregations == {"correct": "aggregate_mean", "non_lin_score": "aggregate_non_lin"}
    spec = importlib.util.spec_from_file_location("lmms_utils", tmp_path / "x" / "utils.py")
    utils = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(utils)
    raw = {
        str(p["id"]): p["raw"] for p in map(json.loads, (tmp_path / "o" / "predictions.jsonl").read_text().splitlines())
    }
    docs = datasets.load_dataset("parquet", data_files={"test": str(tmp_path / "x" / "test-*.parquet")}, split="test")
    per_metric: dict[str, list] = {}
    for doc in docs:
        for metric, value in utils.process_results(doc, [raw[doc["id"]]]).items():
            per_metric.setdefault(metric, []).append(value)
    theirs = {m: getattr(utils, aggregations[m])(values) for m, values in per_metric.items()}
    expected = _mme2_expected(files["videomme2"], _answers(tmp_path / "o"))
    assert theirs["non_lin_score"] == pytest.approx(got["videomme2"]["Non-Lin Score"], abs=1e-4)
    assert theirs["non_lin_score"] == pytest.approx(expected["nonlin"], abs=1e-4)
    assert 100 * theirs["correct"] == pytest.approx(got["videomme2"]["Avg Acc"], abs=1e-4)
    # another benchmark's export has no group score to report
    other = ["export", str(prepared), "--task", "videoqa", "--questions", str(files["worldsense"])]
    res = CliRunner().invoke(app, [*other, "--to", "lmms-eval", "--out", str(tmp_path / "w")])
    assert res.exit_code == 0, res.output
    assert "non_lin_score" not in (tmp_path / "w" / "avstack_videoqa_full.yaml").read_text()


def test_a_failed_extraction_is_wrong_and_score_json_says_how_the_official_script_differs(av, tmp_path):
    root, _, files = av
    lines = [{"id": f"00{v}-{k}", "response": "B" if (v, k) != (1, 1) else "i really cannot say which one it is here"}
             for v in (1, 2) for k in range(1, 5)]  # fmt: skip
    pred = tmp_path / "theirs.jsonl"
    pred.write_text("".join(json.dumps(x) + "\n" for x in lines))
    from avstack.tasks.videoqa.score import score

    items, _ = load_questions(files["videomme2"], "auto", root)
    result = score(items, lines)
    assert result["per_item"]["001-1"]["correct"] == 0.0 and result["per_item"]["001-1"]["parsed"] == 0
    answers = {x["id"]: (None if x["id"] == "001-1" else "B") for x in lines}
    assert result["videomme2"]["Non-Lin Score"] == pytest.approx(
        _mme2_expected(files["videomme2"], answers)["nonlin"], abs=1e-4
    )


@pytest.mark.parametrize("model", ["oracle", "chance:1"])
def test_worldsense_and_its_six_breakdowns_as_computed_by_hand(av, tmp_path, model):
    root, prepared, files = av
    got = _run(prepared, files["worldsense"], model, tmp_path / "o")
    answers = _answers(tmp_path / "o")
    data = json.loads(files["worldsense"].read_text())
    rows = []
    for vid, video in data.items():
        for key in ("task0", "task1"):
            t = video[key]
            if t["answer"] in "ABCD":
                fields = {**video, **t, "audio_class": ", ".join(sorted(video["audio_class"]))}
                rows.append((fields, answers.get(f"{vid}_{key}") == t["answer"]))
    assert got["overall"]["accuracy"] == pytest.approx(100 * sum(ok for _, ok in rows) / len(rows), abs=1e-4)
    for field in ("duration", "domain", "sub_category", "task_domain", "task_type", "audio_class"):
        for value in {f[field] for f, _ in rows}:
            mine = [ok for f, ok in rows if f[field] == value]
            assert got["by_group"][f"{field}={value}"]["accuracy"] == pytest.approx(100 * sum(mine) / len(mine))


def test_dailyomni_both_ways_and_its_own_sound_is_what_the_omni_arm_sends(av, tmp_path):
    root, prepared, files = av
    got = _run(prepared, files["dailyomni"], "chance:2", tmp_path / "o")
    answers = _answers(tmp_path / "o")
    rows = json.loads(files["dailyomni"].read_text())[:4]
    keys = [f"{r['video_id']}_{k}" for k, r in enumerate(rows)]
    right = [answers.get(key) == r["Answer"] for key, r in zip(keys, rows)]
    assert got["dailyomni"]["accuracy_failures_wrong"] == pytest.approx(100 * sum(right) / 4)
    assert got["dailyomni"]["accuracy_failures_left_out"] == pytest.approx(100 * sum(right) / 4)  # none failed
    # a failed item: left out of the paper's denominator, wrong in ours
    from avstack.tasks.videoqa.score import score

    items, _ = load_questions(files["dailyomni"], "auto", root)
    lines = [{"id": k, "response": r["Answer"]} for k, r in zip(keys[1:], rows[1:])] + [{"id": keys[0], "error": "x"}]
    both = score(items, lines)["dailyomni"]
    assert both["accuracy_failures_left_out"] == 100.0 and both["accuracy_failures_wrong"] == 75.0
    assert both["left_out"] == 1
    # the omni arm hears the benchmark's own <id>_audio.wav, not the video file's track
    from avstack.manifest import opened
    from avstack.prompting.messages import Audio
    from avstack.prompting.stacks import make_stack
    from avstack.tasks.videoqa.prompt import build_request

    records = {r.video: r for r in opened(prepared).records}
    item = next(it for it in items if it.id == "d2_2")
    req = build_request(records[item.video], item, make_stack("omni"), str(prepared), str(root))
    (sound,) = [p for p in req.parts if isinstance(p, Audio)]
    assert req.path_of(sound) == root / "Videos" / "d2" / "d2_audio.wav"


# ------------------------------------------------------------------------------------ a recording server


Recording = recording_handler("B")  # every question answered B


@pytest.fixture()
def recording_server():
    pytest.importorskip("openai")
    Recording.bodies.clear()
    with serving(Recording) as url:
        yield url


def _texts(body: dict) -> str:
    return "\n".join(
        p.get("text", "")
        for m in body["messages"]
        for p in (m["content"] if isinstance(m["content"], list) else [{"text": m["content"]}])
    )


def test_videomme2_one_ablation_puts_its_own_prompts_beside_timed_words(av, recording_server, tmp_path):
    root, prepared, files = av
    out = tmp_path / "abl"
    args = ["ablate", str(prepared), "--task", "videoqa", "--questions", str(files["videomme2"]), "--asr", "source",
            "--model", "openai:m", "--base-url", recording_server, "--drop", "word_ts",
            "--variants", "concat,interleave", "--out", str(out)]  # fmt: skip
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    report = (out / "report.md").read_text()
    assert "`full-no_word_ts` against `full` (word_ts)" in report
    sent = [_texts(b) for b in Recording.bodies]
    words = [json.loads(x) for x in (root / "subtitle" / "001.jsonl").read_text().splitlines()]
    joined = " ".join(w["text"] for w in words)
    concat = [t for t in sent if "This video's subtitles are listed below:\n" + joined + "\n" in t]
    assert len(concat) == 4 and all(t.rstrip().endswith("F, G, or H) of the correct option.") for t in concat)
    interleave = [t for t in sent if "[Subtitle " in t]
    assert len(interleave) == 8
    ours = [t for t in sent if "in video 001" in t and "[Subtitle " not in t and "listed below" not in t]
    timed = [{"text": w["text"], "begin_time": round(w["start_time"] * 1000), "end_time": round(w["end_time"] * 1000)}
             for w in words]  # fmt: skip
    # our word format: the same words with their times (full); -word_ts: the same words, no times
    assert sum(json.dumps({"text": joined, "words": timed}) in t for t in ours) == 4
    assert sum(json.dumps({"text": joined}) in t for t in ours) == 4
    score = json.loads((out / "concat" / "score.json").read_text())["videomme2"]
    expected = _mme2_expected(
        files["videomme2"], dict.fromkeys((f"00{v}-{k}" for v in (1, 2) for k in range(1, 5)), "B")
    )
    assert (score["Avg Acc"], score["Non-Lin Score"]) == (25.0, pytest.approx(expected["nonlin"], abs=1e-4))


def _official_segments(words: list[dict]) -> list[tuple[float, float, str]]:
    """Video-MME-v2's sentence grouping, written here from its script's rule: a new sentence
    after a gap over 0.5 s, or after . ! ? with a gap over 0.1 s."""
    out: list[list] = []
    for prev, w in zip([None, *words], words):
        gap = w["start_time"] - prev["end_time"] if prev else None
        if prev is None or gap > 0.5 or (prev["text"].rstrip().endswith((".", "!", "?")) and gap > 0.1):
            out.append([w["start_time"], w["end_time"], [w["text"]]])
        else:
            out[-1][1] = w["end_time"]
            out[-1][2].append(w["text"])
    return [(a, b, " ".join(ws)) for a, b, ws in out]


@pytest.mark.parametrize("variant", ["concat", "interleave"])
def test_videomme2_concat_and_interleave_are_its_scripts_requests_byte_for_byte(
    av, recording_server, tmp_path, variant
):
    """Part by part, the request Video-MME-v2's standalone script builds: computed here from the
    word JSONL and the frames' indices (t = index / fps; a sentence follows each frame whose
    [t_i, t_i+1) it overlaps)."""
    root, prepared, files = av
    args = ["run", str(prepared), "--task", "videoqa", "--questions", str(files["videomme2"]),
            "--variant", variant, "--model", "openai:m", "--base-url", recording_server,
            "--out", str(tmp_path / "o")]  # fmt: skip
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    manifest = [json.loads(x) for x in (prepared / "manifest.jsonl").read_text().splitlines()]
    rows = [json.loads(x) for x in files["videomme2"].read_text().splitlines()][:8]
    assert len(Recording.bodies) == len(rows)
    instruction = ("Select the best answer to the following multiple-choice question based on the video. "
                   "Respond with only the letter (A, B, C, D, E, F, G, or H) of the correct option.")  # fmt: skip
    for body in Recording.bodies:
        (message,) = [m for m in body["messages"] if m["role"] == "user"]
        content = message["content"]
        row = next(r for r in rows if content[-1]["text"].startswith(f"Question: {r['question']}\n"))
        assert content[-1]["text"] == f"Question: {row['question']}\n{row['options']}\n{instruction}"
        rec = next(r for r in manifest if r["video"].endswith(f"{row['video_id']}.mp4"))
        words = [json.loads(x) for x in (root / "subtitle" / f"{row['video_id']}.jsonl").read_text().splitlines()]
        if variant == "concat":
            joined = " ".join(w["text"] for w in words)
            expected = [{"type": "image_url"}] * len(rec["frames"]) + [
                {
                    "type": "text",
                    "text": f"These are the frames of a video. This video's subtitles are listed below:\n{joined}\n",
                }
            ]
        else:
            times = [f["index"] / rec["fps"] for f in rec["frames"]] + [rec["duration_ms"] / 1000]
            expected = []
            segments = _official_segments(words)
            for k in range(len(rec["frames"])):
                said = [
                    f"[Subtitle {a:.2f}s - {b:.2f}s]: {s}" for a, b, s in segments if b >= times[k] and a < times[k + 1]
                ]
                expected += [{"type": "image_url"}, *({"type": "text", "text": x} for x in said)]
            between = (
                "These are the frames of a video with corresponding subtitles shown between frames. "
                "The subtitles indicate what is being said during the time interval between adjacent frames."
            )
            expected.append({"type": "text", "text": between})
        got = [{"type": p["type"]} if p["type"] == "image_url" else p for p in content[:-1]]
        assert got == expected


def test_worldsense_frame_cues_is_vlmevalkits_subtitled_request_byte_for_byte(av, recording_server, tmp_path):
    """WorldSense's subtitled setting as VLMEvalKit sends it: its instruction, the frames, the cue
    on screen at each sampled frame (index / fps; begin < t < end, strictly), the question and
    its candidates; computed here from the SRT file and the frames' indices."""
    root, prepared, files = av
    args = ["run", str(prepared), "--task", "videoqa", "--questions", str(files["worldsense"]),
            "--variant", "frame_cues", "--model", "openai:m", "--base-url", recording_server,
            "--out", str(tmp_path / "o")]  # fmt: skip
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    srt = [(500, 1500, "the cup"), (2000, 3000, "is red")]  # ws1.srt, as _worldsense writes it
    manifest = {json.loads(x)["clip_id"]: json.loads(x) for x in (prepared / "manifest.jsonl").read_text().splitlines()}
    items = {it.id: it for it in load_questions(files["worldsense"], "auto", root)[0]}
    assert len(Recording.bodies) == len(items) == 3
    for body in Recording.bodies:
        (message,) = [m for m in body["messages"] if m["role"] == "user"]
        content = message["content"]
        kinds = [p["type"] for p in content]
        item = next(it for it in items.values() if f"Question: {it.question}\n" in content[-1]["text"])
        rec = next(r for r in manifest.values() if r["video"].endswith(item.video.split("/")[-1]))
        times = [round(f["index"] * 1000 / rec["fps"]) for f in rec["frames"]]
        cues = [next((c for a, b, c in srt if a < t < b), "") for t in times] if item.subtitles else []
        assert kinds == ["text", *["image_url"] * len(times), "text", "text"], kinds
        assert content[0]["text"] == (
            "Carefully watch this video and pay attention to every detail. Based on your observations, "
            "select the best option that accurately addresses the question."
        )
        assert content[-2]["text"] == (
            "\nThese are the frames of a video. This video's subtitles are listed below:\n"
            + "\n".join(c for c in cues if c)
            + "\nSelect the best answer to the following multiple-choice question based on the video. "
            "Respond with only the letter (A, B, C, or D) of the correct option.\n"
        )
        assert content[-1]["text"] == f"Question: {item.question}\n" + "\n".join(item.options) + "\nAnswer: "
        if item.subtitles:  # frames at 0, 1000, 2000, 3000 ms: "the cup" at 1000 only (2000 is its begin)
            assert [c for c in cues if c] == ["the cup"]
    # a question of another benchmark is refused this arm, named
    other = ["run", str(prepared), "--task", "videoqa", "--questions", str(files["videomme2"]), "--variant",
             "frame_cues", "--model", "oracle", "--out", str(tmp_path / "m")]  # fmt: skip
    CliRunner().invoke(app, other)
    lines = [json.loads(x) for x in (tmp_path / "m" / "predictions.jsonl").read_text().splitlines()]
    assert all("frame_cues variant is WorldSense's own prompt" in (x.get("error") or "") for x in lines), lines


def test_egolife_no_request_carries_anything_after_its_query_time(av, recording_server, tmp_path):
    root, prepared, files = av
    asked = ["run", str(prepared), "--task", "videoqa", "--questions", str(files["egolife"])]
    res = CliRunner().invoke(
        app, [*asked, "--model", "openai:m", "--base-url", recording_server, "--out", str(tmp_path / "o")]
    )
    assert res.exit_code == 0, res.output
    items = {it.id: it for it in load_questions(files["egolife"], "auto", root)[0]}
    assert len(Recording.bodies) == 3
    for body in Recording.bodies:
        text = _texts(body)
        (qid,) = re.findall(r"screwdriver first\? \((\d)\)", text)
        times = [int(t) for t in re.findall(r"<timestamp_ms>(\d+)", text)]
        assert times and max(times) <= items[qid].until_s * 1000, (qid, times)
        assert not any(p["type"] in ("input_audio", "video_url") for m in body["messages"]
                       for p in (m["content"] if isinstance(m["content"], list) else []))  # fmt: skip
    # a stack that would show the future (the whole file) is refused for each question, named
    res = CliRunner().invoke(app, [*asked, "--model", "oracle", "--variant", "video", "--out", str(tmp_path / "v")])
    lines = [json.loads(x) for x in (tmp_path / "v" / "predictions.jsonl").read_text().splitlines()]
    assert all("sees the video only up to" in (x.get("error") or "") for x in lines), lines


def test_avspeaker_each_arm_sends_its_own_file(av, recording_server, tmp_path):
    import base64

    root, prepared, files = av
    out = tmp_path / "abl"
    args = ["ablate", str(prepared), "--task", "videoqa", "--questions", str(files["avspeaker"]),
            "--model", "openai:m", "--base-url", recording_server, "--variants", "video,silent,sound",
            "--out", str(out)]  # fmt: skip
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    from avstack.media.wavfile import pcm16_wav

    def sent(kind: str, field: str) -> list[bytes]:
        parts = [p for b in Recording.bodies for m in b["messages"] if isinstance(m["content"], list)
                 for p in m["content"] if p["type"] == kind]  # fmt: skip
        datas = [p[kind]["data"] if kind == "input_audio" else p[kind]["url"].split("base64,", 1)[1] for p in parts]
        return [base64.b64decode(d) for d in datas]

    shipped = lambda rel: (root / rel).read_bytes()  # noqa: E731
    sounds = sent("input_audio", "data")
    assert sorted(sounds) == sorted(pcm16_wav(shipped(f"audio/s{k}.wav")) for k in (1, 2))  # the sound arm: audio_path
    videos = sent("video_url", "url")
    # the video arm sends audio_visual_path, the silent arm visual_path: each question's own file
    assert sorted(videos) == sorted(shipped(f"{d}/s{k}.mp4") for d in ("av", "visual") for k in (1, 2))
    assert json.loads((out / "silent" / "run.json").read_text())["stack"] == "silent"


def test_videomme2_reads_its_parquet_as_its_jsonl(av, tmp_path):
    """The release's own file is test.parquet: the same rows as Parquet are the same items."""
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    root, _, files = av
    rows = [json.loads(x) for x in files["videomme2"].read_text().splitlines()]
    path = tmp_path / "test.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    assert detect_format(path) == "videomme2"
    from_parquet, errors = load_questions(path, "auto", root)
    from_jsonl, _ = load_questions(files["videomme2"], "auto", root)
    assert from_parquet == from_jsonl and [it.facts for it in from_parquet] == [it.facts for it in from_jsonl]
    assert len(errors) == 1 and "001-9" in errors[0]


@pytest.mark.parametrize("name,group", [("avspeaker", "task_id"), ("egolife", "type")])
@pytest.mark.parametrize("model", ["oracle", "chance:5"])
def test_avspeaker_per_task_and_egolife_per_type_as_computed_by_hand(av, tmp_path, name, group, model):
    root, prepared, files = av
    got = _run(prepared, files[name], model, tmp_path / "o")
    answers = _answers(tmp_path / "o")
    if name == "avspeaker":
        rows = [json.loads(x) for x in files[name].read_text().splitlines()][:2]
        truth = [(r["question_id"], r["answer"], r["task_id"]) for r in rows]
    else:
        rows = json.loads(files[name].read_text())[:3]
        truth = [(r["ID"], r["answer"], r["type"]) for r in rows]
    right = {key: answers.get(key) == answer for key, answer, _ in truth}
    assert got["overall"]["accuracy"] == pytest.approx(100 * sum(right.values()) / len(right))
    for value in {g for _, _, g in truth}:
        mine = [right[key] for key, _, g in truth if g == value]
        assert got["by_group"][f"{group}={value}"]["accuracy"] == pytest.approx(100 * sum(mine) / len(mine))
    if model == "oracle":
        assert got["overall"]["accuracy"] == 100.0


@pytest.mark.parametrize("variant", ["subtitled", "silent", "concat", "interleave"])
def test_a_task_with_no_questions_file_refuses_the_variants_that_need_one(av, variant, tmp_path):
    """EcoG has no subtitles or shipped files: the variants that show them exit 2 before anything
    runs, under run and ablate, and write nothing."""
    prepared = av[1]
    for command in (["run", "--variant", variant], ["ablate", "--variants", variant]):
        res = CliRunner().invoke(app, [command[0], str(prepared), "--model", "deixis", *command[1:],
                                       "--out", str(tmp_path / "o")])  # fmt: skip
        assert res.exit_code == 2 and f"--task ecog takes no variant {variant}" in res.output, res.output
        assert not (tmp_path / "o").exists()
