"""The field's definitions: multiple-choice accuracy (unparsed answers counted apart), open answers
by normalized exact match, temporal grounding by IoU (the best-matching true window when there are
several) with R@0.3 / R@0.5 / R@0.7 and mIoU."""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from typing import Any

from avstack.tasks.videoqa.data import Item

THRESHOLDS = (0.3, 0.5, 0.7)


def iou(a: Sequence[float], b: Sequence[float]) -> float:
    """Temporal IoU of two [start, end] spans (0 when they do not overlap)."""
    inter = max(0.0, min(a[1], b[1]) - max(a[0], b[0]))
    union = max(a[1], b[1]) - min(a[0], b[0])
    return inter / union if union > 0 else 0.0


def best_iou(pred: Sequence[float], truths: Sequence[Sequence[float]]) -> float:
    return max((iou(pred, t) for t in truths), default=0.0)


def normalize(text: str) -> str:
    """Lowercase, no punctuation, no articles, single spaces (SQuAD's answer normalization)."""
    text = "".join(c for c in text.lower() if c not in string.punctuation)
    return " ".join(w for w in text.split() if w not in ("a", "an", "the"))


METRIC_FIELDS = ("correct", "iou", *(f"r@{k}" for k in THRESHOLDS))


def _prediction(item: Item, line: Mapping[str, Any] | None) -> tuple[dict[str, Any] | None, bool]:
    """(what was answered, whether it parsed) from a run's prediction line ({"prediction": ...}) or
    another harness's ({"id", "response"} or {"id", "answer"}, parsed here)."""
    if line is None or line.get("error"):
        return None, False
    if isinstance(line.get("prediction"), dict):
        return line["prediction"], not line.get("parse_error")
    from avstack.tasks.videoqa.parse import parse_answer

    raw = line.get("response", line.get("answer"))
    if not isinstance(raw, str):
        return None, False
    pred, err = parse_answer(raw, item)
    return pred, err is None


NLQ_THRESHOLDS = (0.3, 0.5)  # Ego4D NLQ: R@1 and R@5 at IoU > 0.3 and > 0.5 (strict)


def item_outcome(item: Item, line: Mapping[str, Any] | None) -> dict[str, Any]:
    """One item's per-item row: `correct` (mcq, open; R@0.5 for grounding) and, for grounding,
    `iou` and `r@k`, all 0..1 (None where the answer is hidden: scored by the benchmark's server);
    whether an answer came and parsed; the item's group values."""
    pred, parsed = _prediction(item, line)
    row: dict[str, Any] = {"kind": item.kind, "answered": int(pred is not None), "parsed": int(parsed)}
    row |= dict.fromkeys(METRIC_FIELDS)
    if (item.kind == "mcq" and item.answer is None) or (item.kind == "grounding" and not item.spans):
        return row | item.groups  # a hidden answer: nothing to score here
    if item.protocol == "nlq":
        return row | nlq_outcome(item, pred if parsed else None) | item.groups
    if item.kind == "grounding":
        span = (pred or {}).get("span") if parsed else None
        value = best_iou(span, item.spans) if span else 0.0
        row |= {"iou": value, **{f"r@{k}": float(value >= k) for k in THRESHOLDS}, "correct": float(value >= 0.5)}
    elif item.kind == "mcq":
        row["correct"] = float(parsed and (pred or {}).get("answer") == item.answer)
    else:
        said = normalize(str((pred or {}).get("answer", "")))
        row["correct"] = float(parsed and said == normalize(item.answer or ""))
    return row | item.groups


def nlq_outcome(item: Item, pred: Mapping[str, Any] | None) -> dict[str, object]:
    """Ego4D NLQ's measures of one query (evaluate_ego4d_nlq.py): IoU of the top-1 window, and
    whether any of the top 1 / top 5 ranked windows has IoU strictly over 0.3 / 0.5."""
    spans = list((pred or {}).get("spans") or ([pred["span"]] if pred and pred.get("span") else []))[:5]
    ious = [best_iou(s, item.spans) for s in spans]
    top1 = ious[0] if ious else 0.0
    row: dict[str, object] = {"iou": top1, "correct": float(top1 > 0.5), "submitted": int(bool(spans))}
    row |= {f"r@{k}": float(top1 > k) for k in THRESHOLDS}
    for t in NLQ_THRESHOLDS:
        row[f"r1@{t}"] = float(top1 > t)
        row[f"r5@{t}"] = float(any(x > t for x in ious))
    return row


def nlq_summary(rows: Sequence[Mapping[str, object]]) -> dict[str, object]:
    """R@1 and R@5 at IoU > 0.3 / 0.5, mIoU and the mean R@1, over every query (a query without
    a prediction is a miss) and, as the official script averages, over the queries predicted."""
    pct = lambda xs: round(100 * sum(xs) / len(xs), 4) if xs else 0.0  # noqa: E731

    def measures(of: Sequence[Mapping[str, object]]) -> Mapping[str, object]:
        out = {f"R@{k} IoU>{t}": pct([r[f"r{k}@{t}"] for r in of]) for k in (1, 5) for t in NLQ_THRESHOLDS}
        out["mIoU"] = pct([r["iou"] for r in of])
        out["mean R@1"] = round((out["R@1 IoU>0.3"] + out["R@1 IoU>0.5"]) / 2, 4)
        return out | {"n": len(of)}

    submitted = [r for r in rows if r.get("submitted")]
    return {
        "all_queries": measures(rows),
        "submitted_only": measures(submitted),
        "note": f"all_queries counts a query without a prediction as a miss; the official script "
        f"(evaluate_ego4d_nlq.py) averages over the {len(submitted)} of {len(rows)} queries predicted",
    }


def score(items: Sequence[Item], predictions: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Scores over `items` (percent), per kind and per group value, counts apart; `per_item` rows
    (every row with the same columns)."""
    by_id = {str(p.get("id")): p for p in predictions if isinstance(p, Mapping)}
    per_item = {it.id: item_outcome(it, by_id.get(it.id)) for it in items}
    columns = list(dict.fromkeys(k for r in per_item.values() for k in r))  # every row the same columns
    per_item = {i: {c: r.get(c) for c in columns} for i, r in per_item.items()}
    groups = sorted({g for it in items for g in it.groups})
    out: dict[str, Any] = {"per_item": per_item, "by_kind": {}, "by_group": {}}
    for kind in ("mcq", "open", "grounding"):
        rows = [r for r in per_item.values() if r["kind"] == kind]
        if rows:
            out["by_kind"][kind] = summary(rows)
    for g in groups:
        for value in sorted({str(r[g]) for r in per_item.values() if r.get(g) is not None}):
            out["by_group"][f"{g}={value}"] = summary([r for r in per_item.values() if str(r.get(g)) == value])
    out["overall"] = summary(list(per_item.values()))
    nlq = [per_item[it.id] for it in items if it.protocol == "nlq" and per_item[it.id]["correct"] is not None]
    if nlq:
        out["nlq"] = nlq_summary(nlq)
    out |= protocol_sections(items, per_item)
    hidden = sum(1 for r in per_item.values() if r["correct"] is None)
    if any(it.protocol == "egoschema" for it in items):
        out["egoschema"] = {
            "scored": "the public 500-question subset (subset_answers.json), reported as such: not EgoSchema's "
            "full-set score, which only the authors' server gives (egoschema_submission.json)",
            "subset_n": sum(1 for it in items if it.protocol == "egoschema" and it.answer is not None),
        }
    out["counts"] = {
        "items": len(items),
        "missing_predictions": sum(1 for it in items if it.id not in by_id),
        "failed": sum(1 for it in items if it.id in by_id and by_id[it.id].get("error")),
        "unparsed": sum(1 for r in per_item.values() if r["answered"] and not r["parsed"]),
        "hidden_answers": hidden,  # answered and submitted, scored only by the benchmark's server
    }
    return out


def protocol_sections(items: Sequence[Item], per_item: Mapping[str, Mapping[str, Any]]) -> dict[str, object]:
    """The scores a benchmark's own code reports beside accuracy (tasks.videoqa.protocols)."""
    from avstack.tasks.videoqa.protocols import dailyomni_summary, videomme2_summary

    out: dict[str, object] = {}
    mme2 = [it for it in items if it.protocol == "videomme2"]
    if mme2:
        out["videomme2"] = videomme2_summary([it.facts for it in mme2], [per_item[it.id]["correct"] for it in mme2])
    daily = [per_item[it.id] for it in items if it.protocol == "dailyomni"]
    if daily:
        out["dailyomni"] = dailyomni_summary(daily)
    return out


def summary(rows: Sequence[Mapping[str, object]]) -> dict[str, float]:
    """Percent means: accuracy over all rows (`correct`: R@0.5 for grounding rows) and, where
    there are grounding rows, mIoU and R@k over them."""
    pct = lambda xs: round(100 * sum(xs) / len(xs), 4) if xs else 0.0  # noqa: E731
    rows = [r for r in rows if r["correct"] is not None]  # a hidden answer is not scored here
    out = {"n": len(rows), "accuracy": pct([r["correct"] for r in rows])}
    grounding = [r for r in rows if r["kind"] == "grounding"]
    if grounding:
        out["miou"] = pct([r["iou"] for r in grounding])
        out |= {f"r@{k}": pct([r[f"r@{k}"] for r in grounding]) for k in THRESHOLDS}
    return out
