"""The lmms-eval hooks every avstack export shares (runs.exports writes a task folder whose
utils.py calls these, and the task's own `process_results`): the request as `avstack run` sends
it, part by part, from a generic export row."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # a TypedDict: only the annotations read it
    from avstack.runs.exports.rows import LmmsDoc


def doc_to_visual(doc: LmmsDoc) -> Sequence[object]:
    """The row's images in order (PIL images, as `datasets` decodes the Parquet column)."""
    return [img.convert("RGB") if hasattr(img, "convert") else img for img in doc["images"]]


def doc_to_messages(doc: LmmsDoc) -> Sequence[Mapping[str, object]]:
    """The chat as `avstack run` sends it (lmms-eval's chat models read this): the system turn,
    then the user turn part by part, each frame after its own time tag."""
    images = iter(doc_to_visual(doc))
    content: list[Mapping[str, object]] = []
    for part in json.loads(doc["parts"]):
        if part["type"] == "text":
            content.append({"type": "text", "text": part["text"]})
        elif part["type"] == "image":
            content.append({"type": "image", "url": next(images)})
        else:  # a video or sound: the Parquet row carries its path, not its bytes
            content.append({"type": part["type"], "url": doc["video"] if part["type"] == "video" else doc["audio"]})
    system = [{"role": "system", "content": [{"type": "text", "text": doc["system"]}]}] if doc["system"] else []
    return [*system, {"role": "user", "content": content}]


def doc_to_text(doc: LmmsDoc, kwargs: dict[str, object] | None = None) -> str:
    """The system prompt, then the user turn with `<image>` where each frame goes: lmms-eval has
    no system turn per document."""
    kwargs = kwargs or {}
    system = f"{doc['system']}\n\n" if doc["system"] else ""
    return f"{kwargs.get('pre_prompt', '')}{system}{doc['question']}{kwargs.get('post_prompt', '')}"


def aggregate_mean(items: list[float | None]) -> float:
    """The mean over the items that have a score (a hidden answer's is None)."""
    scored = [x for x in items if x is not None]
    return sum(scored) / len(scored) if scored else 0.0
