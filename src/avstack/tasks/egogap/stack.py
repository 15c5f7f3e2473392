"""EgoGap input stacks: prompt style, image ablation, option ablation; all values read here only."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from pathlib import Path

import cv2
import numpy as np

from avstack.errors import UsageError
from avstack.io import atomic_write
from avstack.media.images import resize_max_side
from avstack.prompting.messages import Image, Request, Text
from avstack.prompting.stacks import REPEAT, Changes
from avstack.tasks.egogap.data import Item, image_path
from avstack.tasks.egogap.prompt import STYLES, build_prompt, drop_off_vantage, shuffled, swap_motor

IMAGE_VARIANTS = ("image", "vflip", "hflip", "gray", "downscale", "text")
OPTION_VARIANTS = ("all", "n3", "swap_motor")


@dataclass(frozen=True)
class EgoGapStack:
    style: str = "default"
    image: str = "image"  # image | vflip | hflip | gray | downscale | text (no image)
    options: str = "all"  # all | n3 (drop the off-vantage option) | swap_motor
    shuffle_seed: int | None = None
    max_side: int = 512  # for `downscale`
    repeat: bool = False  # the A/A arm: the same requests asked again (runs.noise)

    def __post_init__(self) -> None:
        for value, allowed, what in (
            (self.style, STYLES, "style"),
            (self.image, IMAGE_VARIANTS, "variant"),
            (self.options, OPTION_VARIANTS, "options"),
        ):
            if value not in allowed:
                raise UsageError(f"{what} must be one of {', '.join(allowed)}; found {value!r}")

    @property
    def name(self) -> str:
        parts = [self.style, self.image if self.image != "downscale" else f"downscale{self.max_side}"]
        if self.options != "all":
            parts.append(self.options)
        if self.shuffle_seed is not None:
            parts.append(f"shuffle{self.shuffle_seed}")
        return "-".join(parts) + ("-aa" if self.repeat else "")

    def changes_from(self, other: object) -> Changes | None:
        """What this condition may change in `other`'s requests when it is one step from it (the
        engine's arm integrity check, avstack.runs.ablation.integrity); None when it is not."""
        if not isinstance(other, EgoGapStack) or other == self:
            return None
        if self.repeat or other.repeat:
            return REPEAT if self.repeat and replace(self, repeat=False) == other else None
        moved = [
            f
            for f in ("style", "image", "options", "shuffle_seed", "max_side")
            if getattr(self, f) != getattr(other, f)
        ]
        if moved == ["image"] or moved == ["max_side"]:
            # the picture transformed (flipped, gray, smaller) one for one, or none (text)
            return Changes(
                f"image {other.image} -> {self.image}", images="fewer" if self.image == "text" else "replaced"
            )
        if moved == ["options"] or moved == ["shuffle_seed"]:
            return Changes(f"options {moved[0]}", text="region")  # the option lines only
        if moved == ["style"]:
            return Changes(f"style {other.style} -> {self.style}", text="any")
        return None


def present(items: list[Item], stack: EgoGapStack) -> list[Item]:
    """Items as the model will see them: option ablation first, then the seeded shuffle."""
    out = []
    for item in items:
        if stack.options == "n3":
            item = drop_off_vantage(item)
        elif stack.options == "swap_motor":
            item = swap_motor(item, items, seed=stack.shuffle_seed or 0)
        if stack.shuffle_seed is not None:
            item = shuffled(item, stack.shuffle_seed)
        out.append(item)
    return out


def _transform(bgr: np.ndarray, variant: str, max_side: int) -> np.ndarray:
    if variant == "vflip":
        return np.ascontiguousarray(bgr[::-1])
    if variant == "hflip":
        return np.ascontiguousarray(bgr[:, ::-1])
    if variant == "gray":
        return cv2.cvtColor(cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY), cv2.COLOR_GRAY2BGR)
    if variant == "downscale":
        return resize_max_side(bgr, max_side)
    raise UsageError(f"no image transform named {variant!r}")


def variant_image(source: Path, stack: EgoGapStack, cache: Path) -> Path:
    """The source image, or its transformed copy cached by source content + variant."""
    if stack.image == "image":
        return source
    data = source.read_bytes()
    key = hashlib.sha256(data + f"|{stack.image}|{stack.max_side}".encode()).hexdigest()[:24]
    dest = cache / stack.image / f"{key}.jpg"
    if not dest.is_file():
        bgr = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
        if bgr is None:
            raise UsageError(f"cannot decode image {source}")
        ok, buf = cv2.imencode(".jpg", _transform(bgr, stack.image, stack.max_side), [cv2.IMWRITE_JPEG_QUALITY, 95])
        if not ok:
            raise UsageError(f"cannot encode {stack.image} of {source}")
        atomic_write(dest, buf.tobytes())
    return dest


def build_request(item: Item, stack: EgoGapStack, image: Path | None) -> Request:
    """Image first, then the prompt; no system prompt (the benchmark sends none)."""
    text = Text(build_prompt(item, stack.style))
    parts = (text,) if image is None else (Image(str(image)), text)
    return Request(system="", parts=parts, meta={"clip_id": item.uid, "task": "egogap", "letters": item.letters})


def request_for(item: Item, stack: EgoGapStack, images: Path | None, cache: Path) -> Request:
    """Raises EgoGapDataError naming the item when its image is missing."""
    if stack.image == "text":
        return build_request(item, stack, None)
    if images is None:
        raise UsageError(f"item {item.uid}: variant {stack.image!r} needs --images (the image folder)")
    return build_request(item, stack, variant_image(image_path(item, images), stack, cache))


def prompt_lines(bundles: str | Path, stack: EgoGapStack) -> list[dict[str, str]]:
    """`egogap prompts`: uid, image, prompt and correct letter of every item as presented."""
    from avstack.tasks.egogap.data import load_bundles

    return [
        {
            "uid": item.uid,
            "image": item.file_name,
            "prompt": build_prompt(item, stack.style),
            "correct_letter": item.correct_letter,
        }
        for item in present(load_bundles(bundles), stack)
    ]
