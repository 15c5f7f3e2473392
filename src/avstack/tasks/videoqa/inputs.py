"""videoqa's own options as one record, read whole by its runs, plans and exports."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from avstack.errors import UsageError
from avstack.options import TASK, option

NEEDS = (
    "--task videoqa needs the PREPARED folder and --questions FILE "
    "(JSONL/CSV, or Charades-STA, QVHighlights, Video-MME)"
)


@dataclass(frozen=True)
class VideoqaInputs:
    """videoqa's own options, named as their flags (packing is a stack's: --pack)."""

    questions: Path | None = option(
        None,
        "videoqa: the questions file (JSONL/CSV; Charades-STA .txt, QVHighlights .jsonl, Video-MME table)",
        panel=TASK,
    )
    questions_format: str = option("auto", "videoqa: auto, generic, charades, qvhighlights or videomme", panel=TASK)
    prompt: Path | None = option(
        None, "A folder of prompt templates (system.j2, user.j2; see README); default: the shipped ones", panel=TASK
    )

    def questions_file(self) -> Path:
        if self.questions is None:
            raise UsageError(NEEDS)
        return Path(self.questions)
