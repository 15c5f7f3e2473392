"""Requests for video questions: the same anchors and time formats as EcoG (frames with their true
times, word-timed ASR, the native video), plus the dataset's own subtitles with their cue times;
one Jinja2 template pair per item kind (`prompts/{mcq,open,grounding}/{system,user}.j2`), which
`--prompt DIR` replaces (`DIR/<kind>/system.j2`, or `DIR/system.j2` for every kind)."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from avstack.io import DataError, inside
from avstack.manifest import ClipRecord, frame_file
from avstack.prompting.messages import Audio, Image, Part, Request, Text, Video
from avstack.prompting.sound import clip_sound
from avstack.prompting.stacks import Stack
from avstack.prompting.templates import IMAGE, PART, PromptSet, clean, load_prompts, split_parts
from avstack.prompting.timefmt import frame_tag, parse_frame_tag, parse_words, words_block
from avstack.tasks.videoqa.data import Item
from avstack.tasks.videoqa.subtitles import read_subtitles

PROMPT_VERSION = "videoqa-1"
BUILTIN = Path(__file__).with_name("prompts")


@lru_cache(maxsize=16)
def prompt_set(folder: str | None) -> PromptSet:
    return load_prompts(folder or BUILTIN)


def _asr(record: ClipRecord, stack: Stack) -> tuple[bool, str]:
    asr = record.asr or {}
    if not stack.has("asr") or not asr.get("text", "").strip():
        return False, ""
    if not stack.has("word_ts"):
        return True, json.dumps({"text": asr["text"]}, ensure_ascii=False)
    words = [{"text": w["text"], "begin_time": w["begin_time"], "end_time": w["end_time"]} for w in asr["words"]]
    return True, words_block(stack.word_ts_format, asr["text"], words)


def _subtitles(item: Item, stack: Stack, data_root: str | None) -> tuple[bool, str]:
    if not stack.has("subtitles") or not item.subtitles:
        return False, ""
    if data_root is None:
        raise DataError(f"item {item.id!r}: subtitles need the data root (recorded in prepare.json)")
    cues = read_subtitles(inside(data_root, item.subtitles, f"item {item.id!r}: subtitles", links=True))
    # subtitles bring their own cue times (told like word times), whether or not ASR is in the stack
    return True, words_block(stack.word_ts_format, " ".join(c["text"] for c in cues), cues)


def _image_path(record: ClipRecord, k: int, stack: Stack, prepared_dir: str) -> str:
    f = record.frames[k]
    if stack.ts_format == "overlay" and stack.has("frame_ts"):  # the time burned into the frame
        from avstack.prompting.overlay import overlay_frame

        return overlay_frame(Path(prepared_dir), f.path, f.pts_ms)
    return f.path


def build_request(
    record: ClipRecord,
    item: Item,
    stack: Stack,
    prepared_dir: str,
    data_root: str | None,
    prompt_dir: Path | None = None,
) -> Request:
    """The request for one question about one prepared clip under one stack."""
    prompts = prompt_set(str(prompt_dir) if prompt_dir else None)
    frames: list[dict[str, Any]] = []
    if stack.has("frames"):
        for k, f in enumerate(record.frames):
            frame_file(prepared_dir, f, record.clip_id)  # a manifest is input: its paths stay inside
            tag = frame_tag(stack.ts_format, f.pts_ms, f.index) if stack.has("frame_ts") else None
            frames.append({"index": f.index, "pts_ms": f.pts_ms, "tag": tag, "image": IMAGE.format(k)})
    asr_shown, asr_block = _asr(record, stack)
    subs_shown, subs_block = _subtitles(item, stack, data_root)
    variables: dict[str, Any] = {
        "kind": item.kind,
        "question": clean(item.question),
        "options": [clean(o) for o in item.options],
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
    parts: list[Part] = [
        Image(_image_path(record, p, stack, prepared_dir), record.frames[p].pts_ms) if isinstance(p, int) else Text(p)
        for p in split_parts(prompts.render(item.kind, "user.j2", variables))
    ]
    if stack.has("video"):
        if data_root is None:
            raise ValueError("the video variant needs the data root (recorded in prepare.json)")
        inside(data_root, record.video, f"clip {record.clip_id!r}: video", links=True)
        parts.insert(0, Video(f"{data_root}/{record.video}"))
    if stack.has("audio"):
        parts.insert(0, Audio(clip_sound(record, prepared_dir, stack.name)))
    shown = {
        "letters": item.letters,
        "duration_s": variables["duration_s"],
        "frame_ts": [t for f in frames if f["tag"] and (t := parse_frame_tag(stack.ts_format, f["tag"])) is not None],
        "words": parse_words(stack.word_ts_format, asr_block) if asr_shown and stack.has("word_ts") else [],
    }
    meta = {
        "item_id": item.id,
        "clip_id": record.clip_id,
        "stack": stack.name,
        "kind": item.kind,
        "prompt_version": PROMPT_VERSION,
        "prompt_sha256": prompts.sha256,
        "shown": shown,
    }
    system = prompts.render(item.kind, "system.j2", variables)
    return Request(system=system, parts=tuple(parts), root=prepared_dir, meta=meta)
