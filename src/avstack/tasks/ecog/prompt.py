"""EcoG prompts (EN and ZH, same structure) and request building from a manifest record.

Structure follows the benchmark protocol (FORMAT.md, "Input stacks"): a system
prompt with the clip's option list, the JSON template, the coordinate
convention and one line of guidance per instruction; a user turn with
`<instruction>`, `<asr_data>` with its note, and the frames, each preceded by
`<timestamp_ms>N` carrying the frame's true pts.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from avstack.manifest import ClipRecord
from avstack.prompting.budget import budgeted
from avstack.prompting.messages import Request
from avstack.prompting.shared_parts import asr_text, frame_times_told, frame_views, request_parts, shared_prefix
from avstack.prompting.stacks import Stack
from avstack.prompting.templates import PART, PromptSet, clean, load_prompts
from avstack.prompting.timefmt import parse_words
from avstack.tasks.ecog.inputs import EcogInputs

PROMPT_VERSION = "ecog-1"


BUILTIN = Path(__file__).with_name("prompts")  # en/ and zh/: system.j2, user.j2


@lru_cache(maxsize=16)
def prompt_set(folder: str | None) -> PromptSet:
    """The templates of a folder, or the shipped EN/ZH ones."""
    return load_prompts(folder or BUILTIN)


# Referent roles per instruction type, in order: what the guidance line of the system prompt says.
ROLES = {
    "指令1": ("target_object",),
    "指令2": ("target_object",),
    "指令3": ("target_object", "spatial_affordance"),
    "指令4": ("target_object", "spatial_affordance"),
    "指令5": ("target_object", "spatial_affordance", "target_object"),
    "指令6": ("target_object", "spatial_affordance", "target_object", "spatial_affordance"),
}
_OPTION = re.compile(r"^([A-Za-z])\.\s")


def lang_of(record: ClipRecord, default: str = "en") -> str:
    lang = (record.lang or default or "en").lower()
    return "zh" if lang.startswith("zh") or lang in ("cn", "cmn", "zn") else "en"


def _choices(gt: dict[str, Any], key: str) -> list[str]:
    return [str(c) for c in gt.get(key) or []]


def pick_asr(record: ClipRecord, source: str | None) -> dict[str, Any] | None:
    """`whisper` (ours, from prepare) or `source` (the annotations' verified asr_result).

    Default: ours when prepared, else the source.
    """
    ours = record.asr.to_ecog() if record.asr is not None else None  # the EcoG shape templates see
    theirs = record.source_asr
    if source == "whisper":
        return ours
    if source == "source":
        return theirs
    return ours if ours is not None else theirs


def _is_silent(record: ClipRecord, asr: dict[str, Any] | None) -> bool:
    return record.task_template == "指令1" or not (asr or {}).get("text", "").strip()


def template_variables(record: ClipRecord, stack: Stack, lang: str, options: EcogInputs) -> dict[str, object]:
    """Everything a prompt template receives (README: "Prompt templates"), frames excluded."""
    gt = record.eval_gt or {}
    asr = pick_asr(record, options.asr)
    silent = _is_silent(record, asr)
    asr_shown = stack.has("asr") and asr is not None and not silent
    word_times = stack.has("word_ts")
    block = asr_text(asr, stack) if asr_shown and asr is not None else ""
    return {
        "lang": lang,
        "coord_order": options.coord_order,
        "task_template": record.task_template or "",
        "stack": stack.name,
        "anchors": sorted(stack.anchors),
        "ts_format": stack.ts_format,
        "word_ts_format": stack.word_ts_format,
        "object_choices": [clean(c) for c in _choices(gt, "object_choices")],
        "space_choices": [clean(c) for c in _choices(gt, "space_choices")],
        # a stack that hears the clip's sound (omni) gets no transcript: the speech is in the audio
        "instruction": "" if stack.has("audio") else clean((asr or {}).get("text", "").strip()),
        "speech_sound": stack.has("audio"),
        "silent": silent,
        "asr": asr,
        "asr_shown": asr_shown,
        "word_times": word_times,
        "asr_block": clean(block),
        "visual": "video" if stack.has("video") else "frames" if stack.has("frames") else "text",
        "part": PART,
    }


def shown(
    record: ClipRecord,
    stack: Stack,
    variables: dict[str, Any],
    frames: list[dict[str, object]],
    images: list[str],
    prepared_dir: str,
) -> dict[str, object]:
    """What the request shows, as a model reads it, for the offline baselines: the option letters,
    the referent roles of the guidance line, the frame times the tags tell (parsed back in their
    format; none for `index`), the overlaid images to read (overlay), and the timed words parsed
    back from the ASR block in its format."""
    letters = [
        m.group(1) for c in variables["object_choices"] + variables["space_choices"] if (m := _OPTION.match(c.strip()))
    ]
    stamps = frame_times_told(frames, stack)
    overlaid = (
        [str(Path(prepared_dir) / p) for p in images] if stack.ts_format == "overlay" and stack.has("frame_ts") else []
    )
    words = (
        parse_words(stack.word_ts_format, variables["asr_block"])
        if variables["asr_shown"] and variables["word_times"]
        else []
    )
    return {
        "objects": [c for c in letters if c.isupper()],
        "spaces": [c for c in letters if c.islower()],
        "roles": list(ROLES.get(record.task_template or "", ("target_object",))),
        "frame_ts": stamps,
        "overlay_images": overlaid,
        "words": words,
    }


def build_request(
    record: ClipRecord,
    stack: Stack,
    prepared_dir: str,
    options: EcogInputs = EcogInputs(),
    data_root: str | None = None,
) -> Request:
    """The request for one prepared clip under one stack, rendered from the prompt templates."""
    record = budgeted(record, stack.budget)  # the frames the stack's budget picks, at their pts
    lang = options.lang or lang_of(record)
    prompts = prompt_set(str(options.prompt) if options.prompt else None)
    variables = template_variables(record, stack, lang, options)
    frames = frame_views(record, stack, prepared_dir)
    last = record.last_frame
    last_shown = bool(frames) and last is not None and record.frames[-1].index == last.index
    variables |= {"frames": frames, "last_shown": last_shown}
    rendered = prompts.render(lang, "user.j2", variables)
    parts, images = request_parts(rendered, record, stack, frames, prepared_dir, data_root)
    meta = {
        "clip_id": record.clip_id,
        "stack": stack.name,
        "prompt_version": PROMPT_VERSION,
        "prompt_sha256": prompts.sha256,
        "coord_order": options.coord_order,
        "lang": lang,
        "shown": shown(record, stack, variables, frames, images, prepared_dir),
    }
    system = prompts.render(lang, "system.j2", variables)
    return Request(system, tuple(parts), prepared_dir, meta, shared_prefix(stack, parts))
