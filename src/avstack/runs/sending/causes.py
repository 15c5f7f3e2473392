"""Why requests failed, as the console and the reports say it: a failure as one cause shared by
the items it hit (without their ids), cut at a word with the back-end's advice kept, and the
causes counted, the commonest first. The records keep each whole message."""

from __future__ import annotations

import re
from collections.abc import Iterable

CAUSE_CHARS = 160  # a cause as the console shows it; the record keeps the whole message


def cause_of(error: str) -> str:
    """A request failure as one cause shared by the items it hit: the message without the item's
    own ids and numbers past the status, cut to CAUSE_CHARS at a word (shortened)."""
    return shortened(re.sub(r"\b(req|chatcmpl|id)[-_][\w-]+", "…", str(error)), CAUSE_CHARS)


def shortened(text: str, limit: int) -> str:
    """`text` in at most `limit` characters, cut at a word; a closing parenthesis (the advice a
    back-end adds: "(the request's sound was sent as WAV ...; --audio-format pcm16 sends 16-bit
    PCM)") is kept whole, the cut made before it."""
    if len(text) <= limit:
        return text
    at = _closing_group(text)
    tail = " " + text[at:] if 0 < at and len(text) - at <= limit * 2 // 3 else ""
    body = text[:at] if tail else text
    room = limit - len(tail) - 2  # the " …" that says something was cut
    head = body[: room + 1]
    head = head[: head.rfind(" ")] if " " in head else head[:room]
    return head.rstrip(" ,;:") + " …" + tail


def _closing_group(text: str) -> int:
    """Where the parenthesis that closes `text` opens (nested ones inside it counted), or -1."""
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(text[i], 0)
        if depth == 0:
            return i if text.endswith(")") and i < len(text) - 1 else -1
    return -1


def count_causes(errors: Iterable[str]) -> dict[str, int]:
    """Request failures grouped by cause (cause_of), the commonest first."""
    causes: dict[str, int] = {}
    for error in errors:
        cause = cause_of(error)
        causes[cause] = causes.get(cause, 0) + 1
    return dict(sorted(causes.items(), key=lambda kv: -kv[1]))
