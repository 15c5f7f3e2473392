"""What a prepare job is asked to do (`PrepareSettings`), and the cache keys that follow from it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from avstack.errors import UsageError
from avstack.limits import DEFAULT_MAX_PIXELS
from avstack.options import ASR, FRAMES, STREAMS, WORK, option

if TYPE_CHECKING:  # the settings stay light: the command line reads them to build its flags
    from avstack.media.streams import StreamPick

ANCHORS = ("frames", "audio", "asr")


ASR_MODES = ("auto", "single", "packed", "batched")


# 2: frames and audio on the clip's one clock (the earliest stream start); 3: the streams a player
# would pick (media.streams), not the first video stream
CACHE_VERSION = 3


def parse_anchors(text: str | Sequence[str]) -> tuple[str, ...]:
    """`full` or a comma list of frames, audio, asr (or those names already listed)."""
    names = [a.strip() for a in (text.split(",") if isinstance(text, str) else text) if a.strip()]
    if names == ["full"]:
        return ANCHORS
    bad = [a for a in names if a not in ANCHORS]
    if bad or not names:
        raise UsageError(f"--anchors expects 'full' or a comma list of {', '.join(ANCHORS)}; found {text!r}")
    wanted = set(names) | ({"audio"} if "asr" in names else set())  # ASR needs the audio
    return tuple(a for a in ANCHORS if a in wanted)


def language_given(text: str | None) -> str | None:
    """--lang as the setting: None where the language is detected (or the clip's own)."""
    return None if text in (None, "", "auto") else text


ALIGN_HELP = (
    "What times the words: auto (= acoustic: phone HMMs for English and Mandarin, else self), self, none, "
    "or a model name"
)


@dataclass(frozen=True)
class PrepareSettings:
    """What a prepare job is asked to do, each field with its flag (avstack.options)."""

    anchors: tuple[str, ...] = option(
        ANCHORS,
        "'full' or a comma list of frames,audio,asr",
        panel=FRAMES,
        text=str,
        default_text="full",
        parse=parse_anchors,
    )
    fps: float = option(2.0, "Frames per second to sample (the paper uses 2)", panel=FRAMES)
    max_frames: int | None = option(None, "Cap on sampled frames (uniform subsample)", panel=FRAMES)
    max_side: int | None = option(None, "Shrink frames to this longest side in px", panel=FRAMES)
    # a clip with larger frames is refused (a bound on memory)
    max_pixels: int | None = option(
        DEFAULT_MAX_PIXELS, "Refuse clips whose frames have more pixels (default: 8K, 7680x4320)", panel=FRAMES
    )
    jpeg_quality: int = option(90, "JPEG quality 1-100", panel=FRAMES)
    thread_type: str = "AUTO"
    # frames are identical either way; speed differs
    decode: str = option("auto", "auto, selective or sequential (identical frames)", panel=FRAMES)
    # decoder threads per worker (its spans side by side); 0: chosen (avstack.jobplan)
    threads: int = option(0, "Decoder threads per worker (0: chosen for the job; see prepare.json)", panel=WORK)
    asr_model: str = option("tiny.en", "faster-whisper model name or folder (tiny.en, base bundled)", panel=ASR)
    asr_device: str = option("auto", "ASR device: auto, cpu, cuda", panel=ASR, name="device")
    # None/"auto": detect (or take the clip's own field)
    lang: str | None = option(
        None, "ASR language: auto, en, zh, ...", panel=ASR, text=str, default_text="auto", parse=language_given
    )
    asr_beam_size: int = 5
    asr_vad: bool = True
    # auto: batched on a GPU, else single | single: each clip alone, in its worker | batched: one
    # window per clip, batched (BatchedInferencePipeline) | packed: short clips laid end to end, one
    # window for several (asr.transcribe_packed: faster on a CPU, but a clip's words then depend
    # on its neighbours, so it is never chosen for you: docs/reproducibility.md)
    asr_mode: str = option(
        "auto",
        "auto (batched on a GPU, else single), single, batched, or packed (several short clips per Whisper window: "
        "faster on a CPU, but a clip's words then depend on its neighbours)",
        panel=ASR,
    )
    asr_batch: int = 16  # clips per batch when batched
    asr_refine: bool = option(
        True,
        "Snap ASR word edges to speech-energy edges (measured: benchmarks/asr_timing.py)",
        panel=ASR,
        name="refine-words",
        switch=True,
    )
    # CPU threads of one transcription: fixed, so words never depend on workers or cores
    asr_threads: int = option(
        1, "CPU threads of one transcription; fixed (not the cores), so words never move with them", panel=ASR
    )
    # CTranslate2 compute type (asr.AsrSettings.compute_type): auto = float32 on a CPU (the same
    # words on any CPU), float16 on CUDA; int8 is faster on a CPU and machine-dependent
    asr_compute: str = option(
        "auto",
        "CTranslate2 compute type: auto (float32 on a CPU: the same words on any CPU; float16 on CUDA), or int8, "
        "int8_float32, ... (int8 is faster on a CPU, its words depend on the machine)",
        panel=ASR,
    )
    # what times the words (asr.AsrSettings.aligner): auto (= acoustic: phone HMMs on the clip's
    # own audio for English, else the transcriber's own), self, none, or a model name (asr.align)
    asr_aligner: str = option("auto", ALIGN_HELP, panel=ASR, name="aligner")
    asr_fillers: bool = option(
        False,
        "Report the fillers the acoustic aligner finds (um, uh, er) as words too",
        panel=ASR,
        name="fillers",
        switch=True,
    )
    audio_track: int | None = option(
        None, "Audio track to hear (0 = the first audio track; default: ffmpeg's pick)", panel=STREAMS
    )
    video_stream: int | None = option(
        None, "The file's video stream to see, by its index as ffprobe lists it (default: ffmpeg's pick)", panel=STREAMS
    )
    audio_stream: str | None = option(
        None, "The file's audio stream to hear: its index as ffprobe lists it, or a language (eng, de)", panel=STREAMS
    )

    def __post_init__(self) -> None:
        # fps=1 and --fps 1 are one setting: the cache key reads 1.0 for both
        object.__setattr__(self, "fps", float(self.fps))

    def streams(self) -> StreamPick:
        """The streams asked for, as media.streams.StreamPick (checked: one way to ask for audio)."""
        from avstack.media.streams import StreamPick

        audio = int(self.audio_stream) if self.audio_stream and self.audio_stream.isdigit() else self.audio_stream
        return StreamPick(video=self.video_stream, audio=audio, audio_track=self.audio_track)

    def frame_key(self, video_sha: str) -> str:
        return cache_key(
            {
                "v": CACHE_VERSION,
                "sha": video_sha,
                "fps": self.fps,
                "max_frames": self.max_frames,
                "max_side": self.max_side,
                "q": self.jpeg_quality,
                "streams": self.streams().key(),  # the heard track can start the clip's clock
            }
        )


@dataclass(frozen=True)
class PrepareJob:
    """How a prepare job runs (never what it makes: the manifest is the same whichever): where
    its workers run and how many, and which files of a plain folder it takes."""

    workers: int | None = option(None, "Worker processes (default: CPU count)", panel=WORK)
    executor: str = option(
        "local", "local (processes here) or ray (a Ray cluster; pip install 'avstack[ray]')", panel=WORK
    )
    ray_address: str | None = option(
        None, "Ray cluster address (default RAY_ADDRESS; else a local Ray is started)", panel=WORK
    )
    include: tuple[str, ...] = option(
        (), "Also take files matching this glob as videos (repeatable): '*.dat'", panel=WORK, many=True
    )


def cache_key(obj: object) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:20]
