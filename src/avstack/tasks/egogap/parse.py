"""Reading the letter out of a model's answer: lenient about wrapping, strict about the letter."""

from __future__ import annotations

import json
import re

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S | re.I)
_ANSWER_FIELD = re.compile(r'"answer"\s*:\s*"([^"]*)"', re.I)
_BARE = re.compile(r"^\s*\(?([A-Z])\)?[.):]?\s*$")
_LEADING_LETTER = re.compile(r"^\(?([A-Z])(?:[.):]\s|\)?$)")


def _json_objects(text: str) -> list[dict[str, object]]:
    """Every top-level {...} in the text that parses (trailing commas forgiven)."""
    found, depth, start = [], 0, -1
    for i, ch in enumerate(text):
        if ch == "{":
            depth, start = depth + 1, i if depth == 0 else start
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                chunk = re.sub(r",\s*([}\]])", r"\1", text[start : i + 1])
                try:
                    obj = json.loads(chunk)
                except json.JSONDecodeError:
                    continue
                if isinstance(obj, dict):
                    found.append(obj)
    return found


def _letter(value: object, letters: list[str]) -> str | None:
    """'B', ' B ', '(B)', 'B)', 'B. As the umpire...' -> 'B'; anything else -> None."""
    if not isinstance(value, str):
        return None
    m = _LEADING_LETTER.match(value.strip())
    return m.group(1) if m and m.group(1) in letters else None


def parse_letter(text: str | None, letters: list[str]) -> tuple[str | None, str | None]:
    """(letter, error). The letter must be one of the item's own letters."""
    if text is None:
        return None, "no answer"
    body = "\n".join(_FENCE.findall(text)) or text
    for obj in _json_objects(body):
        if "answer" in obj:
            got = _letter(obj["answer"], letters)
            return (got, None) if got else (None, f"answer {obj['answer']!r} is not one of {', '.join(letters)}")
    m = _ANSWER_FIELD.search(body)  # half-JSON, e.g. cut off after the answer
    if m:
        got = _letter(m.group(1), letters)
        return (got, None) if got else (None, f"answer {m.group(1)!r} is not one of {', '.join(letters)}")
    m = _BARE.match(body)
    if m and m.group(1) in letters:
        return m.group(1), None
    return None, f"no JSON answer found in {text[:80]!r}"
