"""The audio-visual benchmarks' own answer extraction and scores (shared/videoqa/AUDIOVISUAL.md),
as their official code reads a reply; where the official code has a bug, the difference is named
in score.json and docs/benchmarks/audiovisual.md.

- Video-MME-v2: its prefixes stripped, then the first A-H ('' when a reply of over 10 words has
  none); grouped, non-linear: each video's 4 questions are a group, scored by how many are right
  (relevance) or by the leading run of right answers through the group's structure (logic). A
  failed extraction is wrong here; the official script scores it -1, which lowers a relevance sum
  and passes as right in its logic step.
- WorldSense: the first standalone A-D (VLMEvalKit's); accuracy and its six breakdowns.
- Daily-Omni: the first A-D after the answer marker; accuracy both ways: the paper's (a failed or
  skipped item left out of the denominator) and every item counted (a failure is wrong).
- AV-SpeakerBench: prefixes stripped, punctuation to spaces, the first token that is a choice
  label (any case: the article "a" reads as A), else A.
- EgoLifeQA: the first standalone A-D; none is wrong."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

MME2_PREFIXES = ("Final Answer:", "The best answer is", "The correct answer is", "The answer is", "The answer",
                 "The best option is", "The correct option is", "Best answer:", "Best option:", "Answer:",
                 "Option:")  # fmt: skip
AVS_PREFIXES = (*MME2_PREFIXES[1:], "Based on", "Based")
# the leading run's steps through each group structure: a step is a question or a set answered side by side
STRUCTURES = {"[1, 2, 3, 4]": ((1,), (2,), (3,), (4,)), "[1, [2, 3], 4]": ((1,), (2, 3), (4,)),
              "[[1, 2], 3, 4]": ((1, 2), (3,), (4,))}  # fmt: skip
RELEVANCE = {0: 0.0, 1: 6.25, 2: 25.0, 3: 56.25, 4: 100.0}
# in twelfths, as its script computes them (100 / 12 ...: the tables' printed 8.33 is rounded)
LOGIC = {"[1, 2, 3, 4]": RELEVANCE, "[1, [2, 3], 4]": {0: 0.0, 1: 100 / 12, 2: 400 / 12, 3: 700 / 12, 4: 100.0},
         "[[1, 2], 3, 4]": {0: 0.0, 1: 10.0, 2: 20.0, 3: 50.0, 4: 100.0}}  # fmt: skip
MME2_NOTE = (
    "a failed extraction is scored as wrong; the official Video-MME-v2 script scores it -1, which lowers a "
    "relevance group's sum and counts as correct in its logic step (a bug)"
)


def _stripped(text: str, prefixes: Sequence[str]) -> str:
    text = text.strip()
    for prefix in prefixes:
        text = text.replace(prefix, "")
    return text


def videomme2_letter(text: str, letters: Sequence[str]) -> str | None:
    # the official code: '' for a reply of over 10 words with no A-H, else the first A-H; a short
    # reply with none fails there too, so both are None here
    found = re.search(r"[A-H]", _stripped(text, MME2_PREFIXES))
    return found.group(0) if found else None


def worldsense_letter(text: str, letters: Sequence[str]) -> str | None:
    found = re.search(r"\b([ABCD])\b", text)  # standalone: "Based on ..., C" is C (lmms-eval's parser reads B)
    return found.group(1) if found else None


def dailyomni_letter(text: str, letters: Sequence[str]) -> str | None:
    marker = re.search(r"answer\s*(?:is)?\s*[:：]?", text, re.I)
    found = re.search(r"[A-D]", text[marker.end() :] if marker else text)
    return found.group(0) if found else None


def avspeaker_letter(text: str, letters: Sequence[str]) -> str | None:
    tokens = re.sub(r"[^\w\s]", " ", _stripped(text, AVS_PREFIXES)).split()
    return next((t.upper() for t in tokens if t.upper() in letters), "A")  # the official default


def egolife_letter(text: str, letters: Sequence[str]) -> str | None:
    found = re.search(r"\b([A-D])\b", text)
    return found.group(1) if found else None


EXTRACT: dict[str, Callable[[str, Sequence[str]], str | None]] = {
    "videomme2": videomme2_letter,
    "worldsense": worldsense_letter,
    "dailyomni": dailyomni_letter,
    "avspeaker": avspeaker_letter,
    "egolife": egolife_letter,
}


def leading_run(right: Mapping[int, bool], structure: str) -> int:
    """How many of a group's questions count: through the structure's steps in order, each right
    answer of a step, stopping after the first step not wholly right."""
    k = 0
    for step in STRUCTURES[structure]:
        hits = sum(bool(right.get(q)) for q in step)
        k += hits
        if hits < len(step):
            break
    return k


def group_score(group_type: str, structure: str, right: Mapping[int, bool]) -> float:
    if group_type == "relevance":
        return RELEVANCE[sum(bool(right.get(q)) for q in (1, 2, 3, 4))]
    return LOGIC[structure][leading_run(right, structure)]


def videomme2_summary(facts: Sequence[Mapping[str, str]], correct: Sequence[float | None]) -> dict[str, object]:
    """The Non-Lin Score (the mean over groups), its relevance / logic / level / head breakdowns,
    and Avg Acc, from each question's facts and whether it was answered right."""
    groups: dict[str, dict[str, Any]] = {}
    for fact, ok in zip(facts, correct):
        g = groups.setdefault(fact["video_id"], {"right": {}, "heads": {}})
        g["type"], g["structure"] = fact["group_type"], fact["group_structure"]
        g["right"][int(fact["place"])] = bool(ok)
        g["heads"] |= {k: fact[k] for k in ("level", "second_head", "third_head") if k in fact}
    whole = {vid: g for vid, g in groups.items() if sorted(g["right"]) == [1, 2, 3, 4]}
    scores = {vid: group_score(g["type"], g["structure"], g["right"]) for vid, g in whole.items()}
    mean = lambda xs: round(sum(xs) / len(xs), 4) if xs else 0.0  # noqa: E731
    out: dict[str, object] = {"Non-Lin Score": mean(list(scores.values())), "groups": len(scores)}
    out["Avg Acc"] = mean([100 * float(bool(c)) for c in correct])
    for kind in ("relevance", "logic"):
        out[kind] = mean([s for vid, s in scores.items() if whole[vid]["type"] == kind])
    for head in ("level", "second_head", "third_head"):
        values = sorted({g["heads"][head] for g in whole.values() if head in g["heads"]})
        out[head] = {v: mean([scores[vid] for vid, g in whole.items() if g["heads"].get(head) == v]) for v in values}
    out["incomplete_groups"] = sorted(set(groups) - set(whole))  # a question missing from the file: left out
    return out | {"note": MME2_NOTE}


def dailyomni_summary(rows: Sequence[Mapping[str, object]]) -> dict[str, object]:
    """Accuracy as the paper reports it (failed or skipped items left out) and with every item."""
    pct = lambda xs: round(100 * sum(xs) / len(xs), 4) if xs else 0.0  # noqa: E731
    kept = [r for r in rows if r["answered"] and r["parsed"]]
    by_type = sorted({str(r.get("type")) for r in rows})
    return {
        "accuracy_failures_left_out": pct([r["correct"] for r in kept]),
        "accuracy_failures_wrong": pct([r["correct"] for r in rows]),
        "left_out": len(rows) - len(kept),
        "by_type_failures_left_out": {t: pct([r["correct"] for r in kept if str(r.get("type")) == t]) for t in by_type},
        "note": "Daily-Omni's code removes failed or skipped items from the denominator "
        "(accuracy_failures_left_out); accuracy_failures_wrong counts them as wrong, as every other score here",
    }
