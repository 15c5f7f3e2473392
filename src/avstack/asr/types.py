"""ASR values: settings, words, transcripts; the one place that resolves a requested language."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

ASR_VERSION = 6  # bump when post-processing changes, so cached ASR is recomputed


RATE = 16_000


@dataclass(frozen=True)
class AsrSettings:
    model: str = "tiny.en"
    device: str = "auto"  # auto | cpu | cuda
    language: str = "auto"  # auto | en | zh | any Whisper code
    beam_size: int = 5
    vad: bool = True
    simplified: bool = True  # Chinese in simplified characters
    refine: bool = True  # snap word edges to speech-energy edges (benchmarks/asr_timing.py)
    # what times the words: "auto" (= "acoustic": phone HMMs on the clip's own audio for English
    # and Mandarin, asr.acoustic; elsewhere the transcriber's own cross-attention, "self"), "self", "none" (the
    # transcription's times as they are) or a model name whose cross-attention times them (asr.align)
    aligner: str = "auto"
    fillers: bool = False  # the fillers the acoustic aligner found ("um", "uh") reported as words too
    # CPU threads of one transcription: fixed, so results never depend on the worker count or
    # the machine's cores (clips run side by side for speed; see asr.runtime)
    threads: int = 1
    # CTranslate2's compute type: "auto" is float32 on a CPU (the same words on any CPU, GEMM
    # back-end and instruction set: asr.models.REPRODUCIBLE_CPU_COMPUTE) and float16 on CUDA;
    # "int8" is faster on a CPU but its words depend on the machine (recorded in `runtime`)
    compute_type: str = "auto"

    @property
    def fixed_language(self) -> str | None:
        """The language to decode in, or None to detect it ("auto")."""
        return None if self.language in ("auto", "", None) else self.language


@dataclass(frozen=True)
class Word:
    """One recognized word: its text, begin and end in ms, and Whisper's probability for it."""

    text: str
    begin_ms: int
    end_ms: int
    prob: float


@dataclass(frozen=True)
class Transcript:
    """A transcription: the model, the language, the words in time order, the settings it ran with,
    what the guards dropped and why, and what it ran on (`runtime`)."""

    model: str
    language: str
    words: tuple[Word, ...]
    settings: AsrSettings
    dropped: tuple[str, ...] = ()  # why text was discarded (guards), for provenance
    runtime: dict[str, Any] = field(default_factory=dict, compare=False)  # asr.runtime: what it ran on
    fillers: tuple[Word, ...] = ()  # sounds between words the transcript lacks ("um"), found acoustically
    # what timed the words: {"by", "words", "timed", "fallback": {why: count}} (asr.whisper.timing_record)
    timing: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        sep = "" if self.language == "zh" else " "
        return sep.join(w.text for w in self.words)

    def to_ecog(self) -> dict[str, Any]:
        """The EcoG annotations shape, plus provenance."""
        return {
            "model": self.model,
            "language": self.language,
            "text": self.text,
            "words": [
                {"text": w.text, "begin_time": w.begin_ms, "end_time": w.end_ms, "prob": round(w.prob, 4)}
                for w in self.words
            ],
            "fillers": [{"text": w.text, "begin_time": w.begin_ms, "end_time": w.end_ms} for w in self.fillers],
            "timing": self.timing,
            "engine": "faster-whisper",
            "settings": asdict(self.settings),
            "dropped": list(self.dropped),
            "runtime": self.runtime,
        }


def language_setting(requested: str | None, clip_lang: str | None, model: str) -> str:
    """The language setting for one clip, the one place "auto" is resolved: the language asked
    for; else the clip's own (from its annotations); else English for an English-only model
    (nothing to detect); else "auto" (Whisper detects it)."""
    lang = clip_lang if (requested in (None, "auto") and clip_lang) else requested
    if lang in (None, "auto") and model.endswith(".en"):
        lang = "en"
    return lang or "auto"


@dataclass(frozen=True, eq=False)
class Heard:
    """One clip's words as the transcriber gave them, before the guards and the aligner: what
    the device's part of a batch hands to the CPU's part (asr.batch.finish). The words are on
    the clip's own clock; `samples` its audio (the aligner's input)."""

    words: tuple[Word, ...]
    dropped: tuple[str, ...]
    language: str
    samples: Any  # np.ndarray: kept Any so this module needs no NumPy
    settings: AsrSettings
    regions: Any = None  # the clip's voiced regions where already found
    own_audio: bool = True  # False: the words were timed inside a pack (asr.packing)
