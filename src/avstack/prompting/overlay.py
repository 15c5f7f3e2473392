"""Time burned into a frame: `--ts-format overlay` draws the frame's pts (seconds, to the ms) in the
top-left corner, white on black, large enough to read when the image is shrunk to 448 px; and
reads it back by matching the glyphs it draws (tests check every frame of a VFR clip; the
offline baselines read it the way a model must: from the pixels).

The text is drawn in fixed cells, one character each (`SSSS.mmm`, then ` s`), so the reader needs
no OCR: it compares each cell with the glyphs drawn at the same size.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import cv2
import numpy as np

from avstack.errors import UsageError
from avstack.io import atomic_write
from avstack.media.images import encode_jpeg

OVERLAY_VERSION = 1
CHARS = "0123456789."
N_CELLS = 8  # SSSS.mmm
FONT = cv2.FONT_HERSHEY_SIMPLEX


def cell_size(short_side: int) -> tuple[int, int, float, int]:
    """(cell width, cell height, font scale, thickness) for an image whose shorter side is this:
    text about 7% of it, so 16 px or more once a 1080p frame is shrunk to 448 px."""
    h = max(18, round(0.07 * short_side))
    scale = h / 30
    thickness = max(1, round(h / 12))
    return round(0.62 * h), round(1.3 * h), scale, thickness


def text_of(pts_ms: int) -> str:
    return f"{pts_ms // 1000:04d}.{pts_ms % 1000:03d}"


@lru_cache(maxsize=64)
def _glyph(ch: str, short_side: int) -> np.ndarray:
    cw, chh, scale, th = cell_size(short_side)
    cell = np.zeros((chh, cw), np.uint8)
    (tw, tht), _ = cv2.getTextSize(ch, FONT, scale, th)
    cv2.putText(cell, ch, ((cw - tw) // 2, (chh + tht) // 2), FONT, scale, 255, th, cv2.LINE_AA)
    return cell


def draw(bgr: np.ndarray, pts_ms: int) -> np.ndarray:
    """A copy of the frame with its time in the top-left corner."""
    out = bgr.copy()
    h = min(out.shape[:2])
    cw, chh, scale, th = cell_size(h)
    pad = max(2, chh // 8)
    width = (N_CELLS + 2) * cw + 2 * pad
    cv2.rectangle(out, (0, 0), (min(out.shape[1] - 1, width), chh + 2 * pad), (0, 0, 0), -1)
    for k, ch in enumerate(text_of(pts_ms) + " s"):
        glyph = _glyph(ch, h) if ch != " " else None
        if glyph is not None:
            y, x = pad, pad + k * cw
            region = out[y : y + chh, x : x + cw]
            mask = glyph[: region.shape[0], : region.shape[1]] > 0
            region[mask] = (255, 255, 255)
    return out


def read(bgr: np.ndarray) -> int | None:
    """The time in ms drawn by `draw`, read by matching each cell with the glyphs; None when the
    corner holds no readable time."""
    h = min(bgr.shape[:2])
    cw, chh, _, _ = cell_size(h)
    pad = max(2, chh // 8)
    gray = cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY) if bgr.ndim == 3 else bgr
    text = ""
    for k in range(N_CELLS):
        cell = gray[pad : pad + chh, pad + k * cw : pad + (k + 1) * cw].astype(np.float32)
        if cell.shape != (chh, cw):
            return None
        scores = {c: float(np.abs(cell - _glyph(c, h).astype(np.float32)).mean()) for c in CHARS}
        text += min(scores, key=scores.__getitem__)
    if text[4] != "." or not (text[:4] + text[5:]).isdigit():
        return None
    return int(text[:4]) * 1000 + int(text[5:])


def overlay_frame(prepared: Path, frame_path: str, pts_ms: int, quality: int = 90) -> str:
    """The overlaid copy of a prepared frame (made once, cached next to the frames); its path
    relative to the prepared folder."""
    name = f"{Path(frame_path).stem}-{pts_ms}.jpg"
    # the frame's whole folder path, not only its last name: two clips whose frames lie in folders
    # of one name (a manifest made elsewhere, copies under frames/copyN/...) must not share overlays
    rel = Path("overlay") / f"v{OVERLAY_VERSION}" / Path(frame_path).parent / name
    dest = prepared / rel
    if not dest.is_file():
        bgr = cv2.imread(str(prepared / frame_path), cv2.IMREAD_COLOR)
        if bgr is None:
            raise UsageError(f"cannot read frame {prepared / frame_path}")
        atomic_write(dest, encode_jpeg(draw(bgr, pts_ms), quality, order="bgr"))
    return rel.as_posix()
