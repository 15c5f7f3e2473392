"""Subtitle files (SRT, WebVTT) as cues with times in ms."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from avstack.io import DataError

_TIME = r"(?:(\d+):)?(\d{1,2}):(\d{2})[,.](\d{3})"
_CUE = re.compile(rf"{_TIME}\s*-->\s*{_TIME}")


def _ms(h: str | None, m: str, s: str, frac: str) -> int:
    return ((int(h or 0) * 60 + int(m)) * 60 + int(s)) * 1000 + int(frac)


def read_subtitles(path: str | Path) -> list[dict[str, Any]]:
    """[{text, begin_time, end_time}] in ms, in file order; a file with no cue is a DataError."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"subtitles {path}: cannot read ({exc})") from None
    cues = []
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
