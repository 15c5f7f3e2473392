"""Several questions in one request (`--pack`, a `@packed` stack): all of a video's questions asked
at once, as MMBench-Video's pack mode and HourVideo's own Gemini script do, and each answer parsed
back to its question. The video's frames, words and sound are sent once instead of once a question,
which the plan shows; packing can change answers, so it is an axis of the ablation with its delta.

The engine asks packs (`RUN/packs/`: their requests, raw answers and usage, resumable as any run);
each question's line in `RUN/predictions.jsonl` is then written from its pack's answer (the pack's
usage on its first question only, so sums stay right), so scoring and reports read a packed run as
any other. A question with image options or its own cut of the video (HourVideo's predictive ones)
is asked alone: its request differs from its video's others."""

from __future__ import annotations

import json
from typing import Any

from avstack.manifest import ClipRecord
from avstack.tasks.videoqa.data import Item
from avstack.tasks.videoqa.parse import json_object, parse_answer

PACK_PREFIX = "pack:"


def pack_groups(pairs: list[tuple[Item, ClipRecord | None]]) -> list[list[tuple[Item, ClipRecord | None]]]:
    """The questions in packs: one per prepared video (in the order first asked), a question that
    needs a request of its own (image options, a cut of the video; an unprepared video) alone."""
    groups: dict[str, list[tuple[Item, ClipRecord | None]]] = {}
    for item, rec in pairs:
        alone = rec is None or not rec.ok or item.option_images or item.until_s is not None
        groups.setdefault(f"alone:{item.id}" if alone else f"video:{item.video}", []).append((item, rec))
    return list(groups.values())


def pack_id(items: list[Item]) -> str:
    return PACK_PREFIX + (items[0].id if len(items) == 1 else f"{items[0].video}#{len(items)}")


def pack_truth(items: list[Item]) -> dict[str, object]:
    """What only an oracle may see: every question's truth, by its number in the pack."""
    return {"kind": "packed", "items": {str(n): it.truth() for n, it in enumerate(items, 1)}}


def parse_pack(text: str, items: list[Item]) -> tuple[dict[str, object], str | None]:
    """Each question's prediction from {"answers": {"1": ..., "2": ...}} (a number's value told
    as that question asks: a letter, [s, e], [[s, e], ...], a text); a question left out is unparsed."""
    obj = json_object(text)
    answers = obj.get("answers") if isinstance(obj, dict) else None
    if not isinstance(answers, dict):
        return {"answers": {}}, 'no {"answers": {...}} object in the answer'
    out: dict[str, tuple[dict[str, object], str | None]] = {}
    for n, item in enumerate(items, 1):
        value = answers.get(str(n), answers.get(n))
        if value is None:
            continue
        out[item.id] = parse_answer(_as_text(value, item), item)
    return {"answers": {k: {"prediction": p, "parse_error": e} for k, (p, e) in out.items()}}, None


def _as_text(value: object, item: Item) -> str:
    """A packed answer's value as the single-question parser reads it."""
    if item.kind == "grounding" and isinstance(value, list):
        if value and all(isinstance(w, list) for w in value):
            return json.dumps({"windows": value})
        if len(value) == 2:
            return json.dumps({"start": value[0], "end": value[1]})
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return json.dumps({"answer": str(value)}) if item.kind != "grounding" else str(value)


def unpacked(pack: dict[str, Any], items: list[Item], id_field: str = "id") -> list[dict[str, object]]:
    """Each question's prediction line from its pack's line."""
    answers = (pack.get("prediction") or {}).get("answers") or {}
    lines = []
    for k, item in enumerate(items):
        got = answers.get(item.id)
        error = pack.get("error")
        parse_error = pack.get("parse_error") if got is None else got.get("parse_error")
        if got is None and error is None and pack.get("raw") is not None:
            parse_error = parse_error or f"question {k + 1} of the pack has no answer"
        lines.append({
            id_field: item.id,
            "raw": pack.get("raw"),
            "prediction": (got or {}).get("prediction") or {},
            "parse_error": parse_error,
            "error": error,
            "latency_s": pack.get("latency_s"),
            "usage": pack.get("usage") if k == 0 else {},  # the pack's cost, counted once
            "attempts": pack.get("attempts"),
            "cached": pack.get("cached"),
            "stack": pack.get("stack"),
            "kind": item.kind,
            "pack": pack.get("pack"),
        })  # fmt: skip
    return lines
