"""One question about one video, as every questions format is read into it (data.py,
longform.py), and the small readers of its fields that the formats share."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from avstack.io import DataError

_LETTER = re.compile(r"^\s*\(?([A-Za-z])[.):]\s*")


@dataclass(frozen=True)
class Item:
    """One question about one video. Times are seconds on the video's clock (the clip's one clock)."""

    id: str
    video: str  # relative to the data root (posix)
    question: str
    kind: str  # mcq | open | grounding
    options: tuple[str, ...] = ()  # mcq: the option texts as shown, lettered "A. ...", "B. ..."
    answer: str | None = None  # mcq: the letter; open: the text
    spans: tuple[tuple[float, float], ...] = ()  # grounding: the true windows (one or more)
    subtitles: str | None = None  # an SRT/VTT file for the video, relative to the data root
    groups: dict[str, str] = field(default_factory=dict, compare=False)  # duration class, domain, ...
    source: str = field(default="", compare=False)  # file:line it was read from (errors name it)
    # the benchmark whose scoring and submission apply (longform: egoschema, nlq, hourvideo); "" generic
    protocol: str = field(default="", compare=False)
    until_s: float | None = None  # the video is seen only up to here (HourVideo's predictive questions)
    option_images: tuple[str, ...] = ()  # each option's picture, absolute (HourVideo's image tasks)
    # the benchmark's own fields its scorer reads, not reported as groups (Video-MME-v2's video_id,
    # group_type, group_structure; the question's place in its group)
    facts: dict[str, str] = field(default_factory=dict, compare=False)
    # the benchmark's other files for this question, by role, relative to the data root: "sound"
    # (Daily-Omni's <id>_audio.wav, AV-SpeakerBench's audio_path), "silent" (AV-SpeakerBench's
    # visual_path)
    media: dict[str, str] = field(default_factory=dict, compare=False)

    @property
    def letters(self) -> list[str]:
        return [chr(ord("A") + i) for i in range(len(self.options))]

    def truth(self) -> dict[str, object]:
        return {"kind": self.kind, "answer": self.answer, "spans": [list(s) for s in self.spans]}


def lettered(options: list[str]) -> tuple[str, ...]:
    """Options as shown: "A. text" (an option that already starts with its letter keeps it)."""
    out = []
    for i, text in enumerate(options):
        text = str(text).strip()
        out.append(text if _LETTER.match(text) else f"{chr(ord('A') + i)}. {text}")
    return tuple(out)


def option_text(option: str) -> str:
    return _LETTER.sub("", option, count=1).strip()


def number(v: object) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)) and math.isfinite(v):
        return float(v)
    if isinstance(v, str):
        try:
            x = float(v)
        except ValueError:
            return None
        return x if math.isfinite(x) else None
    return None


def required_text(v: object, name: str, where: str) -> str:
    if not isinstance(v, str) or not v.strip():
        raise DataError(f"{where}: {name!r} must be a non-empty text; found {v!r:.60}")
    return v.strip()
