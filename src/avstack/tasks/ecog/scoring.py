"""Aggregate EcoG clip scores the way the paper reports them."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from avstack.runs.sending.causes import count_causes
from avstack.tasks.ecog.data import GtClip
from avstack.tasks.ecog.metrics import METRICS, ClipScore, score_clip


@dataclass
class ScoredClip:
    clip: GtClip
    pred: object
    score: ClipScore
    parse_error: str | None = None
    # the request itself failed (the server refused or never answered): no answer to score, which
    # counts as zero in the metrics and is never shown as a plain score (answer_counts)
    request_error: str | None = None


@dataclass
class EcogResult:
    clips: list[ScoredClip]
    missing_predictions: list[str] = field(default_factory=list)
    unknown_predictions: list[str] = field(default_factory=list)
    gt_errors: list[str] = field(default_factory=list)

    def group(self, key: str) -> dict[str, dict[str, float]]:
        buckets: dict[str, list[ScoredClip]] = defaultdict(list)
        for sc in self.clips:
            value = getattr(sc.clip, key)
            if value:
                buckets[value].append(sc)
        return {k: aggregate(v) for k, v in sorted(buckets.items())}

    def per_item(self) -> dict[str, dict[str, object]]:
        """One row per clip: its metrics (0..1) and the columns it can be grouped or clustered by."""
        return {
            sc.clip.video_name: {m: getattr(sc.score, m) for m in METRICS}
            | {
                "task_template": sc.clip.task_template,
                "level": sc.clip.level,
                "scene": sc.clip.scene or "",
                "lang": sc.clip.lang or "",
            }
            for sc in self.clips
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "overall": aggregate(self.clips) | {"acc_eco_referent": micro_eco(self.clips)},
            "per_instruction": self.group("task_template"),
            "per_level": self.group("level"),
            "per_lang": self.group("lang"),
            "per_scene": self.group("scene"),
            "per_clip": [
                {"video_name": sc.clip.video_name, **sc.score.as_dict()}
                | ({"error": sc.score.error} if sc.score.error else {})
                | ({"parse_error": sc.parse_error} if sc.parse_error else {})
                | ({"request_error": sc.request_error} if sc.request_error else {})
                for sc in self.clips
            ],
            "answers": answer_counts(self.clips),
            "counts": {
                "clips": len(self.clips),
                "missing_predictions": len(self.missing_predictions),
                "unknown_predictions": len(self.unknown_predictions),
                "parse_errors": sum(1 for sc in self.clips if sc.parse_error),
                "scoring_errors": sum(1 for sc in self.clips if sc.score.error),
                "gt_errors": len(self.gt_errors),
            },
            "problems": {
                "missing_predictions": self.missing_predictions,
                "unknown_predictions": self.unknown_predictions,
                "gt_errors": self.gt_errors,
            },
        }


def answer_counts(scored: list[ScoredClip]) -> dict[str, object]:
    """How many clips got an answer, an answer that did not parse, or no answer at all (the request
    failed), with the failures' causes: a stack that never got an answer must not read as a model
    that scored zero."""
    causes = count_causes(sc.request_error for sc in scored if sc.request_error)
    failed = sum(causes.values())
    return {
        "clips": len(scored),
        "answered": len(scored) - failed,
        "parse_failures": sum(1 for sc in scored if sc.parse_error and not sc.request_error),
        "request_failures": failed,
        "causes": causes,
    }


def aggregate(scored: list[ScoredClip]) -> dict[str, float]:
    """Means over clips, in clip order (the upstream summation order)."""
    n = len(scored)
    out: dict[str, float] = {m: (sum(getattr(sc.score, m) for sc in scored) / n if n else 0.0) for m in METRICS}
    out["count"] = n
    return out


def micro_eco(scored: list[ScoredClip]) -> float:
    """Referent-level Acc_eco: eco hits over all referents (the paper's wording)."""
    hits = total = 0
    for sc in scored:
        k = len([a for a in sc.clip.eval_gt.get("answer", []) if not isinstance(a, dict) or a.get("choice")])
        total += k
        hits += sum(c and s and t for c, s, t in zip(sc.score.cls, sc.score.s, sc.score.t))
    return hits / total if total else 0.0


def prediction_of(rec: Mapping[str, Any]) -> tuple[object, str | None, str | None]:
    """The prediction dict inside a predictions.jsonl record, its parse error, and the request's
    error (no answer came: a failure of the request, not of the model's answer)."""
    if "prediction" in rec:
        request = rec.get("error") if rec.get("raw") is None else None
        return rec.get("prediction") or {}, rec.get("parse_error"), (str(request) if request else None)
    return rec, None, None


def score(
    clips: Iterable[GtClip], predictions: Iterable[Mapping[str, object]], gt_errors: list[str] | None = None
) -> EcogResult:
    """Score predictions (matched by video_name; the last one wins) against clips."""
    by_name: dict[str, Mapping[str, object]] = {}
    for p in predictions:
        by_name[str(p.get("video_name"))] = p
    result = EcogResult(clips=[], gt_errors=list(gt_errors or []))
    names = set()
    for clip in clips:
        names.add(clip.video_name)
        rec = by_name.get(clip.video_name)
        pred: object
        perr: str | None
        rerr: str | None = None
        if rec is None:
            result.missing_predictions.append(clip.video_name)
            pred, perr = {}, "no prediction"
        else:
            pred, perr, rerr = prediction_of(rec)
        s = score_clip(pred, clip.eval_gt, clip.width, clip.height)
        result.clips.append(ScoredClip(clip, pred, s, perr, rerr))
    result.unknown_predictions = sorted(set(by_name) - names)
    return result
