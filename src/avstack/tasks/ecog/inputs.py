"""EcoG's own options as one record, read whole by its runs, plans and exports (light to import:
the command line is built from it)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from avstack.options import TASK, option
from avstack.tasks.shared_inputs import asr_source, prompt_folder

if TYPE_CHECKING:  # the inputs stay light: the command line reads them to build its flags
    from avstack.tasks.ecog.prompt import EcogOptions


@dataclass(frozen=True)
class EcogInputs:
    """EcoG's own options, named as their flags."""

    asr: str | None = asr_source()
    coord_order: str = option("xy", "ecog: xy or yx (the order of a point's coordinates in answers)", panel=TASK)
    prompt: Path | None = prompt_folder()

    def options(self) -> EcogOptions:
        """The prompt builder's options (tasks.ecog.prompt.EcogOptions) of these inputs."""
        from avstack.tasks.ecog.prompt import EcogOptions

        return EcogOptions(self.coord_order, self.asr, prompt_dir=self.prompt)
