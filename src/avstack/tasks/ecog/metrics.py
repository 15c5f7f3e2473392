"""EcoG-Bench metrics, computed exactly as the upstream evaluator does.

The upstream evaluator is lenient in specific, observable ways and the
reference scores depend on them, so each quirk is reproduced on purpose:
- a string `selected_options` counts as a one-element list;
- a point is scored on the int() of its pixel coordinates, a list of points
  is averaged first, a timestamp must be int/float (bool included) and is
  truncated with int() before the inclusive window test;
- any exception while scoring a clip (a non-dict referent, a NaN timestamp,
  a one-number point, ...) scores the WHOLE clip zero.
"""

from __future__ import annotations

import base64
import math
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

METRICS = ("acc_cls", "acc_s", "acc_t", "acc_eco", "acc_seq")
SPACE_RADIUS_PX = 100


@dataclass(frozen=True)
class Referent:
    """One scored answer of a clip, in pixels of the clip."""

    choice: str
    begin_ms: Any
    end_ms: Any
    is_object: bool
    points_px: Any  # [x, y] or [[x, y], ...] in pixels, or None
    mask: Any  # the raw eval_gt mask record (objects only), read lazily as upstream does


@dataclass(frozen=True)
class ClipScore:
    acc_cls: float
    acc_s: float
    acc_t: float
    acc_eco: float
    acc_seq: float
    # per-referent hits, for the analyses (empty when the clip errored)
    cls: tuple[bool, ...] = ()
    s: tuple[bool, ...] = ()
    t: tuple[bool, ...] = ()
    error: str | None = None

    def as_dict(self) -> dict[str, float]:
        return {m: getattr(self, m) for m in METRICS}


ZERO = ClipScore(0.0, 0.0, 0.0, 0.0, 0.0)


def _to_pixels(point_xy: Sequence[Any], width: int, height: int) -> list[int]:
    return [int(point_xy[0] * width / 1000), int(point_xy[1] * height / 1000)]


def gt_referents(eval_gt: dict[str, Any], width: int, height: int) -> tuple[list[str], list[Referent]]:
    """Correct option strings and scored referents of one clip's eval_gt entry."""
    options: list[str] = []
    referents: list[Referent] = []
    for ans in eval_gt.get("answer", []):
        if not isinstance(ans, dict):
            options.append(ans)  # legacy: a bare option string
            continue
        choice = ans.get("choice")
        if not choice:
            continue
        options.append(choice)
        is_object = choice.isupper()
        pts = ans.get("points")
        points_px: object = None
        if pts:
            # eval_gt points are [y, x] normalized 0-1000
            if isinstance(pts[0], list):
                points_px = [_to_pixels([p[1], p[0]], width, height) for p in pts]
            else:
                points_px = _to_pixels([pts[1], pts[0]], width, height)
        referents.append(
            Referent(
                choice=choice,
                begin_ms=ans.get("stroke_begin_time", 0),
                end_ms=ans.get("stroke_end_time", 0),
                is_object=is_object,
                points_px=points_px,
                mask=ans["mask"] if is_object and "mask" in ans else None,
            )
        )
    return options, referents


def single_point(pt: object) -> list[object] | None:
    """A point [x, y]; a list of points is averaged. None when unusable."""
    if not pt or not isinstance(pt, list):
        return None
    if isinstance(pt[0], list):
        n = len(pt)
        return [sum(p[0] for p in pt) / n, sum(p[1] for p in pt) / n]
    return pt


MASK_CACHE_BYTES = 256 << 20  # decoded masks kept for reuse, at most this many bytes in all


class MaskTooLarge(ValueError):
    """A mask whose declared size does not fit the clip's frame."""


def declared_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) a PNG or JPEG header declares, read without decoding; None otherwise."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR" and len(data) >= 24:
        return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    if data[:2] == b"\xff\xd8":
        i = 2
        while i + 9 < len(data) and data[i] == 0xFF:
            marker, seg = data[i + 1], int.from_bytes(data[i + 2 : i + 4], "big")
            if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):  # a start-of-frame
                return int.from_bytes(data[i + 7 : i + 9], "big"), int.from_bytes(data[i + 5 : i + 7], "big")
            i += 2 + seg
    return None


def check_mask_size(data: bytes, width: int, height: int) -> None:
    """Refuse, before any pixel is decoded, a mask larger than the clip's frame (a full-frame mask
    is the frame's size; a crop is smaller) or in a format whose size cannot be read."""
    size = declared_size(data)
    if size is None:
        raise MaskTooLarge("mask does not decode as an image (not a PNG or JPEG)")
    w, h = size
    if not (0 < w <= max(width, 1) and 0 < h <= max(height, 1)):
        raise MaskTooLarge(f"mask declares {w}x{h} px, larger than the {width}x{height} frame")


class _MaskCache:
    """Decoded masks by content, least recently used dropped past MASK_CACHE_BYTES."""

    def __init__(self, budget: int):
        self.budget, self.used = budget, 0
        self.items: OrderedDict[str, np.ndarray | None] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: str, make: Any) -> np.ndarray | None:
        with self.lock:
            if key in self.items:
                self.items.move_to_end(key)
                return self.items[key]
        value = make()
        with self.lock:
            self.items[key] = value
            self.used += 0 if value is None else value.nbytes
            while self.used > self.budget and len(self.items) > 1:
                _, old = self.items.popitem(last=False)
                self.used -= 0 if old is None else old.nbytes
        return value


_MASKS = _MaskCache(MASK_CACHE_BYTES)


def decode_mask(mask_base64: str, width: int, height: int) -> np.ndarray | None:
    """The grayscale mask; MaskTooLarge when its header declares more than the frame holds."""
    data = base64.b64decode(mask_base64)
    check_mask_size(data, width, height)
    import cv2  # OpenCV only where a mask is decoded: prepare's driver imports this module

    return _MASKS.get(mask_base64, lambda: cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_GRAYSCALE))


def load_mask(mask: Any, width: int, height: int) -> tuple[np.ndarray, list[int]] | None:
    """(grayscale mask image, bbox) of an eval_gt mask record; None when it does not decode or
    does not fit the frame."""
    try:
        img = decode_mask(mask["mask_base64"], width, height)
        x1, y1, x2, y2 = mask["bbox"]
    except Exception:
        return None
    return None if img is None else (img, [x1, y1, x2, y2])


def point_in_mask(px: int, py: int, mask_base64: str, bbox: Any, width: int, height: int) -> bool:
    try:
        x1, y1, x2, y2 = bbox
        if not (x1 <= px <= x2 and y1 <= py <= y2):
            return False
        mask = decode_mask(mask_base64, width, height)
        if mask is None:
            return False
        mh, mw = mask.shape
        if (mh, mw) == (height, width):
            return bool(mask[py, px] > 128)
        # a bbox-sized crop, scaled into the bbox
        bh, bw = y2 - y1, x2 - x1
        ly = min(max(int((py - y1) * mh / bh) if bh > 0 else 0, 0), mh - 1)
        lx = min(max(int((px - x1) * mw / bw) if bw > 0 else 0, 0), mw - 1)
        return bool(mask[ly, lx] > 128)
    except Exception:
        return False


def spatial_hit(pred_item: dict[str, object], ref: Referent, width: int, height: int) -> bool:
    raw = pred_item.get("point")
    if not raw:
        return False
    pt = single_point(raw)
    if pt is None:
        return False
    px, py = _to_pixels(pt, width, height)
    mask_info = ref.mask or {}
    if mask_info.get("mask_base64"):
        bbox = mask_info.get("bbox")
        if not bbox:
            return False
        return point_in_mask(px, py, mask_info["mask_base64"], bbox, width, height)
    gt = ref.points_px
    if not gt:
        return False
    if isinstance(gt[0], list):
        n = len(gt)
        centre = [int(sum(p[0] for p in gt) / n), int(sum(p[1] for p in gt) / n)]
    else:
        centre = [int(gt[0]), int(gt[1])]
    return math.hypot(px - centre[0], py - centre[1]) < SPACE_RADIUS_PX


def temporal_hit(pred_item: dict[str, object], ref: Referent) -> bool:
    ts = pred_item.get("timestamp")
    if ts is None or not isinstance(ts, (int, float)):
        return False
    if ref.begin_ms is None or ref.end_ms is None:
        return False
    return bool(ref.begin_ms <= int(ts) <= ref.end_ms)


def _score(pred: dict[str, Any], options: list[str], refs: list[Referent], width: int, height: int) -> ClipScore:
    selected = pred.get("selected_options", [])
    if isinstance(selected, str):
        selected = [selected]
    elif not isinstance(selected, list):
        selected = []
    want = [str(o).strip() for o in options]
    got = [str(s).strip() for s in selected]
    k_total = len(want)
    if k_total == 0:
        return ZERO
    points = pred.get("point_list", [])
    cls, s, t = [], [], []
    for k in range(k_total):
        cls.append(k < len(got) and got[k] == want[k])
        has_pt = k < len(points) and k < len(refs)
        s.append(has_pt and spatial_hit(points[k], refs[k], width, height))
        t.append(has_pt and temporal_hit(points[k], refs[k]))
    eco = [c and sp and tm for c, sp, tm in zip(cls, s, t)]
    return ClipScore(
        acc_cls=sum(cls) / k_total,
        acc_s=sum(s) / k_total,
        acc_t=sum(t) / k_total,
        acc_eco=sum(eco) / k_total,
        acc_seq=1.0 if all(eco) else 0.0,
        cls=tuple(cls),
        s=tuple(s),
        t=tuple(t),
    )


def score_clip(pred: Any, eval_gt: dict[str, object], width: int, height: int) -> ClipScore:
    """Score one prediction dict against one clip. Never raises."""
    try:
        options, refs = gt_referents(eval_gt, width, height)
        return _score(pred, options, refs, width, height)
    except Exception as exc:  # upstream: any failure zeroes the clip
        return ClipScore(0.0, 0.0, 0.0, 0.0, 0.0, error=f"{type(exc).__name__}: {exc}")
