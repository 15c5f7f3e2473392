"""videoqa's own options as one record, read whole by its runs, plans and exports."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from avstack.errors import UsageError
from avstack.options import TASK, option
from avstack.tasks.shared_inputs import asr_source, checked_asr_source, prompt_folder

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
    questions_format: str = option(
        "auto",
        "videoqa: auto (by its shape), generic, charades, qvhighlights, videomme, egoschema, nlq, hourvideo, "
        "egoplan, videomme2, worldsense, dailyomni, avspeaker or egolife",
        panel=TASK,
    )
    asr: str | None = asr_source()
    prompt: Path | None = prompt_folder()

    def __post_init__(self) -> None:
        checked_asr_source(self.asr)

    def questions_file(self) -> Path:
        if self.questions is None:
            raise UsageError(NEEDS)
        return Path(self.questions)
