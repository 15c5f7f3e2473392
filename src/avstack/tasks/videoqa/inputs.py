"""videoqa's own options as one record, read whole by its runs, plans and exports."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from avstack.errors import UsageError

NEEDS = (
    "--task videoqa needs the PREPARED folder and --questions FILE "
    "(JSONL/CSV, or Charades-STA, QVHighlights, Video-MME)"
)


@dataclass(frozen=True)
class VideoqaInputs:
    """videoqa's own options, named as their flags (packing is a stack's: --pack)."""

    questions: Path | None = None  # the questions file
    questions_format: str = "auto"  # auto, generic, charades, qvhighlights or videomme
    prompt: Path | None = None  # a folder of prompt templates; None: the shipped ones

    def questions_file(self) -> Path:
        if self.questions is None:
            raise UsageError(NEEDS)
        return Path(self.questions)
