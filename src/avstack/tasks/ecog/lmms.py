"""EcoG's hooks for `avstack export --to lmms-eval` (the one writer, runs.exports, writes the task
folder: `avstack_ecog_<stack>.yaml` and a `utils.py` whose doc_to_messages, doc_to_visual,
doc_to_text and aggregation are every task's, runs.lmms_hooks, and whose process_results is this:
avstack's own parser and scorer, so lmms-eval reports the numbers `avstack run` reports. A chat
model (lmms-eval's `openai`) gets `doc_to_messages`: the request `avstack run` sends, part by part
(each frame after its `<timestamp_ms>N` tag, the system turn apart); a simple model gets the flat
`doc_to_text` with `<image>` where each frame goes.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from avstack.runs import lmms_hooks as hooks
from avstack.tasks.ecog.metrics import score_clip
from avstack.tasks.ecog.parse import parse_answer

if TYPE_CHECKING:  # a TypedDict: only the annotations read it
    from avstack.runs.exports.rows import LmmsDoc


# --------------------------------------------------------------------------- the hooks


# the request part by part, from the row: the same for every task's export (runs.lmms_hooks)
doc_to_visual = hooks.doc_to_visual
doc_to_messages = hooks.doc_to_messages
doc_to_text = hooks.doc_to_text
aggregate_mean = hooks.aggregate_mean


def process_results(doc: LmmsDoc, results: list[str]) -> dict[str, float]:
    """avstack's parse and score of the model's answer, per metric."""
    pred, _ = parse_answer(results[0] if results else "", "xy")
    # the clip's size: in the row's extra (one schema for every task); a column in older exports
    size = doc if doc.get("width") is not None else json.loads(doc.get("extra") or "{}")
    s = score_clip(pred, json.loads(doc["answer"]), int(size["width"]), int(size["height"]))
    return s.as_dict()
