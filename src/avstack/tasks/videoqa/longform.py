"""The long egocentric benchmarks as they ship (shared/videoqa/LONGFORM.md), read into videoqa items
with the field's own scoring protocol named on each:

- EgoSchema: `questions.json` (a list; options under "option 0".."option 4") with
  `subset_answers.json` beside it (0-based answers for 500 questions only). A question without a
  public answer is an item with none: answered and written to the submission the authors' server
  takes, never scored here, and the score names the 500-question subset as such.
- Ego4D NLQ: videos > clips > annotations > language_queries; windows in seconds from the clip's
  start (the clip file's own clock). A query keeps its original `query_idx`; a null query is
  skipped and counted, never renumbered. Zero-length windows are kept (their IoU is 0).
- HourVideo: keyed by video_uid; options `answer_1..5` (image paths for the image tasks, sent as
  images); a predictive question sees the video only up to its first relevant timestamp.
- EgoPlan-Bench: a list of samples with four choices; the clip cut at the current observation.

Videos are looked for where each benchmark puts them, then as `{id}.mp4` in the data root. A bad
row is an error naming the file and the item; the rest go on."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from avstack.io import DataError
from avstack.tasks.videoqa.items import Item, lettered, number, required_text
from avstack.tasks.videoqa.shipped import each_row, listed_rows, load_json, video_at

LETTERS = "ABCDE"


# ------------------------------------------------------------------------------------ EgoSchema


def egoschema_items(path: Path, root: Path | None) -> tuple[list[Item], list[str]]:
    data = load_json(path)
    answers_file = path.with_name("subset_answers.json")
    answers = load_json(answers_file) if answers_file.is_file() else {}
    if not isinstance(answers, dict):
        raise DataError(f"{answers_file}: expected {{q_uid: option index}}; found {type(answers).__name__}")

    def read(row: dict[str, object], where: str) -> list[Item]:
        uid = required_text(row.get("q_uid"), "q_uid", where)
        options = [row.get(f"option {i}") for i in range(5)]
        if not all(isinstance(o, str) and o.strip() for o in options):
            raise DataError(f"{where}: question {uid}: expected 'option 0' .. 'option 4' (with the space) as texts")
        gold = answers.get(uid)
        if gold is not None and (isinstance(gold, bool) or not isinstance(gold, int) or not 0 <= gold < 5):
            raise DataError(f"{answers_file}: question {uid}: the answer must be an option index 0-4; found {gold!r}")
        video = video_at(root, uid, ("videos/{uid}.mp4", "{uid}.mp4"))
        question = required_text(row.get("question"), "question", where)
        subset = "public 500 (subset_answers.json)" if gold is not None else "hidden (server-scored)"
        answer = None if gold is None else LETTERS[gold]  # 0-based on file, a letter as shown
        return [Item(uid, video, question, "mcq", lettered([str(o) for o in options]), answer,
                     groups={"egoschema": subset}, source=where, protocol="egoschema")]  # fmt: skip

    return listed_rows(path, "EgoSchema's questions.json", "question", read, data)


# ------------------------------------------------------------------------------------ Ego4D NLQ


def nlq_items(path: Path, root: Path | None) -> tuple[list[Item], list[str]]:
    data = load_json(path)
    videos = data.get("videos") if isinstance(data, dict) else None
    if not isinstance(videos, list):
        raise DataError(f"{path}: Ego4D NLQ annotations have a top-level 'videos' list")
    errors: list[str] = []
    skipped = 0

    def read_clip(clip: object, where: str) -> list[Item]:
        nonlocal skipped
        if not isinstance(clip, dict):
            raise DataError(f"{where}: expected a clip object, found {type(clip).__name__}")
        clip_uid = required_text(clip.get("clip_uid"), "clip_uid", where)
        video = video_at(root, clip_uid, ("clips/{uid}.mp4", "v1/clips/{uid}.mp4", "{uid}.mp4"))
        out = []
        for a, ann in enumerate(clip.get("annotations") or []):
            ann_uid = str((ann or {}).get("annotation_uid") or "")
            for q, query in enumerate((ann or {}).get("language_queries") or []):
                here = f"{where}, annotation {ann_uid or a}, query_idx {q}"
                if not isinstance(query, dict):
                    errors.append(f"{here}: expected a query object")
                    continue
                text = query.get("query")
                if not isinstance(text, str) or not text.strip():
                    skipped += 1  # the baseline skips these too, keeping the others' query_idx
                    continue
                start, end = number(query.get("clip_start_sec")), number(query.get("clip_end_sec"))
                spans: tuple[tuple[float, float], ...] = ()
                if start is not None and end is not None:
                    if start < 0 or end < start:
                        errors.append(f"{here}: window [{start}, {end}] s is not two times in order")
                        continue
                    spans = ((start, end),)  # seconds from the clip's start: the clip file's clock
                groups = {"template": str(query.get("template"))} if query.get("template") else {}
                item_id = f"{clip_uid}/{ann_uid}/{q}"
                out.append(Item(item_id, video, text.strip(), "grounding", spans=spans, groups=groups,
                                source=here, protocol="nlq"))  # fmt: skip
        return out

    clips = [(f"{v.get('video_uid', i)}: clip {j}", c) for i, v in enumerate(videos) if isinstance(v, dict)
             for j, c in enumerate(v.get("clips") or [])]  # fmt: skip
    items = each_row(((w, c) for w, c in clips), f"{path}: video ", lambda c, w: read_clip(c, w), errors)
    if skipped:
        errors.append(f"{path}: {skipped} queries have no text (null query): skipped and counted; "
                      "the others keep their original query_idx")  # fmt: skip
    return items, errors


def nlq_key(item_id: str) -> dict[str, object]:
    """(clip_uid, annotation_uid, query_idx) of an NLQ item, as the challenge's submission names it."""
    clip_uid, ann_uid, q = item_id.rsplit("/", 2)
    return {"clip_uid": clip_uid, "annotation_uid": ann_uid, "query_idx": int(q)}


# ------------------------------------------------------------------------------------ HourVideo

_HMS = re.compile(r"(\d+):(\d{2}):(\d{2}(?:\.\d+)?)")


def first_timestamp_s(text: object) -> float | None:
    """The first time of a `relevant_timestamps` value ("HH:MM:SS - HH:MM:SS", or a list of them)."""
    if isinstance(text, list):
        text = " ".join(str(t) for t in text)
    m = _HMS.search(str(text or ""))
    return int(m[1]) * 3600 + int(m[2]) * 60 + float(m[3]) if m else None


def hourvideo_items(path: Path, root: Path | None) -> tuple[list[Item], list[str]]:
    data = load_json(path)
    if not isinstance(data, dict):
        raise DataError(f"{path}: HourVideo's annotations are keyed by video_uid; found {type(data).__name__}")
    errors: list[str] = []
    release = path.parent

    def read_video(entry: object, where: str) -> list[Item]:
        video_uid = where.rsplit(" ", 1)[-1]
        if not isinstance(entry, dict) or not isinstance(entry.get("benchmark_dataset"), list):
            raise DataError(f"{where}: expected {{'video_metadata', 'benchmark_dataset': [MCQ, ...]}}")
        video = video_at(root, video_uid, ("video_540ss/{uid}.mp4", "videos/{uid}.mp4", "{uid}.mp4"))
        out = []
        for k, mcq in enumerate(entry["benchmark_dataset"]):
            try:
                out.append(_hourvideo_mcq(mcq, f"{where}, question #{k}", video_uid, video, release, root))
            except DataError as exc:
                errors.append(str(exc))
        return out

    return each_row(((uid, v) for uid, v in data.items()), f"{path}: video ", read_video, errors), errors


def _hourvideo_mcq(mcq: object, where: str, video_uid: str, video: str, release: Path, root: Path | None) -> Item:
    if not isinstance(mcq, dict):
        raise DataError(f"{where}: expected an object, found {type(mcq).__name__}")
    qid = required_text(str(mcq.get("qid") or ""), "qid", where)
    given = [mcq.get(f"answer_{i}") for i in range(1, 6)]
    if not all(isinstance(o, str) and o.strip() for o in given):
        raise DataError(f"{where}: question {qid}: expected answer_1 .. answer_5 as texts or image paths")
    options = [str(o) for o in given]
    task = str(mcq.get("task") or "")
    images: tuple[str, ...] = ()
    if task.endswith("_image") or task.endswith("/layout"):
        found = [_option_image(o, release, root) for o in options]
        if all(found):
            images = tuple(str(p) for p in found)
        elif any(found) or task.endswith("_image"):
            raise DataError(f"{where}: question {qid}: image options not found beside {release} or in the data root")
    label = mcq.get("correct_answer_label")
    answer = str(label).strip().upper() if label is not None else None
    if answer is not None and answer not in LETTERS:
        raise DataError(f"{where}: question {qid}: correct_answer_label must be A-E; found {label!r}")
    until = first_timestamp_s(mcq.get("relevant_timestamps")) if "predictive" in task else None
    shown = [f"image {LETTERS[i]}" for i in range(5)] if images else options
    groups = {"task": task.split("/")[0] or "unknown", "sub_task": task or "unknown"}
    return Item(f"{video_uid}/{qid}", video, required_text(mcq.get("question"), "question", where), "mcq",
                lettered(shown), answer, groups=groups, source=where, protocol="hourvideo",
                until_s=until, option_images=images)  # fmt: skip


def _option_image(rel: str, release: Path, root: Path | None) -> Path | None:
    for base in (release, root):
        if base is not None and ".." not in Path(rel).parts and (base / rel).is_file():
            return (base / rel).resolve()
    return None


# ------------------------------------------------------------------------------------ EgoPlan-Bench


def egoplan_items(path: Path, root: Path | None) -> tuple[list[Item], list[str]]:
    """EgoPlan-Bench: a list of samples (`sample_id`, `task_goal`, `question`, `choice_a..d`,
    `golden_choice_idx` A-D). The model sees the video up to the current observation, which the
    file gives as a frame index of the source video; avstack tells time by pts, never by index, so
    it takes the clip cut there (`{sample_id}.mp4`, as lmms-eval ships them) and names a sample
    without one."""

    def read(row: dict[str, object], where: str) -> list[Item]:
        sid = str(row.get("sample_id", "")).strip()
        if not sid:
            raise DataError(f"{where}: no sample_id")
        here = f"{where} (sample {sid})"
        choices = [row.get(f"choice_{c}") for c in "abcd"]
        if not all(isinstance(c, str) and c.strip() for c in choices):
            raise DataError(f"{here}: expected choice_a .. choice_d as texts")
        video = video_at(root, sid, ("{uid}.mp4", "videos/{uid}.mp4"))
        if root is not None and not (root / video).is_file():
            raise DataError(f"{here}: no clip {sid}.mp4 cut at the current observation (frame "
                            f"{row.get('current_observation_frame')} of {row.get('video_id')}: a frame index, "
                            "which avstack does not turn into a time)")  # fmt: skip
        gold = row.get("golden_choice_idx")
        answer = str(gold).strip().upper() if gold is not None else None
        if answer is not None and answer not in LETTERS[:4]:
            raise DataError(f"{here}: golden_choice_idx must be A-D; found {gold!r}")
        goal = required_text(row.get("task_goal"), "task_goal", here)
        question = f"Task goal: {goal}\n{required_text(row.get('question'), 'question', here)}"
        groups = {"video_source": str(row.get("video_source") or "unknown")}
        return [Item(sid, video, question, "mcq", lettered([str(c) for c in choices]), answer, groups=groups,
                     source=here, protocol="egoplan")]  # fmt: skip

    return listed_rows(path, "EgoPlan-Bench's file", "sample", read)


def detect_longform(path: Path) -> str | None:
    """egoschema, nlq or hourvideo where the file has that shape (its first entry), else None."""
    if path.suffix.lower() != ".json":
        return None
    try:
        data = load_json(path)
    except DataError:
        return None
    if isinstance(data, list) and data and isinstance(data[0], dict) and "q_uid" in data[0]:
        return "egoschema"
    if isinstance(data, list) and data and isinstance(data[0], dict) and "choice_a" in data[0]:
        return "egoplan"
    if isinstance(data, dict) and isinstance(data.get("videos"), list):
        return "nlq"
    if isinstance(data, dict) and data and all(isinstance(v, dict) and "benchmark_dataset" in v
                                               for v in list(data.values())[:3]):  # fmt: skip
        return "hourvideo"
    return None


READERS: dict[str, Callable[[Path, Path | None], tuple[list[Item], list[str]]]] = {
    "egoschema": egoschema_items,
    "nlq": nlq_items,
    "hourvideo": hourvideo_items,
    "egoplan": egoplan_items,
}


def submissions(items: list[Item], predictions: list[dict[str, Any]]) -> dict[str, object]:
    """The files the benchmarks' servers take, by file name: EgoSchema's `{q_uid: option index}`
    (every question answered with a letter) and Ego4D NLQ's challenge JSON (ranked windows in
    seconds from the clip's start, each query by clip_uid, annotation_uid and its original
    query_idx). None for a benchmark not among the items."""
    answered = {str(p.get("id")): p.get("prediction") or {} for p in predictions if not p.get("error")}
    out: dict[str, object] = {}
    ego = [it for it in items if it.protocol == "egoschema"]
    if ego:
        picks = {it.id: str(answered.get(it.id, {}).get("answer") or "") for it in ego}
        out["egoschema_submission.json"] = {q: LETTERS.index(a) for q, a in picks.items() if a and a in LETTERS}
    nlq = [it for it in items if it.protocol == "nlq"]
    if nlq:
        results = []
        for it in nlq:
            spans = answered.get(it.id, {}).get("spans") or []
            if spans:
                results.append(nlq_key(it.id) | {"predicted_times": [[float(a), float(b)] for a, b in spans[:5]]})
        out["nlq_submission.json"] = {"version": "1.0", "challenge": "ego4d_nlq_challenge", "results": results}
    plan = [it for it in items if it.protocol == "egoplan"]
    if plan:  # the leaderboard's shape: [{"sample_id": int, "label": "A".."D"}]
        labels = [(it.id, str(answered.get(it.id, {}).get("answer") or "")) for it in plan]
        out["egoplan_submission.json"] = [{"sample_id": int(i) if i.isdigit() else i, "label": a}
                                          for i, a in labels if a in LETTERS[:4]]  # fmt: skip
    return out
