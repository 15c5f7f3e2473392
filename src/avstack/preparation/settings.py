"""What a prepare job is asked to do (`PrepareSettings`), and the cache keys that follow from it."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from avstack.errors import UsageError
from avstack.limits import DEFAULT_MAX_PIXELS

if TYPE_CHECKING:
    pass


ANCHORS = ("frames", "audio", "asr")


ASR_MODES = ("auto", "single", "packed", "batched")


# 2: frames and audio on the clip's one clock (the earliest stream start); 3: the streams a player
# would pick (media.streams), not the first video stream
CACHE_VERSION = 3


@dataclass(frozen=True)
class PrepareSettings:
    anchors: tuple[str, ...] = ANCHORS
    fps: float = 2.0
    max_frames: int | None = None
    max_side: int | None = None
    max_pixels: int | None = DEFAULT_MAX_PIXELS  # a clip with larger frames is refused (a bound on memory)
    jpeg_quality: int = 90
    thread_type: str = "AUTO"
    decode: str = "auto"  # auto | selective | sequential (frames are identical; speed differs)
    threads: int = 0  # decoder threads per worker (its spans side by side); 0: chosen (avstack.jobplan)
    asr_model: str = "tiny.en"
    asr_device: str = "auto"
    lang: str | None = None  # None/"auto": detect (or take the clip's own field)
    asr_beam_size: int = 5
    asr_vad: bool = True
    # auto: batched on a GPU, else single | single: each clip alone, in its worker | batched: one
    # window per clip, batched (BatchedInferencePipeline) | packed: short clips laid end to end, one
    # window for several (asr.transcribe_packed: faster on a CPU, but a clip's words then depend
    # on its neighbours, so it is never chosen for you: docs/reproducibility.md)
    asr_mode: str = "auto"
    asr_batch: int = 16  # clips per batch when batched
    asr_refine: bool = True  # snap word edges to speech-energy edges (see benchmarks/asr_timing.py)
    asr_threads: int = 1  # CPU threads of one transcription: fixed, so words never depend on workers or cores
    # CTranslate2 compute type (asr.AsrSettings.compute_type): auto = float32 on a CPU (the same
    # words on any CPU), float16 on CUDA; int8 is faster on a CPU and machine-dependent
    asr_compute: str = "auto"
    # what times the words (asr.AsrSettings.aligner): auto (= acoustic: phone HMMs on the clip's
    # own audio for English, else the transcriber's own), self, none, or a model name (asr.align)
    asr_aligner: str = "auto"
    asr_fillers: bool = False  # the fillers found ("um", "uh") reported as words too
    audio_track: int | None = None  # the audio track heard (0 = first); None: ffmpeg's pick (media.streams)
    video_stream: int | None = None  # the file's stream index to see (ffprobe's numbering); None: ffmpeg's pick
    audio_stream: str | None = None  # the file's stream index to hear, or a language ("eng"); None: ffmpeg's pick

    def streams(self) -> Any:
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


def parse_anchors(text: str) -> tuple[str, ...]:
    """`full` or a comma list of frames, audio, asr."""
    names = [a.strip() for a in text.split(",") if a.strip()]
    if names == ["full"]:
        return ANCHORS
    bad = [a for a in names if a not in ANCHORS]
    if bad or not names:
        raise UsageError(f"--anchors expects 'full' or a comma list of {', '.join(ANCHORS)}; found {text!r}")
    wanted = set(names) | ({"audio"} if "asr" in names else set())  # ASR needs the audio
    return tuple(a for a in ANCHORS if a in wanted)


def cache_key(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:20]
