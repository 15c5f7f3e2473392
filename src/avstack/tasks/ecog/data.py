"""EcoG-Bench data: the instruction-folder layout, ground truth records."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from avstack.io import DataError, load_records, read_json_file
from avstack.tasks.ecog.validate import eval_gt_problem, masks_problem

INSTRUCTIONS = tuple(f"指令{i}" for i in range(1, 7))
LEVEL_OF = {"指令1": "L1", "指令2": "L2", "指令3": "L3", "指令4": "L3", "指令5": "L4", "指令6": "L4"}


def referents(eval_gt: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The scored answers of a clip's eval_gt: objects with a choice, in order."""
    return [a for a in (eval_gt or {}).get("answer", []) if isinstance(a, dict) and a.get("choice")]


@dataclass(frozen=True)
class GtClip:
    """Normalized ground truth of one clip, as written by `avstack ecog gt`."""

    video_name: str
    task_template: str
    width: int
    height: int
    eval_gt: dict[str, Any]
    lang: str | None = None
    scene: str | None = None
    extra: dict[str, object] = field(default_factory=dict, compare=False)

    @property
    def level(self) -> str:
        return LEVEL_OF.get(self.task_template, "?")

    def to_json(self) -> dict[str, object]:
        rec: dict[str, object] = {
            "video_name": self.video_name,
            "task_template": self.task_template,
            "level": self.level,
            "width": self.width,
            "height": self.height,
            "eval_gt": self.eval_gt,
        }
        if self.lang:
            rec["lang"] = self.lang
        if self.scene:
            rec["scene"] = self.scene
        return rec

    @classmethod
    def from_json(cls, rec: dict[str, Any], where: str = "") -> GtClip:
        for key in ("lang", "scene"):
            if rec.get(key) is not None and not isinstance(rec[key], str):
                name = rec.get("video_name")
                raise DataError(f"{where}clip {name!r}: {key} must be a string, found {rec[key]!r:.40}")
        try:
            return cls(
                video_name=str(rec["video_name"]),
                task_template=str(rec["task_template"]),
                width=int(rec["width"]),
                height=int(rec["height"]),
                eval_gt=dict(rec["eval_gt"]),
                lang=rec.get("lang"),
                scene=rec.get("scene"),
            )
        except (KeyError, TypeError, ValueError) as exc:
            name = rec.get("video_name", "?") if isinstance(rec, dict) else "?"
            raise DataError(
                f"{where}clip {name!r}: expected video_name, task_template, width, height, "
                f"eval_gt; problem: {type(exc).__name__}: {exc}"
            ) from exc


def load_gt(path: str | Path) -> tuple[list[GtClip], list[str]]:
    """Ground-truth clips and per-item errors (a bad line never stops the rest)."""
    clips, errors = [], []
    for i, rec in enumerate(load_records(path, "clips"), 1):
        if isinstance(rec, DataError):
            errors.append(str(rec))
            continue
        try:
            if not isinstance(rec, dict):
                raise DataError(f"{path}: item {i}: expected an object, found {type(rec).__name__}")
            clip = GtClip.from_json(rec, where=f"{path}: ")
            problem = eval_gt_problem(clip.eval_gt) or masks_problem(clip.eval_gt, clip.width, clip.height)
            if problem:
                raise DataError(f"{path}: clip {clip.video_name!r}: {problem}")
            clips.append(clip)
        except DataError as exc:
            errors.append(str(exc))
    return clips, errors


def load_annotations(folder: Path) -> list[dict[str, Any]]:
    """annotations.json of one instruction folder, duplicate ids dropped (first kept)."""
    seen: set[object] = set()
    out = []
    for rec in read_json_file(folder / "annotations.json", list):
        if not isinstance(rec, dict):
            continue
        rid = rec.get("id")
        if rid is not None and rid in seen:
            continue
        seen.add(rid)
        out.append(rec)
    return out


def safe_video_path(root: Path, folder: Path, video_name: object) -> Path:
    """The clip file named by an annotation: a relative name without `..`, below its folder. The
    rule for links is the plain-folder rule: links the user made inside the data root (a linked
    video, a linked task folder) are followed; a name read from a file never climbs out."""
    if not isinstance(video_name, str) or not video_name:
        raise DataError(f"{folder}: video_name must be a non-empty string, found {video_name!r}")
    if Path(video_name).is_absolute() or ".." in Path(video_name).parts:
        raise DataError(f"{video_name!r} in {folder}: path escapes the data root {root}")
    return (folder / video_name).absolute()
