"""The long egocentric benchmarks read as they ship (#59; shared/videoqa/LONGFORM.md): held-out
files in EgoSchema's, Ego4D NLQ's and HourVideo's shapes over real (synthetic) clips where each
benchmark puts them; `oracle` scores 100% (NLQ: R@1 at IoU > 0.5 = 100), `chance` scores as
chance, the submission files are well-formed, NLQ keeps each query's original query_idx and counts
a missing prediction as a miss (and says how the official script's mean differs), a predictive
HourVideo question sees the video only up to its first relevant timestamp, image options go as
images, and a bad row is an error naming the file and the item while the rest go on."""

from __future__ import annotations

import json
import math
import uuid

import cv2
import numpy as np
import pytest
from avstack_cli.app import app
from typer.testing import CliRunner

from avstack.tasks.videoqa.data import Item, load_questions
from avstack.tasks.videoqa.score import nlq_outcome, score

CLIP_S = 12.0


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """Videos where each benchmark puts them: EgoSchema's videos/{q_uid}.mp4, NLQ's
    clips/{clip_uid}.mp4, HourVideo's video_540ss/{video_uid}.mp4; prepared at 1 fps."""
    from avstack.preparation.driver import prepare
    from avstack.preparation.settings import PrepareSettings
    from avstack.synthetic import synth

    data = tmp_path_factory.mktemp("longform")
    names = {"ego": [str(uuid.UUID(int=k)) for k in range(1, 4)], "clips": ["clipA", "clipB"], "hv": ["vid1", "vid2"]}
    spec = synth.ClipSpec(width=160, height=90, fps=5, duration_s=CLIP_S)
    for folder, key in (("videos", "ego"), ("clips", "clips"), ("video_540ss", "hv")):
        (data / folder).mkdir()
        for name in names[key]:
            synth.write_clip(data / folder / f"{name}.mp4", spec)
    for sample in ("101", "102"):  # EgoPlan-Bench's clips, cut at the current observation
        synth.write_clip(data / f"{sample}.mp4", spec)
    out = tmp_path_factory.mktemp("longform_prepared")
    report = prepare(data, out, PrepareSettings(anchors=("frames",), fps=1.0), workers=1)
    assert not report.failed, report.failed
    return data, out, names


def _run(prepared, questions, model, out):
    res = CliRunner().invoke(app, ["run", str(prepared), "--task", "videoqa", "--questions", str(questions),
                                   "--model", model, "--out", str(out)])  # fmt: skip
    assert res.exit_code == 0, res.output
    return json.loads((out / "score.json").read_text()), res.output


def _egoschema(data, uids):
    rows = [{"q_uid": u, "google_drive_id": f"g{k}", "question": f"What is the goal of c in clip {k}?"}
            | {f"option {i}": f"c does thing {i}" for i in range(5)} for k, u in enumerate(uids)]  # fmt: skip
    rows.append({"q_uid": "no-options", "question": "broken"})  # a bad row: named, the rest go on
    (data / "questions.json").write_text(json.dumps(rows))
    (data / "subset_answers.json").write_text(json.dumps({uids[0]: 2, uids[1]: 0}))  # public for two only
    return data / "questions.json"


def test_egoschema_scores_the_public_subset_as_such_and_writes_the_submission(root, tmp_path):
    data, prepared, names = root
    questions = _egoschema(data, names["ego"])
    items, errors = load_questions(questions, "auto", data)
    assert [it.video for it in items] == [f"videos/{u}.mp4" for u in names["ego"]]
    assert [it.answer for it in items] == ["C", "A", None]  # 0-based on file: 2 -> C
    assert len(errors) == 1 and "questions.json" in errors[0] and "'option 0'" in errors[0]
    js, said = _run(prepared, questions, "oracle", tmp_path / "oracle")
    assert js["overall"]["accuracy"] == 100.0 and js["overall"]["n"] == 2
    assert js["counts"]["hidden_answers"] == 1 and js["egoschema"]["subset_n"] == 2
    assert "not EgoSchema's full-set score" in js["egoschema"]["scored"]
    chance_js, _ = _run(prepared, questions, "chance", tmp_path / "chance")
    sub = json.loads((tmp_path / "chance" / "egoschema_submission.json").read_text())
    assert set(sub) == set(names["ego"]) and all(isinstance(v, int) and 0 <= v <= 4 for v in sub.values())


def _nlq(data):
    def query(s, e, text, template="Objects: Where is object X?"):
        return {"clip_start_sec": s, "clip_end_sec": e, "video_start_sec": 600 + s, "video_end_sec": 600 + e,
                "template": template, "query": text, "slot_x": "x"}  # fmt: skip

    clip_a = {"clip_uid": "clipA", "video_start_sec": 600.0, "video_end_sec": 612.0, "annotations": [
        {"annotation_uid": "annA", "language_queries": [
            query(1.0, 4.0, "where did I leave the scissors?"),
            query(2.0, 3.0, None),  # a null query: skipped, counted; the next keeps query_idx 2
            query(6.5, 9.0, "what did I put in the bag?")]}]}  # fmt: skip
    clip_b = {"clip_uid": "clipB", "video_start_sec": 30.0, "video_end_sec": 42.0, "annotations": [
        {"annotation_uid": "annB", "language_queries": [query(8.0, 11.5, "where is the cup?"),
                                                        query(5.0, 4.0, "a window backwards")]}]}  # fmt: skip
    doc = {"version": "v2", "date": "2022", "description": "", "manifest": "",
           "videos": [{"video_uid": "v1", "split": "val", "clips": [clip_a]},
                      {"video_uid": "v2", "split": "val", "clips": [clip_b]}]}  # fmt: skip
    (data / "nlq_val.json").write_text(json.dumps(doc))
    return data / "nlq_val.json"


def test_nlq_keeps_query_idx_scores_strictly_and_writes_the_challenge_json(root, tmp_path):
    data, prepared, _ = root
    questions = _nlq(data)
    items, errors = load_questions(questions, "auto", data)
    assert [it.id for it in items] == ["clipA/annA/0", "clipA/annA/2", "clipB/annB/0"]
    assert items[1].spans == ((6.5, 9.0),)  # seconds from the clip's start, as written
    assert any("1 queries have no text" in e for e in errors)
    assert any("nlq_val.json" in e and "annotation annB, query_idx 1" in e and "not two times in order" in e
               for e in errors), errors  # fmt: skip
    js, _ = _run(prepared, questions, "oracle", tmp_path / "oracle")
    nlq = js["nlq"]["all_queries"]
    assert nlq["R@1 IoU>0.5"] == nlq["R@1 IoU>0.3"] == nlq["R@5 IoU>0.5"] == 100.0 and nlq["mean R@1"] == 100.0
    sub = json.loads((tmp_path / "oracle" / "nlq_submission.json").read_text())
    assert sub["version"] == "1.0" and sub["challenge"] == "ego4d_nlq_challenge"
    keys = [(r["clip_uid"], r["annotation_uid"], r["query_idx"]) for r in sub["results"]]
    assert keys == [("clipA", "annA", 0), ("clipA", "annA", 2), ("clipB", "annB", 0)]
    assert sub["results"][1]["predicted_times"] == [[6.5, 9.0]]


def test_nlq_measures_by_hand_and_a_missing_prediction_is_a_miss():
    a = Item("c/a/0", "c.mp4", "q", "grounding", spans=((10.0, 20.0),), protocol="nlq")
    # windows ranked: the first IoU 5/15 = 0.333 (> 0.3, not > 0.5), the third IoU 1.0
    row = nlq_outcome(a, {"spans": [[15.0, 25.0], [0.0, 1.0], [10.0, 20.0]]})
    assert row["iou"] == pytest.approx(1 / 3) and row["r1@0.3"] == 1.0 and row["r1@0.5"] == 0.0
    assert row["r5@0.5"] == 1.0
    # strict: IoU exactly 0.5 is not over 0.5 ([10, 20] against [15, 20]: 5 / 10)
    assert nlq_outcome(a, {"spans": [[15.0, 20.0]]})["r1@0.5"] == 0.0
    zero = Item("c/a/1", "c.mp4", "q", "grounding", spans=((5.0, 5.0),), protocol="nlq")
    assert nlq_outcome(zero, {"spans": [[5.0, 5.0]]})["iou"] == 0.0  # a zero-length window: IoU 0 always
    items = [Item(f"c/a/{k}", "c.mp4", "q", "grounding", spans=((10.0, 20.0),), protocol="nlq") for k in range(4)]
    preds = [
        {"id": "c/a/0", "prediction": {"spans": [[10.0, 20.0]]}},
        {"id": "c/a/1", "prediction": {"spans": [[10.0, 19.0]]}},
    ]
    js = score(items, preds)["nlq"]
    assert js["all_queries"]["R@1 IoU>0.5"] == 50.0 and js["all_queries"]["n"] == 4
    assert js["submitted_only"]["R@1 IoU>0.5"] == 100.0 and js["submitted_only"]["n"] == 2
    assert "averages over the 2 of 4 queries predicted" in js["note"]


def _hourvideo(data, per_video=60, bad=False):
    (data / "hv_images").mkdir(exist_ok=True)
    for k in range(5):
        cv2.imwrite(str(data / "hv_images" / f"room{k}.jpg"), np.full((32, 32, 3), 40 * k, np.uint8))
    doc = {}
    for v in ("vid1", "vid2"):
        mcqs = []
        for q in range(per_video):
            task = ["summarization/key_events", "perception/factual_recall", "reasoning/predictive"][q % 3]
            mcq = {"qid": f"q{q:03d}", "task": task, "question": f"question {q} about {v}?", "mcq_test": "",
                   "correct_answer_label": "ABCDE"[q % 5], "relevant_timestamps": "00:00:05 - 00:00:08"}  # fmt: skip
            mcq |= {f"answer_{i}": f"option {i} of {q}" for i in range(1, 6)}
            mcqs.append(mcq)
        doc[v] = {"video_metadata": {"duration_in_seconds": CLIP_S}, "benchmark_dataset": mcqs}
    image_q = {"qid": "nav", "task": "navigation/room_to_room_image", "question": "Which room next?"}
    image_q |= {"correct_answer_label": "B"} | {f"answer_{i}": f"hv_images/room{i - 1}.jpg" for i in range(1, 6)}
    doc["vid1"]["benchmark_dataset"].append(image_q)
    if bad:
        doc["vid2"]["benchmark_dataset"].append({"qid": "bad", "task": "perception/x", "question": "no options"})
    path = data / ("dev_bad.json" if bad else "dev_v1.0_annotations.json")
    path.write_text(json.dumps(doc))
    return path


def test_hourvideo_per_task_and_weighted_accuracy_predictive_cut_and_image_options(root, tmp_path):
    data, prepared, _ = root
    items, errors = load_questions(_hourvideo(data, bad=True), "auto", data)
    assert len(items) == 121 and len(errors) == 1 and "vid2" in errors[0] and "question bad" in errors[0]
    questions = _hourvideo(data)
    out = tmp_path / "req.jsonl"
    res = CliRunner().invoke(app, ["stacks", str(prepared), "--task", "videoqa", "--questions", str(questions),
                                   "--format", "neutral", "--out", str(out)])  # fmt: skip
    assert res.exit_code == 0, res.output
    rows = {json.loads(line)["id"]: json.loads(line)["request"] for line in out.read_text().splitlines()}
    predictive = rows["vid1/q002"]["parts"]
    pts = [p["pts_ms"] for p in predictive if p["type"] == "image"]
    assert pts and max(pts) <= 5000 and len(pts) < len([p for p in rows["vid1/q000"]["parts"] if p["type"] == "image"])
    nav = [p for p in rows["vid1/nav"]["parts"] if p["type"] == "image"]
    assert [p["path"].rsplit("/", 1)[-1] for p in nav[-5:]] == [f"room{k}.jpg" for k in range(5)]
    js, _ = _run(prepared, questions, "oracle", tmp_path / "oracle")
    assert js["overall"]["accuracy"] == 100.0 and js["overall"]["n"] == 121
    assert js["by_group"]["task=reasoning"]["n"] == 40 and js["by_group"]["task=navigation"]["n"] == 1
    chance, _ = _run(prepared, questions, "chance", tmp_path / "chance")
    # five options: 20% expected; 121 questions, seeded: within a 99.9% binomial interval
    half_width = 3.29 * math.sqrt(0.2 * 0.8 / 121) * 100
    assert abs(chance["overall"]["accuracy"] - 20.0) <= half_width, chance["overall"]


def test_packing_asks_a_videos_questions_at_once_and_the_plan_shows_the_saving(root, tmp_path):
    data, prepared, _ = root
    questions = _hourvideo(data)
    out = tmp_path / "abl"
    args = ["ablate", str(prepared), "--task", "videoqa", "--questions", str(questions), "--model", "oracle"]
    res = CliRunner().invoke(app, [*args, "--pack", "off,on", "--out", str(out)])
    assert res.exit_code == 0, res.output
    plan = json.loads((out / "plan.json").read_text())
    one, packed = plan["stacks"]["full"], plan["stacks"]["full@packed"]
    # per video: its 40 plain questions in one pack; the 20 predictive ones (each its own cut of
    # the video) and the image-option one asked alone, the very requests the unpacked stack asks
    # (paid once between them)
    assert one["requests"] == 121 and packed["requests"] == 2 + 40 + 1
    assert one["to_pay_requests"] + packed["to_pay_requests"] == 121 + 2
    assert packed["image_tokens"] < one["image_tokens"] / 2 or plan["image_rule"] is None
    assert packed["images"] < one["images"] / 2  # the frames sent once a video, not once a question
    for stack in ("full", "full@packed"):
        js = json.loads((out / stack / "score.json").read_text())
        assert js["overall"]["accuracy"] == 100.0 and js["counts"]["items"] == 121, stack
    packs = (out / "full@packed" / "packs" / "predictions.jsonl").read_text().splitlines()
    assert len(packs) == 43
    chance = tmp_path / "chance"
    res = CliRunner().invoke(app, ["run", str(prepared), "--task", "videoqa", "--questions", str(questions),
                                   "--model", "chance", "--pack", "--out", str(chance)])  # fmt: skip
    assert res.exit_code == 0, res.output
    js = json.loads((chance / "score.json").read_text())
    assert js["counts"]["unparsed"] == 0
    assert abs(js["overall"]["accuracy"] - 20.0) <= 3.29 * math.sqrt(0.2 * 0.8 / 121) * 100


def test_a_packed_answer_parsed_back_to_each_question_by_hand():
    from avstack.tasks.videoqa.packing import parse_pack, unpacked

    mcq = Item("v/q1", "v.mp4", "which?", "mcq", ("A. x", "B. y"), "B")
    span = Item("v/q2", "v.mp4", "when?", "grounding", spans=((1.0, 2.0),))
    nlq = Item("c/a/0", "v.mp4", "where?", "grounding", spans=((1.0, 2.0),), protocol="nlq")
    missing = Item("v/q4", "v.mp4", "what?", "open", answer="cup")
    text = 'Sure: {"answers": {"1": "B", "2": [1.0, 2.5], "3": [[4, 5], [1, 2]]}}'
    pred, err = parse_pack(text, [mcq, span, nlq, missing])
    assert err is None
    answers = pred["answers"]
    assert answers["v/q1"]["prediction"] == {"answer": "B"}
    assert answers["v/q2"]["prediction"] == {"span": [1.0, 2.5]}
    assert answers["c/a/0"]["prediction"]["spans"] == [[4.0, 5.0], [1.0, 2.0]]
    lines = unpacked({"pack": "pack:v#4", "raw": text, "prediction": pred, "usage": {"input_tokens": 9}},
                     [mcq, span, nlq, missing])  # fmt: skip
    assert [line["usage"] for line in lines] == [{"input_tokens": 9}, {}, {}, {}]  # the pack's cost once
    assert "question 4 of the pack has no answer" in lines[3]["parse_error"]
    assert parse_pack("no json here", [mcq])[1] is not None


def test_egoplan_reads_the_cut_clips_scores_accuracy_and_writes_the_leaderboard_file(root, tmp_path):
    data, prepared, _ = root
    rows = [
        {"sample_id": sid, "video_source": "Ego4D", "video_id": "v", "task_goal": "make tea",
         "question": "What next?", "choice_a": "boil water", "choice_b": "pour", "choice_c": "stir",
         "choice_d": "drink", "golden_choice_idx": gold, "answer": "x", "current_observation_frame": 120}
        for sid, gold in ((101, "A"), (102, "C"), (103, "B"))
    ]  # fmt: skip
    (data / "EgoPlan_validation.json").write_text(json.dumps(rows))
    items, errors = load_questions(data / "EgoPlan_validation.json", "auto", data)
    assert [it.id for it in items] == ["101", "102"] and items[0].question.startswith("Task goal: make tea\n")
    assert len(errors) == 1 and "sample 103" in errors[0] and "frame 120 of v" in errors[0]
    js, _ = _run(prepared, data / "EgoPlan_validation.json", "oracle", tmp_path / "oracle")
    assert js["overall"]["accuracy"] == 100.0 and js["overall"]["n"] == 2
    sub = json.loads((tmp_path / "oracle" / "egoplan_submission.json").read_text())
    assert sub == [{"sample_id": 101, "label": "A"}, {"sample_id": 102, "label": "C"}]
