"""The prepare stage through the door: `prepare` (a folder of clips into frames at true times,
audio and word-timed ASR), `transcribe` and `transcribe_files` (words on the clip's clock, as
prepare times them), `sample_frames`, `open_prepared`, `sample_root` and `synth`."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from avstack.api.failures import speaks_flags
from avstack.api.options import Done
from avstack.errors import InputError, UsageError
from avstack.io import Progress
from avstack.manifest import Prepared
from avstack.options import fold, fold_all, option, refuse_unknown
from avstack.preparation.settings import ALIGN_HELP, PrepareJob, PrepareSettings

if TYPE_CHECKING:
    import numpy as np

    from avstack.asr.types import AsrSettings, Transcript
    from avstack.media.probe import Frame
    from avstack.preparation.driver import PrepareReport

PathLike = str | os.PathLike[str]


@speaks_flags
def prepare(
    data_root: PathLike,
    out: PathLike,
    settings: PrepareSettings | None = None,
    *,
    job: PrepareJob | None = None,
    progress: Progress | None = None,
    **keywords: object,
) -> PrepareReport:
    """Prepare every clip below `data_root` into `out` (frames at true times, audio, word-timed ASR,
    a content-addressed cache and `out/manifest.jsonl`), exactly as `avstack prepare` does.

    What to make is one record, `settings` (PrepareSettings), how the job runs another, `job`
    (PrepareJob: workers, executor local | ray, ray_address, include: globs for odd file names);
    or their fields by keyword, by name or as the command's flags say them: `anchors="frames,audio"`,
    `fps=1`, `max_side=160`, `lang="auto"` (detect, or each clip's own), `device="cpu"`,
    `refine_words=False`, `workers=1`. An EcoG-Bench root is recognised by its folders; anything
    else is a plain folder of videos. Returns the report (counts, failed records); a failing clip
    never stops the others.
    """
    from avstack.preparation.driver import prepare as run_prepare
    from avstack.tasks import all_layouts

    s, j = fold(PrepareSettings, keywords, settings), fold(PrepareJob, keywords, job)
    refuse_unknown("prepare", keywords, PrepareSettings, PrepareJob)
    return run_prepare(
        Path(data_root), Path(out), s, j.workers, progress, all_layouts(), j.executor, j.ray_address, j.include
    )


def sample_root() -> Path:
    """The bundled sample set: seven EcoG-style English clips with their annotations (the data
    `make demo` runs on), from the installed package, or a checkout's samples/ecog_en."""
    from importlib.resources import files

    try:
        found = Path(str(files("avstack.samples") / "ecog_en"))
    except ModuleNotFoundError:
        found = Path(__file__).resolve().parents[3] / "samples" / "ecog_en"
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


@dataclass(frozen=True)
class TranscribeOptions:
    """How words are heard and timed, one record (faster-whisper's TranscriptionOptions): what
    `avstack transcribe` parses its flags into and `transcribe` takes. `model`: tiny.en and base
    work offline; any faster-whisper name or folder. `language` auto detects (English for a .en
    model). `aligner`: what times the words (auto: phone HMMs on the audio for English, the
    transcriber's own times elsewhere; self, none, or a model whose cross-attention times them).
    `fillers`: the fillers found ("um", "uh") are in `Transcript.fillers` always, and among the
    words too when True. `compute`: CTranslate2's compute type (auto: float32 on a CPU, the same
    words on any CPU; int8 is faster, its words depend on the machine)."""

    model: str = option("tiny.en", "faster-whisper model name or folder")
    language: str = option("auto", "auto, en, zh, ...", name="lang")
    device: str = option("auto", "auto, cpu, cuda")
    refine: bool = option(True, "Snap word edges to speech-energy edges", switch=True)
    aligner: str = option("auto", ALIGN_HELP)
    fillers: bool = option(False, "Report the fillers found (um, uh, er) as words too", switch=True)
    compute: str = option(
        "auto", "CTranslate2 compute type: auto (float32 on a CPU, the same words anywhere), int8, ..."
    )

    def settings(self) -> AsrSettings:
        """The ASR settings these options make, "auto" resolved as `prepare` resolves it."""
        from avstack.asr import AsrSettings, aligner_setting, language_setting
        from avstack.asr.models import COMPUTE_TYPES

        if self.compute not in COMPUTE_TYPES:
            raise UsageError(f"--compute: expected one of {', '.join(COMPUTE_TYPES)}, found {self.compute!r}")
        return AsrSettings(
            model=self.model,
            device=self.device,
            language=language_setting(self.language, None, self.model),
            refine=self.refine,
            aligner=aligner_setting(self.aligner, self.model),
            fillers=self.fillers,
            compute_type=self.compute,
        )


@speaks_flags
def transcribe(
    audio_or_video: PathLike | np.ndarray, options: TranscribeOptions | None = None, **keywords: object
) -> Transcript:
    """Words with times in ms (`Transcript.words`: text, begin_ms, end_ms, prob) from 16 kHz mono
    float32 samples, or from a media file's heard audio track placed on the clip's clock (time 0
    where a player starts the clip, so the times match `sample_frames` and `prepare`'s manifest
    even where the audio track starts late). `options` (TranscribeOptions) or its fields by
    keyword: `transcribe(path, model="base", language="en")`."""
    import numpy as np

    from avstack import media
    from avstack.asr import Transcript
    from avstack.asr import transcribe as run_asr

    settings = fold_all("transcribe", TranscribeOptions, keywords, options).settings()
    if isinstance(audio_or_video, np.ndarray):
        return run_asr(audio_or_video.astype(np.float32, copy=False), settings)
    path = Path(audio_or_video)
    if not path.is_file():
        raise InputError(f"{path}: expected a media file, found {'a folder' if path.exists() else 'nothing'}")
    # a video's clock starts where a player starts it (its earliest stream); a sound file's, at
    # its own first sample
    origin = media.clip_origin(media.probe(path)) if media.has_video(path) else None
    samples = media.load_audio(path, origin=origin)  # None: no audio track
    if samples is None:
        return Transcript(settings.model, "", (), settings, ("no audio track",))
    return run_asr(samples, settings)


@dataclass(frozen=True)
class FileWords:
    """One file's words, or why it has none (a bad file never stops the others)."""

    path: Path
    transcript: Any = None  # a Transcript
    error: dict[str, str] | None = None

    def to_json(self) -> Mapping[str, object]:
        """The EcoG annotations shape, with the file's path (or its error)."""
        said: dict[str, object] = {"path": str(self.path)}
        return said | ({"error": self.error} if self.error else self.transcript.to_ecog())


def transcribe_files(paths: Sequence[PathLike], options: TranscribeOptions | None = None) -> Iterator[FileWords]:
    """`avstack transcribe`: each file's words as `transcribe` gives them (on the clip's clock),
    one at a time; a file that cannot be read is a FileWords with its error, and the rest go on.
    Options that cannot be honoured are refused before any file is read."""
    options = options or TranscribeOptions()
    options.settings()  # refuses a bad option before the first file
    for path in paths:
        try:
            yield FileWords(Path(path), transcribe(path, options))
        except Exception as exc:  # one bad file never stops the others; it is recorded, named
            yield FileWords(Path(path), error={"type": type(exc).__name__, "message": str(exc)})


@dataclass(frozen=True)
class SynthOptions:
    """What `avstack synth` makes: the clips' language and size."""

    lang: str = option("en", "en or zh")
    small: bool = option(True, "Small clips (the bundled demo size)", switch=True)


@speaks_flags
def synth(out: PathLike, options: SynthOptions | None = None, **keywords: object) -> Done:
    """Write an EcoG-layout sample set with known frame and word timing (`avstack synth`):
    `options` (SynthOptions: lang, small) or its fields by keyword."""
    from avstack.synthetic.sample_data import make_sample_set

    o = fold_all("synth", SynthOptions, keywords, options)
    clips = make_sample_set(Path(out), lang=o.lang, small=o.small)
    return Done(f"wrote {len(clips)} clips to {out}", Path(out))
