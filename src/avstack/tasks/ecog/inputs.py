"""EcoG's own options as one record, read whole by its runs, plans, exports and its prompt builder
(light to import: the command line is built from it)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from avstack.errors import UsageError
from avstack.options import TASK, option
from avstack.tasks.shared_inputs import asr_source, checked_asr_source, prompt_folder

COORD_ORDERS = ("xy", "yx")


@dataclass(frozen=True)
class EcogInputs:
    """What goes into an EcoG request besides the stack, named as its flags: point order, whose
    ASR, the prompt templates, and the prompt's language (no flag: each clip's own)."""

    asr: str | None = asr_source()  # whisper (ours) | source (the annotations') | None: ours when prepared
    coord_order: str = option("xy", "ecog: xy or yx (the order of a point's coordinates in answers)", panel=TASK)
    prompt: Path | None = prompt_folder()  # the user's templates (system.j2, user.j2); None: the shipped ones
    lang: str | None = None  # en | zh; None: each clip's own

    def __post_init__(self) -> None:
        if self.coord_order not in COORD_ORDERS:
            raise UsageError(f"--coord-order: expected xy or yx; found {self.coord_order!r}")
        checked_asr_source(self.asr)
