"""The bundled sample set: EcoG-layout clips with known frames, words and strokes.

A fixed tabletop scene (four coloured objects, three free areas) is shown in
every clip; instructions are spoken word by word with espeak-ng at chosen
onsets, and each referent's pointing stroke is the window around its deictic
word, so word timing really carries the When of the answer.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import cv2
import numpy as np

from avstack.synthetic import synth

if TYPE_CHECKING:  # a TypedDict: only the annotations read it
    from avstack.asr.types import TimedWord


OBJECTS = {  # letter: (name, colour, rect as fractions x1, y1, x2, y2 of the displayed frame)
    "A": ("red cup", (220, 40, 40), (0.10, 0.55, 0.22, 0.80)),
    "B": ("blue box", (40, 70, 220), (0.35, 0.50, 0.55, 0.78)),
    "C": ("green bottle", (40, 180, 60), (0.65, 0.45, 0.72, 0.80)),
    "D": ("yellow book", (230, 210, 40), (0.80, 0.60, 0.95, 0.85)),
}
SPACES = {  # letter: (description, centre as fractions x, y)
    "a": ("the empty area left of the red cup", (0.04, 0.70)),
    "b": ("the empty area between the cup and the box", (0.28, 0.88)),
    "c": ("the empty area right of the yellow book", (0.97, 0.92)),
}
ZH_NAMES = {
    "A": "红色杯子",
    "B": "蓝色盒子",
    "C": "绿色瓶子",
    "D": "黄色书本",
    "a": "红色杯子左边的空地",
    "b": "杯子和盒子之间的空地",
    "c": "黄色书本右边的空地",
}


@dataclass(frozen=True)
class SampleClip:
    name: str
    instruction: int
    words_en: tuple[str, ...]  # "shown|spoken" allowed
    words_zh: tuple[str, ...]
    onsets_ms: tuple[int, ...]
    deictic: tuple[int, ...]  # word index of each referent's deictic word, in answer order
    answers: tuple[str, ...]
    spec: synth.ClipSpec
    audio: bool = True


def _clips(small: bool) -> list[SampleClip]:
    w, h = (640, 360) if small else (1920, 1080)
    base = synth.ClipSpec(width=w, height=h, fps=30, duration_s=4.0)
    portrait = replace(base, width=h, height=w)
    return [
        SampleClip("l1_point.mp4", 1, (), (), (), (), ("B",), base),
        SampleClip("l1_silent.mp4", 1, (), (), (), (), ("C",), replace(base, codec="libx265"), audio=False),
        SampleClip(
            "l2_pick.mp4",
            2,
            ("pick", "this", "up"),
            ("把|ba3", "这个|zhe4ge5", "拿起来|na2qi3lai2"),
            (500, 1000, 1700),
            (1,),
            ("A",),
            replace(base, codec="libx265"),
        ),
        SampleClip(
            "l2_portrait.mp4", 2, ("grab", "that"), ("拿|na2", "那个|na4ge5"), (700, 1300), (1,), ("D",), portrait
        ),
        SampleClip(
            "l3_put.MOV",
            3,
            ("put", "this", "over", "there"),
            ("把|ba3", "这个|zhe4ge5", "放到|fang4dao4", "那里|na4li3"),
            (400, 900, 1900, 2500),
            (1, 3),
            ("B", "a"),
            replace(base, rotation=90),
        ),
        SampleClip(
            "l3_left.mp4",
            4,
            ("put", "this", "to", "its", "left"),
            ("把|ba3", "这个|zhe4ge5", "放到|fang4dao4", "它|ta1", "左边|zuo3bian1"),
            (300, 800, 1700, 2100, 2500),
            (1, 3),
            ("C", "b"),
            replace(base, vfr=True),
        ),
        SampleClip(
            "l4_place_pick.mp4",
            5,
            ("put", "this", "here", "then", "take", "that"),
            ("把|ba3", "这个|zhe4ge5", "放这里|fang4zhe4li3", "然后|ran2hou4", "拿|na2", "那个|na4ge5"),
            (300, 700, 1400, 2100, 2600, 3100),
            (1, 2, 5),
            ("A", "c", "D"),
            replace(base, duration_s=4.5),
        ),
    ]


def _scene(w: int, h: int) -> np.ndarray:
    y = np.linspace(60, 150, h, dtype=np.uint8)
    img = np.repeat(np.repeat(y[:, None, None], w, 1), 3, 2)
    for _, colour, (x1, y1, x2, y2) in OBJECTS.values():
        img[int(y1 * h) : int(y2 * h), int(x1 * w) : int(x2 * w)] = colour
    return img


def _mask_record(rect: tuple[float, float, float, float], w: int, h: int) -> dict[str, object]:
    x1, y1, x2, y2 = int(rect[0] * w), int(rect[1] * h), int(rect[2] * w), int(rect[3] * h)
    crop = np.full((y2 - y1, x2 - x1), 255, np.uint8)
    ok, png = cv2.imencode(".png", crop)
    assert ok
    return {"bbox": [x1, y1, x2, y2], "mask_base64": base64.b64encode(png.tobytes()).decode(), "score": 1.0}


def _answer(letter: str, stroke: tuple[int, int], w: int, h: int) -> dict[str, object]:
    ans: dict[str, object] = {"choice": letter, "stroke_begin_time": stroke[0], "stroke_end_time": stroke[1]}
    if letter.isupper():
        rect = OBJECTS[letter][2]
        cx, cy = (rect[0] + rect[2]) / 2, (rect[1] + rect[3]) / 2
        ans["points"] = [[round(cy * 1000), round(cx * 1000)]]
        ans["mask"] = _mask_record(rect, w, h)
    else:
        cx, cy = SPACES[letter][1]
        ans["points"] = [[round(cy * 1000), round(cx * 1000)]]
    return ans


def _choices(lang: str) -> tuple[list[str], list[str]]:
    if lang == "zh":
        return ([f"{k}. {ZH_NAMES[k]}" for k in OBJECTS], [f"{k}. {ZH_NAMES[k]}" for k in SPACES])
    return ([f"{k}. {v[0]}" for k, v in OBJECTS.items()], [f"{k}. {v[0]}" for k, v in SPACES.items()])


def _strokes(clip: SampleClip, truth: Sequence[TimedWord]) -> list[tuple[int, int]]:
    if not truth:  # no speech (level 1): one stroke in the middle of the clip
        return [(1200, 2200)]
    return [(max(0, int(truth[i]["begin_time"]) - 200), int(truth[i]["end_time"]) + 300) for i in clip.deictic]


def make_sample_set(out: str | Path, lang: str = "en", small: bool = True) -> list[str]:
    """Write `out/指令N/{clips, annotations.json, eval_gt.json}`; returns the clip paths."""
    out = Path(out)
    voice = "cmn-latn-pinyin" if lang == "zh" else "en"
    annotations: dict[int, list[dict[str, object]]] = {}
    eval_gt: dict[int, dict[str, object]] = {}
    written = []
    for n, clip in enumerate(_clips(small)):
        spec = clip.spec
        k = (spec.rotation // 90) % 4
        dw, dh = (spec.height, spec.width) if k % 2 else (spec.width, spec.height)
        words = clip.words_zh if lang == "zh" else clip.words_en
        audio, truth = (
            synth.speak(words, clip.onsets_ms, spec.duration_s, voice=voice, seed=n)
            if words
            else (synth.noise(spec.duration_s, seed=n), [])
        )
        spec = replace(spec, audio=audio if clip.audio else None)
        folder = out / f"指令{clip.instruction}"
        folder.mkdir(parents=True, exist_ok=True)
        scene = np.ascontiguousarray(np.rot90(_scene(dw, dh), -k))
        synth.write_clip(folder / clip.name, spec, scene=scene)
        written.append(str(folder / clip.name))
        objects, spaces = _choices(lang)
        answers = [_answer(letter, stroke, dw, dh) for letter, stroke in zip(clip.answers, _strokes(clip, truth))]
        eval_gt.setdefault(clip.instruction, {})[clip.name] = {
            "object_choices": objects,
            "space_choices": spaces,
            "answer": answers,
        }
        sep = "" if lang == "zh" else " "
        annotations.setdefault(clip.instruction, []).append(
            {
                "id": f"sample{n:03d}",
                "video_name": clip.name,
                "task_template": f"指令{clip.instruction}",
                "scene": "Office Scene",
                "lang": lang,
                "asr_result": {"text": sep.join(str(t["text"]) for t in truth), "words": truth},
            }
        )
    for ins, recs in annotations.items():
        folder = out / f"指令{ins}"
        (folder / "annotations.json").write_text(json.dumps(recs, ensure_ascii=False, indent=1), encoding="utf-8")
        (folder / "eval_gt.json").write_text(json.dumps(eval_gt[ins], ensure_ascii=False, indent=1), encoding="utf-8")
    return written
