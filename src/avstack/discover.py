"""Find the clips of a data root: the EcoG-Bench layout or a plain folder of videos."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .tasks.ecog.data import (
    VIDEO_SUFFIXES,
    DataError,
    instruction_dirs,
    load_annotations,
    read_json_file,
    safe_video_path,
)


@dataclass(frozen=True)
class ClipJob:
    """One clip to prepare; `problem` is set when the clip cannot be located."""

    clip_id: str
    video: str  # relative to the data root (posix)
    path: str  # absolute
    task_template: str | None = None
    lang: str | None = None
    scene: str | None = None
    source_asr: dict[str, Any] | None = None
    eval_gt: dict[str, Any] | None = None
    problem: str | None = None
    meta: dict[str, Any] = field(default_factory=dict, compare=False)


def _rel(root: Path, path: Path) -> str:
    """Lexical path below root: a user's symlink to a video elsewhere is followed, not refused
    (names taken from annotation files are checked by safe_video_path instead)."""
    return path.relative_to(root).as_posix()


def discover(root: str | Path, lang: str | None = None) -> list[ClipJob]:
    """Clips in EcoG layout when `指令N` folders exist, else every video below root."""
    root = Path(root)
    if not root.is_dir():
        raise DataError(f"data root {root} is not a folder")
    folders = instruction_dirs(root)
    jobs = _ecog_jobs(root, folders, lang) if folders else _plain_jobs(root)
    return sorted(jobs, key=lambda j: j.clip_id)


def _plain_jobs(root: Path) -> list[ClipJob]:
    return [
        ClipJob(clip_id=_rel(root, p), video=_rel(root, p), path=str(p.resolve()))
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.suffix.lower() in VIDEO_SUFFIXES
    ]


def _ecog_jobs(root: Path, folders: list[Path], lang: str | None) -> list[ClipJob]:
    jobs: list[ClipJob] = []
    for folder in folders:
        jobs.extend(_folder_jobs(root, folder, lang))
    return jobs


def _problem_job(root: Path, folder: Path, name: str, message: str) -> ClipJob:
    rel = f"{_rel(root, folder)}/{name}"
    return ClipJob(clip_id=rel, video=rel, path="", task_template=folder.name, problem=message)


def _folder_jobs(root: Path, folder: Path, lang: str | None) -> list[ClipJob]:
    try:
        annotations = load_annotations(folder)
    except DataError as exc:
        return [_problem_job(root, folder, "annotations.json", str(exc))]
    try:
        eval_gt = read_json_file(folder / "eval_gt.json", dict)
    except DataError as exc:
        eval_gt, gt_problem = {}, str(exc)
    else:
        gt_problem = ""
    jobs = []
    named = set()
    for rec in annotations:
        name = rec.get("video_name")
        try:
            path = safe_video_path(root, folder, name)
        except DataError as exc:
            jobs.append(_problem_job(root, folder, str(name), str(exc)))
            continue
        named.add(path.name)
        problem: str | None = None
        if not path.is_file():
            problem = f"{name!r} listed in {folder / 'annotations.json'} but the video file is missing"
        elif gt_problem:
            problem = gt_problem
        elif name not in eval_gt:
            problem = f"{name!r}: no entry in {folder / 'eval_gt.json'}"
        rel = _rel(root, folder) + "/" + str(name)
        jobs.append(
            ClipJob(
                clip_id=rel,
                video=rel,
                path=str(path),
                task_template=folder.name,
                lang=rec.get("lang") or rec.get("language") or lang,
                scene=rec.get("scene"),
                source_asr=rec.get("asr_result"),
                eval_gt=eval_gt.get(name) if isinstance(eval_gt.get(name), dict) else None,
                problem=problem,
                meta={"id": rec.get("id")},
            )
        )
    return jobs
