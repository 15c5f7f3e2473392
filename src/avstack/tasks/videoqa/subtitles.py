"""Subtitle files (SRT, WebVTT, and Video-MME-v2's word JSONL) as cues with times in ms."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import TYPE_CHECKING

from avstack.io import DataError

if TYPE_CHECKING:  # a TypedDict: only the annotations read it
    from avstack.asr.types import TimedWord


_TIME = r"(?:(\d+):)?(\d{1,2}):(\d{2})[,.](\d{3})"
_CUE = re.compile(rf"{_TIME}\s*-->\s*{_TIME}")


def _ms(h: str | None, m: str, s: str, frac: str) -> int:
    return ((int(h or 0) * 60 + int(m)) * 60 + int(s)) * 1000 + int(frac)


def read_subtitles(path: str | Path) -> list[TimedWord]:
    """[{text, begin_time, end_time}] in ms, in file order; a file with no cue is a DataError."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"subtitles {path}: cannot read ({exc})") from None
    if path.suffix.lower() == ".jsonl":
        return word_lines(path, text)
    cues: list[TimedWord] = []
    for block in re.split(r"\n\s*\n", text.replace("\r\n", "\n")):
        lines = [ln for ln in block.strip().split("\n") if ln.strip()]
        for k, line in enumerate(lines):
            m = _CUE.search(line)
            if m:
                words = " ".join(re.sub(r"<[^>]+>", "", ln).strip() for ln in lines[k + 1 :]).strip()
                if words:
                    cues.append({"text": words, "begin_time": _ms(*m.groups()[:4]), "end_time": _ms(*m.groups()[4:])})
                break
    if not cues:
        raise DataError(f"subtitles {path}: no cue with a time line ('00:00:01,000 --> 00:00:02,000')")
    return cues


def word_lines(path: Path, text: str) -> list[TimedWord]:
    """Video-MME-v2's word-level subtitles: a word a line, `{"text", "start_time", "end_time"}` in
    float seconds, each kept to the millisecond; a bad line names the file and the line."""
    words: list[TimedWord] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            begin, end = float(row["start_time"]), float(row["end_time"])
            word = str(row["text"]).strip()
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise DataError(
                f"subtitles {path}:{lineno}: expected {{'text', 'start_time', 'end_time'}} in seconds ({exc})"
            ) from None
        if not (math.isfinite(begin) and math.isfinite(end)) or end < begin or begin < 0:
            raise DataError(f"subtitles {path}:{lineno}: times must be 0 <= start_time <= end_time; found {line:.80}")
        if word:
            words.append({"text": word, "begin_time": round(begin * 1000), "end_time": round(end * 1000)})
    if not words:
        raise DataError(f"subtitles {path}: no word lines")
    return words
