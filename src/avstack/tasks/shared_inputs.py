"""The options more than one task takes, declared once: a task's inputs record names them as its
own fields (`asr: str | None = asr_source()`), and the command line shows one flag for all."""

from __future__ import annotations

from pathlib import Path

from avstack.errors import UsageError
from avstack.options import TASK, option

ASR_SOURCES = (None, "whisper", "source")


def asr_source() -> str | None:
    """--asr: whose words the ASR block shows. (A field specifier, typed as the field it fills, as
    dataclasses.field is: the record's field reads `str | None`.)"""
    return option(
        None,
        "whose words the ASR block shows: whisper (ours, prepared) or source (the dataset's own); default ours",
        panel=TASK,
    )


def prompt_folder() -> Path | None:
    """--prompt: the templates a task's prompt builder renders."""
    return option(
        None, "A folder of prompt templates (system.j2, user.j2; see README); default: the shipped ones", panel=TASK
    )


def checked_asr_source(value: str | None) -> str | None:
    if value not in ASR_SOURCES:
        raise UsageError(f"--asr: expected whisper or source; found {value!r}")
    return value


__all__ = ["ASR_SOURCES", "asr_source", "checked_asr_source", "prompt_folder"]
