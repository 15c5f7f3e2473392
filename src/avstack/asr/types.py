"""ASR values: settings, words, transcripts; the one place that resolves a requested language."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, TypedDict

from avstack.io import DataError

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


# the keys of a transcript's JSON, in order: as transcribed, and for a clip with nothing to hear
HEARD_KEYS = ("model", "language", "text", "words", "fillers", "timing", "engine", "settings", "dropped", "runtime")
UNHEARD_KEYS = ("model", "language", "text", "words", "note")
WORD_KEYS = ("text", "begin_time", "end_time", "prob")


class _Spoken(TypedDict):
    text: str
    begin_time: int
    end_time: int


class TimedWord(_Spoken, total=False):
    """A word (or a subtitle cue) as EcoG's annotations write it: its text and its span on the
    clip's clock, in ms. The shape of a set's truth, of the given subtitles, and of the words a
    prompt shows. (total=False for `utterance` alone: NotRequired is Python 3.11's.)"""

    utterance: int  # a long take's truth: the utterance the word belongs to


@dataclass(frozen=True)
class Transcript:
    """A transcription: the model, the language, the words in time order, the settings it ran with,
    what the guards dropped and why, and what it ran on (`runtime`). A clip with no audio track has
    a transcript too: no words, no settings, and a `note` saying why (prepare's manifest).

    `to_ecog` is its JSON (the EcoG annotations shape, which the manifest and the ASR cache hold);
    `transcript_from_ecog` reads one back as untrusted input, and `to_ecog` then gives back the
    same JSON: the keys it was read with (`keys`, `word_keys`), the text as it was written."""

    model: str
    language: str | None
    words: tuple[Word, ...]
    settings: AsrSettings | None
    dropped: tuple[str, ...] = ()  # why text was discarded (guards), for provenance
    runtime: dict[str, object] = field(default_factory=dict, compare=False)  # asr.runtime: what it ran on
    fillers: tuple[Word, ...] = ()  # sounds between words the transcript lacks ("um"), found acoustically
    # what timed the words: {"by", "words", "timed", "fallback": {why: count}} (asr.whisper.timing_record)
    timing: dict[str, Any] = field(default_factory=dict)
    note: str | None = None  # why there is nothing to hear ("clip has no audio track")
    # read from a file: its keys in order, its words' keys, its text as written and any key of its
    # own (None, (), None, {}: as transcribed)
    keys: tuple[str, ...] | None = field(default=None, compare=False, repr=False)
    word_keys: tuple[str, ...] = field(default=WORD_KEYS, compare=False, repr=False)
    written_text: str | None = field(default=None, compare=False, repr=False)
    extra: dict[str, object] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def unheard(cls, model: str, language: str | None, note: str) -> Transcript:
        """The transcript of a clip with nothing to hear."""
        return cls(model, language, (), None, note=note, keys=UNHEARD_KEYS)

    @property
    def text(self) -> str:
        if self.written_text is not None:
            return self.written_text
        sep = "" if self.language == "zh" else " "
        return sep.join(w.text for w in self.words)

    def only_words(self, words: Sequence[Word]) -> Transcript:
        """This transcript with only `words` (its text theirs, not the text as written)."""
        return replace(self, words=tuple(words), written_text=None)

    def to_ecog(self) -> dict[str, object]:
        """The EcoG annotations shape, plus provenance."""
        words = [
            {"text": w.text, "begin_time": w.begin_ms, "end_time": w.end_ms, "prob": round(w.prob, 4)}
            for w in self.words
        ]
        if self.word_keys != WORD_KEYS:
            words = [{k: w[k] for k in self.word_keys} for w in words]
        values: dict[str, object] = {
            "model": self.model,
            "language": self.language,
            "text": self.text,
            "words": words,
            "fillers": [{"text": w.text, "begin_time": w.begin_ms, "end_time": w.end_ms} for w in self.fillers],
            "timing": self.timing,
            "engine": "faster-whisper",
            "settings": asdict(self.settings) if self.settings is not None else None,
            "dropped": list(self.dropped),
            "runtime": self.runtime,
            "note": self.note,
        }
        return {k: values[k] if k in values else self.extra[k] for k in self.keys or HEARD_KEYS}


def _is_ms(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _words(given: object, where: str) -> tuple[Word, ...]:
    """Words as the EcoG shape lists them (a filler has no probability: 0)."""
    if not isinstance(given, list):
        raise DataError(f"{where}: expected a list of words, found {type(given).__name__}")
    words = []
    for i, w in enumerate(given):
        timed = isinstance(w, dict) and isinstance(w.get("text"), str) and _is_ms(w.get("begin_time"))
        timed = timed and _is_ms(w.get("end_time"))
        prob = w.get("prob", 0.0) if timed else None
        if not timed or not isinstance(prob, (int, float)) or isinstance(prob, bool):
            raise DataError(f"{where}[{i}]: expected {{text, begin_time, end_time (ms), prob}}; found {w!r:.80}")
        words.append(Word(w["text"], w["begin_time"], w["end_time"], float(prob)))
    return tuple(words)


def transcript_from_ecog(d: object, where: str) -> Transcript:
    """A transcript read from a file (a manifest's `asr`, the ASR cache): DataError naming the
    place and the field it could not use."""
    if not isinstance(d, dict) or not isinstance(d.get("model", ""), str):
        raise DataError(f"{where}: expected a transcript object (model, language, text, words), found {str(d):.80}")
    language, text, note = d.get("language"), d.get("text"), d.get("note")
    if not all(v is None or isinstance(v, str) for v in (language, text, note)):
        raise DataError(f"{where}: language, text and note must be strings or null; found {str(d):.80}")
    settings = d.get("settings")
    names = {f.name for f in fields(AsrSettings)}
    if settings is not None and (not isinstance(settings, dict) or not set(settings) <= names):
        raise DataError(f"{where}: settings must be an object of {', '.join(sorted(names))}; found {settings!r:.80}")
    extra = {k: d.get(k) for k in ("dropped", "runtime", "timing")}
    objects = all(isinstance(extra[k] or {}, dict) for k in ("runtime", "timing"))
    if not isinstance(extra["dropped"] or [], list) or not objects:
        raise DataError(f"{where}: dropped must be a list, runtime and timing objects")
    words = d.get("words", [])
    first = words[0] if isinstance(words, list) and words and isinstance(words[0], dict) else {}
    return Transcript(
        d.get("model", ""),
        language,
        _words(words, f"{where}: words"),
        AsrSettings(**settings) if settings is not None else None,
        tuple(str(x) for x in extra["dropped"] or []),
        dict(extra["runtime"] or {}),
        _words(d.get("fillers", []), f"{where}: fillers"),
        dict(extra["timing"] or {}),
        note,
        keys=tuple(d),
        word_keys=tuple(k for k in WORD_KEYS if k in first) if first else WORD_KEYS,
        written_text=text,
        extra={k: v for k, v in d.items() if k not in HEARD_KEYS + UNHEARD_KEYS},
    )


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
