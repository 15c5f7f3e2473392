"""Ground truth is input: check its shapes and types where it is loaded, so a bad clip is one
recorded data error naming the field, never a crash later in run, score or report."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from avstack.manifest import ClipRecord, is_number


def _point(p: object) -> bool:
    return isinstance(p, list) and len(p) == 2 and all(is_number(v) for v in p)


def _points_problem(pts: object) -> str | None:
    if pts is None:
        return None
    if not isinstance(pts, list) or not pts:
        return f"must be a non-empty list of [y, x], found {pts!r:.60}"
    if isinstance(pts[0], list):
        bad = next((p for p in pts if not _point(p)), None)
        return None if bad is None else f"each point must be two finite numbers, found {bad!r:.60}"
    return None if _point(pts) else f"must be two finite numbers, found {pts!r:.60}"


def _mask_problem(mask: object) -> str | None:
    if not isinstance(mask, dict):
        return f"must be an object, found {type(mask).__name__}"
    bbox = mask.get("bbox")
    if not (isinstance(bbox, list) and len(bbox) == 4 and all(is_number(v) for v in bbox)):
        return f"bbox must be four finite numbers, found {bbox!r:.60}"
    if not isinstance(mask.get("mask_base64"), str):
        return "mask_base64 must be a string"
    return None


def _answer_problem(i: int, ans: object) -> str | None:
    if not isinstance(ans, dict):
        return f"answer[{i}] must be an object, found {type(ans).__name__} {ans!r:.40}"
    if not isinstance(ans.get("choice"), str) or not ans["choice"]:
        return f"answer[{i}].choice must be a non-empty string, found {ans.get('choice')!r:.40}"
    for key in ("stroke_begin_time", "stroke_end_time"):
        if key in ans and not is_number(ans[key]):
            return f"answer[{i}].{key} must be a finite number, found {ans[key]!r:.40}"
    problem = _points_problem(ans.get("points"))
    if problem:
        return f"answer[{i}].points {problem}"
    if "mask" in ans and ans["mask"] is not None and (problem := _mask_problem(ans["mask"])):
        return f"answer[{i}].mask {problem}"
    return None


def eval_gt_problem(gt: object) -> str | None:
    """What is wrong with one clip's eval_gt entry, naming the field; None when it is usable."""
    if not isinstance(gt, dict):
        return f"eval_gt entry must be an object, found {type(gt).__name__}"
    for key in ("object_choices", "space_choices"):
        value = gt.get(key)
        if value is not None and not (isinstance(value, list) and all(isinstance(c, str) for c in value)):
            return f"eval_gt.{key} must be a list of strings, found {value!r:.60}"
    answers = gt.get("answer", [])
    if not isinstance(answers, list):
        return f"eval_gt.answer must be a list, found {type(answers).__name__}"
    return next((p for i, a in enumerate(answers) if (p := _answer_problem(i, a))), None)


def annotation_problem(rec: dict[str, object]) -> str | None:
    """Fields of an annotations.json record that avstack reads."""
    for key in ("scene", "lang", "language"):
        if rec.get(key) is not None and not isinstance(rec[key], str):
            return f"annotation field {key!r} must be a string, found {rec[key]!r:.40}"
    asr = rec.get("asr_result")
    if asr is not None and not (isinstance(asr, dict) and isinstance(asr.get("words", []), list)):
        return "annotation field 'asr_result' must be an object with a 'words' list"
    return None


def masks_problem(eval_gt: dict[str, Any], width: int, height: int) -> str | None:
    """A mask that does not fit the clip's frame (checked on its header, before decoding)."""
    from avstack.tasks.ecog.metrics import MaskTooLarge, check_mask_size  # OpenCV: only when there are masks

    for i, ans in enumerate(eval_gt.get("answer", [])):
        mask = ans.get("mask") if isinstance(ans, dict) else None
        if not isinstance(mask, dict) or not mask.get("mask_base64"):
            continue
        try:
            check_mask_size(base64.b64decode(mask["mask_base64"], validate=False), width, height)
        except (MaskTooLarge, binascii.Error, ValueError) as exc:
            return f"answer[{i}] ({ans.get('choice')!r}) mask: {exc}"
    return None


def check_record(record: ClipRecord) -> str | None:
    """After prepare knows the frame size: the clip's masks must fit it."""
    if not record.eval_gt or not record.width or not record.height:
        return None
    problem = masks_problem(record.eval_gt, record.width, record.height)
    return f"{record.clip_id}: {problem}" if problem else None
