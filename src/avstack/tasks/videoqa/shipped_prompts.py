"""A benchmark's own prompt as its code sends it (the `concat`, `interleave` and `frame_cues`
variants): the arm
that reproduces the field's setting, beside the arms that go beyond it.

Video-MME-v2 (its standalone script, evaluation/test_video_mme_v2.py, read at
MME-Benchmarks/Video-MME-v2 013b6c9): `concat` sends the frames, `These are the frames of a
video. This video's subtitles are listed below:\\n{the words joined by spaces}\\n`, then
`Question: {question}\\n{options}\\n` and its instruction (`Select the best answer ... Respond
with only the letter (A, B, C, D, E, F, G, or H) of the correct option.`); the words' times are
dropped, as lmms-eval's PR #1289 also does. `interleave` merges the words into sentences (a new
one after a gap over 0.5 s, or after . ! ? with a gap over 0.1 s) and puts after each frame, a
text part each, the sentences that overlap [t_i, t_i+1) (end >= t_i and start < t_i+1: a long
sentence follows every frame it spans) as `[Subtitle 12.34s - 15.00s]: ...`, then its own
sentence on the subtitles between frames, and the same question part. t_i is the frame's
index / fps, as the script times frames (not its pts: on a variable-rate clip the two differ,
and this arm keeps the script's); the last frame's span ends at the clip's end.

WorldSense (VLMEvalKit's vlmeval/dataset/worldsense.py, its frames-with-subtitles setting, read at
open-compass/VLMEvalKit 00fff54): `frame_cues` sends its instruction, the frames, `These are the
frames of a video. This video's subtitles are listed below:` with, a line per sampled frame, the
cue on screen at that frame's time (index / fps, to the ms; the first cue with begin < t < end; a
frame with none adds no line, and a cue on screen at three frames is listed three times), then
`Question: ...` with its candidates and `Answer: `. Its text parts are the strings that code
writes; a cue's lines are joined by a space (as it joins pysubs2's line breaks), its markup
dropped."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from avstack.io import DataError
from avstack.manifest import ClipRecord
from avstack.prompting.messages import Image, Part, Request, Text
from avstack.prompting.stacks import Stack
from avstack.tasks.videoqa.items import Item

if TYPE_CHECKING:  # a TypedDict: only the annotations read it
    from avstack.asr.types import TimedWord


# Video-MME-v2's, as its standalone script writes them
MME2_SUBTITLED = "These are the frames of a video. This video's subtitles are listed below:\n{}\n"
MME2_INTERLEAVED = (
    "These are the frames of a video with corresponding subtitles shown between frames. "
    "The subtitles indicate what is being said during the time interval between adjacent frames."
)
MME2_INSTRUCTION = (
    "Select the best answer to the following multiple-choice question based on the video. "
    "Respond with only the letter (A, B, C, D, E, F, G, or H) of the correct option."
)
SENTENCE_GAP_S, AFTER_STOP_GAP_S = 0.5, 0.1
# WorldSense's, as VLMEvalKit writes them around the frames (its subtitled setting)
WS_INSTRUCTION = (
    "Carefully watch this video and pay attention to every detail. "
    "Based on your observations, select the best option that accurately addresses the question."
)
WS_SUBTITLED = (
    "\nThese are the frames of a video. This video's subtitles are listed below:\n{}\n"
    "Select the best answer to the following multiple-choice question based on the video. "
    "Respond with only the letter (A, B, C, or D) of the correct option.\n"
)
WS_QUESTION = "Question: {}\nAnswer: "
# (protocol, variant) this module writes, and whose prompt each variant is
PROMPTS = {("videomme2", "concat"), ("videomme2", "interleave"), ("worldsense", "frame_cues")}
OWNER = {"concat": "Video-MME-v2", "interleave": "Video-MME-v2", "frame_cues": "WorldSense"}


def sentences(words: Sequence[TimedWord]) -> list[tuple[float, float, str]]:
    """(start s, end s, text) of the script's sentences over timed words (ms)."""
    out: list[tuple[float, float, str]] = []
    for w in words:
        begin, end, text = w["begin_time"] / 1000, w["end_time"] / 1000, w["text"]
        if out:
            gap, last = begin - out[-1][1], out[-1][2]
            if not (gap > SENTENCE_GAP_S or (last.endswith((".", "!", "?")) and gap > AFTER_STOP_GAP_S)):
                out[-1] = (out[-1][0], end, f"{last} {text}")
                continue
        out.append((begin, end, text))
    return out


def cues_at_frames(cues: Sequence[TimedWord], times_ms: Sequence[int]) -> list[str]:
    """Per frame time, the text of the first cue on screen then (begin < t < end, strictly, as
    VLMEvalKit compares); a frame with no cue gives no line."""
    lines = []
    for t in times_ms:
        text = next((c["text"] for c in cues if c["begin_time"] < t < c["end_time"]), "")
        if text.strip():
            lines.append(text)
    return lines


def _index_seconds(record: ClipRecord, variant: str) -> list[float]:
    """Each frame's time as these scripts take it: its index / fps (not its pts)."""
    if not record.fps:
        raise DataError(f"clip {record.clip_id!r}: {variant} times frames by index / fps; the clip has no fps")
    return [f.index / record.fps for f in record.frames]


def _question(item: Item) -> str:
    return f"Question: {item.question}\n" + "\n".join(item.options) + f"\n{MME2_INSTRUCTION}"


def shipped_request(record: ClipRecord, item: Item, stack: Stack, prepared_dir: str,
                    words: Sequence[TimedWord], meta: dict[str, Any]) -> Request:  # fmt: skip
    """The request the benchmark's own code would send for `item` under a shipped-prompt variant
    (its words: the item's subtitles, already cut at `until_s`)."""
    if (item.protocol, stack.variant) not in PROMPTS:
        raise DataError(
            f"item {item.id!r}: the {stack.variant} variant is {OWNER[stack.variant]}'s own prompt; this question "
            f"is {item.protocol or 'generic'}'s"
        )
    images = [Image(f.path, f.pts_ms) for f in record.frames]
    parts: list[Part]
    if stack.variant == "frame_cues":
        cues = cues_at_frames(words, [round(t * 1000) for t in _index_seconds(record, stack.variant)])
        question = WS_QUESTION.format(item.question + "\n" + "\n".join(item.options))
        parts = [Text(WS_INSTRUCTION), *images, Text(WS_SUBTITLED.format("\n".join(cues))), Text(question)]
    elif stack.variant == "concat":
        joined = " ".join(w["text"] for w in words)
        parts = [*images, Text(MME2_SUBTITLED.format(joined)), Text(_question(item))]
    else:
        end = record.duration_ms / 1000 if record.duration_ms else float("inf")
        bounds = [*_index_seconds(record, stack.variant), end]
        said = sentences(words)
        parts = []
        for k, image in enumerate(images):
            lo, hi = bounds[k], bounds[k + 1]
            parts += [image, *(Text(f"[Subtitle {a:.2f}s - {b:.2f}s]: {t}") for a, b, t in said if b >= lo and a < hi)]
        parts += [Text(MME2_INTERLEAVED), Text(_question(item))]
    return Request("", tuple(parts), prepared_dir, meta)
