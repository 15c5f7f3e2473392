"""Questions about videos: one item per (video, question), from a generic JSONL/CSV file or from the
shapes public benchmarks ship (Charades-STA lines, QVHighlights JSONL, a Video-MME table).

Every row is input: a bad one (no video, a field of the wrong type, a span that is not two times
in order) is a counted error naming the file and line; the rest go on.
"""

from __future__ import annotations

import json
import re
from functools import partial
from pathlib import Path

from avstack.errors import UsageError
from avstack.io import DataError
from avstack.tasks.videoqa.items import Item, lettered, number, option_text, required_text
from avstack.tasks.videoqa.shipped import table_items, table_rows

KINDS = ("mcq", "open", "grounding")
FORMATS = ("auto", "generic", "charades", "qvhighlights", "videomme", "egoschema", "nlq", "hourvideo", "egoplan",
           "videomme2", "worldsense", "dailyomni", "avspeaker", "egolife")  # fmt: skip
GROUP_FIELDS = ("duration", "domain", "sub_category", "task_type", "category")  # reported per value


def _span(v: object, where: str) -> tuple[float, float]:
    if isinstance(v, str):
        v = [p for p in re.split(r"[,\s;]+", v.strip("[] ")) if p]
    if not isinstance(v, (list, tuple)) or len(v) != 2:
        raise DataError(f"{where}: a span must be [start_s, end_s]; found {v!r:.60}")
    a, b = number(v[0]), number(v[1])
    if a is None or b is None or a < 0 or b <= a:
        raise DataError(f"{where}: a span must be two times in seconds, start < end; found {v!r:.60}")
    return a, b


def _options(v: object, where: str) -> list[str]:
    if isinstance(v, str):
        try:
            v = json.loads(v) if v.strip().startswith("[") else [p for p in v.split("|") if p.strip()]
        except json.JSONDecodeError:
            raise DataError(f"{where}: options must be a list (JSON, or texts joined by |); found {v!r:.60}") from None
    if hasattr(v, "tolist"):  # a Parquet list column
        v = v.tolist()
    if not isinstance(v, (list, tuple)) or len(v) < 2 or not all(isinstance(o, str) for o in v):
        raise DataError(f"{where}: options must be a list of at least 2 texts; found {v!r:.60}")
    return list(v)


def generic_item(row: dict[str, object], where: str) -> Item:
    """`id`, `video`, `question`, then `options` + `answer` (mcq), `answer` (open) or `answer_span`
    (grounding); optional `subtitles` and group fields."""
    if not isinstance(row, dict):
        raise DataError(f"{where}: expected an object, found {type(row).__name__}")
    item_id = row.get("id")
    if isinstance(item_id, int) and not isinstance(item_id, bool):
        item_id = str(item_id)
    item_id = required_text(item_id, "id", where)
    video, question = (
        required_text(row.get("video"), "video", where),
        required_text(row.get("question"), "question", where),
    )
    groups = {k: str(row[k]) for k in GROUP_FIELDS if row.get(k) not in (None, "")}
    subtitles = row.get("subtitles") or None
    if subtitles is not None and not isinstance(subtitles, str):
        raise DataError(f"{where}: 'subtitles' must be a file name; found {subtitles!r:.60}")
    item = partial(Item, id=item_id, video=video, question=question, subtitles=subtitles, groups=groups, source=where)
    if row.get("answer_span") not in (None, ""):
        return item(kind="grounding", spans=(_span(row["answer_span"], f"{where}: answer_span"),))
    if row.get("options") not in (None, ""):
        options = lettered(_options(row["options"], f"{where}: options"))
        answer = required_text(row.get("answer"), "answer", where)
        letters = [chr(ord("A") + i) for i in range(len(options))]
        letter = (
            answer.upper()
            if answer.upper() in letters
            else next((lt for lt, o in zip(letters, options) if option_text(o).lower() == answer.lower()), None)
        )
        if letter is None:
            raise DataError(f"{where}: answer {answer!r} is neither an option letter ({''.join(letters)}) nor option")
        return item(kind="mcq", options=options, answer=letter)
    return item(kind="open", answer=required_text(row.get("answer"), "answer", where))


def charades_items(path: Path) -> tuple[list[Item], list[str]]:
    """Charades-STA: `VIDEO_ID START END##SENTENCE`, seconds; videos are VIDEO_ID.mp4."""
    items, errors = [], []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        head, sep, sentence = line.partition("##")
        parts = head.split()
        try:
            if not sep or len(parts) != 3 or not sentence.strip():
                raise DataError(f"{where}: expected 'VIDEO_ID START END##SENTENCE'; found {line!r:.80}")
            span = _span(parts[1:], where)
            items.append(
                Item(
                    f"{parts[0]}#{lineno}",
                    f"{parts[0]}.mp4",
                    sentence.strip(),
                    "grounding",
                    spans=(span,),
                    source=where,
                )
            )
        except DataError as exc:
            errors.append(str(exc))
    return items, errors


def qvhighlights_item(row: dict[str, object], where: str) -> Item:
    """QVHighlights: `qid`, `query`, `vid`, `relevant_windows` ([[start, end], ...], seconds)."""
    if not isinstance(row, dict):
        raise DataError(f"{where}: expected an object, found {type(row).__name__}")
    windows = row.get("relevant_windows")
    if not windows:
        raise DataError(f"{where}: no relevant_windows (a test split has none to score against)")
    if not isinstance(windows, list):
        raise DataError(f"{where}: relevant_windows must be a list of [start, end]; found {windows!r:.60}")
    spans = tuple(_span(w, f"{where}: relevant_windows") for w in windows)
    vid = required_text(row.get("vid"), "vid", where)
    query = required_text(row.get("query"), "query", where)
    return Item(str(row.get("qid")), f"{vid}.mp4", query, "grounding", spans=spans, source=where)


def videomme_item(row: dict[str, object], where: str, root: Path | None) -> Item:
    """Video-MME: `videoID`, `question_id`, `question`, `options` (["A. ..", ...]), `answer` (a
    letter), `duration`, `domain`, `task_type`; videos `video/{videoID}.mp4` (or `{videoID}.mp4`),
    subtitles `subtitle/{videoID}.srt` where there is one."""
    if not isinstance(row, dict):
        raise DataError(f"{where}: expected an object, found {type(row).__name__}")
    vid = required_text(row.get("videoID"), "videoID", where)
    video = f"video/{vid}.mp4" if root is None or (root / "video" / f"{vid}.mp4").exists() else f"{vid}.mp4"
    subs = next(
        (f"{d}{vid}.srt" for d in ("subtitle/", "") if root is not None and (root / f"{d}{vid}.srt").is_file()), None
    )
    generic = {
        "id": row.get("question_id") or f"{vid}-{where.rsplit(':', 1)[-1]}",
        "video": video,
        "question": row.get("question"),
        "options": row.get("options"),
        "answer": row.get("answer"),
        "subtitles": subs,
        **{k: row.get(k) for k in GROUP_FIELDS},
    }
    return generic_item(generic, where)


def detect_format(path: Path) -> str:
    from avstack.tasks.videoqa.audiovisual import detect_audiovisual
    from avstack.tasks.videoqa.longform import detect_longform

    if path.suffix.lower() == ".txt":
        return "charades"
    audiovisual = detect_audiovisual(path)  # before the long ones: EgoLifeQA's rows have EgoPlan's choice_a
    if audiovisual is not None:
        return audiovisual
    longform = detect_longform(path)
    if longform is not None:
        return longform
    for _, row in table_rows(path):
        if isinstance(row, dict):
            if "relevant_windows" in row or ("qid" in row and "query" in row):
                return "qvhighlights"
            if "videoID" in row:
                return "videomme"
        return "generic"
    return "generic"


def load_questions(path: str | Path, fmt: str = "auto", root: str | Path | None = None) -> tuple[list[Item], list[str]]:
    """The items of a questions file and the errors of its bad rows (file:line: why). With `root`,
    an item whose video is not there is an error too. Ids must be unique."""
    path = Path(path)
    if fmt not in FORMATS:
        raise UsageError(f"--questions-format must be one of {', '.join(FORMATS)}; found {fmt!r}")
    if not path.is_file():
        raise DataError(f"questions file {path} does not exist")
    fmt = detect_format(path) if fmt == "auto" else fmt
    root = Path(root) if root is not None else None
    from avstack.tasks.videoqa.audiovisual import READERS as AUDIOVISUAL
    from avstack.tasks.videoqa.longform import READERS

    if fmt == "charades":
        items, errors = charades_items(path)
    elif fmt in READERS or fmt in AUDIOVISUAL:
        items, errors = (READERS | AUDIOVISUAL)[fmt](path, root)
    elif fmt == "qvhighlights":
        items, errors = table_items(path, qvhighlights_item)
    elif fmt == "videomme":
        items, errors = table_items(path, lambda row, where: videomme_item(row, where, root))
    else:
        items, errors = table_items(path, generic_item)
    return _checked(items, errors, root, path)


def _checked(items: list[Item], errors: list[str], root: Path | None, path: Path) -> tuple[list[Item], list[str]]:
    seen: set[str] = set()
    kept = []
    for item in items:
        where = item.source or str(path)
        if item.id in seen:
            errors.append(f"{where}: item id {item.id!r} appears twice")
            continue
        seen.add(item.id)
        if ".." in Path(item.video).parts or Path(item.video).is_absolute():
            errors.append(f"{where}: item {item.id!r}: video {item.video!r} leaves the data root")
            continue
        if root is not None and not (root / item.video).is_file():
            errors.append(f"{where}: item {item.id!r}: video {item.video!r} not found under {root}")
            continue
        gone = [
            f"{role} {rel!r}" for role, rel in item.media.items() if root is not None and not (root / rel).is_file()
        ]
        if gone or any(".." in Path(rel).parts or Path(rel).is_absolute() for rel in item.media.values()):
            errors.append(f"{where}: item {item.id!r}: {', '.join(gone) or 'a file'} not found under {root}")
            continue
        kept.append(item)
    return kept, errors
