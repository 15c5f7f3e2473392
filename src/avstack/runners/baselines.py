"""Offline baselines that need no key.

`chance` and `deixis` read only what the rendered request carries, parsed as a
model would see it, so an ablation affects them exactly as it would a model.
Only `oracle` looks at the ground truth.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from typing import Any

import cv2
import numpy as np

from ..messages import Request, Text
from ..tasks.ecog.metrics import load_mask
from .base import Answer

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
_OPTION = re.compile(r"^([A-Za-z])\.\s")
_TS = re.compile(r"^<timestamp_ms>(\d+)$")
_ASR = re.compile(r"<asr_data>\n(.*?)\n", re.S)
_MCQ_OPTION = re.compile(r"^([A-H])\) ", re.M)
DEFAULT_SPAN_MS = 5000


def _rng(request: Request, seed: int) -> random.Random:
    key = f"{seed}:{request.meta.get('clip_id', request.system)}"
    return random.Random(int(hashlib.sha256(key.encode()).hexdigest()[:16], 16))


def seen_mcq_letters(request: Request) -> list[str]:
    """Letters of a multiple-choice prompt ("A) ..." lines), as a model reads them; [] when none."""
    if request.system:
        return []  # EcoG requests carry their option list in the system prompt
    text = "\n".join(p.text for p in request.parts if isinstance(p, Text))
    return list(dict.fromkeys(_MCQ_OPTION.findall(text)))


def seen_options(request: Request) -> tuple[list[str], list[str]]:
    """Object and space letters from the system prompt's option list."""
    letters = [m.group(1) for line in request.system.splitlines() if (m := _OPTION.match(line.strip()))]
    return [c for c in letters if c.isupper()], [c for c in letters if c.islower()]


def seen_roles(request: Request) -> list[str]:
    """Referent roles in order, from the per-instruction guidance line of the system prompt."""
    for line in request.system.splitlines():
        if line.startswith(("This clip:", "本片段")):
            return re.findall(r"target_object|spatial_affordance", line) or ["target_object"]
    return ["target_object"]


def seen_words(request: Request) -> list[dict[str, Any]]:
    text = "\n".join(p.text for p in request.parts if isinstance(p, Text))
    m = _ASR.search(text)
    if not m:
        return []
    try:
        return list(json.loads(m.group(1)).get("words", []))
    except (json.JSONDecodeError, AttributeError):
        return []


def seen_span_ms(request: Request) -> int:
    """How long the clip looks: the last frame timestamp shown, else the last word, else a default."""
    stamps = [int(m.group(1)) for p in request.parts if isinstance(p, Text) and (m := _TS.match(p.text))]
    words = seen_words(request)
    ends = [int(w.get("end_time", 0)) for w in words if isinstance(w.get("end_time"), int)]
    return max(stamps + ends, default=0) or DEFAULT_SPAN_MS


def _guess(
    rng: random.Random, roles: list[str], objects: list[str], spaces: list[str], times: list[int]
) -> dict[str, Any]:
    options, points = [], []
    for role, ts in zip(roles, times):
        pool = (objects if role == "target_object" else spaces) or objects + spaces or ["A"]
        options.append(rng.choice(pool))
        points.append({"type": role, "point": [rng.randint(0, 1000), rng.randint(0, 1000)], "timestamp": ts})
    return {"selected_options": options, "point_list": points}


class Chance:
    """Uniform random option (of the role's kind), point and time, seeded per clip."""

    name = "chance"

    def __init__(self, seed: int = 0):
        self.seed = seed

    def times(self, request: Request, roles: list[str], rng: random.Random) -> list[int]:
        span = seen_span_ms(request)
        return [rng.randint(0, span) for _ in roles]

    def answer(self, request: Request, truth: dict[str, Any] | None = None) -> Answer:
        letters = seen_mcq_letters(request)
        if letters:
            if self.name != "chance":
                raise ValueError(f"{self.name} answers EcoG clips only; use chance or oracle for multiple choice")
            return Answer(json.dumps({"answer": _rng(request, self.seed).choice(letters), "rationale": "chance"}))
        roles = seen_roles(request)
        objects, spaces = seen_options(request)
        times = self.times(request, roles, _rng(request, self.seed + 1))
        # What/Where from their own stream, so every baseline guesses them alike
        return Answer(json.dumps(_guess(_rng(request, self.seed), roles, objects, spaces, times)))


class Deixis(Chance):
    """When from the word times of deictic words, in order; What and Where at chance."""

    name = "deixis"

    def times(self, request: Request, roles: list[str], rng: random.Random) -> list[int]:
        words = [w for w in seen_words(request) if "begin_time" in w and "end_time" in w]
        deictic = [w for w in words if str(w.get("text", "")).strip(".,!?。，！？").lower() in DEICTIC]
        times = super().times(request, roles, rng)
        for i, w in enumerate(deictic[: len(times)]):
            times[i] = (int(w["begin_time"]) + int(w["end_time"])) // 2
        return times


def _mask_point(mask: dict[str, Any], width: int, height: int) -> tuple[int, int] | None:
    """A pixel inside the mask, nearest its centroid (full-frame or bbox-crop masks)."""
    loaded = load_mask(mask)
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


class Oracle:
    """Answers from the ground truth: the whole pipeline must then score 100%."""

    name = "oracle"

    def answer(self, request: Request, truth: dict[str, Any] | None = None) -> Answer:
        if not truth:
            raise ValueError("oracle needs the item's ground truth (eval_gt, width, height or correct_letter)")
        if "correct_letter" in truth:
            return Answer(json.dumps({"answer": truth["correct_letter"], "rationale": "oracle"}))
        w, h = truth["width"], truth["height"]
        options, points = [], []
        for ans in truth["eval_gt"].get("answer", []):
            options.append(ans["choice"])
            pt = _mask_point(ans["mask"], w, h) if ans.get("mask") else None
            if pt is not None:
                point = [_to_norm(pt[0], w), _to_norm(pt[1], h)]
            else:
                ys, xs = (
                    zip(*ans["points"])
                    if isinstance(ans["points"][0], list)
                    else ([ans["points"][0]], [ans["points"][1]])
                )
                point = [sum(xs) / len(xs), sum(ys) / len(ys)]
            ts = (ans["stroke_begin_time"] + ans["stroke_end_time"]) // 2
            points.append({"point": point, "timestamp": ts})
        return Answer(json.dumps({"selected_options": options, "point_list": points}))
