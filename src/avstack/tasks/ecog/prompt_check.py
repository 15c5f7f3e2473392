"""`avstack prompts check DIR`: render one clip of the bundled sample set with a user's templates
and say what is wrong (unknown variables, missing parts) and where the frames go."""

from __future__ import annotations

import json
from pathlib import Path

from avstack.asr.types import transcript_from_ecog
from avstack.manifest import ClipRecord, FrameRef
from avstack.prompting.messages import Image, Text
from avstack.prompting.stacks import make_stack
from avstack.prompting.templates import PromptError, load_prompts, undeclared
from avstack.tasks.ecog.inputs import EcogInputs
from avstack.tasks.ecog.prompt import build_request, prompt_set

# What a template receives (README: "Prompt templates"); `part` and `frames[].image` are markers.
VARIABLES = {
    "lang",
    "coord_order",
    "task_template",
    "stack",
    "anchors",
    "ts_format",
    "word_ts_format",
    "object_choices",
    "space_choices",
    "instruction",
    "silent",
    "speech_sound",
    "asr",
    "asr_shown",
    "word_times",
    "asr_block",
    "visual",
    "part",
    "frames",
    "last_shown",
}
SAMPLE = Path(__file__).resolve().parents[4] / "samples" / "ecog_en" / "指令3"


FALLBACK = {  # the sample set's 指令3 clip, for installs without the repository's samples/
    "video_name": "l3_put.MOV",
    "asr_result": {
        "text": "put this over there",
        "words": [
            {"text": "put", "begin_time": 400, "end_time": 687},
            {"text": "this", "begin_time": 900, "end_time": 1265},
            {"text": "over", "begin_time": 1900, "end_time": 2340},
            {"text": "there", "begin_time": 2500, "end_time": 2900},
        ],
    },
    "eval_gt": {
        "object_choices": ["A. red cup", "B. blue box"],
        "space_choices": ["a. left", "b. right"],
        "answer": [
            {"choice": "B", "stroke_begin_time": 700, "stroke_end_time": 1560, "points": [500, 500]},
            {"choice": "a", "stroke_begin_time": 2300, "stroke_end_time": 3200, "points": [600, 300]},
        ],
    },
}


def sample_record(folder: Path = SAMPLE) -> ClipRecord:
    """A clip of the sample set as a prepared record (frames every 500 ms; no decoding needed)."""
    if (folder / "annotations.json").is_file():
        ann = json.loads((folder / "annotations.json").read_text(encoding="utf-8"))[0]
        gt = json.loads((folder / "eval_gt.json").read_text(encoding="utf-8"))[ann["video_name"]]
    else:
        ann, gt = FALLBACK, FALLBACK["eval_gt"]
    frames = tuple(FrameRef(15 * k, 500 * k, f"frames/sample/{k:06d}.jpg") for k in range(8))
    return ClipRecord(
        clip_id=f"{folder.name}/{ann['video_name']}",
        video=ann["video_name"],
        task_template=folder.name,
        lang="en",
        width=640,
        height=360,
        duration_ms=4000,
        frames=frames,
        last_frame=frames[-1],
        asr=transcript_from_ecog(ann["asr_result"], "sample asr_result") if ann.get("asr_result") else None,
        eval_gt=gt,
    )


def check_prompts(folder: str | Path) -> tuple[str, bool]:
    folder = Path(folder)
    prompts = load_prompts(folder)
    lines, ok = [f"templates: {prompts.folder} (sha256 {prompts.sha256[:16]})"], True
    for name in ("system.j2", "user.j2"):
        if not prompts.path("en", name).is_file():
            lines.append(f"MISSING {name}: every prompt folder needs system.j2 and user.j2")
            ok = False
    for template, names in undeclared(folder).items():
        unknown = sorted(names - VARIABLES)
        if unknown:
            lines.append(f"UNKNOWN in {template}: {', '.join(unknown)} (known: {', '.join(sorted(VARIABLES))})")
            ok = False
    if not ok:
        return "\n".join(lines), False
    prompt_set.cache_clear()  # the folder may have changed since it was last read
    rec = sample_record()
    try:
        req = build_request(rec, make_stack("full"), "/prepared", EcogInputs(prompt=folder))
    except PromptError as exc:
        return "\n".join([*lines, f"ERROR {exc}"]), False
    images = [i for i, p in enumerate(req.parts) if isinstance(p, Image)]
    lines.append(f"rendered {rec.clip_id}: system {len(req.system)} chars, {len(req.parts)} user parts")
    if len(images) != len(rec.frames):
        lines.append(
            f"FRAMES: {len(images)} images placed for {len(rec.frames)} frames (use {{{{ f.image }}}} once per frame)"
        )
        ok = False
    elif images:
        before = req.parts[images[0] - 1]
        lead = before.text.splitlines()[-1] if isinstance(before, Text) and before.text else "(nothing)"
        lines.append(f"frames: parts {images[0]}..{images[-1]}; the first follows {lead!r}")
    if not any(isinstance(p, Text) and (rec.asr.text if rec.asr else "").strip() in p.text for p in req.parts):
        lines.append("NOTE: the instruction text does not appear in the user turn")
    return "\n".join(lines), ok
