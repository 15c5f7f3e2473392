"""lmms-eval's `process_results` for a videoqa export (runs.exports writes the task folder): the
question's answer parsed and scored as `avstack run` scores it (score.item_outcome)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from avstack.io import DataError
from avstack.tasks.videoqa.items import Item
from avstack.tasks.videoqa.score import item_outcome

if TYPE_CHECKING:  # a TypedDict: only the annotations read it
    from avstack.runs.exports.rows import LmmsDoc


METRICS = ("correct",)
# Video-MME-v2's own score, over groups of four questions (tasks.videoqa.protocols)
NON_LIN = "non_lin_score"


def metrics_of(items: Sequence[Item]) -> tuple[tuple[str, ...], dict[str, str]]:
    """The export's metrics, and the aggregation of each that is not a mean: Video-MME-v2's
    questions add the Non-Lin Score, aggregated over their groups as score.json's is."""
    if any(it.protocol == "videomme2" for it in items):
        return (*METRICS, NON_LIN), {NON_LIN: "aggregate_non_lin"}
    return METRICS, {}


def answer_of(item: Item) -> dict[str, Any]:
    """What the row keeps of a question to score an answer to it (a Video-MME-v2 question: its
    group's facts too, for the Non-Lin Score)."""
    spans = [list(s) for s in item.spans]
    return (
        {"kind": item.kind, "answer": item.answer, "spans": spans, "options": list(item.options)}
        | ({"protocol": item.protocol} if item.protocol else {})
        | ({"facts": dict(item.facts)} if item.protocol == "videomme2" else {})
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
        facts={str(k): str(v) for k, v in (answer.get("facts") or {}).items()},
    )


def process_results(doc: LmmsDoc, results: list[str]) -> dict[str, object]:
    item = item_of(doc["id"], json.loads(doc["answer"]))
    row = item_outcome(item, {"response": results[0] if results else ""})
    scored: dict[str, object] = {m: row[m] for m in METRICS}
    if item.protocol == "videomme2":  # what the group score needs of this answer
        scored[NON_LIN] = {"facts": item.facts, "correct": row["correct"]}
    return scored


def aggregate_non_lin(items: Sequence[Mapping[str, object]]) -> float:
    """Video-MME-v2's Non-Lin Score over the answers lmms-eval collected, as score.json's."""
    from avstack.tasks.videoqa.protocols import videomme2_summary

    facts: list[dict[str, str]] = []
    correct: list[float | None] = []
    for it in items:
        fact, ok = it.get("facts"), it.get("correct")
        if not isinstance(fact, Mapping):
            raise DataError(f"{NON_LIN}: expected each answer's group facts; found {fact!r:.60}")
        facts.append({str(k): str(v) for k, v in fact.items()})
        correct.append(float(ok) if isinstance(ok, (int, float)) else None)
    score = videomme2_summary(facts, correct)["Non-Lin Score"]
    return float(score) if isinstance(score, (int, float)) else 0.0
