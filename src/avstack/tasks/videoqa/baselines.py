"""Offline baselines for video questions: `oracle` (the truth) and `chance` (a seeded guess among
what the request allows: an option letter, a span inside the video)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from avstack.errors import UsageError
from avstack.prompting.messages import Request
from avstack.runs.sending.runners import Answer, Backend, seeded_rng


class Oracle(Backend):
    name = "oracle"

    def answer(self, request: Request | None, truth: dict[str, Any] | None = None) -> Answer:
        if not truth or "kind" not in truth:
            raise UsageError("oracle needs the item's truth (videoqa runs pass it)")
        if truth["kind"] == "packed":  # several questions: each answer under its number
            return Answer(json.dumps({"answers": {n: _packed_truth(t) for n, t in truth["items"].items()}}))
        if truth["kind"] == "grounding" and truth["spans"]:
            start, end = truth["spans"][0]
            return Answer(json.dumps({"start": start, "end": end}))
        return Answer(json.dumps({"answer": truth["answer"]}, ensure_ascii=False))


def _packed_truth(truth: dict[str, Any]) -> object:
    if truth["kind"] == "grounding":
        return [list(truth["spans"][0])] if truth["spans"] else []
    return truth["answer"]


class Chance(Backend):
    name = "chance"

    def __init__(self, seed: int = 0):
        self.seed = seed

    def answer(self, request: Request, truth: dict[str, object] | None = None) -> Answer:
        shown, kind = request.meta.get("shown") or {}, request.meta.get("kind")
        if kind is None:
            raise UsageError("this baseline answers videoqa requests (built by avstack.tasks.videoqa.prompt)")
        rng = seeded_rng(request, f"{self.seed}:{request.meta.get('item_id')}")  # per question, not per clip
        if kind == "packed":
            return Answer(json.dumps({"answers": {str(q["n"]): self._guess(q["kind"], q["letters"], shown, rng)
                                                  for q in shown["questions"]}}))  # fmt: skip
        if kind == "mcq":
            return Answer(json.dumps({"answer": rng.choice(shown["letters"])}))
        if kind == "grounding":
            a, b = sorted(rng.uniform(0, max(shown.get("duration_s") or 1.0, 0.1)) for _ in range(2))
            return Answer(json.dumps({"start": round(a, 2), "end": round(b, 2)}))
        return Answer(json.dumps({"answer": "unknown"}))

    @staticmethod
    def _guess(kind: str, letters: list[str], shown: dict[str, Any], rng: Any) -> object:
        if kind == "mcq":
            return rng.choice(letters)
        if kind == "grounding":
            return sorted(round(rng.uniform(0, max(shown.get("duration_s") or 1.0, 0.1)), 2) for _ in range(2))
        return "unknown"


BASELINES: dict[str, Callable[[str], Backend]] = {
    "oracle": lambda name: Oracle(),
    "chance": lambda name: Chance(int(name or 0)),
}
