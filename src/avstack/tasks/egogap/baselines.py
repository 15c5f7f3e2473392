"""EgoGap's offline baselines: `oracle` (the correct letter) and `chance` (a letter as shown)."""

from __future__ import annotations

import json
from collections.abc import Callable

from avstack.errors import UsageError
from avstack.prompting.messages import Request
from avstack.runs.sending.runners import Answer, Backend, seeded_rng


class Chance(Backend):
    """A uniform letter among the options the request shows (`Request.meta["letters"]`), seeded per item."""

    name = "chance"

    def __init__(self, seed: int = 0):
        self.seed = seed

    def answer(self, request: Request, truth: dict[str, object] | None = None) -> Answer:
        letters = request.meta.get("letters")
        if not letters:
            raise UsageError("this baseline answers EgoGap requests (built by avstack.tasks.egogap.stack)")
        return Answer(json.dumps({"answer": seeded_rng(request, self.seed).choice(letters), "rationale": "chance"}))


class Oracle(Backend):
    name = "oracle"

    def answer(self, request: Request | None, truth: dict[str, object] | None = None) -> Answer:
        if not truth or "correct_letter" not in truth:
            raise UsageError("oracle needs the item's correct_letter")
        return Answer(json.dumps({"answer": truth["correct_letter"], "rationale": "oracle"}))


BASELINES: dict[str, Callable[[str], Backend]] = {
    "oracle": lambda name: Oracle(),
    "chance": lambda name: Chance(int(name or 0)),
}
