"""EgoGapBench metrics (paper section 4.1): accuracy by group, n4 error analysis, CIs, rank agreement."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from avstack.errors import UsageError
from avstack.tasks.egogap.data import MOTOR, OFF_VANTAGE, Item
from avstack.tasks.egogap.parse import parse_letter

GROUPS = ("overall", "n3", "n4", "direct", "indirect")
BOOTSTRAP = 2000


@dataclass(frozen=True)
class Graded:
    uid: str
    kind: str
    cand_kind: str
    letter: str | None
    label: str | None  # what the chosen option was: correct, motor_a, composition_off, ...
    error: str | None  # why no letter could be read

    @property
    def correct(self) -> bool:
        return self.label == "correct"


def _answer_text(pred: dict[str, Any]) -> str | None:
    for key in ("raw", "response", "text", "output"):
        if isinstance(pred.get(key), str):
            return str(pred[key])
    answer = pred.get("answer", (pred.get("prediction") or {}).get("answer"))
    return json.dumps({"answer": answer}) if answer is not None else None


def grade(item: Item, pred: dict[str, Any] | None) -> Graded:
    """One item. A prediction may carry its own `labels` (letters as shown, after shuffles/ablations)."""
    if pred is None:
        return Graded(item.uid, item.kind, item.cand_kind, None, None, "missing prediction")
    labels = pred.get("labels") or {let: lab for let, _, lab in item.options}
    text = _answer_text(pred)
    if text is None and pred.get("error"):  # never answered: a bad input or an API failure
        return Graded(item.uid, item.kind, item.cand_kind, None, None, f"failed: {pred['error']}")
    letter, error = parse_letter(text, sorted(labels))
    kind = pred.get("kind") or item.kind
    return Graded(item.uid, kind, item.cand_kind, letter, labels.get(letter) if letter else None, error)


def bootstrap_ci(values: list[bool], seed: int = 0, n: int = BOOTSTRAP) -> tuple[float, float]:
    """95% percentile bootstrap interval of a mean of 0/1 outcomes."""
    if not values:
        return math.nan, math.nan
    arr = np.asarray(values, dtype=np.float64)
    rng = np.random.default_rng(seed)
    means = arr[rng.integers(0, len(arr), size=(n, len(arr)))].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def _group(graded: list[Graded], seed: int) -> dict[str, object]:
    hits = [g.correct for g in graded]
    lo, hi = bootstrap_ci(hits, seed)
    return {
        "n": len(hits),
        "correct": sum(hits),
        "accuracy": sum(hits) / len(hits) if hits else math.nan,
        "ci95": [lo, hi],
    }


def _members(graded: list[Graded], group: str) -> list[Graded]:
    if group == "overall":
        return graded
    if group in ("n3", "n4"):
        return [g for g in graded if g.kind == f"mcq{group[1]}"]
    return [g for g in graded if g.cand_kind == group]


def _rate(graded: list[Graded], labels: Iterable[str]) -> float:
    wanted = set(labels)
    return sum(g.label in wanted for g in graded) / len(graded) if graded else math.nan


def score(items: list[Item], preds: list[dict[str, object]], seed: int = 0) -> dict[str, Any]:
    """Scores of predictions (matched by `uid`) against items; items without one count as wrong."""
    by_uid = {str(p.get("uid")): p for p in preds if isinstance(p, dict)}
    graded = [grade(it, by_uid.get(it.uid)) for it in items]
    n4 = _members(graded, "n4")
    known = {it.uid for it in items}
    return {
        "groups": {g: _group(_members(graded, g), seed) for g in GROUPS},
        "n4_errors": {
            "n": len(n4),
            "motor_intrusion_rate": _rate(n4, MOTOR),
            "off_vantage_rate": _rate(n4, (OFF_VANTAGE,)),
        },
        "motor_intrusion_rate_all": _rate(graded, MOTOR),
        "counts": {
            "items": len(items),
            "missing_predictions": sum(g.error == "missing prediction" for g in graded),
            "failed": sum(str(g.error).startswith("failed") for g in graded),
            "unparsed": sum(
                g.letter is None and g.error != "missing prediction" and not str(g.error).startswith("failed")
                for g in graded
            ),
            "unknown_uids": len(set(by_uid) - known),
        },
        "items": [g.__dict__ | {"correct": g.correct} for g in graded],
    }


def _ranks(values: list[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1  # ties share their mean rank
        i = j + 1
    return ranks


def spearman(x: list[float], y: list[float]) -> float:
    """Spearman's rho with average ranks for ties; NaN when undefined (n < 2 or a constant side)."""
    if len(x) != len(y):
        raise UsageError(f"spearman needs equal lengths; found {len(x)} and {len(y)}")
    if len(x) < 2:
        return math.nan
    rx, ry = np.asarray(_ranks(x)), np.asarray(_ranks(y))
    if rx.std() == 0 or ry.std() == 0:
        return math.nan
    return float(np.corrcoef(rx, ry)[0, 1])
