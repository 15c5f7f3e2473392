"""What the server saw, against the plan: each arm's reported input tokens beside the tokens
planned for the same requests, per request and per arm. An arm whose server count departs from
its plan by more than the plan's own uncertainty is flagged (its delta measures more than its cue:
a merged picture, a dropped frame, a sound the server did not decode), with the likely cause where
one is known. `--strict-inputs` makes a flag a failure.

The plan's uncertainty per request is zero where the server counted the text itself and the
pictures follow a published rule; else the text estimate's stated error (and none can be checked
where a part has no rule: a video, a picture or sound of a model without one)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

from avstack.io import read_jsonl_objects
from avstack.prompting.messages import Image, Request
from avstack.runs.planning.cost import audio_rule
from avstack.runs.planning.plan_record import Plan

# the stated error of a text estimate, as a share of its tokens plus a request's framing
TEXT_ERROR = {"server": (0.0, 0), "tiktoken": (0.05, 12), "estimate": (0.25, 12)}


def text_error_of(how: str) -> tuple[float, int]:
    """(share, tokens) the text count may be off by, from how the plan counted it."""
    if how.startswith("the server's tokenizer"):
        return TEXT_ERROR["server"]
    return TEXT_ERROR["tiktoken"] if how.startswith("tiktoken") else TEXT_ERROR["estimate"]


def reported_input(usage: object) -> int | None:
    """All the input tokens a server counted for one request, in each back-end's usage fields:
    OpenAI, vLLM and llama.cpp `prompt_tokens` (cached ones included), OpenAI Responses
    `input_tokens`, Gemini `prompt_token_count` (cached content included), Anthropic `input_tokens`
    plus its `cache_creation_input_tokens` and `cache_read_input_tokens` (which it counts apart)."""
    if not isinstance(usage, dict):
        return None

    def number(key: str) -> int | None:
        v = usage.get(key)
        return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 else None

    if "cache_read_input_tokens" in usage or "cache_creation_input_tokens" in usage:  # Anthropic
        base = number("input_tokens")
        extra = (number("cache_read_input_tokens") or 0) + (number("cache_creation_input_tokens") or 0)
        return None if base is None else base + extra
    for key in ("prompt_tokens", "input_tokens", "prompt_token_count"):
        if (n := number(key)) is not None:
            return n
    return None


# the fields a prediction line names its item by, per task (EcoG video_name, videoqa id, EgoGap
# uid, a packed request's pack)
ID_FIELDS = ("pack", "video_name", "id", "clip_id", "uid", "item_id")


def item_of_record(rec: Mapping[str, object], known: Any) -> str | None:
    """The item a prediction line answers: the first of its id fields whose value is a known item."""
    return next((str(rec[f]) for f in ID_FIELDS if f in rec and str(rec[f]) in known), None)


def adjacent_images(req: Request) -> int:
    """Pictures in `req` that touch another picture (nothing between them)."""
    touching = set()
    for k in range(1, len(req.parts)):
        if isinstance(req.parts[k], Image) and isinstance(req.parts[k - 1], Image):
            touching |= {k - 1, k}
    return len(touching)


def input_uncertainty(
    counted: tuple[int, ...], rule: str | None, model: str, text_how: str, server_counts: bool
) -> int | None:
    """How far the plan's input tokens for one request may be off: zero where the server counts the
    text and the pictures follow a published rule; the text estimate's stated error otherwise; None
    where a part has no rule (a video; a picture or sound of a model without one): not checkable."""
    images, videos, _, text_toks, sounds, _ = counted
    if videos or (images and rule is None) or (sounds and audio_rule(model) is None):
        return None
    share, framing = (0.0, 0) if server_counts else text_error_of(text_how)
    return round(share * text_toks) + (framing if share else 0)


@dataclass
class ArmInputs:
    """One arm's planned and reported input over the requests actually sent."""

    arm: str
    requests: int = 0  # sent and counted by the server
    planned: int = 0
    reported: int = 0
    uncertainty: int = 0
    departing: int = 0  # requests whose own count departs beyond their uncertainty
    uncheckable: int = 0  # sent, but a part has no rule (a video) or the server said no count
    adjacent_images: int = 0  # pictures that touch another in the arm's requests (a merge can join them)
    cause: str = ""

    @property
    def departure(self) -> int:
        return self.reported - self.planned

    @property
    def share(self) -> float:
        return self.departure / self.planned if self.planned else 0.0

    @property
    def flagged(self) -> bool:
        return self.requests > 0 and abs(self.departure) > self.uncertainty

    def said(self) -> str:
        sign = f"{100 * self.share:+.1f}%"
        unc = f"±{self.uncertainty:,}" if self.uncertainty else "exact"
        return (
            f"{self.reported:,} input tokens reported against {self.planned:,} planned ({sign}; plan {unc})"
            f" over {self.requests} requests, {self.departing} departing"
            + (f"; likely: {self.cause}" if self.cause else "")
        )


def _planned_pair(want: Any) -> bool:
    """A plan entry [tokens, uncertainty] with both counts (uncertainty None: not checkable)."""
    return isinstance(want, list) and len(want) == 2 and all(type(v) is int and v >= 0 for v in want)


def likely_cause(arm: ArmInputs) -> str:
    if arm.departure < 0 and arm.adjacent_images:
        return (
            f"the server merged adjacent images ({arm.adjacent_images} pictures touch another: a Qwen2-VL"
            " server takes two as one temporal pair)"
        )
    if arm.departure < 0:
        return "the server counted less than was sent: a part dropped or not decoded on the way"
    return "the server counted more than planned: a chat template or picture rule the plan does not know"


def checked_pair(want: Any) -> tuple[int, int]:
    """A plan entry [tokens, uncertainty] that _planned_pair has checked."""
    return int(want[0]), int(want[1])


def reconcile(plan: Plan, predictions: Mapping[str, Path]) -> list[ArmInputs]:
    """Each arm's reported input against its plan, request by request (the plan's `inputs`)."""
    out = []
    for name, path in predictions.items():
        planned = plan.inputs.get(name)
        if not isinstance(planned, dict) or not Path(path).exists():
            continue
        packs = Path(path).parent / "packs" / "predictions.jsonl"  # a packed run: its requests are the packs
        path = packs if packs.is_file() else Path(path)
        bill = plan.stacks.get(name)
        arm = ArmInputs(name, adjacent_images=bill.adjacent_images if bill is not None else 0)
        for rec in read_jsonl_objects(path, "prediction"):
            if rec.get("cached") or rec.get("raw") is None:
                continue  # not sent, or no answer: counted among the request failures
            item = item_of_record(rec, planned)
            want, got = planned.get(item) if item else None, reported_input(rec.get("usage"))
            if not _planned_pair(want) or got is None:  # plan.json is input too: a malformed entry is unchecked
                arm.uncheckable += 1
                continue
            tokens, error = checked_pair(want)
            arm.requests += 1
            arm.planned += tokens
            arm.reported += got
            arm.uncertainty += error
            arm.departing += abs(got - tokens) > error
        arm.cause = likely_cause(arm) if arm.flagged else ""
        out.append(arm)
    return out


def inputs_section(arms: list[ArmInputs], strict: bool) -> str:
    """The report's "What the server saw": every arm's reported input against its plan."""
    if not arms:
        return ""
    flagged = [a for a in arms if a.flagged]
    lines = ["", "## What the server saw", ""]
    lines += [
        "Each arm's input tokens as the server counted them, against the plan for the same requests (the plan's"
        " uncertainty is zero where the server counted the text and the pictures follow a published rule)."
        " A flagged arm's delta measures more than its cue.",
        "",
        "| arm | requests | planned | reported | departure | plan's uncertainty | flag |",
        "|---|---|---|---|---|---|---|",
    ]
    for a in arms:
        flag = f"**INPUT {100 * a.share:+.1f}%**: {a.cause}" if a.flagged else "ok" if a.requests else "not checked"
        unc = f"±{a.uncertainty:,}" if a.uncertainty else "0"
        lines.append(f"| {a.arm} | {a.requests} | {a.planned:,} | {a.reported:,} | {a.departure:+,} | {unc} | {flag} |")
    unchecked = [f"`{a.arm}` {a.uncheckable}" for a in arms if a.uncheckable]
    if unchecked:
        lines += ["", "Sent but not checkable (no count, or a part without a rule): " + ", ".join(unchecked) + "."]
    if flagged:
        verdict = "fails this run (`--strict-inputs`)" if strict else "is a warning (`--strict-inputs` fails the run)"
        lines += ["", f"{len(flagged)} arm(s) departed from their plan; this {verdict}."]
    return "\n".join([*lines, ""])


def flag_label(label: str, arm: ArmInputs) -> str:
    """An arm's label in the report's tables, marked where the server saw other input than planned."""
    return f"{label} [INPUT {100 * arm.share:+.1f}%]" if arm.flagged else label


def _relabel(m: re.Match[str], arm: ArmInputs) -> str:
    return f"| {flag_label(m.group(1), arm)} |"


def marked(text: str, seen: Sequence[ArmInputs]) -> str:
    """Every table row of the report that names a flagged arm gets the flag beside its name, so
    its delta is read with it (the row's first cell is the arm's label)."""
    for arm in (a for a in seen if a.flagged):
        pattern = re.compile(rf"^\| ((?:[^|]*\s)?{re.escape(arm.arm)}(?: \[[^]|]*\])?) \|", re.MULTILINE)
        label = partial(_relabel, arm=arm)
        text = pattern.sub(label, text)
    return text


def as_json(arms: list[ArmInputs]) -> list[dict[str, object]]:
    return [asdict(a) | {"departure": a.departure, "flagged": a.flagged} for a in arms]


class InputsDeparted(RuntimeError):
    """`--strict-inputs`: arms whose server count departed from the plan (after everything was written)."""

    def __init__(self, arms: list[ArmInputs]):
        self.arms = arms
        super().__init__("the server saw other input than planned: " + "; ".join(f"{a.arm}: {a.said()}" for a in arms))
