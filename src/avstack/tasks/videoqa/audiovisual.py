"""The audio-visual benchmarks as they ship (shared/videoqa/AUDIOVISUAL.md), read into videoqa
items with the benchmark's own scoring protocol named on each (score_av.py scores them):

- Video-MME-v2: `test.parquet` (or the same columns as JSONL/JSON): 4 questions a video, options
  A-H in one string, questions grouped by video (`group_type`, `group_structure`); word-level
  subtitles at `subtitle/<video_id>.jsonl` (a word a line, float seconds), read as subtitles.
- WorldSense: `worldsense_qa.json`, keyed by video id, `task0`..`task4` per video (or lmms-eval's
  flat copy: `index`, `video_path`, `subtitle_path`, ...); SRT subtitles where they are.
- Daily-Omni: `qa.json`, a list; media `Videos/<id>/<id>_video.mp4` and `<id>_audio.wav`.
- AV-SpeakerBench: rows with `question`, `choices`, `answer`, `task_id` and three files
  (`audio_visual_path`, `visual_path`: silent, `audio_path`): each arm sends its own.
- EgoLifeQA: a list of records with a `query_time` (`DAYn` + `HHMMSSFF`), asked of the wearer's
  clips (`A1_JAKE/DAY1_A1_JAKE_<HHMMSSFF>.mp4`): the clip that holds the query time, seen only
  up to it (`until_s`); one that starts at the query time holds nothing of it, and the clip
  before is asked whole.

A bad row is an error naming the file and the row; the rest go on."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from avstack.io import DataError
from avstack.tasks.videoqa.items import Item, lettered, required_text
from avstack.tasks.videoqa.shipped import each_row, listed_rows, load_json, objects, table_items, table_rows, video_at

VIDEOMME2_STRUCTURES = {
    "[1, 2, 3, 4]": ((1,), (2,), (3,), (4,)),
    "[1, [2, 3], 4]": ((1,), (2, 3), (4,)),
    "[[1, 2], 3, 4]": ((1, 2), (3,), (4,)),
}
WORLDSENSE_GROUPS = ("duration", "domain", "sub_category", "task_domain", "task_type", "audio_class")
DAILYOMNI_GROUPS = {
    "Type": "type",
    "content_parent_category": "content_parent_category",
    "content_fine_category": "content_fine_category",
    "video_category": "video_category",
    "video_duration": "video_duration",
}


def _text(v: object) -> str:
    return "" if v is None else str(v).strip()


def _letter(answer: object, options: tuple[str, ...], where: str) -> str:
    letters = [chr(ord("A") + i) for i in range(len(options))]
    said = _text(answer).upper()
    if said not in letters:
        raise DataError(f"{where}: answer {answer!r} is not one of the option letters {''.join(letters)}")
    return said


def _choices(v: object, where: str, name: str) -> tuple[str, ...]:
    """A list of "A. ..." texts, or its Python/JSON literal (AV-SpeakerBench ships both)."""
    if hasattr(v, "tolist"):
        v = v.tolist()
    if isinstance(v, str) and v.strip().startswith("["):
        try:
            v = ast.literal_eval(v.strip())
        except (ValueError, SyntaxError):
            raise DataError(f"{where}: {name!r} is not a list literal; found {v!r:.60}") from None
    if not isinstance(v, (list, tuple)) or len(v) < 2 or not all(isinstance(o, str) and o.strip() for o in v):
        raise DataError(f"{where}: {name!r} must be a list of at least 2 option texts; found {v!r:.60}")
    return lettered(list(v))


def _mcq(
    row: dict[str, object],
    at: tuple[str, str, str],
    options: tuple[str, ...],
    fields: tuple[str, str],
    answer_where: str | None = None,
    **more: Any,
) -> Item:
    """A multiple-choice item: `at` its id, video and where it was read; `fields` the row's names
    for its question and its answer letter (each benchmark names them its own way)."""
    key, video, where = at
    question, answer = fields
    return Item(
        key,
        video,
        required_text(row.get(question), question, where),
        "mcq",
        options,
        _letter(row.get(answer), options, answer_where or where),
        source=where,
        **more,
    )


# ------------------------------------------------------------------------------------ Video-MME-v2


def _mme2_options(v: object, where: str) -> tuple[str, ...]:
    """Video-MME-v2's options: one string, an option a line ("A. ...\\nB. ...")."""
    if not isinstance(v, str) or not v.strip():
        raise DataError(f"{where}: 'options' must be one text, an option a line ('A. ...\\nB. ...'); found {v!r:.60}")
    lines = [ln.strip() for ln in v.strip().split("\n") if ln.strip()]
    if len(lines) < 2 or not all(re.match(r"^[A-H]\.", ln) for ln in lines):
        raise DataError(f"{where}: 'options' must be lines 'A. ...' to at most 'H. ...'; found {v!r:.60}")
    return tuple(lines)


def videomme2_items(path: Path, root: Path | None) -> tuple[list[Item], list[str]]:
    """Video-MME-v2's `test.parquet` rows (or the same columns as JSONL/JSON)."""
    return table_items(path, lambda row, where: _videomme2_item(row, where, root))


def _videomme2_item(row: dict[str, object], where: str, root: Path | None) -> Item:
    vid = required_text(_text(row.get("video_id")) or None, "video_id", where)
    qid = required_text(row.get("question_id"), "question_id", where)
    if not re.fullmatch(rf"{re.escape(vid)}-[1-4]", qid):
        raise DataError(f"{where}: question_id {qid!r} is not '{vid}-1' .. '{vid}-4' (its video_id and place)")
    group_type = _text(row.get("group_type"))
    if group_type not in ("relevance", "logic"):
        raise DataError(f"{where}: question {qid}: group_type must be relevance or logic; found {group_type!r}")
    structure = " ".join(_text(row.get("group_structure")).split()).replace("[ ", "[").replace(" ]", "]")
    if group_type == "logic" and structure not in VIDEOMME2_STRUCTURES:
        raise DataError(
            f"{where}: question {qid}: group_structure must be one of {', '.join(VIDEOMME2_STRUCTURES)}; "
            f"found {row.get('group_structure')!r}"
        )
    options = _mme2_options(row.get("options"), where)
    subs = next(
        (f"subtitle/{vid}.jsonl" for _ in [0] if root is not None and (root / f"subtitle/{vid}.jsonl").is_file()), None
    )
    facts = {
        "video_id": vid,
        "group_type": group_type,
        "group_structure": structure or "[1, 2, 3, 4]",
        "place": qid.rsplit("-", 1)[1],
    }
    for head in ("level", "second_head", "third_head"):  # on the last question of each group only
        if _text(row.get(head)):
            facts[head] = _text(row.get(head))
    return _mcq(
        row,
        (qid, video_at(root, vid, ("videos/{uid}.mp4", "video/{uid}.mp4", "{uid}.mp4")), where),
        options,
        ("question", "answer"),
        answer_where=f"{where}: question {qid}",
        subtitles=subs,
        protocol="videomme2",
        facts=facts,
    )


# ------------------------------------------------------------------------------------ WorldSense


def _worldsense_groups(fields: dict[str, object]) -> dict[str, str]:
    groups = {}
    for name in WORLDSENSE_GROUPS:
        v: object = fields.get(name)
        if hasattr(v, "tolist"):  # a Parquet list column
            v = v.tolist()
        if isinstance(v, (list, tuple)):  # audio_class: the sounds heard, each a breakdown of its own
            v = ", ".join(sorted(str(x) for x in v))
        if _text(v):
            groups[name] = _text(v)
    return groups


def _worldsense_item(
    task: dict[str, object], video: dict[str, object], vid: str, key: str, where: str, root: Path | None
) -> Item:
    options = _choices(task.get("candidates"), where, "candidates")
    subs = next(
        (
            p.format(uid=vid)
            for p in ("subtitles/{uid}.srt", "subtitle/{uid}.srt", "{uid}.srt")
            if root is not None and (root / p.format(uid=vid)).is_file()
        ),
        None,
    )
    return _mcq(
        task,
        (key, video_at(root, vid, ("videos/{uid}.mp4", "{uid}.mp4")), where),
        options,
        ("question", "answer"),
        subtitles=subs,
        groups=_worldsense_groups(video | task),
        protocol="worldsense",
    )


def worldsense_items(path: Path, root: Path | None) -> tuple[list[Item], list[str]]:
    """worldsense_qa.json (keyed by video id, task0..task4 each) or lmms-eval's flat copy."""
    data = load_json(path)
    if isinstance(data, list):
        return listed_rows(
            path, "WorldSense's flat copy", "question", lambda r, w: [_worldsense_flat(r, w, root)], data
        )
    if not isinstance(data, dict):
        raise DataError(f"{path}: worldsense_qa.json is keyed by video id; found {type(data).__name__}")
    errors: list[str] = []

    def read_video(video: object, where: str) -> list[Item]:
        video = objects(video, where)
        vid = where.rsplit(" ", 1)[-1]
        tasks = sorted((k for k in video if re.fullmatch(r"task\d+", k)), key=lambda k: int(k[4:]))
        if not tasks:
            raise DataError(f"{where}: no task0 .. task4 questions")
        out = []
        for key in tasks:
            try:
                out.append(
                    _worldsense_item(
                        objects(video[key], f"{where}: {key}"), video, vid, f"{vid}_{key}", f"{where}: {key}", root
                    )
                )
            except DataError as exc:
                errors.append(str(exc))
        return out

    return each_row(data.items(), f"{path}: video ", read_video, errors), errors


def _worldsense_flat(row: dict[str, object], where: str, root: Path | None) -> Item:
    key = required_text(_text(row.get("index")) or None, "index", where)
    video = required_text(row.get("video_path"), "video_path", where)
    options = _choices(row.get("candidates"), where, "candidates")
    subs = _text(row.get("subtitle_path")) or None
    if subs and root is not None and not (root / subs).is_file():
        subs = None  # lmms-eval's task crashes here; a question without its subtitles is asked without them
    return _mcq(
        row,
        (key, video, where),
        options,
        ("question", "answer"),
        subtitles=subs,
        groups=_worldsense_groups(row),
        protocol="worldsense",
    )


# ------------------------------------------------------------------------------------ Daily-Omni


def dailyomni_items(path: Path, root: Path | None) -> tuple[list[Item], list[str]]:
    def read(row: dict[str, object], where: str) -> list[Item]:
        vid = required_text(row.get("video_id"), "video_id", where)
        options = _choices(row.get("Choice"), where, "Choice")
        groups = {name: _text(row.get(k)) for k, name in DAILYOMNI_GROUPS.items() if _text(row.get(k))}
        key = f"{vid}_{where.rsplit('#', 1)[-1]}"  # the file has no question id: the video and the row
        return [
            _mcq(
                row,
                (key, f"Videos/{vid}/{vid}_video.mp4", where),
                options,
                ("Question", "Answer"),
                groups=groups,
                protocol="dailyomni",
                media={"sound": f"Videos/{vid}/{vid}_audio.wav"},
            )
        ]

    return listed_rows(path, "Daily-Omni's qa.json", "question", read)


# ------------------------------------------------------------------------------------ AV-SpeakerBench


def avspeaker_items(path: Path, root: Path | None) -> tuple[list[Item], list[str]]:
    return table_items(path, _avspeaker_item)


def _avspeaker_item(row: dict[str, object], where: str) -> Item:
    key = required_text(_text(row.get("question_id") or row.get("id")) or None, "question_id", where)
    files = {
        role: required_text(row.get(field), field, where)
        for role, field in (("video", "audio_visual_path"), ("silent", "visual_path"), ("sound", "audio_path"))
    }
    options = _choices(row.get("choices"), where, "choices")
    return _mcq(
        row,
        (key, files["video"], where),
        options,
        ("question", "answer"),
        groups={"task_id": _text(row.get("task_id")) or "none"},
        protocol="avspeaker",
        media={"silent": files["silent"], "sound": files["sound"]},
    )


# ------------------------------------------------------------------------------------ EgoLifeQA

CLIP_NAME = re.compile(r"^DAY(\d+)_(.+)_(\d{8})\.mp4$")


def egolife_seconds(day: object, time: object, where: str) -> float:
    """A `DAYn` + `HHMMSSFF` time as seconds of the week (FF read as hundredths, as the code's
    own example: 10483000 is 10:48:30.00)."""
    d = re.fullmatch(r"DAY(\d+)", _text(day))
    t = re.fullmatch(r"(\d{2})(\d{2})(\d{2})(\d{2})", _text(time))
    if not d or not t:
        raise DataError(f"{where}: a time must be 'DAYn' and 'HHMMSSFF'; found {day!r}, {time!r}")
    h, m, s, ff = (int(x) for x in t.groups())
    if h > 23 or m > 59 or s > 59:
        raise DataError(f"{where}: time {time!r} is not HHMMSSFF of a day")
    return (int(d.group(1)) - 1) * 86400 + h * 3600 + m * 60 + s + ff / 100


def egolife_clips(root: Path | None) -> list[tuple[float, str]]:
    """(start in seconds of the week, path under the root) of every clip named as EgoLife names them."""
    if root is None:
        return []
    out = []
    for path in sorted(root.rglob("DAY*_*.mp4")):
        m = CLIP_NAME.match(path.name)
        if m:
            out.append((egolife_seconds(f"DAY{m.group(1)}", m.group(3), str(path)), path.relative_to(root).as_posix()))
    return sorted(out)


def clip_at(clips: list[tuple[float, str]], at_s: float) -> tuple[str, float | None] | None:
    """The clip a question asked at `at_s` may see, and how far into it (None: whole): the last
    clip that starts before `at_s`, cut there; None when no clip starts before it."""
    before = [(start, rel) for start, rel in clips if start < at_s]
    if not before:
        return None
    start, rel = before[-1]
    return rel, round(at_s - start, 3)


def egolife_items(path: Path, root: Path | None) -> tuple[list[Item], list[str]]:
    clips = egolife_clips(root)

    def read(row: dict[str, object], where: str) -> list[Item]:
        key = required_text(_text(row.get("ID")) or None, "ID", where)
        here = f"{where} (ID {key})"
        query = row.get("query_time")
        if not isinstance(query, dict):
            raise DataError(f"{here}: query_time must be {{'date': 'DAYn', 'time': 'HHMMSSFF'}}; found {query!r:.60}")
        at_s = egolife_seconds(query.get("date"), query.get("time"), f"{here}: query_time")
        options = lettered([_text(row.get(f"choice_{c}")) for c in "abcd"])
        if not all(o[3:].strip() for o in options):
            raise DataError(f"{here}: expected choice_a .. choice_d as texts")
        seen = clip_at(clips, at_s)
        if seen is None:
            raise DataError(
                f"{here}: no clip under the data root starts before its query time "
                f"{query.get('date')} {query.get('time')}"
            )
        video, until_s = seen
        return [
            _mcq(
                row,
                (key, video, here),
                options,
                ("question", "answer"),
                groups={"type": _text(row.get("type")) or "none"},
                protocol="egolife",
                until_s=until_s,
                facts={"query_time": f"{query.get('date')} {query.get('time')}"},
            )
        ]

    return listed_rows(path, "EgoLifeQA's file", "question", read)


READERS: dict[str, Callable[[Path, Path | None], tuple[list[Item], list[str]]]] = {
    "videomme2": videomme2_items,
    "worldsense": worldsense_items,
    "dailyomni": dailyomni_items,
    "avspeaker": avspeaker_items,
    "egolife": egolife_items,
}


def _first(path: Path) -> Iterator[object]:
    if path.suffix.lower() == ".json":
        try:
            data = load_json(path)
        except DataError:
            return
        if isinstance(data, dict):
            yield data
            return
        yield from (data[:1] if isinstance(data, list) else [])
        return
    for _, row in table_rows(path):
        yield row
        return


def detect_audiovisual(path: Path) -> str | None:
    """The benchmark whose shape the file has (its first row), else None."""
    for row in _first(path):
        if not isinstance(row, dict):
            return None
        if "group_structure" in row and "video_id" in row:
            return "videomme2"
        if "audio_visual_path" in row and "visual_path" in row:
            return "avspeaker"
        if "query_time" in row and "choice_a" in row:
            return "egolife"
        if "Choice" in row and "video_id" in row:
            return "dailyomni"
        if "candidates" in row and ("video_path" in row or "task_type" in row):
            return "worldsense"
        if row and all(isinstance(v, dict) and any(re.fullmatch(r"task\d+", k) for k in v) for v in row.values()):
            return "worldsense"
    return None
