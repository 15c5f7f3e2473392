"""EgoGap's own options as one record, read whole by its runs, plans and exports."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from avstack.errors import UsageError
from avstack.tasks.egogap.stack import EgoGapStack


@dataclass(frozen=True)
class EgogapInputs:
    """EgoGap's own options, named as their flags: the bundles and images, and the condition."""

    bundles: Path | None = None  # the *.bundles.jsonl file
    images: Path | None = None  # the image folder (COCO train2017, wikimedia)
    style: str = "default"  # the prompt style: default, egoplan, exclusion
    options: str = "all"  # all, n3 (drop off-vantage), swap_motor
    shuffle_seed: int | None = None  # the options shuffled and re-lettered
    max_side: int = 512  # the downscale variant's longest side

    def stack(self, variant: str = "image") -> EgoGapStack:
        return EgoGapStack(self.style, variant, self.options, self.shuffle_seed, self.max_side)

    def bundles_file(self) -> Path:
        if self.bundles is None:
            raise UsageError("--task egogap needs --bundles B.jsonl (and --images DIR unless the variant is text)")
        return Path(self.bundles)
