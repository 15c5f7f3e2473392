"""lmms-eval's `process_results` for an EgoGap export (runs.exports writes the task folder): the
letter parsed as `avstack run` parses it, right or wrong."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from avstack.tasks.egogap.parse import parse_letter

if TYPE_CHECKING:  # a TypedDict: only the annotations read it
    from avstack.runs.exports.rows import LmmsDoc


METRICS = ("accuracy",)


def process_results(doc: LmmsDoc, results: list[str]) -> dict[str, float]:
    truth = json.loads(doc["answer"])
    letter, _ = parse_letter(results[0] if results else "", truth["letters"])
    return {"accuracy": float(letter is not None and letter == truth["correct_letter"])}
