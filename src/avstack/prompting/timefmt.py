"""How a time is told to a model: frame timestamp tags and word-timing blocks, each format with its
parser (the offline baselines read times back the way a model would see them).

Frame formats (`--ts-format`): ms `<timestamp_ms>1234` · seconds `<t=1.234s>` · mmss `00:01.234`
· qwen `<1.2 seconds>` (Qwen2.5/3-VL's convention, 0.1 s) · index `<frame_index>37` (the frame
number: the time must be inferred) · overlay (no text tag: the time is burned into the image).
Word formats (`--word-ts-format`): json (begin/end per word) · srt (one cue per word) · inline
(`[1.23s] word`, begin times only).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from avstack.errors import UsageError

if TYPE_CHECKING:  # a TypedDict: only the annotations read it
    from avstack.asr.types import TimedWord


TS_FORMATS = ("ms", "seconds", "mmss", "qwen", "index", "overlay")
WORD_TS_FORMATS = ("json", "srt", "inline")

_PARSE = {
    "ms": (re.compile(r"^<timestamp_ms>(\d+)$"), lambda m: int(m.group(1))),
    "seconds": (re.compile(r"^<t=(\d+(?:\.\d+)?)s>$"), lambda m: round(float(m.group(1)) * 1000)),
    "mmss": (
        re.compile(r"^(\d+):(\d{2})\.(\d{3})$"),
        lambda m: int(m.group(1)) * 60000 + int(m.group(2)) * 1000 + int(m.group(3)),
    ),
    "qwen": (re.compile(r"^<(\d+(?:\.\d+)?) seconds>$"), lambda m: round(float(m.group(1)) * 1000)),
}


def check_ts_format(fmt: str) -> str:
    if fmt not in TS_FORMATS:
        raise UsageError(f"--ts-format takes {', '.join(TS_FORMATS)}; found {fmt!r}")
    return fmt


def check_word_format(fmt: str) -> str:
    if fmt not in WORD_TS_FORMATS:
        raise UsageError(f"--word-ts-format takes {', '.join(WORD_TS_FORMATS)}; found {fmt!r}")
    return fmt


def frame_tag(fmt: str, pts_ms: int, index: int) -> str | None:
    """The text shown before a frame; None when the format tells time another way (overlay)."""
    if fmt == "ms":
        return f"<timestamp_ms>{pts_ms}"
    if fmt == "seconds":
        return f"<t={pts_ms / 1000:.3f}s>"
    if fmt == "mmss":
        return f"{pts_ms // 60000:02d}:{pts_ms // 1000 % 60:02d}.{pts_ms % 1000:03d}"
    if fmt == "qwen":
        return f"<{pts_ms / 1000:.1f} seconds>"
    if fmt == "index":
        return f"<frame_index>{index}"
    return None


def parse_frame_tag(fmt: str, tag: str) -> int | None:
    """The time in ms a tag tells, as a reader of that format would take it (None: no time)."""
    rule = _PARSE.get(fmt)
    m = rule[0].match(tag) if rule else None
    return rule[1](m) if rule and m else None


def _srt_time(ms: int) -> str:
    return f"{ms // 3600000:02d}:{ms // 60000 % 60:02d}:{ms // 1000 % 60:02d},{ms % 1000:03d}"


def words_block(fmt: str, text: str, words: Sequence[TimedWord]) -> str:
    """The timed ASR words as the format writes them."""
    if fmt == "srt":
        return "\n\n".join(
            f"{i}\n{_srt_time(int(w['begin_time']))} --> {_srt_time(int(w['end_time']))}\n{w['text']}"
            for i, w in enumerate(words, 1)
        )
    if fmt == "inline":
        return " ".join(f"[{int(w['begin_time']) / 1000:.2f}s] {w['text']}" for w in words)
    return json.dumps({"text": text, "words": words}, ensure_ascii=False)


_SRT = re.compile(r"(\d+):(\d{2}):(\d{2}),(\d{3}) --> (\d+):(\d{2}):(\d{2}),(\d{3})\n(.*)")
_INLINE = re.compile(r"\[(\d+(?:\.\d+)?)s\] (\S+)")


def _ms(h: str, m: str, s: str, ms: str) -> int:
    return int(h) * 3600000 + int(m) * 60000 + int(s) * 1000 + int(ms)


def parse_words(fmt: str, block: str) -> list[dict[str, object]]:
    """Words with the times a reader of the format gets (inline: begin only)."""
    if fmt == "srt":
        return [
            {"text": m.group(9), "begin_time": _ms(*m.group(1, 2, 3, 4)), "end_time": _ms(*m.group(5, 6, 7, 8))}
            for m in _SRT.finditer(block)
        ]
    if fmt == "inline":
        return [{"text": m.group(2), "begin_time": round(float(m.group(1)) * 1000)} for m in _INLINE.finditer(block)]
    try:
        words = json.loads(block).get("words", [])
    except (json.JSONDecodeError, AttributeError):
        return []
    return [w for w in words if isinstance(w, dict)]
