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


# the same words as EcoG's --asr (tasks sharing an option share its declaration)
ASR_HELP = "whose words the ASR block shows: whisper (ours, prepared) or source (the dataset's own); default ours"


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
    asr: str | None = option(None, ASR_HELP, panel=TASK)
    prompt: Path | None = option(
        None, "A folder of prompt templates (system.j2, user.j2; see README); default: the shipped ones", panel=TASK
    )

    def __post_init__(self) -> None:
        if self.asr not in (None, "whisper", "source"):
            raise UsageError(f"--asr: expected whisper or source; found {self.asr!r}")

    def questions_file(self) -> Path:
        if self.questions is None:
            raise UsageError(NEEDS)
        return Path(self.questions)
