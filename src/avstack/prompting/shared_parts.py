"""The parts of a request that every task builds the same way from a prepared clip and a stack:
the frames as templates see them (their time tags), the images sent (overlaid when the time is
burned in), the ASR block in the stack's word-time format, and where the clip's own video or
sound goes. A task's prompt module keeps only what is its own (its templates and variables)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from avstack.errors import UsageError
from avstack.io import DataError, inside
from avstack.manifest import ClipRecord, frame_file
from avstack.prompting.messages import Audio, Image, Part, Text, Video
from avstack.prompting.sound import clip_sound
from avstack.prompting.stacks import Stack
from avstack.prompting.templates import IMAGE, split_parts
from avstack.prompting.timefmt import frame_tag, parse_frame_tag, words_block

if TYPE_CHECKING:  # a TypedDict: only the annotations read it
    from avstack.asr.types import TimedWord


# between two frames, in every arm: a server may merge two images that touch into one (llama.cpp's
# Qwen2-VL takes adjacent pictures as one temporal pair, half the visual tokens), so an arm without
# the time tags would see other pictures than `full`. The same text after every frame but the last
# keeps every frame a picture of its own, and `full` and `-frame_ts` differ by the tags alone.
FRAME_SEPARATOR = "\n"
# the clip's own video or sound goes right after the first text part (the instruction or question
# it accompanies), before the frames; one place, so every task's requests agree
MEDIA_AT = 1


def frame_views(record: ClipRecord, stack: Stack, prepared_dir: str) -> list[dict[str, Any]]:
    """Each sampled frame as a template sees it: index, pts_ms, its time tag in the stack's format
    (None for overlay, or when frame_ts is dropped), and the image marker. A frame path that leaves
    the prepared folder is refused (a manifest is input too)."""
    if not stack.has("frames"):
        return []
    views = []
    for k, f in enumerate(record.frames):
        frame_file(prepared_dir, f, record.clip_id)
        tag = frame_tag(stack.ts_format, f.pts_ms, f.index) if stack.has("frame_ts") else None
        views.append({"index": f.index, "pts_ms": f.pts_ms, "tag": tag, "image": IMAGE.format(k)})
    return views


def image_path(record: ClipRecord, k: int, stack: Stack, prepared_dir: str) -> str:
    """The picture sent for frame `k`: the prepared JPEG, or it with its time burned in (overlay)."""
    f = record.frames[k]
    if stack.ts_format == "overlay" and stack.has("frame_ts"):
        from avstack.prompting.overlay import overlay_frame

        return overlay_frame(Path(prepared_dir), f.path, f.pts_ms)
    return f.path


def frame_times_told(frames: list[dict[str, Any]], stack: Stack) -> list[int]:
    """The frame times the tags tell, parsed back in their format (none for `index`)."""
    return [t for f in frames if f["tag"] and (t := parse_frame_tag(stack.ts_format, f["tag"])) is not None]


def asr_text(asr: dict[str, Any], stack: Stack) -> str:
    """The transcript as the stack shows it: with word times in its word-time format, else the
    text alone as JSON."""
    if not stack.has("word_ts"):
        return json.dumps({"text": asr.get("text", "")}, ensure_ascii=False)
    words: list[TimedWord] = [
        {"text": w["text"], "begin_time": w["begin_time"], "end_time": w["end_time"]} for w in asr.get("words", [])
    ]
    return words_block(stack.word_ts_format, asr.get("text", ""), words)


def request_parts(
    rendered: str,
    record: ClipRecord,
    stack: Stack,
    frames: list[dict[str, object]],
    prepared_dir: str,
    data_root: str | None,
    given: Mapping[str, str] | None = None,
) -> tuple[list[Part], list[str]]:
    """A rendered user turn as parts (text, and each frame marker as its image with its pts), the
    clip's video or sound placed at MEDIA_AT; also the image path of every frame view, in order.
    `given`: the benchmark's own files for the request, by role, sent in place of the clip's: its
    "sound" (Daily-Omni's wav, AV-SpeakerBench's audio_path) and its "silent" video."""
    images = [image_path(record, k, stack, prepared_dir) for k in range(len(frames))]
    chunks = split_parts(rendered)
    parts: list[Part] = []
    for p in chunks:
        if not isinstance(p, int):
            parts.append(Text(p))
            continue
        parts.append(Image(images[p], record.frames[p].pts_ms))
        if p < len(frames) - 1:
            parts.append(Text(FRAME_SEPARATOR))
    if stack.has("video"):
        if data_root is None:
            raise UsageError("the video variant needs the data root (recorded in prepare.json)")
        inside(data_root, record.video, f"clip {record.clip_id!r}: video", links=True)  # a manifest is input too
        parts.insert(MEDIA_AT, Video(f"{data_root}/{record.video}"))
    given = given or {}
    if stack.has("silent"):
        if "silent" not in given:
            raise DataError(
                f"clip {record.clip_id!r}: the {stack.name} stack sends the benchmark's silent copy of the video "
                "(AV-SpeakerBench's visual_path); the questions file gives none"
            )
        parts.insert(MEDIA_AT, Video(given["silent"]))
    if stack.has("audio"):
        parts.insert(MEDIA_AT, Audio(given.get("sound") or clip_sound(record, prepared_dir, stack.name)))
    if stack.layout == "shared-first" and len(parts) > 1:
        # what a clip's stacks share (its video or sound, the frames with their tags) before what
        # they vary in (the instruction with the ASR block, the first text part)
        parts = parts[1:] + parts[:1]
    return parts, images


def shared_prefix(stack: Stack, parts: list[Part]) -> int:
    """The leading parts a clip's stacks share under the stack's layout: all but the instruction
    under shared-first (the frames with their tags, the clip's media), none under the benchmark's
    own order (the instruction with the ASR block comes first)."""
    return len(parts) - 1 if stack.layout == "shared-first" and len(parts) > 1 else 0
