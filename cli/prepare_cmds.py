"""Commands of the prepare stage (docs: prepare.md): prepare, transcribe, synth."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

import avstack.api as door

from .common import ALIGN_HELP, app, ended, progress, shown

FRAMES, ASR, STREAMS, WORK = "Frames", "Speech (ASR)", "Streams", "Workers"


@app.command()
def prepare(
    data_root: Annotated[Path, typer.Argument(help="EcoG layout (指令1..指令6 folders) or a plain folder of videos")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder (manifest.jsonl, frames/, audio/)")],
    anchors: Annotated[
        str, typer.Option(rich_help_panel=FRAMES, help="'full' or a comma list of frames,audio,asr")
    ] = "full",
    fps: Annotated[
        float, typer.Option(rich_help_panel=FRAMES, help="Frames per second to sample (the paper uses 2)")
    ] = 2.0,
    max_frames: Annotated[
        int | None, typer.Option(rich_help_panel=FRAMES, help="Cap on sampled frames (uniform subsample)")
    ] = None,
    max_side: Annotated[
        int | None, typer.Option(rich_help_panel=FRAMES, help="Shrink frames to this longest side in px")
    ] = None,
    max_pixels: Annotated[
        int | None,
        typer.Option(
            rich_help_panel=FRAMES, help="Refuse clips whose frames have more pixels (default: 8K, 7680x4320)"
        ),
    ] = None,
    jpeg_quality: Annotated[int, typer.Option(rich_help_panel=FRAMES, help="JPEG quality 1-100")] = 90,
    workers: Annotated[
        int | None, typer.Option(rich_help_panel=WORK, help="Worker processes (default: CPU count)")
    ] = None,
    threads: Annotated[
        int,
        typer.Option(rich_help_panel=WORK, help="Decoder threads per worker (0: chosen for the job; see prepare.json)"),
    ] = 0,
    asr_threads: Annotated[
        int,
        typer.Option(
            rich_help_panel=ASR,
            help="CPU threads of one transcription; fixed (not the cores), so words never move with them",
        ),
    ] = 1,
    asr_model: Annotated[
        str, typer.Option(rich_help_panel=ASR, help="faster-whisper model name or folder (tiny.en, base bundled)")
    ] = "tiny.en",
    lang: Annotated[str, typer.Option(rich_help_panel=ASR, help="ASR language: auto, en, zh, ...")] = "auto",
    device: Annotated[str, typer.Option(rich_help_panel=ASR, help="ASR device: auto, cpu, cuda")] = "auto",
    asr_compute: Annotated[
        str,
        typer.Option(
            rich_help_panel=ASR,
            help=(
                "CTranslate2 compute type: auto (float32 on a CPU: the same words on any CPU; float16 on "
                "CUDA), or int8, int8_float32, ... (int8 is faster on a CPU, its words depend on the machine)"
            ),
        ),
    ] = "auto",
    refine_words: Annotated[
        bool,
        typer.Option(
            rich_help_panel=ASR, help="Snap ASR word edges to speech-energy edges (measured: benchmarks/asr_timing.py)"
        ),
    ] = True,
    aligner: Annotated[str, typer.Option(rich_help_panel=ASR, help=ALIGN_HELP)] = "auto",
    fillers: Annotated[
        bool,
        typer.Option(
            rich_help_panel=ASR, help="Report the fillers the acoustic aligner finds (um, uh, er) as words too"
        ),
    ] = False,
    decode: Annotated[
        str, typer.Option(rich_help_panel=FRAMES, help="auto, selective or sequential (identical frames)")
    ] = "auto",
    asr_mode: Annotated[
        str,
        typer.Option(
            rich_help_panel=ASR,
            help=(
                "auto (batched on a GPU, else single), single, batched, or packed "
                "(several short clips per Whisper window: faster on a CPU, but a clip's words "
                "then depend on its neighbours)"
            ),
        ),
    ] = "auto",
    executor: Annotated[
        str,
        typer.Option(
            rich_help_panel=WORK, help="local (processes here) or ray (a Ray cluster; pip install 'avstack[ray]')"
        ),
    ] = "local",
    ray_address: Annotated[
        str | None,
        typer.Option(
            rich_help_panel=WORK, help="Ray cluster address (default RAY_ADDRESS; else a local Ray is started)"
        ),
    ] = None,
    audio_track: Annotated[
        int | None,
        typer.Option(
            rich_help_panel=STREAMS, help="Audio track to hear (0 = the first audio track; default: ffmpeg's pick)"
        ),
    ] = None,
    video_stream: Annotated[
        int | None,
        typer.Option(
            rich_help_panel=STREAMS,
            help="The file's video stream to see, by its index as ffprobe lists it (default: ffmpeg's pick)",
        ),
    ] = None,
    audio_stream: Annotated[
        str | None,
        typer.Option(
            rich_help_panel=STREAMS,
            help="The file's audio stream to hear: its index as ffprobe lists it, or a language (eng, de)",
        ),
    ] = None,
    include: Annotated[
        list[str] | None,
        typer.Option(rich_help_panel=WORK, help="Also take files matching this glob as videos (repeatable): '*.dat'"),
    ] = None,
) -> None:
    """Decode clips, sample frames at true times, extract audio and word-level ASR; write a manifest."""
    args = dict(locals(), include=tuple(include or ()))  # first: every option, and nothing else
    with ended():
        report = door.prepare(**args, progress=progress)
    said(report, out)
    if report.failed:
        raise typer.Exit(1)


def said(report: Any, out: Path) -> None:
    """prepare's summary (stdout) and its warnings and failed clips (stderr)."""
    lines, warnings = report.said(out)
    for text in lines:
        typer.echo(text)
    for text in warnings:
        typer.echo(text, err=True)


@app.command()
def transcribe(
    paths: Annotated[list[Path], typer.Argument(help="Video or audio files")],
    model: Annotated[str, typer.Option(help="faster-whisper model name or folder")] = "tiny.en",
    lang: Annotated[str, typer.Option(help="auto, en, zh, ...")] = "auto",
    device: Annotated[str, typer.Option(help="auto, cpu, cuda")] = "auto",
    refine: Annotated[bool, typer.Option(help="Snap word edges to speech-energy edges")] = True,
    aligner: Annotated[str, typer.Option(help=ALIGN_HELP)] = "auto",
    fillers: Annotated[bool, typer.Option(help="Report the fillers found (um, uh, er) as words too")] = False,
    compute: Annotated[
        str, typer.Option(help="CTranslate2 compute type: auto (float32 on a CPU, the same words anywhere), int8, ...")
    ] = "auto",
) -> None:
    """Print word-level ASR JSON (EcoG annotations shape), one line per file, on the clip's clock.

    The times are `prepare`'s (time 0 where a player starts the clip, whenever its audio track
    starts); a file that cannot be read is a line with its error, and the others go on."""
    options = door.TranscribeOptions(model, lang, device, refine, aligner, fillers, compute)
    failed = 0
    with ended():
        for words in door.transcribe_files(paths, options):
            typer.echo(json.dumps(words.to_json(), ensure_ascii=False))
            failed += words.error is not None
    if failed:
        raise typer.Exit(1)


@app.command()
def synth(
    out: Annotated[Path, typer.Argument(help="Folder to write an EcoG-layout sample set into")],
    lang: Annotated[str, typer.Option(help="en or zh")] = "en",
    small: Annotated[bool, typer.Option(help="Small clips (the bundled demo size)")] = True,
) -> None:
    """Generate synthetic EcoG-layout clips with known frame and word timing."""
    with ended():
        shown(door.synth(out, lang=lang, small=small))
