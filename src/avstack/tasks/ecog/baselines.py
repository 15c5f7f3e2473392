"""EcoG's offline baselines, no key needed.

`chance` and `deixis` read only what the request shows (`Request.meta["shown"]`, written by the
prompt builder from the same values as the prompt text), so an ablation affects them exactly as
it would a model. Only `oracle` looks at the ground truth.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

import cv2
import numpy as np

from avstack.errors import UsageError
from avstack.prompting.messages import Request
from avstack.runs.sending.runners import Answer, Backend, seeded_rng
from avstack.tasks.ecog.metrics import load_mask

DEICTIC = {
    "this",
    "that",
    "these",
    "those",
    "here",
    "there",
    "it",
    "its",
    "这",
    "那",
    "这个",
    "那个",
    "这里",
    "那里",
    "这儿",
    "那儿",
    "这边",
    "那边",
    "它",
    "放这里",
    "放那里",
}
DEFAULT_SPAN_MS = 5000


def _shown(request: Request) -> dict[str, Any]:
    shown = request.meta.get("shown")
    if not isinstance(shown, dict):
        raise UsageError("this baseline answers EcoG requests (built by avstack.tasks.ecog.prompt)")
    return shown


def seen_frame_times(shown: dict[str, Any]) -> list[int]:
    """Frame times as a model gets them: parsed from the tags, or read off the overlaid pixels."""
    if shown.get("overlay_images"):
        from avstack.prompting.overlay import read

        times = [read(img) for p in shown["overlay_images"] if (img := cv2.imread(p, cv2.IMREAD_COLOR)) is not None]
        return [t for t in times if t is not None]
    return list(shown["frame_ts"])


def seen_span_ms(shown: dict[str, Any]) -> int:
    """How long the clip looks: the last frame time shown, else the last word, else a default."""
    ends = [
        int(w.get("end_time", w.get("begin_time")))
        for w in shown["words"]
        if isinstance(w.get("end_time", w.get("begin_time")), int)
    ]
    return max(seen_frame_times(shown) + ends, default=0) or DEFAULT_SPAN_MS


def _guess(
    rng: random.Random, roles: list[str], objects: list[str], spaces: list[str], times: list[int]
) -> dict[str, object]:
    options, points = [], []
    for role, ts in zip(roles, times):
        pool = (objects if role == "target_object" else spaces) or objects + spaces or ["A"]
        options.append(rng.choice(pool))
        points.append({"type": role, "point": [rng.randint(0, 1000), rng.randint(0, 1000)], "timestamp": ts})
    return {"selected_options": options, "point_list": points}


class Chance(Backend):
    """Uniform random option (of the role's kind), point and time, seeded per clip."""

    name = "chance"

    def __init__(self, seed: int = 0):
        self.seed = seed

    def times(self, shown: dict[str, Any], rng: random.Random) -> list[int]:
        span = seen_span_ms(shown)
        return [rng.randint(0, span) for _ in shown["roles"]]

    def answer(self, request: Request, truth: dict[str, object] | None = None) -> Answer:
        shown = _shown(request)
        times = self.times(shown, seeded_rng(request, self.seed + 1))
        # What/Where from their own stream, so every baseline guesses them alike
        guess = _guess(seeded_rng(request, self.seed), shown["roles"], shown["objects"], shown["spaces"], times)
        return Answer(json.dumps(guess))


class Deixis(Chance):
    """When from the word times of deictic words, in order; What and Where at chance."""

    name = "deixis"

    def times(self, shown: dict[str, Any], rng: random.Random) -> list[int]:
        words = [w for w in shown["words"] if "begin_time" in w]
        deictic = [w for w in words if str(w.get("text", "")).strip(".,!?。，！？").lower() in DEICTIC]
        times = super().times(shown, rng)
        for i, w in enumerate(deictic[: len(times)]):
            # the middle of the word; a format without end times (inline) gives its begin only
            times[i] = (int(w["begin_time"]) + int(w.get("end_time", w["begin_time"]))) // 2
        return times


def _mask_point(mask: dict[str, object], width: int, height: int) -> tuple[int, int] | None:
    """A pixel inside the mask, nearest its centroid (full-frame or bbox-crop masks)."""
    loaded = load_mask(mask, width, height)
    if loaded is None:
        return None
    img, (x1, y1, x2, y2) = loaded
    if img.shape != (height, width):
        img = cv2.resize(img, (max(1, x2 - x1), max(1, y2 - y1)), interpolation=cv2.INTER_NEAREST)
        full = np.zeros((height, width), np.uint8)
        full[y1 : y1 + img.shape[0], x1 : x1 + img.shape[1]] = img[: height - y1, : width - x1]
        img = full
    ys, xs = np.nonzero(img > 128)
    inside = (xs >= x1) & (xs <= x2) & (ys >= y1) & (ys <= y2)
    ys, xs = ys[inside], xs[inside]
    if not len(xs):
        return None
    i = int(np.argmin((xs - xs.mean()) ** 2 + (ys - ys.mean()) ** 2))
    return int(xs[i]), int(ys[i])


def _to_norm(px: int, size: int) -> float:
    return (px + 0.5) * 1000 / size  # the scorer's int(x * size / 1000) gives px back


def oracle_answer(eval_gt: dict[str, Any], width: int, height: int) -> dict[str, Any]:
    """The prediction that scores 100%: each referent's option, a point inside it, its stroke midpoint."""
    options, points = [], []
    for ans in eval_gt.get("answer", []):
        options.append(ans["choice"])
        pt = _mask_point(ans["mask"], width, height) if ans.get("mask") else None
        if pt is not None:
            point = [_to_norm(pt[0], width), _to_norm(pt[1], height)]
        else:
            ys, xs = (
                zip(*ans["points"]) if isinstance(ans["points"][0], list) else ([ans["points"][0]], [ans["points"][1]])
            )
            point = [sum(xs) / len(xs), sum(ys) / len(ys)]
        ts = (ans["stroke_begin_time"] + ans["stroke_end_time"]) // 2
        points.append({"point": point, "timestamp": ts})
    return {"selected_options": options, "point_list": points}


class Oracle(Backend):
    """Answers from the ground truth: the whole pipeline must then score 100%."""

    name = "oracle"

    def answer(self, request: Request | None, truth: dict[str, Any] | None = None) -> Answer:
        if not truth or "eval_gt" not in truth:
            raise UsageError("oracle needs the clip's ground truth (eval_gt, width, height)")
        answer = oracle_answer(truth["eval_gt"], truth["width"], truth["height"])
        if request is not None and request.meta.get("coord_order") == "yx":  # answered in the order asked
            answer["point_list"] = [dict(p, point=p["point"][::-1]) for p in answer["point_list"]]
        return Answer(json.dumps(answer))


def _seed(name: str) -> int:
    return int(name or 0)


BASELINES: dict[str, Callable[[str], Backend]] = {
    "oracle": lambda name: Oracle(),
    "chance": lambda name: Chance(_seed(name)),
    "deixis": lambda name: Deixis(_seed(name)),
}


def baseline(name: str) -> Backend:
    kind, _, arg = name.partition(":")
    return BASELINES[kind](arg)
