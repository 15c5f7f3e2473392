"""Reading a model's answer: a letter (multiple choice), a text (open), a span in seconds
(grounding) told in any of the time formats the stacks use."""

from __future__ import annotations

import json
import re
from typing import Any

from avstack.tasks.videoqa.data import Item, option_text

# a time as the stacks tell it, or as a model writes it: <timestamp_ms>1234, 1234 ms, <t=1.234s>,
# <1.2 seconds>, 00:01.234 / 1:02, 1.5 s, 12.5
_TIME = re.compile(
    r"<timestamp_ms>(?P<tms>\d+)"
    r"|(?P<ms>\d+(?:\.\d+)?)\s*ms\b"
    r"|<t=(?P<ts>\d+(?:\.\d+)?)s>"
    r"|<(?P<qw>\d+(?:\.\d+)?) seconds>"
    r"|(?P<mm>\d+):(?P<ss>\d{2}(?:\.\d+)?)"
    r"|(?P<sec>\d+(?:\.\d+)?)\s*(?:s|sec|secs|seconds?)?\b"
)


def _seconds(m: re.Match[str]) -> float:
    g = m.groupdict()
    if g["tms"] is not None:
        return int(g["tms"]) / 1000
    if g["ms"] is not None:
        return float(g["ms"]) / 1000
    if g["mm"] is not None:
        return int(g["mm"]) * 60 + float(g["ss"])
    return float(g["ts"] or g["qw"] or g["sec"])


def json_object(text: str) -> object:
    m = re.search(r"\{.*\}", text, re.S)
    if not m:
        return None
    try:
        return json.loads(m.group(0))
    except json.JSONDecodeError:
        return None


def parse_span(text: str) -> tuple[float, float] | None:
    """(start, end) in seconds: from {"start": .., "end": ..} or the first two times in the text."""
    obj = json_object(text)
    if isinstance(obj, dict) and "start" in obj and "end" in obj:
        times = [_seconds(m) for key in ("start", "end") for m in [_TIME.search(str(obj[key]))] if m]
    else:
        times = [_seconds(m) for m in _TIME.finditer(text)]
    if len(times) < 2:
        return None
    a, b = times[0], times[1]
    return (a, b) if b >= a else (b, a)


def parse_spans(text: str, most: int = 5) -> list[tuple[float, float]]:
    """Ranked windows, best first: {"windows": [[s, e], ...]}, else the one window parse_span reads."""
    obj = json_object(text)
    windows = obj.get("windows") if isinstance(obj, dict) else None
    out = []
    if isinstance(windows, list):
        for w in windows[:most]:
            times = [_seconds(m) for v in (w if isinstance(w, list) else [w]) for m in [_TIME.search(str(v))] if m]
            if len(times) >= 2:
                out.append((min(times[:2]), max(times[:2])))
    if not out:
        one = parse_span(text)
        out = [one] if one else []
    return out


def parse_letter(text: str, item: Item) -> str | None:
    """The option chosen: {"answer": "B"}, "B", "(B)", "Answer: B", or an option's text."""
    obj = json_object(text)
    if isinstance(obj, dict) and isinstance(obj.get("answer"), str):
        text = obj["answer"]
    letters = item.letters
    m = re.search(r"(?:answer\s*(?:is|:)?\s*)?\(?\b([A-Z])\b\)?", text.strip())
    if m and m.group(1) in letters:
        return m.group(1)
    low = text.strip().lower()
    hits = [lt for lt, o in zip(letters, item.options) if option_text(o).lower() and option_text(o).lower() in low]
    return hits[0] if len(hits) == 1 else None


def parse_open(text: str) -> str:
    obj = json_object(text)
    if isinstance(obj, dict) and isinstance(obj.get("answer"), str):
        return obj["answer"]
    return text.strip()


def parse_answer(text: str, item: Item) -> tuple[dict[str, Any], str | None]:
    """(prediction fields, parse error or None)."""
    if item.kind == "mcq":
        from avstack.tasks.videoqa.protocols import EXTRACT

        own = EXTRACT.get(item.protocol)  # the benchmark's own extraction, read from its official code
        letter = own(text, item.letters) if own else parse_letter(text, item)
        return {"answer": letter}, None if letter else "no option letter in the answer"
    if item.kind == "grounding" and item.protocol == "nlq":  # ranked windows: R@5 reads the top five
        spans = parse_spans(text)
        found = {"span": list(spans[0]) if spans else None, "spans": [list(w) for w in spans]}
        return found, None if spans else "no window in the answer"
    if item.kind == "grounding":
        span = parse_span(text)
        return {"span": list(span) if span else None}, None if span else "no two times in the answer"
    return {"answer": parse_open(text)}, None
