"""EcoG prompts (EN and ZH, same structure) and request building from a manifest record.

Structure follows the benchmark protocol (FORMAT.md, "Input stacks"): a system
prompt with the clip's option list, the JSON template, the coordinate
convention and one line of guidance per instruction; a user turn with
`<instruction>`, `<asr_data>` with its note, and the frames, each preceded by
`<timestamp_ms>N` carrying the frame's true pts.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ...io import inside
from ...manifest import ClipRecord, frame_file
from ...messages import Image, Part, Request, Text, Video
from ...stacks import Stack

PROMPT_VERSION = "ecog-1"
COORD_ORDERS = ("xy", "yx")
ASR_SOURCES = (None, "whisper", "source")


@dataclass(frozen=True)
class EcogOptions:
    """What goes into an EcoG request besides the stack: point order, whose ASR, prompt language."""

    coord_order: str = "xy"  # xy | yx: the order the prompt asks points in
    asr_source: str | None = None  # whisper (ours) | source (the annotations') | None: ours when prepared
    lang: str | None = None  # en | zh; None: each clip's own

    def __post_init__(self) -> None:
        if self.coord_order not in COORD_ORDERS:
            raise ValueError(f"coord order must be xy or yx; found {self.coord_order!r}")
        if self.asr_source not in ASR_SOURCES:
            raise ValueError(f"asr source must be whisper or source; found {self.asr_source!r}")

TEXT: dict[str, dict[str, Any]] = {
    "en": {
        "role": "You are an embodied vision-language assistant. Your task is Ego-centric Co-Speech Intent "
        "Grounding (EcoG): from first-person video and the user's speech, work out what the user "
        "wants done and return the options, points and moments that ground it.",
        "options": "Options:",
        "objects": "Objects:",
        "spaces": "Places:",
        "rules": "Rules:\n1. Output one valid JSON object and nothing else.\n2. Coordinates: {coord} "
        "Take every point on the LAST frame of the sequence.\n3. `target_object` is the thing the "
        "user wants to grasp or move; `spatial_affordance` is the place it goes, or the reference "
        "area of a spatial relation.",
        "coord_xy": "[x, y] integers in 0-1000 (x across, y down), (0, 0) at the top-left.",
        "coord_yx": "[y, x] integers in 0-1000 (y down, x across), (0, 0) at the top-left.",
        "template": "JSON template (same keys, same structure):",
        "fields": "- `selected_options`: option labels in the order the actions are carried out.\n"
        "- `point_list`: same length and order as `selected_options`; `point` on the last frame; "
        "`timestamp` an integer in ms: the moment the pointing gesture is held steady on that "
        "referent (the stroke peak).",
        "guide": {
            "指令1": "This clip: the user points without speaking. One target_object.",
            "指令2": 'This clip: one object is handled ("pick this up"). One target_object.',
            "指令3": 'This clip: an object is placed ("put this here"). target_object -> spatial_affordance.',
            "指令4": 'This clip: a relational placement ("put this to its right"). '
            "target_object -> spatial_affordance.",
            "指令5": "This clip: place then pick. target_object -> spatial_affordance -> target_object.",
            "指令6": "This clip: place then place. target_object -> spatial_affordance -> target_object "
            "-> spatial_affordance.",
        },
        "end": "Output raw JSON only.",
        "silent": "The user did not speak; they only pointed.",
        "asr_note": "Note: the ASR words carry timestamps (begin_time, end_time, ms from clip start).",
        "asr_note_text": "Note: the ASR gives the transcript text only (no word timestamps).",
        "ask_frames": "Analyse the video frames together with the inputs above and answer in the JSON format.",
        "ask_video": "Analyse the video (with its audio) together with the inputs above and answer in the JSON format.",
        "ask_text": "No visual input is given. Answer from the inputs above in the JSON format.",
        "frames_head": "Video frames, in time order:",
        "last": "(last frame)",
    },
    "zh": {
        "role": "你是具备具身智能的视觉-语言助手。你的任务是第一人称视角的伴随语音意图定位（EcoG）：根据第一人称视频和"
        "用户的语音，理解用户要做什么，并给出对应的选项、坐标点和时刻。",
        "options": "选项：",
        "objects": "物体：",
        "spaces": "位置：",
        "rules": "规则：\n1. 只输出一个合法的 JSON 对象，不要输出其他内容。\n2. 坐标：{coord}"
        "所有坐标都取自序列的【最后一帧】。\n3. `target_object` 是用户要拿起或移动的物体；"
        "`spatial_affordance` 是物体要放到的位置，或空间关系所参照的区域。",
        "coord_xy": "[x, y] 整数，范围 0-1000（x 为横向，y 为纵向），(0, 0) 为左上角。",
        "coord_yx": "[y, x] 整数，范围 0-1000（y 为纵向，x 为横向），(0, 0) 为左上角。",
        "template": "JSON 模板（键名与结构必须一致）：",
        "fields": "- `selected_options`：按动作执行先后排列的选项标号。\n"
        "- `point_list`：长度与顺序与 `selected_options` 一致；`point` 取自最后一帧；"
        "`timestamp` 为整数毫秒：手指稳定指向该对象的时刻（指向动作的峰值）。",
        "guide": {
            "指令1": "本片段：用户不说话，只用手指指向。一个 target_object。",
            "指令2": "本片段：单物体操作（“把这个拿起来”）。一个 target_object。",
            "指令3": "本片段：单物体放置（“把这个放到这里”）。target_object -> spatial_affordance。",
            "指令4": "本片段：关系型放置（“把这个放到它的右边”）。target_object -> spatial_affordance。",
            "指令5": "本片段：先放后拿。target_object -> spatial_affordance -> target_object。",
            "指令6": "本片段：先放后放。target_object -> spatial_affordance -> target_object -> spatial_affordance。",
        },
        "end": "只输出 JSON。",
        "silent": "用户没有说话，只是用手指了指。",
        "asr_note": "注意：ASR 的每个词带有时间戳（begin_time、end_time，单位毫秒，从片段开始计）。",
        "asr_note_text": "注意：ASR 只给出转写文本（没有词级时间戳）。",
        "ask_frames": "请结合视频帧与上述输入进行分析，并按要求的 JSON 格式输出。",
        "ask_video": "请结合视频（含音频）与上述输入进行分析，并按要求的 JSON 格式输出。",
        "ask_text": "没有提供任何视觉输入。请根据上述输入，按要求的 JSON 格式输出。",
        "frames_head": "视频帧（按时间顺序）：",
        "last": "（最后一帧）",
    },
}

TEMPLATE = """{
  "reasoning": "...",
  "explicit_command": "...",
  "selected_options": ["A", "b"],
  "point_list": [
    {"type": "target_object", "description": "...", "point": [500, 300], "timestamp": 1200},
    {"type": "spatial_affordance", "description": "...", "point": [300, 500], "timestamp": 3200}
  ]
}"""


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


def system_prompt(record: ClipRecord, lang: str, coord_order: str = "xy") -> str:
    t = TEXT[lang]
    gt = record.eval_gt or {}
    options = [t["options"]]
    if gt.get("object_choices"):
        options += [t["objects"], *_choices(gt, "object_choices")]
    if gt.get("space_choices"):
        options += [t["spaces"], *_choices(gt, "space_choices")]
    coord = t["coord_yx"] if coord_order == "yx" else t["coord_xy"]
    parts = [
        t["role"],
        "\n".join(options),
        t["rules"].format(coord=coord),
        t["template"] + "\n" + TEMPLATE,
        t["fields"],
    ]
    guide = t["guide"].get(record.task_template or "")
    if guide:
        parts.append(guide)
    parts.append(t["end"])
    return "\n\n".join(parts)


def pick_asr(record: ClipRecord, source: str | None) -> dict[str, Any] | None:
    """`whisper` (ours, from prepare) or `source` (the annotations' verified asr_result).

    Default: ours when prepared, else the source.
    """
    ours, theirs = record.asr, record.source_asr
    if source == "whisper":
        return ours
    if source == "source":
        return theirs
    return ours if ours is not None else theirs


def asr_block(asr: dict[str, Any], with_times: bool) -> dict[str, Any]:
    if not with_times:
        return {"text": asr.get("text", "")}
    words = [
        {"text": w["text"], "begin_time": w["begin_time"], "end_time": w["end_time"]} for w in asr.get("words", [])
    ]
    return {"text": asr.get("text", ""), "words": words}


def _is_silent(record: ClipRecord, asr: dict[str, Any] | None) -> bool:
    return record.task_template == "指令1" or not (asr or {}).get("text", "").strip()


def user_text(record: ClipRecord, stack: Stack, lang: str, asr: dict[str, Any] | None) -> str:
    t = TEXT[lang]
    silent = _is_silent(record, asr)
    spoken = (asr or {}).get("text", "").strip()
    chunks = [f"<instruction>\n{t['silent'] if silent else spoken}\n</instruction>"]
    if stack.has("asr") and asr is not None and not silent:
        with_times = stack.has("word_ts")
        note = t["asr_note"] if with_times else t["asr_note_text"]
        body = json.dumps(asr_block(asr, with_times), ensure_ascii=False)
        chunks.append(f"<asr_data>\n{body}\n{note}\n</asr_data>")
    ask = "ask_video" if stack.has("video") else "ask_frames" if stack.has("frames") else "ask_text"
    chunks.append(t[ask])
    return "\n".join(chunks)


def frame_parts(record: ClipRecord, stack: Stack, lang: str, prepared_dir: str) -> list[Part]:
    """Each frame after its `<timestamp_ms>` tag; the JPEG must lie inside the prepared folder."""
    parts: list[Part] = [Text(TEXT[lang]["frames_head"])]
    for f in record.frames:
        frame_file(prepared_dir, f, record.clip_id)  # refuse a path that leaves the prepared folder
        if stack.has("frame_ts"):
            parts.append(Text(f"<timestamp_ms>{f.pts_ms}"))
        parts.append(Image(f.path, f.pts_ms))
    if record.last_frame is not None and record.frames and record.frames[-1].index == record.last_frame.index:
        parts.append(Text(TEXT[lang]["last"]))
    return parts


def shown(record: ClipRecord, stack: Stack, asr: dict[str, Any] | None) -> dict[str, Any]:
    """What the request shows, as data, for the offline baselines (which must see exactly what a
    model sees): the option letters, the referent roles of the guidance line, the frame
    timestamps and the timed words, each only when the stack carries it."""
    gt = record.eval_gt or {}
    letters = [m.group(1) for c in _choices(gt, "object_choices") + _choices(gt, "space_choices")
               if (m := _OPTION.match(c.strip()))]
    words: list[dict[str, Any]] = []
    if stack.has("asr") and stack.has("word_ts") and asr is not None and not _is_silent(record, asr):
        words = asr_block(asr, True)["words"]
    stamps = [f.pts_ms for f in record.frames] if stack.has("frames") and stack.has("frame_ts") else []
    return {
        "objects": [c for c in letters if c.isupper()],
        "spaces": [c for c in letters if c.islower()],
        "roles": list(ROLES.get(record.task_template or "", ("target_object",))),
        "frame_ts": stamps,
        "words": words,
    }


def build_request(
    record: ClipRecord,
    stack: Stack,
    prepared_dir: str,
    options: EcogOptions = EcogOptions(),
    data_root: str | None = None,
) -> Request:
    """The request for one prepared clip under one stack."""
    lang = options.lang or lang_of(record)
    asr = pick_asr(record, options.asr_source)
    parts: list[Part] = [Text(user_text(record, stack, lang, asr))]
    if stack.has("video"):
        if data_root is None:
            raise ValueError("the video variant needs the data root (recorded in prepare.json)")
        inside(data_root, record.video, f"clip {record.clip_id!r}: video", links=True)  # a manifest is input too
        parts.append(Video(f"{data_root}/{record.video}"))
    elif stack.has("frames"):
        parts += frame_parts(record, stack, lang, prepared_dir)
    meta = {
        "clip_id": record.clip_id,
        "stack": stack.name,
        "prompt_version": PROMPT_VERSION,
        "coord_order": options.coord_order,
        "lang": lang,
        "shown": shown(record, stack, asr),
    }
    system = system_prompt(record, lang, options.coord_order)
    return Request(system=system, parts=tuple(parts), root=prepared_dir, meta=meta)
