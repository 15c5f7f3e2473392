"""EcoG-Bench data: the instruction-folder layout, ground truth records."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

INSTRUCTIONS = tuple(f"指令{i}" for i in range(1, 7))
LEVEL_OF = {"指令1": "L1", "指令2": "L2", "指令3": "L3", "指令4": "L3", "指令5": "L4", "指令6": "L4"}
VIDEO_SUFFIXES = (".mp4", ".mov", ".m4v", ".mkv", ".webm", ".avi")


class DataError(ValueError):
    """Bad input data; the message names the item."""


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
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def level(self) -> str:
        return LEVEL_OF.get(self.task_template, "?")

    def to_json(self) -> dict[str, Any]:
        rec: dict[str, Any] = {
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


def read_jsonl(path: str | Path) -> Iterator[tuple[int, Any]]:
    """(line number, parsed JSON or a DataError) for each non-empty line."""
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                yield lineno, json.loads(line)
            except json.JSONDecodeError as exc:
                yield lineno, DataError(f"{path}:{lineno}: not JSON ({exc.msg})")


def write_jsonl(path: str | Path, records: Iterable[Any]) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        for rec in records:
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")


def load_records(path: str | Path, key: str = "clips") -> list[Any]:
    """Records of a .jsonl file, or of a .json file (a list, or a dict holding `key`)."""
    p = Path(path)
    if p.suffix == ".json":
        data = json.loads(p.read_text(encoding="utf-8"))
        if isinstance(data, dict):
            data = data.get(key, [])
        if not isinstance(data, list):
            raise DataError(f"{p}: expected a list of records under {key!r}, found {type(data).__name__}")
        return data
    return [rec for _, rec in read_jsonl(p)]


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
            clips.append(GtClip.from_json(rec, where=f"{path}: "))
        except DataError as exc:
            errors.append(str(exc))
    return clips, errors


def instruction_dirs(root: str | Path) -> list[Path]:
    """Every `指令N` folder below root, at any depth, sorted."""
    root = Path(root)
    return sorted(p for p in root.rglob("指令*") if p.is_dir() and p.name in INSTRUCTIONS)


def read_json_file(path: Path, expect: type) -> Any:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{path}: missing") from None
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, expect):
        raise DataError(f"{path}: expected a JSON {expect.__name__}, found {type(data).__name__}")
    return data


def load_annotations(folder: Path) -> list[dict[str, Any]]:
    """annotations.json of one instruction folder, duplicate ids dropped (first kept)."""
    seen: set[Any] = set()
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


def safe_video_path(root: Path, folder: Path, video_name: Any) -> Path:
    """The clip file, refusing names that escape the data root."""
    if not isinstance(video_name, str) or not video_name:
        raise DataError(f"{folder}: video_name must be a non-empty string, found {video_name!r}")
    if Path(video_name).is_absolute() or ".." in Path(video_name).parts:
        raise DataError(f"{video_name!r} in {folder}: path escapes the data root {root}")
    path = (folder / video_name).resolve()
    if not path.is_relative_to(root.resolve()):
        raise DataError(f"{video_name!r} in {folder}: path escapes the data root {root}")
    return path
