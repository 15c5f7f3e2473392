"""The EcoG-Bench folder layout: `指令1` … `指令6` folders at any depth, each with videos,
`annotations.json` and `eval_gt.json`; one clip job per annotated video."""

from __future__ import annotations

from pathlib import Path

from avstack.io import DataError, read_json_file
from avstack.preparation.discover import ClipJob, rel_path
from avstack.tasks.ecog.data import INSTRUCTIONS, load_annotations, safe_video_path
from avstack.tasks.ecog.validate import annotation_problem, check_record, eval_gt_problem


def instruction_dirs(root: str | Path) -> list[Path]:
    """Every `指令N` folder below root, at any depth (linked folders included), sorted."""
    root = Path(root)
    return sorted(p for p in root.rglob("指令*") if p.is_dir() and p.name in INSTRUCTIONS)


def ecog_layout(root: Path, lang: str | None) -> list[ClipJob] | None:
    """The clip jobs of an EcoG root; None when root has no `指令N` folder."""
    folders = instruction_dirs(root)
    if not folders:
        return None
    return [job for folder in folders for job in _folder_jobs(root, folder, lang)]


def _problem_job(root: Path, folder: Path, name: str, message: str) -> ClipJob:
    rel = f"{rel_path(root, folder)}/{name}"
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
    for rec in annotations:
        name = rec.get("video_name")
        try:
            path = safe_video_path(root, folder, name)
        except DataError as exc:
            jobs.append(_problem_job(root, folder, str(name), str(exc)))
            continue
        problem: str | None = None
        if not path.is_file():
            problem = f"{name!r} listed in {folder / 'annotations.json'} but the video file is missing"
        elif gt_problem:
            problem = gt_problem
        elif name not in eval_gt:
            problem = f"{name!r}: no entry in {folder / 'eval_gt.json'}"
        elif bad := annotation_problem(rec) or eval_gt_problem(eval_gt[name]):
            problem = f"{name!r} in {folder.name}: {bad}"
        rel = rel_path(root, folder) + "/" + str(name)
        if problem:  # none of its fields is trusted into the manifest
            jobs.append(ClipJob(clip_id=rel, video=rel, path=str(path), task_template=folder.name, problem=problem))
            continue
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
                check=check_record,
            )
        )
    return jobs
