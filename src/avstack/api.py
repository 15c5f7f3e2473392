"""The public Python API: a handful of names, re-exported from `avstack`, that the CLI calls too.

Everything else under `avstack.*` is internal (no stability promise). The façade knows the
registered tasks (EcoG, EgoGap) but imports them only inside the functions that need them, so
`import avstack` stays light and the core never depends on a benchmark.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from avstack.io import Progress
from avstack.manifest import ClipRecord, FrameRef, Prepared
from avstack.preparation.driver import PrepareReport
from avstack.preparation.settings import PrepareSettings, parse_anchors

if TYPE_CHECKING:
    import numpy as np

    from avstack.asr.types import Transcript, Word
    from avstack.front import BackendOptions, CommandFailed, Costing, ablate, export, run, view
    from avstack.media.probe import Frame
    from avstack.prompting.stacks import Stack

# names whose modules load numpy, PyAV or the ASR stack: imported on first use, so a command that
# needs none of them (the prepare driver of a frames job) starts without them
_LAZY = {"Frame": "media", "Transcript": "asr.types", "Word": "asr.types", "Stack": "prompting.stacks"}
# the commands as library calls (avstack.front): `avstack.ablate(prepared, model=..., out=...)`
_LAZY |= dict.fromkeys(["ablate", "run", "export", "view", "BackendOptions", "Costing", "CommandFailed"], "front")


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(f".{_LAZY[name]}", __package__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


PathLike = str | os.PathLike[str]
# prepare's flags named otherwise than the PrepareSettings fields they set
PREPARE_FLAGS = {
    "device": "asr_device",
    "refine_words": "asr_refine",
    "aligner": "asr_aligner",
    "fillers": "asr_fillers",
}


def prepare(
    data_root: PathLike,
    out: PathLike,
    *,
    anchors: str = "full",
    fps: float = 2.0,
    asr_model: str = "tiny.en",
    lang: str | None = None,
    asr_mode: str = "auto",
    workers: int | None = None,
    executor: str = "local",
    ray_address: str | None = None,
    include: Sequence[str] = (),
    progress: Progress | None = None,
    **settings: Any,
) -> PrepareReport:
    """Prepare every clip below `data_root` into `out` (frames at true times, audio, word-timed ASR,
    a content-addressed cache and `out/manifest.jsonl`), exactly as `avstack prepare` does.

    `anchors` is "full" or a comma list of frames, audio, asr; `lang` None or "auto" detects it (or
    takes each clip's own); `asr_mode` auto | single | batched | packed; `executor` local | ray.
    Further keywords are `PrepareSettings` fields (max_side, jpeg_quality, audio_track, asr_threads,
    ...) or the command's names for them (device, refine_words, aligner, fillers).
    An EcoG-Bench root is recognised by its folders; anything else is a plain folder of videos
    (`include`: globs for odd file names).
    Returns the report (counts, failed records); a failing clip never stops the others.
    """
    from avstack.preparation.driver import prepare as run_prepare
    from avstack.tasks import all_layouts

    lang = None if lang == "auto" else lang
    # the command's own names for some fields (`avstack prepare --device --refine-words ...`)
    fields = {PREPARE_FLAGS.get(k, k): v for k, v in settings.items()}
    if fields.get("max_pixels", 0) is None:
        fields.pop("max_pixels")  # not given: the default bound
    # fps=1 and --fps 1 are one setting (the cache key reads 1.0 for both)
    s = PrepareSettings(
        anchors=parse_anchors(anchors), fps=float(fps), asr_model=asr_model, lang=lang, asr_mode=asr_mode
    )
    s = replace(s, **fields)
    return run_prepare(Path(data_root), Path(out), s, workers, progress, all_layouts(), executor, ray_address, include)


def sample_root() -> Path:
    """The bundled sample set: seven EcoG-style English clips with their annotations (the data
    `make demo` runs on), from the installed package, or a checkout's samples/ecog_en."""
    from importlib.resources import files

    try:
        found = Path(str(files("avstack.samples") / "ecog_en"))
    except ModuleNotFoundError:
        found = Path(__file__).resolve().parents[2] / "samples" / "ecog_en"
    if not found.is_dir():
        raise FileNotFoundError(f"the bundled sample set is missing (looked in {found})")
    return found


def open_prepared(path: PathLike) -> Prepared:
    """Open a prepared folder: `for clip in open_prepared(p): clip.frames[0].pts_ms`."""
    return Prepared(path)


def sample_frames(
    video: PathLike,
    *,
    fps: float = 2.0,
    times_ms: Sequence[int] | None = None,
    max_side: int | None = None,
    audio_track: int | None = None,
) -> list[Frame]:
    """Frames of one video file at true presentation times, in memory, no cache: the frame shown at
    each of `times_ms` (or at 0, 1/fps, 2/fps, ...), then the clip's last frame, each once, in time
    order. `Frame.pts_ms` is on the clip's one clock (time 0 where a player starts it; the audio
    track can start it, hence `audio_track`); `Frame.index` is its place among the presented frames
    (a label, not a time); `Frame.image` is RGB, upright."""
    from avstack import media

    sample = media.sample_frames(
        video,
        fps=fps,
        times_ms=tuple(times_ms) if times_ms is not None else None,
        max_side=max_side,
        audio_track=audio_track,
    )
    return sample.frames


def transcribe(
    audio_or_video: PathLike | np.ndarray,
    *,
    model: str = "tiny.en",
    language: str = "auto",
    device: str = "auto",
    refine: bool = True,
    aligner: str = "auto",
    fillers: bool = False,
) -> Transcript:
    """Words with times in ms (`Transcript.words`: text, begin_ms, end_ms, prob) from 16 kHz mono
    float32 samples, or from a media file's heard audio track placed on the clip's clock (so the
    times match `sample_frames`). `model`: tiny.en and base work offline; any faster-whisper name
    or folder. `language` auto detects (English for a .en model). `aligner`: what times the words
    (auto: phone HMMs on the audio for English, the transcriber's own times elsewhere; self, none,
    or a model whose cross-attention times them). `fillers`: the fillers found ("um", "uh") are
    in `Transcript.fillers` always, and among the words too when True."""
    import numpy as np

    from avstack import media
    from avstack.asr import AsrSettings, Transcript, aligner_setting, language_setting
    from avstack.asr import transcribe as run_asr

    settings = AsrSettings(
        model=model,
        device=device,
        language=language_setting(language, None, model),
        refine=refine,
        aligner=aligner_setting(aligner, model),
        fillers=fillers,
    )
    if isinstance(audio_or_video, np.ndarray):
        return run_asr(audio_or_video.astype(np.float32, copy=False), settings)
    path = Path(audio_or_video)
    samples = media.load_audio(path, origin=media.clip_origin(media.probe(path))) if media.has_audio(path) else None
    if samples is None:
        return Transcript(model, "", (), settings, ("no audio track",))
    return run_asr(samples, settings)


def stack(
    variant: str = "full", drop: Sequence[str] = (), *, ts_format: str = "ms", word_ts_format: str = "json"
) -> Stack:
    """An input stack: `full` (frames + frame timestamps + word-timed ASR), `video` or `text`, less
    the cues in `drop` (frame_ts, word_ts, asr, frames), with frame times told as `ts_format` (ms,
    seconds, mmss, qwen, index, overlay) and word times as `word_ts_format` (json, srt, inline)."""
    from avstack.prompting.stacks import make_stack

    return make_stack(variant, drop, ts_format, word_ts_format)


def render(
    prepared: PathLike | Prepared,
    record: ClipRecord,
    stack: Stack,
    *,
    format: str = "openai",
    media_mode: str = "path",
    coord_order: str = "xy",
    prompt_dir: PathLike | None = None,
) -> Any:
    """One EcoG clip's request under `stack`, rendered for an API: `openai` (chat messages), `gemini`
    (contents), `hf` (chat template messages) or `neutral` (avstack's own request JSON). Images are
    file paths (`media_mode="path"`) or inline data URLs (`"data"`)."""
    from avstack.manifest import data_root_of
    from avstack.prompting.messages import Request
    from avstack.prompting.messages import render as render_request
    from avstack.tasks.ecog.prompt import EcogOptions, build_request

    folder = Path(prepared.path if isinstance(prepared, Prepared) else prepared).resolve()
    options = EcogOptions(coord_order, prompt_dir=Path(prompt_dir) if prompt_dir else None)
    req: Request = build_request(record, stack, str(folder), options, data_root_of(folder))
    return req.to_neutral() if format == "neutral" else render_request(req, format, media_mode)


def score(task: str, truth: PathLike, predictions: PathLike) -> dict[str, Any]:
    """Score a predictions file with the benchmark's own definitions, as `avstack score` does:
    `task` ecog (truth: `avstack ecog gt` JSONL) or egogap (truth: a *.bundles.jsonl). Returns the
    result JSON (EcoG: per clip acc_cls, acc_s, acc_t, acc_eco, acc_seq and their means)."""
    from avstack.tasks import get_task

    outcome = get_task(task).score(Path(truth), Path(predictions))
    result: dict[str, Any] = outcome.result
    return result


# the same list as avstack.__all__ (that one is read without importing this module;
# tests/test_docs.py holds them equal)
__all__ = [
    "BackendOptions",
    "ClipRecord",
    "CommandFailed",
    "Costing",
    "Frame",
    "FrameRef",
    "PrepareReport",
    "Prepared",
    "Stack",
    "Transcript",
    "Word",
    "ablate",
    "export",
    "open_prepared",
    "prepare",
    "render",
    "run",
    "sample_frames",
    "sample_root",
    "score",
    "stack",
    "transcribe",
    "view",
]
