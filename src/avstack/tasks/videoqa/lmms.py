"""lmms-eval's `process_results` for a videoqa export (runs.exports writes the task folder): the
question's answer parsed and scored as `avstack run` scores it (score.item_outcome)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from avstack.tasks.videoqa.items import Item
from avstack.tasks.videoqa.score import item_outcome

if TYPE_CHECKING:  # a TypedDict: only the annotations read it
    from avstack.runs.exports.rows import LmmsDoc


METRICS = ("correct",)


def answer_of(item: Item) -> dict[str, Any]:
    """What the row keeps of a question to score an answer to it."""
    spans = [list(s) for s in item.spans]
    return {"kind": item.kind, "answer": item.answer, "spans": spans, "options": list(item.options)} | (
        {"protocol": item.protocol} if item.protocol else {}
    )


def item_of(doc_id: str, answer: dict[str, Any]) -> Item:
    return Item(
        id=doc_id,
        video="",
        question="",
        kind=answer["kind"],
        options=tuple(answer.get("options") or ()),
        answer=answer.get("answer"),
        spans=tuple((float(a), float(b)) for a, b in answer.get("spans") or ()),
        protocol=answer.get("protocol", ""),
    )


def process_results(doc: LmmsDoc, results: list[str]) -> dict[str, float | None]:
    item = item_of(doc["id"], json.loads(doc["answer"]))
    row = item_outcome(item, {"response": results[0] if results else ""})
    return {m: row[m] for m in METRICS}
