"""avstack as native inspect_ai tasks: `inspect eval avstack/ecog -T prepared=DIR -T drop=frame_ts`.

Registered through inspect's package entry point (`[project.entry-points.inspect_ai]`), as
evaluation packages do. Samples carry the request avstack renders (the same system prompt, the
same text, `<timestamp_ms>` tags and images in the same order); the target is the clip's ground
truth; the scorer is avstack's own, so inspect reports the numbers `avstack run` reports, with
inspect's providers, retries, logs and viewer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import (
    ChatMessageSystem,
    ChatMessageUser,
    ContentAudio,
    ContentImage,
    ContentText,
    ContentVideo,
)
from inspect_ai.scorer import Score, Target, mean, scorer, stderr
from inspect_ai.solver import TaskState, generate

from avstack.errors import UsageError
from avstack.manifest import opened
from avstack.prompting.messages import Audio, Image, Request, Text, Video, data_url
from avstack.prompting.stacks import make_stack
from avstack.tasks.ecog.inputs import EcogInputs
from avstack.tasks.ecog.metrics import METRICS, score_clip
from avstack.tasks.ecog.parse import parse_answer
from avstack.tasks.ecog.runs import requests_for, truth_of

EGOGAP_METRICS = ("correct", "motor_intrusion", "off_vantage")


def _list(value: Any) -> list[str]:
    """`-T drop=frame_ts,word_ts` or a list."""
    if value is None or value == "":
        return []
    return [v.strip() for v in value.split(",")] if isinstance(value, str) else [str(v) for v in value]


def messages_of(req: Request) -> list[Any]:
    """The request as inspect chat messages: the system prompt, then one user turn with the text
    and media parts in avstack's order (images inline as data URLs, as avstack sends them; a
    video or a sound by its path)."""
    content: list[Any] = []
    for p in req.parts:
        if isinstance(p, Text):
            content.append(ContentText(text=p.text))
        elif isinstance(p, Image):
            content.append(ContentImage(image=data_url(req.path_of(p))))
        elif isinstance(p, Video):
            path = req.path_of(p)
            fmt = {".mov": "mov", ".mpeg": "mpeg", ".mpg": "mpeg"}.get(path.suffix.lower(), "mp4")
            content.append(ContentVideo(video=str(path), format=fmt))  # type: ignore[arg-type]
        elif isinstance(p, Audio):  # the omni stack's sound: the prepared WAV, by its path
            content.append(ContentAudio(audio=str(req.path_of(p)), format="wav"))
    user = ChatMessageUser(content=content)
    return [ChatMessageSystem(content=req.system), user] if req.system else [user]


@scorer(metrics={m: [mean(), stderr()] for m in METRICS})
def ecog_scorer(coord_order: str = "xy"):
    """avstack's EcoG scorer: the answer parsed and scored exactly as `avstack run` does."""

    async def score(state: TaskState, target: Target) -> Score:
        pred, perr = parse_answer(state.output.completion, coord_order)
        truth = state.metadata["truth"]
        s = score_clip(pred, truth["eval_gt"], truth["width"], truth["height"])
        return Score(value=s.as_dict(), answer=state.output.completion, explanation=perr or s.error or "")

    return score


@task
def ecog(
    prepared: str,
    variant: str = "full",
    drop: str | list[str] | None = None,
    ts_format: str = "ms",
    word_ts_format: str = "json",
    lang: str | None = None,
    asr: str | None = None,
    coord_order: str = "xy",
    prompt: str | None = None,
) -> Task:
    """EcoG-Bench over a prepared folder under one input stack (`-T drop=frame_ts` ablates)."""
    stack = make_stack(variant, _list(drop), ts_format, word_ts_format)
    options = EcogInputs(asr, coord_order, Path(prompt) if prompt else None, lang)
    pairs, problems = requests_for(Path(prepared), stack, options)
    if problems:
        raise UsageError("; ".join(f"{r.clip_id}: {why}" for r, why in problems[:5]))
    samples = [
        Sample(
            id=rec.clip_id,
            input=messages_of(req),
            target=json.dumps(rec.eval_gt or {}, ensure_ascii=False),
            metadata={"truth": truth_of(rec), "stack": stack.name, "task_template": rec.task_template},
        )
        for rec, req in pairs
    ]
    return Task(
        dataset=MemoryDataset(samples, name=f"avstack-ecog-{stack.name}"),
        solver=generate(),
        scorer=ecog_scorer(coord_order),
        name=f"ecog_{stack.name}",
    )


@scorer(metrics={m: [mean(), stderr()] for m in EGOGAP_METRICS})
def egogap_scorer():
    """avstack's EgoGap grading: the letter parsed as `avstack run` does, against the labels shown."""
    from avstack.tasks.egogap.data import MOTOR, OFF_VANTAGE
    from avstack.tasks.egogap.parse import parse_letter

    async def score(state: TaskState, target: Target) -> Score:
        labels = state.metadata["labels"]
        letter, error = parse_letter(state.output.completion, sorted(labels))
        label = labels.get(letter) if letter else None
        value = {
            "correct": float(label == "correct"),
            "motor_intrusion": float(label in MOTOR),
            "off_vantage": float(label == OFF_VANTAGE),
        }
        return Score(value=value, answer=letter or "", explanation=error or "")

    return score


@task
def egogap(
    bundles: str,
    images: str | None = None,
    style: str = "default",
    variant: str = "image",
    options: str = "all",
    shuffle_seed: int | None = None,
) -> Task:
    """EgoGapBench items as avstack presents them (style, image and option ablations)."""
    from avstack.tasks.egogap.data import load_bundles
    from avstack.tasks.egogap.stack import EgoGapStack, present, request_for

    stack = EgoGapStack(style, variant, options, shuffle_seed)
    cache = Path(bundles).resolve().parent / ".avstack-inspect-images"
    samples = []
    for item in present(load_bundles(bundles), stack):
        req = request_for(item, stack, Path(images) if images else None, cache)
        samples.append(
            Sample(
                id=item.uid,
                input=messages_of(req),
                target=item.correct_letter,
                metadata={"labels": {let: lab for let, _, lab in item.options}, "kind": item.kind},
            )
        )
    return Task(dataset=MemoryDataset(samples), solver=generate(), scorer=egogap_scorer(), name=f"egogap_{stack.name}")


VIDEOQA_METRICS = ("correct", "iou")


@scorer(metrics={m: [mean(), stderr()] for m in VIDEOQA_METRICS})
def videoqa_scorer():
    """avstack's video-question grading: the answer parsed as `avstack run` does (a letter, a text,
    a span in any time format), scored with the field's definitions (iou is 0 for non-grounding)."""
    from avstack.tasks.videoqa.data import Item
    from avstack.tasks.videoqa.score import item_outcome

    async def score(state: TaskState, target: Target) -> Score:
        item = Item(**state.metadata["item"])
        row = item_outcome(item, {"id": item.id, "response": state.output.completion})
        return Score(value={"correct": row["correct"], "iou": row["iou"] or 0.0}, answer=state.output.completion)

    return score


@task
def videoqa(
    prepared: str,
    questions: str,
    variant: str = "full",
    drop: str | list[str] | None = None,
    ts_format: str = "ms",
    word_ts_format: str = "json",
    questions_format: str = "auto",
    prompt: str | None = None,
) -> Task:
    """Your own videos and questions (`-T questions=FILE`), under one input stack."""
    from dataclasses import asdict

    from avstack.tasks.videoqa.inputs import VideoqaInputs
    from avstack.tasks.videoqa.runs import joined, work_items

    stack = make_stack(variant, _list(drop), ts_format, word_ts_format)
    pairs, errors = joined(prepared, questions, questions_format)
    items = {it.id: it for it, _ in pairs}
    work = work_items(pairs, stack, opened(prepared), VideoqaInputs(prompt=Path(prompt) if prompt else None))
    bad = [f"{w.id}: {w.error}" for w in work if w.request is None] + errors
    if bad:
        raise UsageError("; ".join(bad[:5]))
    samples = [
        Sample(
            id=w.id,
            input=messages_of(w.request),
            target=json.dumps(w.truth),
            metadata={"item": asdict(items[w.id]) | {"options": list(items[w.id].options)}, "stack": stack.name},
        )
        for w in work
        if w.request is not None
    ]
    return Task(
        dataset=MemoryDataset(samples), solver=generate(), scorer=videoqa_scorer(), name=f"videoqa_{stack.name}"
    )
