"""The paper's analyses over scored runs: bottlenecks, temporal calibration, object size."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import numpy as np

from avstack.tasks.ecog.data import LEVEL_OF, referents
from avstack.tasks.ecog.metrics import load_mask
from avstack.tasks.ecog.scoring import EcogResult

BOTTLENECKS = ("only_what", "only_where", "only_when", "joint")
SIZE_BINS = (("<0.5%", 0.0, 0.005), ("0.5-2%", 0.005, 0.02), (">=2%", 0.02, 2.0))


def bottlenecks(result: EcogResult) -> dict[str, int]:
    """Failed referents by which of What / Where / When failed."""
    counts: Counter[str] = Counter({k: 0 for k in BOTTLENECKS})
    for sc in result.clips:
        if sc.score.error or not sc.score.cls:
            continue
        for c, s, t in zip(sc.score.cls, sc.score.s, sc.score.t):
            failed = [name for name, ok in (("what", c), ("where", s), ("when", t)) if not ok]
            if len(failed) == 1:
                counts[f"only_{failed[0]}"] += 1
            elif failed:
                counts["joint"] += 1
    return dict(counts)


def timestamp_errors(result: EcogResult) -> list[tuple[int, float]]:
    """(stroke index, predicted - stroke midpoint in ms) for every numeric predicted timestamp."""
    out = []
    for sc in result.clips:
        points = sc.pred.get("point_list") if isinstance(sc.pred, dict) else None
        answers = referents(sc.clip.eval_gt)
        if not isinstance(points, list):
            continue
        for k, (p, a) in enumerate(zip(points, answers)):
            ts = p.get("timestamp") if isinstance(p, dict) else None
            if isinstance(ts, (int, float)) and not isinstance(ts, bool) and np.isfinite(ts):
                mid = (a["stroke_begin_time"] + a["stroke_end_time"]) / 2
                out.append((k, float(ts) - mid))
    return out


def calibration(result: EcogResult) -> dict[str, dict[str, float]]:
    by_k: dict[str, list[float]] = defaultdict(list)
    for k, err in timestamp_errors(result):
        by_k["all"].append(err)
        by_k[f"stroke {k + 1}"].append(err)
    return {
        key: {
            "n": len(v),
            "mean_ms": float(np.mean(v)),
            "within_500": float(np.mean(np.abs(v) <= 500)),
            "within_1000": float(np.mean(np.abs(v) <= 1000)),
        }
        for key, v in sorted(by_k.items())
    }


def mask_area_share(ans: dict[str, object], width: int, height: int) -> float | None:
    loaded = load_mask(ans.get("mask") or {}, width, height)
    if loaded is None:
        return None
    img, (x1, y1, x2, y2) = loaded
    on = float((img > 128).sum())
    if img.shape != (height, width):  # a crop scaled into the bbox
        on *= max(1, (x2 - x1) * (y2 - y1)) / img.size
    return on / (width * height)


def by_object_size(result: EcogResult) -> dict[str, dict[str, float]]:
    """Referent-level eco accuracy by the object's mask area share."""
    bins: dict[str, list[bool]] = {name: [] for name, _, _ in SIZE_BINS}
    for sc in result.clips:
        if sc.score.error or not sc.score.cls:
            continue
        answers = referents(sc.clip.eval_gt)
        for k, ans in enumerate(answers):
            share = mask_area_share(ans, sc.clip.width, sc.clip.height) if ans["choice"].isupper() else None
            if share is None or k >= len(sc.score.cls):
                continue
            name = next(n for n, lo, hi in SIZE_BINS if lo <= share < hi)
            bins[name].append(sc.score.cls[k] and sc.score.s[k] and sc.score.t[k])
    return {n: {"n": len(v), "acc_eco": float(np.mean(v)) if v else 0.0} for n, v in bins.items()}


def level_table(score_json: dict[str, Any]) -> dict[str, dict[str, float]]:
    levels = {lvl: score_json["per_level"].get(lvl) for lvl in sorted(set(LEVEL_OF.values()))}
    return {k: v for k, v in levels.items() if v} | {"overall": score_json["overall"]}
