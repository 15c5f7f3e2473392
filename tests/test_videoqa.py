"""`--task videoqa`: your own videos and questions. Clips made here with a red square on screen at
known times and a spoken sentence; questions of every kind; the public formats' adapters on files
written in their shapes; the field's metrics against hand-worked examples; and a real local
OpenAI-compatible server that answers only from what each request shows, so that dropping a cue
measurably costs what it should."""

from __future__ import annotations

import base64
import json
import re
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

import av
import cv2
import numpy as np
import pytest
from avstack_cli.app import app
from conftest import manifest_dicts, needs_espeak
from fake_http import JsonHandler
from typer.testing import CliRunner

from avstack.tasks.videoqa.data import load_questions
from avstack.tasks.videoqa.parse import parse_letter, parse_span
from avstack.tasks.videoqa.score import best_iou, iou, normalize, score, summary

DOCS = Path(__file__).resolve().parents[1] / "docs"
RED = {"kitchen.mp4": (2.0, 4.0), "desk.mp4": (5.0, 7.0)}  # when the red square is on screen (s)
FRUIT = {"kitchen.mp4": "apple", "desk.mp4": "orange"}
DURATION_S = 8


# --------------------------------------------------------------------------- metrics by hand


def test_iou_and_recall_by_hand():
    assert iou([0, 10], [5, 15]) == pytest.approx(5 / 15)
    assert iou([2, 4], [2, 4]) == 1.0 and iou([0, 1], [2, 3]) == 0.0 and iou([0, 8], [2, 4]) == 0.25
    assert best_iou([5, 7], [[0, 2], [5, 8]]) == pytest.approx(2 / 3)  # the best-matching true window
    rows = [  # IoU 1, 1/3, 0.6, 0 -> R@0.3 3/4, R@0.5 2/4, R@0.7 1/4, mIoU (1 + 1/3 + 0.6 + 0) / 4
        {
            "kind": "grounding",
            "iou": v,
            "correct": float(v >= 0.5),
            **{f"r@{k}": float(v >= k) for k in (0.3, 0.5, 0.7)},
        }
        for v in (1.0, 1 / 3, 0.6, 0.0)
    ]
    s = summary(rows)
    assert (s["r@0.3"], s["r@0.5"], s["r@0.7"]) == (75.0, 50.0, 25.0)
    assert s["miou"] == pytest.approx(100 * (1 + 1 / 3 + 0.6) / 4, abs=1e-3)
    assert normalize("The Apple!") == normalize("apple") == "apple"


def test_answers_are_read_in_every_time_format():
    for text, want in [
        ('{"start": 2.0, "end": 4.5}', (2.0, 4.5)),
        ("from 00:02.000 to 00:04.500", (2.0, 4.5)),
        ("<timestamp_ms>2000 until <timestamp_ms>4500", (2.0, 4.5)),
        ("between <t=2.000s> and <t=4.500s>", (2.0, 4.5)),
        ("<2.0 seconds> - <4.5 seconds>", (2.0, 4.5)),
        ("2000 ms to 4500 ms", (2.0, 4.5)),
        ("It happens 2-4.5s in", (2.0, 4.5)),
    ]:
        assert parse_span(text) == pytest.approx(want), text
    assert parse_span("I cannot tell") is None


# --------------------------------------------------------------------------- adapters


def test_adapters_read_each_public_shape_and_name_bad_rows(tmp_path):
    (tmp_path / "charades.txt").write_text(
        "3MSZA 24.3 30.4##person turn a light on.\n3MSZA 1.0##no end\n"
        "AB12C 5 2##backwards\nAB12C 0 7.5##opens a door.\n"
    )
    items, errors = load_questions(tmp_path / "charades.txt")
    assert [(i.video, i.spans, i.question) for i in items] == [
        ("3MSZA.mp4", ((24.3, 30.4),), "person turn a light on."),
        ("AB12C.mp4", ((0.0, 7.5),), "opens a door."),
    ]
    assert len(errors) == 2 and "charades.txt:2" in errors[0] and "charades.txt:3" in errors[1]

    qv = [
        {
            "qid": 7,
            "query": "a man talks",
            "duration": 150,
            "vid": "yt1_60_210",
            "relevant_windows": [[10, 20], [40, 52]],
            "relevant_clip_ids": [5, 6],
            "saliency_scores": [[1, 2, 3], [4, 4, 4]],
        },
        {"qid": 8, "query": "test split", "duration": 150, "vid": "yt2_0_150"},
    ]
    (tmp_path / "qv.jsonl").write_text("\n".join(json.dumps(r) for r in qv) + "\n")
    items, errors = load_questions(tmp_path / "qv.jsonl")
    assert items[0].video == "yt1_60_210.mp4" and items[0].spans == ((10.0, 20.0), (40.0, 52.0))
    assert len(errors) == 1 and "qv.jsonl:2" in errors[0] and "no relevant_windows" in errors[0]

    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    rows = [
        {
            "video_id": "001",
            "duration": "short",
            "domain": "Sports",
            "sub_category": "x",
            "url": "u",
            "videoID": "fFjv93ACGo8",
            "question_id": "001-1",
            "task_type": "Counting",
            "question": "How many?",
            "options": ["A. one", "B. two", "C. three", "D. four"],
            "answer": "C",
        },
        {
            "video_id": "001",
            "duration": "short",
            "domain": "Sports",
            "sub_category": "x",
            "url": "u",
            "videoID": "fFjv93ACGo8",
            "question_id": "001-2",
            "task_type": "Counting",
            "question": "Bad?",
            "options": ["A. one", "B. two", "C. three", "D. four"],
            "answer": "E",
        },
    ]
    root = tmp_path / "mme"
    (root / "subtitle").mkdir(parents=True)
    (root / "subtitle" / "fFjv93ACGo8.srt").write_text("1\n00:00:01,000 --> 00:00:02,500\nhello there\n")
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "test-00000-of-00001.parquet")
    items, errors = load_questions(tmp_path / "test-00000-of-00001.parquet", root=None)
    assert items[0].kind == "mcq" and items[0].answer == "C" and items[0].groups["duration"] == "short"
    assert len(errors) == 1 and "parquet:2" in errors[0] and "'E'" in errors[0]

    (tmp_path / "own.csv").write_text(
        "id,video,question,options,answer,answer_span\n"
        "q1,a.mp4,What colour?,red|blue,red,\n"
        "q2,a.mp4,Which word?,,apple,\n"
        'q3,a.mp4,When?,,,"[2, 4]"\n'
        "q4,,No video,,x,\n"
        'q5,a.mp4,When?,,,"[4, 2]"\n'
    )
    items, errors = load_questions(tmp_path / "own.csv")
    assert [(i.id, i.kind, i.answer, i.spans) for i in items] == [
        ("q1", "mcq", "A", ()),
        ("q2", "open", "apple", ()),
        ("q3", "grounding", None, ((2.0, 4.0),)),
    ]
    assert [e.split(": ")[0].rsplit(":", 1)[1] for e in errors] == ["5", "6"]  # file:line of q4 and q5
    # a video that is not there, and a span beyond the clip, name the line too
    (tmp_path / "root").mkdir()
    items, errors = load_questions(tmp_path / "own.csv", root=tmp_path / "root")
    assert not items and errors[-1].startswith(f"{tmp_path / 'own.csv'}:4: item 'q3': video 'a.mp4' not found")


# --------------------------------------------------------------------------- clips and questions


def _write_clip(path: Path, red: tuple[float, float], audio: np.ndarray | None) -> None:
    with av.open(str(path), "w") as out:
        v = out.add_stream("libx264", rate=10)
        v.width, v.height, v.pix_fmt = 320, 240, "yuv420p"
        a = out.add_stream("aac", rate=16000) if audio is not None else None
        for k in range(DURATION_S * 10):
            img = np.full((240, 320, 3), 90, np.uint8)
            if red[0] <= k / 10 < red[1]:
                img[80:160, 120:200] = (230, 20, 20)
            for packet in v.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                out.mux(packet)
        for packet in v.encode():
            out.mux(packet)
        if a is not None and audio is not None:
            frame = av.AudioFrame.from_ndarray(audio[None, :].astype(np.float32), format="flt", layout="mono")
            frame.sample_rate = 16000
            for packet in a.encode(frame):
                out.mux(packet)
            for packet in a.encode():
                out.mux(packet)


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> tuple[Path, Path]:
    from avstack.synthetic import synth

    root = tmp_path_factory.mktemp("own") / "videos"
    root.mkdir()
    for name, red in RED.items():
        audio = None
        if synth.espeak_available():  # else the spoken-word checks skip (needs_espeak)
            words = ["please", "take", "the", FRUIT[name], "now"]
            audio, _ = synth.speak(words, [600, 1100, 1500, 1800, 2600], DURATION_S, seed=2)
        _write_clip(root / name, red, audio if audio is not None else np.zeros(DURATION_S * 16000, np.float32))
    rows = []
    for name, (a, b) in RED.items():
        stem = name.removesuffix(".mp4")
        rows += [
            {
                "id": f"{stem}-colour",
                "video": name,
                "question": "What colour is the square?",
                "options": ["blue", "red", "green"],
                "answer": "red",
            },
            {
                "id": f"{stem}-when",
                "video": name,
                "question": "When is the red square on screen?",
                "answer_span": [a, b],
            },
            {
                "id": f"{stem}-fruit",
                "video": name,
                "question": "Which fruit does the speaker name?",
                "answer": FRUIT[name],
            },
        ]
    questions = root.parent / "questions.jsonl"
    questions.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return root, questions


@pytest.fixture(scope="module")
def prepared_own(data, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("own_prepared")
    res = CliRunner().invoke(app, ["prepare", str(data[0]), "--out", str(out), "--lang", "en", "--workers", "1"])
    assert res.exit_code == 0, res.output
    return out


def _invoke(*args: str) -> str:
    res = CliRunner().invoke(app, list(args))
    assert res.exit_code == 0, res.output
    return res.output


def _run_qa(prepared: Path, questions: Path, model: str, out: Path, *extra: str) -> str:
    return _invoke(
        "run",
        str(prepared),
        "--task",
        "videoqa",
        "--questions",
        str(questions),
        "--model",
        model,
        "--out",
        str(out),
        *extra,
    )


def test_oracle_is_perfect_and_chance_is_not(prepared_own, data, tmp_path):
    _run_qa(
        prepared_own,
        data[1],
        "oracle",
        str(tmp_path / "oracle"),
    )
    result = json.loads((tmp_path / "oracle" / "score.json").read_text())
    assert result["overall"]["accuracy"] == 100.0 and result["by_kind"]["grounding"]["r@0.5"] == 100.0
    assert result["by_kind"]["grounding"]["miou"] == 100.0 and result["counts"]["items"] == 6
    per_item = (tmp_path / "oracle" / "per_item.csv").read_text().splitlines()
    assert per_item[0].startswith("item_id,kind,") and len(per_item) == 7
    _run_qa(
        prepared_own,
        data[1],
        "chance",
        str(tmp_path / "chance"),
    )
    chance = json.loads((tmp_path / "chance" / "score.json").read_text())
    assert chance["overall"]["accuracy"] < 100.0 and chance["counts"]["unparsed"] == 0


# --------------------------------------------------------------------------- a model that reads the request


def _red(data_url: str) -> bool:
    raw = base64.b64decode(data_url.split(",", 1)[1])
    img = cv2.imdecode(np.frombuffer(raw, np.uint8), cv2.IMREAD_COLOR)
    return bool(((img[..., 2] > 180) & (img[..., 1] < 80)).mean() > 0.02)


class ReadingModel(JsonHandler):
    """Answers only from what the request shows: the frames (red or not) with the times told before
    them, the transcript, the stated duration. Without times it can only say 'the whole video';
    without the transcript it cannot know the word."""

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        parts = [p for m in body["messages"] if isinstance(m["content"], list) for p in m["content"]]
        text = " ".join(
            p["text"]
            for m in body["messages"]
            for p in (m["content"] if isinstance(m["content"], list) else [{"type": "text", "text": m["content"]}])
            if p.get("type") == "text"
        )
        last_time, seen = None, []
        for p in parts:
            if p["type"] == "text":
                tags = re.findall(r"<timestamp_ms>(\d+)", p["text"])
                last_time = int(tags[-1]) / 1000 if tags else last_time
            elif p["type"] == "image_url":
                seen.append((last_time, _red(p["image_url"]["url"])))
        duration = float(re.search(r"lasts ([\d.]+) seconds", text).group(1))
        if "colour" in text:
            red_shown = any(r for _, r in seen)
            letter = re.search(r"([A-Z])\. red", text).group(1) if red_shown else "A"
            answer = {"answer": letter}
        elif "When is" in text:
            times = [t for t, r in seen if r and t is not None]
            answer = {"start": min(times), "end": max(times) + 0.5} if times else {"start": 0, "end": duration}
        else:
            said = re.search(r"<asr_data>(.*?)</asr_data>", text, re.S)
            fruit = next((f for f in ("apple", "orange", "banana") if said and f in said.group(1).lower()), "unknown")
            answer = {"answer": fruit}
        content = json.dumps(answer)
        self.send_json(
            200,
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", "m"),
                "choices": [
                    {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            },
        )


@pytest.fixture()
def reading_server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), ReadingModel)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_port}/v1"
    httpd.shutdown()


@needs_espeak
def test_dropping_a_cue_costs_what_it_carries(prepared_own, data, reading_server, tmp_path, monkeypatch):
    pytest.importorskip("openai", reason="the openai back-end needs the openai package")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-videoqa")
    out = tmp_path / "ablate"
    summary_text = _invoke(
        "ablate",
        str(prepared_own),
        "--task",
        "videoqa",
        "--questions",
        str(data[1]),
        "--model",
        "openai:reader",
        "--base-url",
        reading_server,
        "--drop",
        "frame_ts",
        "--drop",
        "asr",
        "--subsets",
        "--out",
        str(out),
    )
    full = json.loads((out / "full" / "score.json").read_text())
    no_ts = json.loads((out / "full-no_frame_ts" / "score.json").read_text())
    no_asr = json.loads((out / "full-no_asr" / "score.json").read_text())
    assert full["by_kind"]["grounding"]["r@0.5"] == 100.0 and full["by_kind"]["mcq"]["accuracy"] == 100.0
    assert no_ts["by_kind"]["grounding"]["r@0.5"] == 0.0  # the whole video: IoU 0.25 with a 2 s moment
    assert full["by_kind"]["open"]["accuracy"] >= 50.0 and no_asr["by_kind"]["open"]["accuracy"] == 0.0
    assert no_asr["by_kind"]["grounding"] == full["by_kind"]["grounding"]  # the drop reaches only its cue
    import csv

    deltas = list(csv.DictReader((out / "delta.csv").read_text().splitlines()))
    cut = next(r for r in deltas if r["run"].endswith("full-no_frame_ts") and r["metric"] == "r@0.5")
    assert float(cut["delta"]) == -100.0 and float(cut["ci_high"]) <= 0 and cut["n"] == "2"
    word = next(
        r for r in deltas if r["run"].endswith("full-no_asr") and r["group"] == "open" and r["metric"] == "correct"
    )
    assert float(word["delta"]) <= -50.0
    shapley = {
        row["cue"]: float(row["shapley"]) for row in csv.DictReader((out / "shapley.csv").read_text().splitlines())
    }
    assert set(shapley) == {"frame_ts", "asr"} and shapley["frame_ts"] > 0 and shapley["asr"] > 0
    assert "What each cue is worth" in (out / "report.md").read_text() and "videoqa report" in summary_text


def test_requests_carry_the_stack_and_subtitles_are_a_cue(prepared_own, data, tmp_path):
    root, questions = data
    (root / "kitchen.srt").write_text("1\n00:00:00,600 --> 00:00:02,000\nplease take the apple\n")
    rows = [json.loads(x) for x in questions.read_text().splitlines()]
    for r in rows:
        if r["video"] == "kitchen.mp4":
            r["subtitles"] = "kitchen.srt"
    subbed = tmp_path / "subbed.jsonl"
    subbed.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    # the clip carries words only where it was made with speech (espeak-ng); silent, ASR has none to give
    kitchen_rec = next(r for r in manifest_dicts(prepared_own) if r["video"].endswith("kitchen.mp4"))
    spoken = bool((kitchen_rec["asr"] or {}).get("words"))
    for variant, drop, has_subs, has_asr in (
        ("subtitled", [], True, True),
        ("subtitled", ["--drop", "asr"], True, False),
        ("full", [], False, True),
    ):
        out = tmp_path / f"{variant}{len(drop)}.jsonl"
        _invoke(
            "stacks",
            str(prepared_own),
            "--task",
            "videoqa",
            "--questions",
            str(subbed),
            "--variant",
            variant,
            *drop,
            "--out",
            str(out),
            "--format",
            "neutral",
        )
        lines = [json.loads(x) for x in out.read_text().splitlines()]
        kitchen = next(x for x in lines if x["id"] == "kitchen-fruit")
        text = " ".join(p.get("text", "") for p in kitchen["request"]["parts"])
        assert ("<subtitles>" in text and '"begin_time": 600' in text) == has_subs, (
            variant
        )  # cue times, as words are told
        assert ("<asr_data>" in text) == (has_asr and spoken)
        assert sum(p["type"] == "image" for p in kitchen["request"]["parts"]) == 17  # 2 fps over 8 s + last


def test_score_other_harness_answers_and_refuse_mismatched_ids(data, tmp_path):
    preds = tmp_path / "theirs.jsonl"
    preds.write_text(
        "\n".join(
            json.dumps(x)
            for x in [
                {"id": "kitchen-colour", "response": "The answer is B"},
                {"id": "kitchen-when", "response": "from 2.0 s to 4.0 s"},
                {"id": "kitchen-fruit", "answer": "An apple."},
            ]
        )
        + "\n"
    )
    items, _ = load_questions(data[1])
    result = score(items, [json.loads(x) for x in preds.read_text().splitlines()])
    assert result["per_item"]["kitchen-colour"]["correct"] == 1.0 and result["per_item"]["kitchen-when"]["iou"] == 1.0
    assert result["per_item"]["kitchen-fruit"]["correct"] == 1.0 and result["counts"]["missing_predictions"] == 3
    res = CliRunner().invoke(app, ["score", "--task", "videoqa", "--questions", str(data[1]), "--pred", str(preds)])
    assert res.exit_code == 0, res.output
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"id": "nope", "response": "A"}) + "\n")
    res = CliRunner().invoke(app, ["score", "--task", "videoqa", "--questions", str(data[1]), "--pred", str(other)])
    assert res.exit_code == 1 and "have no prediction" in res.output


def test_letters_are_read_from_text_or_option(data):
    items, _ = load_questions(data[1])
    colour = next(i for i in items if i.kind == "mcq")
    assert parse_letter('{"answer": "B"}', colour) == "B" and parse_letter("red", colour) == "B"
    assert parse_letter("(C)", colour) == "C" and parse_letter("no idea", colour) is None


# --------------------------------------------------------------------------- no silent zeros, features


@pytest.mark.parametrize(
    "command",
    [
        ["stacks", "{p}", "--out", "{t}/x.jsonl"],
        ["export", "{p}", "--to", "jsonl", "--out", "{t}/e"],
        ["run", "{p}", "--model", "chance", "--out", "{t}/r"],
        ["ablate", "{p}", "--model", "chance", "--drop", "frame_ts", "--out", "{t}/a"],
    ],
)
def test_ecog_commands_on_a_plain_folder_say_what_is_missing(prepared_own, tmp_path, command):
    res = CliRunner().invoke(app, [c.format(p=prepared_own, t=tmp_path) for c in command])
    assert res.exit_code == 2, res.output
    assert "--task videoqa --questions FILE" in res.output and "Traceback" not in res.output
    assert not list(tmp_path.rglob("*.jsonl"))  # no empty file left behind


def test_score_without_ecog_clips_says_so(tmp_path):
    gt = tmp_path / "gt.jsonl"
    gt.write_text("")
    res = CliRunner().invoke(app, ["score", "--task", "ecog", "--gt", str(gt), "--pred", str(gt)])
    assert res.exit_code == 2 and "no EcoG clip to score against" in res.output


def _features_block() -> str:
    blocks = re.findall(r"```python\n(# avstack features loader.*?)```", (DOCS / "videoqa.md").read_text(), re.S)
    assert len(blocks) == 1
    return blocks[0]


def test_features_export_of_a_plain_folder_loads_with_the_docs_snippet(prepared_own, tmp_path):
    pytest.importorskip("datasets", reason="the Parquet features need avstack[export]")
    out = tmp_path / "features"
    _invoke("export", str(prepared_own), "--to", "features", "--out", str(out))
    scope: dict = {}
    exec(_features_block().replace('FEATURES = "out/features"', f"FEATURES = {str(out)!r}"), scope)
    rows, ds = scope["rows"], scope["ds"]
    from avstack.manifest import load_manifest

    recs = {r.clip_id: r for r in load_manifest(prepared_own)}
    assert {r["clip_id"] for r in rows} == set(recs) == set(ds["clip_id"])
    for row in rows:
        assert row["frame_pts_ms"] == [f.pts_ms for f in recs[row["clip_id"]].frames]
        assert Path(row["wav"]).is_file() and row["streams"]["video"]["start_ms"] == 0
    assert scope["first_frame"].size == (320, 240)


def test_view_puts_true_and_predicted_spans_on_the_clip_axis(prepared_own, data, tmp_path, browser):
    from selenium.webdriver.common.by import By

    runs = []
    for model in ("oracle", "chance"):
        runs.append(tmp_path / model)
        _run_qa(
            prepared_own,
            data[1],
            model,
            str(runs[-1]),
        )
    _invoke("view", str(prepared_own), *map(str, runs), "--out", str(tmp_path / "site"))
    browser.get((tmp_path / "site" / "index.html").as_uri())
    link = browser.find_element(By.CSS_SELECTOR, "a[data-item='kitchen-when']")
    browser.get(link.get_attribute("href"))
    from avstack.manifest import load_manifest

    rec = next(r for r in load_manifest(prepared_own) if r.video == "kitchen.mp4")
    frames = browser.find_elements(By.CSS_SELECTOR, "img.frame")
    assert [int(f.get_attribute("data-pts-ms")) for f in frames] == [f.pts_ms for f in rec.frames]
    axis = browser.find_element(By.CSS_SELECTOR, ".timeline")
    x0, width, end = axis.rect["x"], axis.rect["width"], int(axis.get_attribute("data-axis-end-ms"))
    for f in frames:  # positions proportional to pts
        assert abs(f.rect["x"] - (x0 + width * int(f.get_attribute("data-pts-ms")) / end)) <= 2
    truth = browser.find_element(By.CSS_SELECTOR, "[data-item='kitchen-when'][data-true-start-ms]")
    assert (int(truth.get_attribute("data-true-start-ms")), int(truth.get_attribute("data-true-end-ms"))) == (
        2000,
        4000,
    )
    preds = {
        p.get_attribute("data-stack"): (
            int(p.get_attribute("data-pred-start-ms")),
            int(p.get_attribute("data-pred-end-ms")),
        )
        for p in browser.find_elements(By.CSS_SELECTOR, "[data-item='kitchen-when'][data-pred-start-ms]")
    }
    assert preds["oracle full"] == (2000, 4000) and "chance full" in preds
    assert abs(truth.rect["x"] - (x0 + width * 2000 / end)) <= 2
    assert not [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]


def test_own_prompts_and_the_report_command(prepared_own, data, tmp_path):
    prompts = tmp_path / "prompts"
    for kind in ("mcq", "open", "grounding"):
        (prompts / kind).mkdir(parents=True)
        (prompts / kind / "system.j2").write_text(f"MY {kind.upper()} PROMPT\n")
        (prompts / kind / "user.j2").write_text(
            "{{ part }}Q: {{ question }} ({{ kind }}, {{ frames|length }} frames)\n"
        )
    out = tmp_path / "reqs.jsonl"
    _invoke(
        "stacks",
        str(prepared_own),
        "--task",
        "videoqa",
        "--questions",
        str(data[1]),
        "--prompt",
        str(prompts),
        "--format",
        "neutral",
        "--out",
        str(out),
    )
    lines = {json.loads(x)["id"]: json.loads(x)["request"] for x in out.read_text().splitlines()}
    assert lines["kitchen-when"]["system"] == "MY GROUNDING PROMPT"
    assert lines["kitchen-when"]["parts"][0]["text"] == "Q: When is the red square on screen? (grounding, 17 frames)"
    for model in ("oracle", "chance"):
        _run_qa(
            prepared_own,
            data[1],
            model,
            str(tmp_path / model),
        )
    summary = _invoke("report", str(tmp_path / "oracle"), str(tmp_path / "chance"), "--out", str(tmp_path / "rep"))
    assert "oracle full" in summary and "chance full" in summary
    rows = (tmp_path / "rep" / "delta.csv").read_text()
    assert "r@0.5" in rows and "correct" in rows and (tmp_path / "rep" / "delta.png").is_file()


def test_a_videoqa_ablation_plans_first_and_refuses_above_max_cost(prepared_own, data, tmp_path):
    """The plan of a videoqa ablation counts every question's request under each stack, and
    --max-cost refuses to start above it (nothing asked: no run folder)."""
    out = tmp_path / "qa"
    args = ["ablate", str(prepared_own), "--task", "videoqa", "--questions", str(data[1]), "--drop", "frame_ts"]
    args += ["--model", "openai:gpt-4o", "--out", str(out)]
    _invoke(*args, "--dry-run")
    plan = json.loads((out / "plan.json").read_text())
    n_questions = len(data[1].read_text().splitlines())
    assert {s: b["requests"] for s, b in plan["stacks"].items()} == {
        "full": n_questions,
        "full-no_frame_ts": n_questions,
    }
    assert plan["stacks"]["full"]["images"] > 0 and plan["total"]["usd_at_most"]["online"] > 0
    res = CliRunner().invoke(app, [*args, "--max-cost", "0.0001"])
    assert res.exit_code == 2 and "the plan may cost up to" in res.output
    assert sorted(p.name for p in out.iterdir()) == ["plan.json"]


def test_a_videoqa_ablation_until_decided_stops_after_a_round(prepared_own, data, tmp_path):
    out = tmp_path / "seq"
    args = ["ablate", str(prepared_own), "--task", "videoqa", "--questions", str(data[1]), "--model", "chance"]
    _invoke(*args, "--drop", "frame_ts", "--out", str(out), "--until", "decided", "--round", "2", "--precision", "2.5")
    stop = json.loads((out / "sequential.json").read_text())
    assert stop["decided"] and stop["why"] == "precision reached" and stop["unit"] == "questions"
    assert stop["stopped_at_clips"] == 2 and stop["requests_saved"] == (stop["clips"] - 2) * 2
    ids = [{json.loads(x)["id"] for x in (out / s / "predictions.jsonl").read_text().splitlines()} for s in
           ("full", "full-no_frame_ts")]  # fmt: skip
    assert ids[0] == ids[1] and len(ids[0]) == 2
    assert "## Sequential stop" in (out / "report.md").read_text()
