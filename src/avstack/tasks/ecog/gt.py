"""Normalized ground truth from an EcoG data root (`avstack ecog gt`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from avstack.io import DataError
from avstack.manifest import load_manifest
from avstack.preparation.discover import discover
from avstack.tasks.ecog.data import GtClip
from avstack.tasks.ecog.layout import ecog_layout
from avstack.tasks.ecog.metrics import load_mask
from avstack.tasks.ecog.validate import masks_problem


def check_masks(name: str, eval_gt: dict[str, Any], width: int, height: int) -> None:
    """Every object mask must fit the frame (checked on its header) and decode as an image; raise
    naming the clip and referent otherwise."""
    if problem := masks_problem(eval_gt, width, height):
        raise DataError(f"{name}: {problem}")
    for i, ans in enumerate(eval_gt.get("answer", [])):
        mask = ans.get("mask") if isinstance(ans, dict) else None
        if not isinstance(mask, dict) or not mask.get("mask_base64"):
            continue
        if load_mask(mask, width, height) is None:
            raise DataError(f"{name}: answer {i} mask does not decode as an image with a 4-number bbox")


def _sizes_from_manifest(prepared: Path | None) -> dict[str, tuple[int, int]]:
    if prepared is None:
        return {}
    return {r.clip_id: (r.width, r.height) for r in load_manifest(prepared) if r.width and r.height}


def ground_truth(
    root: str | Path, lang: str | None = None, prepared: Path | None = None
) -> tuple[list[GtClip], list[str]]:
    """GT records for every clip, and an error line per clip that cannot be used."""
    from avstack.media.probe import probe

    sizes = _sizes_from_manifest(prepared)
    records, errors = [], []
    for job in discover(root, [ecog_layout], lang=lang):
        try:
            if job.problem:
                raise DataError(job.problem)
            if job.eval_gt is None:
                raise DataError(f"{job.clip_id}: eval_gt entry is not an object")
            w, h = sizes.get(job.clip_id) or _probe_size(probe, job.path)
            check_masks(job.clip_id, job.eval_gt, w, h)
            records.append(
                GtClip(
                    video_name=job.clip_id,  # one clip id everywhere: runs and scores use it too
                    task_template=job.task_template or "",
                    width=w,
                    height=h,
                    eval_gt=job.eval_gt,
                    lang=job.lang,
                    scene=job.scene,
                    extra={"clip_id": job.clip_id},
                )
            )
        except Exception as exc:
            errors.append(f"{job.clip_id}: {exc}" if job.clip_id not in str(exc) else str(exc))
    return records, errors


def _probe_size(probe: Any, path: str) -> tuple[int, int]:
    info = probe(path)
    return info.width, info.height
