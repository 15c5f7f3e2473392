"""Transcription with faster-whisper: one clip, a batch of clips (GPU), a file; every transcript
through the same guards."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from avstack.asr import acoustic
from avstack.asr.align import aligner_model, aligner_setting, realign
from avstack.asr.models import SAMPLED, SEED_LOCK, load_model, pick_device, replicas, resolve_model, seeded_model
from avstack.asr.progress import heard
from avstack.asr.refine import (
    PHONE_MS,
    between_timed,
    bound_to_speech,
    in_order,
    no_speech_why,
    own_region_edges,
    pull_into_speech,
    snap_to_regions,
    speech_present,
    voiced_regions,
)
from avstack.asr.runtime import runtime_of
from avstack.asr.text import characters, collapse_repeats, from_characters, group_chinese, sanitize, to_simplified
from avstack.asr.types import RATE, AsrSettings, Transcript, Word
from avstack.asr.windows import Reader, needs_windows, transcribe_windows
from avstack.profiling import stage

REPETITIVE = 2.4  # zlib compression ratio above which text is a loop (Whisper's own threshold)


def segment_words(seg: Any, offset_s: float, dropped: list[str], whole_segment: bool = True) -> list[Word]:
    """A segment's words in ms from `offset_s`; none when the segment looks hallucinated. A packed
    segment spans several clips, which may well say the same thing: its repetition is judged per
    clip (`_repetitive`), not here."""
    if seg.no_speech_prob > 0.6 and seg.avg_logprob < -1.0:
        dropped.append(f"no-speech segment: {seg.text.strip()!r}")
        return []
    if whole_segment and seg.compression_ratio > REPETITIVE:
        dropped.append(f"repetitive segment: {seg.text.strip()[:60]!r}")
        return []
    return [
        Word(
            w.word, int(round((w.start - offset_s) * 1000)), int(round((w.end - offset_s) * 1000)), float(w.probability)
        )
        for w in seg.words or []
    ]


def finish_transcript(
    words: list[Word],
    dropped: list[str],
    language: str,
    samples: np.ndarray,
    s: AsrSettings,
    regions: list[tuple[int, int]] | None = None,
    own_audio: bool = True,
) -> Transcript:
    """The guards every transcript goes through: script, grouping, clamping, loops, and the edges.
    English and Mandarin words take their edges from the acoustics (asr.acoustic, on this clip's
    own audio, fillers apart; Mandarin character by character, asr.pinyin, then the characters
    joined into jieba's words again); elsewhere from an aligner model's cross-attention
    (`own_audio` False: the words were timed inside a pack) and the energy refinement
    (`regions`, the clip's voiced regions, found here when not given), guarded: a word the
    refinement squeezes below one phone keeps the model's own times."""
    duration_ms = int(len(samples) * 1000 / RATE)
    s = replace(s, aligner=aligner_setting(s.aligner, s.model))
    by_acoustics = s.aligner == "acoustic" and language in acoustic.LANGUAGES and acoustic.available()
    if not by_acoustics:
        words, regions = _cross_attention_times(words, dropped, language, samples, s, regions, own_audio)
    if language == "zh":
        if s.simplified:
            words = [Word(to_simplified(w.text), w.begin_ms, w.end_ms, w.prob) for w in words]
        words = group_chinese(sanitize(words, duration_ms))
    words = sanitize(words, duration_ms)
    words, removed = collapse_repeats(words)
    if removed:
        dropped.append(f"repetition loop: {removed} words")
    fillers: list[Word] = []
    if by_acoustics and words:
        regions = voiced_regions(samples) if regions is None else regions
        # Mandarin is timed by the character (one syllable each), its words put together after
        units, owner = characters(words) if language == "zh" else (words, list(range(len(words))))
        with stage("alignment"):
            aligned, fillers, notes, why = acoustic.align(units, samples, regions, language)
        dropped += notes
        timing = timing_record("acoustic", why)
        if any(why):
            # words the acoustics could not time (a chunk holding a misheard word, or a pack
            # neighbour's) take what the path before this one gave them: cross-attention times
            # on this clip's own audio (a tiny model's by base where base is on this machine),
            # refined and guarded (held-out packed word-by-word p90 306 ms with the transcriber's
            # pack times kept, 67 with these)
            with stage("fallback"):
                before, _ = _cross_attention_times(
                    units, dropped, language, samples, _previous_timer(s), regions, own_audio
                )
            fallback = _refined(before, regions) if s.refine else before
            aligned = between_timed(aligned, fallback, [w is None for w in why])
        words = from_characters(words, aligned, owner) if language == "zh" else aligned
    else:  # no words to align, or another language
        if not by_acoustics and s.refine and regions is not None:
            words = _refined(words, regions)
        by = "acoustic" if by_acoustics else ("transcriber" if s.aligner == "none" else "cross-attention")
        timing = timing_record(by, [None] * len(words))
    if s.fillers:
        words = sorted(words + fillers, key=lambda w: (w.begin_ms, w.end_ms))
    if not words and not dropped:
        dropped.append("the transcriber returned no words")  # never empty without a reason
    return Transcript(s.model, language, tuple(words), s, tuple(dropped), runtime_of(s), tuple(fillers), timing)


def timing_record(by: str, why: list[str | None]) -> dict[str, object]:
    """What timed a clip's words, for its record: the method, how many words it timed, how many
    kept the path before it (the fallback) and why, so a failure is counted, not hidden."""
    reasons: dict[str, int] = {}
    for w in why:
        if w is not None:
            reasons[w] = reasons.get(w, 0) + 1
    return {"by": by, "words": len(why), "timed": len(why) - sum(reasons.values()), "fallback": reasons}


def _cross_attention_times(
    words: list[Word],
    dropped: list[str],
    language: str,
    samples: np.ndarray,
    s: AsrSettings,
    regions: list[tuple[int, int]] | None,
    own_audio: bool,
) -> tuple[list[Word], list[tuple[int, int]] | None]:
    """Where no acoustic aligner serves the language: the words timed by an aligner model's
    cross-attention on the clip's own audio (asr.align; the transcriber itself for "acoustic"),
    and the clip's voiced regions when a step needs them."""
    timer = aligner_model("self" if s.aligner == "acoustic" else s.aligner, s.model, own_audio)
    if (timer or s.refine) and regions is None:
        regions = voiced_regions(samples)
    if timer and words:
        try:
            words = realign(words, samples, timer[0], language, s.device, s.threads, timer[1], regions, s.compute_type)
        except Exception as exc:  # noqa: BLE001 - the transcription's own times still stand
            dropped.append(f"aligner {timer[0]} failed ({type(exc).__name__}: {exc}); the transcription's times kept")
    return words, regions


def _previous_timer(s: AsrSettings) -> AsrSettings:
    """The cross-attention aligner that timed words before the acoustic aligner: base for a tiny
    model when base is on this machine (bundled or a local folder: resolving fetches nothing),
    else the transcriber itself."""
    tiny = s.model in ("tiny", "tiny.en") and resolve_model("base") != "base"
    return replace(s, aligner="base" if tiny else "self")


def _refined(words: list[Word], regions: list[tuple[int, int]]) -> list[Word]:
    """The energy refinement (asr.refine), guarded: a word it squeezes keeps its own times."""
    refined = bound_to_speech(pull_into_speech(snap_to_regions(words, regions), regions), regions)
    return collapse_guard(words, own_region_edges(refined, regions))


COLLAPSED_MS = PHONE_MS  # shorter than one phone: a word squeezed to this was not measured, it was lost


def collapse_guard(model: list[Word], refined: list[Word]) -> list[Word]:
    """A refined word shorter than a phone where the model gave it more keeps the model's times
    (clipped so the words stay in order)."""
    kept = [m if r.end_ms - r.begin_ms < COLLAPSED_MS <= m.end_ms - m.begin_ms else r for m, r in zip(model, refined)]
    return in_order(kept)


def _empty(s: AsrSettings, lang: str | None, why: str) -> Transcript:
    return Transcript(s.model, lang or "", (), s, (why,), runtime_of(s))


def transcribe(samples: np.ndarray, settings: AsrSettings | None = None) -> Transcript:
    """Words with times in ms from the start of `samples` (16 kHz mono float32); audio longer
    than asr.windows.WINDOW_MAX_S a window at a time (memory flat in duration)."""
    s = settings or AsrSettings()
    if needs_windows(len(samples)):
        return transcribe_long(lambda a, b: samples[a:b], len(samples), s)
    return transcribe_one(samples, s)


def transcribe_long(read: Reader, n_samples: int, settings: AsrSettings | None = None) -> Transcript:
    """Words of audio read as needed (`read(first, end)` gives samples [first, end)), a window at
    a time (asr.windows): a long clip's file is never held whole."""
    return transcribe_windows(read, n_samples, settings or AsrSettings(), transcribe_window)


def transcribe_one(samples: np.ndarray, s: AsrSettings, seeded: bool = False) -> Transcript:
    """One clip's words: the whole-clip pass (`seeded`: decoded by a model seeded from this
    audio from the start, see transcribe_window)."""
    lang = s.fixed_language
    if not speech_present(samples):
        return _empty(s, lang, no_speech_why(samples))
    segments, dropped, language = transcribe_words(samples, s, lang, seeded=seeded)
    return finish_transcript([w for seg in segments for w in seg], dropped, language, samples, s)


def transcribe_window(samples: np.ndarray, s: AsrSettings) -> Transcript:
    """One window of a long clip. Decoded once, by a model seeded from the window's audio from the
    start: the words a clip gets when its temperature fallback sampled (the decode that counts),
    without the first decode that only found out that it sampled. That first decode ran the whole
    window twice in each window that sampled: 60 s of a 5-minute window with tiny.en, and a
    30-minute read meets more such windows than a 5-minute one, so the time per audio second
    grew with the duration (docs/performance.md). The words are the same in every case. A decode
    that drew from the sampler is always flagged (`SAMPLED`), even when every temperature failed
    and the greedy result was kept: faster-whisper then reports the last temperature tried. One
    that did not draw kept temperature 0 in every 30-s window, which no sampler state changes.

    On the CPU only: there the fresh model's load is a few per cent of a window's decode (tiny.en
    about 0.5 s, base 2 s, against 60 and 120 s), and a window timed by base's fallback loads its
    transcriber again anyway (one model at a time). On a GPU a large model's load can take as
    long as the window's decode, and a decode that sampled costs little there: the cached model
    decodes first, as for a clip."""
    return transcribe_one(samples, s, seeded=pick_device(s.device, s.compute_type)[0] == "cpu")


def silent_apart(
    clips: list[np.ndarray], s: AsrSettings, lang: str | None
) -> tuple[list[Transcript | None], list[int]]:
    """Empty transcripts for clips without speech energy (they never reach Whisper); the indices
    of the others, still to transcribe."""
    out: list[Transcript | None] = [None if speech_present(c) else _empty(s, lang, no_speech_why(c)) for c in clips]
    return out, [i for i, t in enumerate(out) if t is None]


def clip_seed(samples: np.ndarray) -> int:
    """The sampler seed of one clip: a function of its audio alone."""
    digest = hashlib.sha256(np.ascontiguousarray(samples, dtype=np.float32).tobytes()).digest()
    return int.from_bytes(digest[:4], "little")


def _decode(model: Any, samples: np.ndarray, options: Mapping[str, object]) -> tuple[list[object], object, bool]:
    """All segments of one transcription, and whether a kept result was sampled."""
    SAMPLED.flag = False
    segments, info = model.transcribe(samples, **options)
    total = float(getattr(info, "duration", 0.0) or len(samples) / RATE)
    kept = []
    for seg in segments:  # faster-whisper decodes lazily: each segment as its window is done
        kept.append(seg)
        heard(min(float(seg.end), total), total)
    heard(total, total)
    return kept, info, bool(SAMPLED.flag)


def decode_options(s: AsrSettings, lang: str | None, packed: bool = False) -> dict[str, object]:
    """faster-whisper's transcribe options for one clip (or a pack of clips)."""
    return dict(
        language=lang,
        beam_size=s.beam_size,
        word_timestamps=True,
        # in a pack the VAD would cut the pauses that keep the clips apart
        vad_filter=s.vad and not packed,
        condition_on_previous_text=False,
        # no temperature fallback in a pack: its test (the mean log-prob of a window holding
        # several clips) judges them together, so one hard clip would resample the whole window
        # at twice its cost and put every clip of the pack on the sampler; the per-clip guards
        # (no-speech segments, repetition) still apply
        temperature=[0.0] if packed else [0.0, 0.2, 0.4],
        compression_ratio_threshold=None if packed else REPETITIVE,
    )


def transcribe_words(
    samples: np.ndarray, s: AsrSettings, lang: str | None, packed: bool = False, seeded: bool = False
) -> tuple[list[list[Word]], list[str], str]:
    """Whisper's words by segment (ms from the start of `samples`), what the guards dropped, the
    language. `seeded`: decoded once, by a model seeded from this audio (transcribe_window)."""
    options = decode_options(s, lang, packed)
    if seeded:
        segments, info = _seeded_decode(samples, s, options)
    else:
        with stage("model load"):  # once per process: the models are cached
            model = load_model(s.model, s.device, s.threads, replicas(), s.compute_type)
        with stage("asr decode"):
            segments, info, sampled = _decode(model, samples, options)
        del model  # one model at a time where asked: this one may go before a seeded one loads
        if sampled:
            # the fallback sampled: decoded again from a seed of this audio alone, so the words do
            # not depend on what this process (or thread, or worker) transcribed before
            segments, info = _seeded_decode(samples, s, options)
    dropped: list[str] = []
    kept = [segment_words(seg, 0.0, dropped, not packed) for seg in segments]
    if not segments and not packed:
        dropped.append(_why_no_segment(info, s.vad))
    return [words for words in kept if words], dropped, lang or info.language


def _seeded_decode(samples: np.ndarray, s: AsrSettings, options: dict[str, object]) -> tuple[list[object], Any]:
    """The segments of a decode by a fresh model whose sampler starts from this audio's seed."""
    with SEED_LOCK:
        with stage("model load"):
            model = seeded_model(s.model, s.device, s.threads, clip_seed(samples), s.compute_type)
        with stage("asr decode"):
            segments, info, _ = _decode(model, samples, options)
    return segments, info


def _why_no_segment(info: object, vad: bool) -> str:
    """Why faster-whisper gave no segment at all, as far as it tells: its VAD kept nothing, or it
    skipped each window as no speech (no_speech_prob > 0.6 while avg_logprob < -1.0 at every
    temperature tried: 0, 0.2, 0.4; plain faster-whisper tries up to 1.0) or decoded nothing."""
    kept = getattr(info, "duration_after_vad", None)
    if vad and kept is not None and kept <= 0:
        return "faster-whisper's VAD found no speech"
    heard = f"its VAD kept {kept:.1f} s of speech, " if vad and kept is not None else ""
    return (
        f"faster-whisper returned no segment: {heard}each window was skipped as no speech "
        "(no_speech_prob > 0.6 with avg_logprob < -1.0 at temperatures 0, 0.2, 0.4) or decoded to nothing"
    )


def transcribe_file(path: str | os.PathLike[str], settings: AsrSettings | None = None) -> Transcript:
    from avstack.media.audio import load_audio

    samples = load_audio(path)
    s = settings or AsrSettings()
    if samples is None:
        return _empty(s, None, "no audio track")
    return transcribe(samples, s)
