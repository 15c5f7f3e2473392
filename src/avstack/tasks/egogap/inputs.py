"""EgoGap's own options as one record, read whole by its runs, plans and exports."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from avstack.errors import UsageError
from avstack.options import TASK, option

if TYPE_CHECKING:  # the inputs stay light: the command line reads them to build its flags
    from avstack.tasks.egogap.stack import EgoGapStack


@dataclass(frozen=True)
class EgogapInputs:
    """EgoGap's own options, named as their flags: the bundles and images, and the condition."""

    bundles: Path | None = option(None, "egogap: the *.bundles.jsonl file", panel=TASK)
    images: Path | None = option(None, "egogap: the image folder (COCO train2017, wikimedia)", panel=TASK)
    style: str = option("default", "egogap: the prompt style, default, egoplan or exclusion", panel=TASK)
    options: str = option("all", "egogap: the options, all, n3 (drop off-vantage) or swap_motor", panel=TASK)
    shuffle_seed: int | None = option(None, "egogap: shuffle and re-letter the options with this seed", panel=TASK)
    max_side: int = option(512, "egogap: the downscale variant's longest side in px", panel=TASK)

    def stack(self, variant: str = "image") -> EgoGapStack:
        """The EgoGap stack (tasks.egogap.stack.EgoGapStack) of these inputs under `variant`."""
        from avstack.tasks.egogap.stack import EgoGapStack

        return EgoGapStack(self.style, variant, self.options, self.shuffle_seed, self.max_side)

    def bundles_file(self) -> Path:
        if self.bundles is None:
            raise UsageError("--task egogap needs --bundles B.jsonl (and --images DIR unless the variant is text)")
        return Path(self.bundles)
