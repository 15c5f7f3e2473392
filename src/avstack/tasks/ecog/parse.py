"""Model answer text -> EcoG prediction dict. Never raises."""

from __future__ import annotations

import json
import re

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S | re.I)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")


def _candidates(text: str) -> list[str]:
    out = [m.group(1) for m in _FENCE.finditer(text)]
    start, end = text.find("{"), text.rfind("}")
    if start != -1 and end > start:
        out.append(text[start : end + 1])
    out.append(text)
    return out


def extract_json(text: str) -> object:
    """The first JSON object in the text: code fences, leading prose, trailing commas allowed."""
    last_error = "no JSON object found"
    for cand in _candidates(text):
        for attempt in (cand, _TRAILING_COMMA.sub(r"\1", cand)):
            try:
                return json.loads(attempt)
            except json.JSONDecodeError as exc:
                last_error = f"{exc.msg} at char {exc.pos}"
    raise ValueError(f"answer is not JSON ({last_error}): {text[:80]!r}")


def _swap(point: object) -> object:
    if isinstance(point, list) and point and isinstance(point[0], list):
        return [_swap(p) for p in point]
    if isinstance(point, list) and len(point) == 2:
        return [point[1], point[0]]
    return point


def parse_answer(text: str | None, coord_order: str = "xy") -> tuple[dict[str, object], str | None]:
    """(prediction, parse error). `[y, x]` answers are turned to `[x, y]` when coord_order is yx.

    The prediction keeps the model's own values (a list of points stays a list:
    the scorer averages it, as upstream does), so scoring sees what the model said.
    """
    if text is None or not str(text).strip():
        return {}, "empty answer"
    try:
        data = extract_json(str(text))
    except ValueError as exc:
        return {}, str(exc)
    if not isinstance(data, dict):
        return {}, f"expected a JSON object, found {type(data).__name__}"
    pred = {k: data[k] for k in ("selected_options", "point_list", "explicit_command", "reasoning") if k in data}
    if coord_order == "yx" and isinstance(pred.get("point_list"), list):
        pred["point_list"] = [
            dict(p, point=_swap(p.get("point"))) if isinstance(p, dict) else p for p in pred["point_list"]
        ]
    missing = [k for k in ("selected_options", "point_list") if k not in pred]
    return pred, (f"answer lacks {', '.join(missing)}" if missing else None)
