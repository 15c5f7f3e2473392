"""Commands of the prepare stage (docs: prepare.md): prepare, transcribe, synth."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

import avstack.api as door

from .common import app, ended, print_done, progress
from .declared import argument, flag, takes


@app.command()
@takes(
    [
        argument("data_root", Path, "EcoG layout (指令1..指令6 folders) or a plain folder of videos"),
        flag("out", Path, "--out", "-o", help="Output folder (manifest.jsonl, frames/, audio/)"),
    ],
    settings=door.PrepareSettings,
    job=door.PrepareJob,
)
def prepare(**given: Any) -> None:
    """Decode clips, sample frames at true times, extract audio and word-level ASR; write a manifest."""
    with ended():
        report = door.prepare(**given, progress=progress)
    print_prepare_report(report, given["out"])
    if report.failed:
        raise typer.Exit(1)


def print_prepare_report(report: Any, out: Path) -> None:
    """prepare's summary (stdout) and its warnings and failed clips (stderr)."""
    lines, warnings = report.summary_lines(out)
    for text in lines:
        typer.echo(text)
    for text in warnings:
        typer.echo(text, err=True)


@app.command()
@takes([argument("paths", list[Path], "Video or audio files")], options=door.TranscribeOptions)
def transcribe(**given: Any) -> None:
    """Print word-level ASR JSON (EcoG annotations shape), one line per file, on the clip's clock.

    The times are `prepare`'s (time 0 where a player starts the clip, whenever its audio track
    starts); a file that cannot be read is a line with its error, and the others go on."""
    failed = 0
    with ended():
        for words in door.transcribe_files(**given):
            typer.echo(json.dumps(words.to_json(), ensure_ascii=False))
            failed += words.error is not None
    if failed:
        raise typer.Exit(1)


@app.command()
@takes([argument("out", Path, "Folder to write an EcoG-layout sample set into")], options=door.SynthOptions)
def synth(**given: Any) -> None:
    """Generate synthetic EcoG-layout clips with known frame and word timing."""
    with ended():
        print_done(door.synth(**given))
