"""Image helpers: resize to a longest side, JPEG encode and write (OpenCV)."""

from __future__ import annotations

import os

import cv2
import numpy as np

from avstack.io import atomic_write


class ImageError(RuntimeError):
    """An image that cannot be encoded."""


def resize_max_side(rgb: np.ndarray, max_side: int | None) -> np.ndarray:
    if not max_side:
        return rgb
    h, w = rgb.shape[:2]
    scale = max_side / max(h, w)
    if scale >= 1:
        return rgb
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    return cv2.resize(rgb, size, interpolation=cv2.INTER_AREA)


def encode_jpeg(image: np.ndarray, quality: int = 90, max_side: int | None = None, order: str = "rgb") -> bytes:
    """JPEG bytes of an RGB (or, with order="bgr", an OpenCV BGR) image."""
    image = resize_max_side(image, max_side)
    bgr = image if order == "bgr" else cv2.cvtColor(image, cv2.COLOR_RGB2BGR)
    ok, buf = cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, int(quality)])
    if not ok:
        raise ImageError("JPEG encoding failed")
    return buf.tobytes()


def write_jpeg(
    path: str | os.PathLike[str], image: np.ndarray, quality: int = 90, max_side: int | None = None, order: str = "rgb"
) -> None:
    atomic_write(path, encode_jpeg(image, quality, max_side, order))
