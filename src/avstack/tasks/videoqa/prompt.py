"""Requests for video questions: the same anchors and time formats as EcoG (frames with their true
times, word-timed ASR, the native video), plus the dataset's own subtitles with their cue times;
one Jinja2 template pair per item kind (`prompts/{mcq,open,grounding}/{system,user}.j2`), which
`--prompt DIR` replaces (`DIR/<kind>/system.j2`, or `DIR/system.j2` for every kind)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from avstack.io import DataError, inside
from avstack.manifest import ClipRecord
from avstack.prompting.budget import budgeted
from avstack.prompting.messages import Image, Request, Text
from avstack.prompting.shared_parts import asr_text, frame_times_told, frame_views, request_parts, shared_prefix
from avstack.prompting.stacks import SHIPPED_PROMPTS, Stack
from avstack.prompting.templates import PART, PromptSet, clean, load_prompts
from avstack.prompting.timefmt import parse_words, words_block
from avstack.tasks.videoqa.data import Item
from avstack.tasks.videoqa.inputs import VideoqaInputs
from avstack.tasks.videoqa.shipped_prompts import shipped_request
from avstack.tasks.videoqa.subtitles import read_subtitles

if TYPE_CHECKING:  # a TypedDict: only the annotations read it
    from avstack.asr.types import TimedWord


PROMPT_VERSION = "videoqa-2"  # 2: the clip's video or sound after the question (prompting.shared_parts), as EcoG's
BUILTIN = Path(__file__).with_name("prompts")


@lru_cache(maxsize=16)
def prompt_set(folder: str | None) -> PromptSet:
    return load_prompts(folder or BUILTIN)


def _asr(record: ClipRecord, item: Item, stack: Stack, data_root: str | None, source: str | None) -> tuple[bool, str]:
    """The ASR block: Whisper's words as prepared, or with `--asr source` the benchmark's own
    (its word file or subtitle cues, each cue a timed unit: no time is made up inside a cue)."""
    if not stack.has("asr"):
        return False, ""
    if source == "source":
        if not item.subtitles:
            raise DataError(f"item {item.id!r}: --asr source: the questions file gives this video no words")
        cues = given_words(item, data_root)
        return True, asr_text({"text": " ".join(c["text"] for c in cues), "words": cues}, stack)
    if record.asr is None or not record.asr.text.strip():
        return False, ""
    return True, asr_text(record.asr.to_ecog(), stack)


def given_words(item: Item, data_root: str | None) -> list[TimedWord]:
    """The benchmark's words or cues for the item's video, those ended by `until_s` only."""
    if data_root is None:
        raise DataError(f"item {item.id!r}: subtitles need the data root (recorded in prepare.json)")
    cues = read_subtitles(inside(data_root, str(item.subtitles), f"item {item.id!r}: subtitles", links=True))
    if item.until_s is not None:  # a question asked at a moment hears nothing said after it
        cues = [c for c in cues if c["end_time"] <= round(item.until_s * 1000)]
    return cues


def _subtitles(item: Item, stack: Stack, data_root: str | None) -> tuple[bool, str]:
    if not stack.has("subtitles") or not item.subtitles:
        return False, ""
    cues = given_words(item, data_root)
    # subtitles bring their own cue times (told like word times), whether or not ASR is in the stack
    return True, words_block(stack.word_ts_format, " ".join(c["text"] for c in cues), cues)


def seen_until(record: ClipRecord, item: Item, stack: Stack) -> ClipRecord:
    """The clip as a question that may see it only up to `item.until_s` (HourVideo's predictive
    questions): the frames and words before that time, and that time as its length."""
    if item.until_s is None:
        return record
    if stack.has("video") or stack.has("audio"):
        raise DataError(
            f"item {item.id!r}: a predictive question sees the video only up to {item.until_s:g} s; the "
            f"{stack.name} stack sends the whole file or sound (use a stack of frames)"
        )
    from dataclasses import replace

    until_ms = round(item.until_s * 1000)
    heard = record.asr
    asr = heard.only_words([w for w in heard.words if w.end_ms <= until_ms]) if heard else None
    frames = tuple(f for f in record.frames if f.pts_ms <= until_ms)
    length = min(record.duration_ms or until_ms, until_ms)
    return replace(record, frames=frames, asr=asr, duration_ms=length)


def _media(
    record: ClipRecord, item: Item, stack: Stack, prepared_dir: str, data_root: str | None, source: str | None
) -> tuple[dict[str, Any], list[dict[str, object]], bool, str]:
    """The template variables of what a request shows of its video (frames, words, subtitles,
    sound), the frame views, and whether and how the words are shown."""
    frames = frame_views(record, stack, prepared_dir)
    asr_shown, asr_block = _asr(record, item, stack, data_root, source)
    subs_shown, subs_block = _subtitles(item, stack, data_root)
    variables: dict[str, object] = {
        "frames": frames,
        "visual": "video" if stack.has("video") else "frames" if stack.has("frames") else "text",
        "asr_shown": asr_shown,
        "asr_block": clean(asr_block),
        "word_times": stack.has("word_ts"),
        "speech_sound": stack.has("audio"),
        "subtitles_shown": subs_shown,
        "subtitles_block": clean(subs_block),
        "duration_s": (record.duration_ms or 0) / 1000,
        "stack": stack.name,
        "anchors": sorted(stack.anchors),
        "ts_format": stack.ts_format,
        "part": PART,
    }
    return variables, frames, asr_shown, asr_block


def _shown(variables: dict[str, object], frames: list[dict[str, object]], stack: Stack, asr: tuple[bool, str]) -> dict:
    """What the request shows, as the offline baselines read it."""
    return {
        "duration_s": variables["duration_s"],
        "frame_ts": frame_times_told(frames, stack),
        "words": parse_words(stack.word_ts_format, asr[1]) if asr[0] and stack.has("word_ts") else [],
    }


def build_request(
    record: ClipRecord,
    item: Item,
    stack: Stack,
    prepared_dir: str,
    data_root: str | None,
    inputs: VideoqaInputs = VideoqaInputs(),
) -> Request:
    """The request for one question about one prepared clip under one stack."""
    record = budgeted(seen_until(record, item, stack), stack.budget)  # the frames it may see, then its budget
    prompts = prompt_set(str(inputs.prompt) if inputs.prompt else None)
    variables, frames, asr_shown, asr_block = _media(record, item, stack, prepared_dir, data_root, inputs.asr)
    variables |= {
        "kind": item.kind,
        "question": clean(item.question),
        "options": [clean(o) for o in item.options],
        "ranked": item.protocol == "nlq",  # Ego4D NLQ scores the top 5 windows
    }
    meta = {
        "item_id": item.id,
        "clip_id": record.clip_id,
        "stack": stack.name,
        "kind": item.kind,
        "prompt_version": PROMPT_VERSION,
        "prompt_sha256": prompts.sha256,
        "shown": {"letters": item.letters, **_shown(variables, frames, stack, (asr_shown, asr_block))},
    }
    if stack.variant in SHIPPED_PROMPTS:  # the benchmark's own request, not our templates
        words = given_words(item, data_root) if item.subtitles else []
        return shipped_request(record, item, stack, prepared_dir, words, meta | {"prompt_sha256": "shipped"})
    rendered = prompts.render(item.kind, "user.j2", variables)
    if item.media and data_root is None:
        raise DataError(f"item {item.id!r}: its {', '.join(item.media)} file needs the data root (in prepare.json)")
    given = {role: str(inside(str(data_root), rel, f"item {item.id!r}: {role}", links=True))
             for role, rel in item.media.items()}  # fmt: skip
    parts, _ = request_parts(rendered, record, stack, frames, prepared_dir, data_root, given)
    shared = shared_prefix(stack, parts)  # what a clip's stacks share: before the options' pictures
    if item.option_images:  # image options (HourVideo's navigation and layout tasks), each after its letter
        parts.append(Text("The options' pictures:"))
        for letter, path in zip(item.letters, item.option_images):
            parts += [Text(f"{letter}:"), Image(path)]
    system = prompts.render(item.kind, "system.j2", variables)
    return Request(system, tuple(parts), prepared_dir, meta, shared)


def build_packed_request(
    record: ClipRecord,
    items: list[Item],
    stack: Stack,
    prepared_dir: str,
    data_root: str | None,
    pack: str,
    inputs: VideoqaInputs = VideoqaInputs(),
) -> Request:
    """One request for several questions about one prepared clip (`prompts/packed/`): the video
    shown once, then each question numbered with its options and the form of its answer."""
    record = budgeted(record, stack.budget)
    prompts = prompt_set(str(inputs.prompt) if inputs.prompt else None)
    variables, frames, asr_shown, asr_block = _media(record, items[0], stack, prepared_dir, data_root, inputs.asr)
    questions = [
        {"n": n, "kind": it.kind, "question": clean(it.question), "options": [clean(o) for o in it.options],
         "ranked": it.protocol == "nlq"}
        for n, it in enumerate(items, 1)
    ]  # fmt: skip
    variables |= {"kind": "packed", "questions": questions}
    rendered = prompts.render("packed", "user.j2", variables)
    parts, _ = request_parts(rendered, record, stack, frames, prepared_dir, data_root)
    shown = _shown(variables, frames, stack, (asr_shown, asr_block))
    meta = {
        "item_id": pack,
        "clip_id": record.clip_id,
        "stack": stack.name,
        "kind": "packed",
        "prompt_version": PROMPT_VERSION,
        "prompt_sha256": prompts.sha256,
        "shown": shown
        | {
            "questions": [{"n": q["n"], "kind": q["kind"], "letters": it.letters} for q, it in zip(questions, items)]
        },  # fmt: skip
    }
    system = prompts.render("packed", "system.j2", variables)
    return Request(system, tuple(parts), prepared_dir, meta, shared_prefix(stack, parts))
