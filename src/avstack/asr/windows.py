"""Long audio in windows: memory flat in duration.

A clip's whole-clip pass holds what grows with its length: faster-whisper's VAD and log-mel
features (our float64 extractor: about 1.2 GB of spectrogram for an hour), the samples and their
copies. Audio longer than WINDOW_MAX_S is transcribed a window at a time instead, each window cut
in the quietest 200 ms of the last minute before its limit (a pause between words, not a word),
read from the file as it is needed and let go before the next: peak memory is one window's,
whatever the duration. Each window goes through the one-clip path (asr.whisper.transcribe) and
its words are moved onto the clip's clock. A clip up to WINDOW_MAX_S is one window: the
whole-clip pass itself, word for word.

What windows change, measured on the long read (benchmarks/long.py, docs/performance.md): a word
is never cut (the cut is a pause); near a cut, Whisper's own 30 s windows start elsewhere than in
the whole pass, so a word there may be heard differently. The language is detected once, on the
first window that has speech (as the whole pass detects it on its first 30 s), and then fixed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

import numpy as np

from avstack.asr.models import give_back_memory, one_model_at_a_time
from avstack.asr.progress import heard, within
from avstack.asr.types import RATE, AsrSettings, Transcript, Word

WINDOW_MAX_S = 300  # a window's length at most (a clip this long or shorter is one window)
CUT_SEARCH_S = 60  # the cut is the quietest point in the last minute before the limit
QUIET_MS = 200  # over this span: a pause, not the gap inside a word

Reader = Callable[[int, int], np.ndarray]  # (first sample, end sample) -> float32 samples


def needs_windows(n_samples: int) -> bool:
    return n_samples > WINDOW_MAX_S * RATE


def quietest(samples: np.ndarray, hop: int = RATE // 100) -> int:
    """The sample at the middle of the quietest QUIET_MS of `samples` (10 ms frames' energy,
    summed over QUIET_MS): where a cut splits no word."""
    frames = len(samples) // hop
    if frames == 0:
        return len(samples) // 2
    energy = (samples[: frames * hop].astype(np.float64).reshape(frames, hop) ** 2).sum(axis=1)
    span = max(1, QUIET_MS // 10)
    if frames <= span:
        return len(samples) // 2
    summed = np.convolve(energy, np.ones(span), mode="valid")  # summed[i]: frames i .. i + span - 1
    return int(np.argmin(summed)) * hop + span * hop // 2


def cuts(read: Reader, n_samples: int) -> Iterator[tuple[int, int]]:
    """(first, end) sample of each window: at most WINDOW_MAX_S, cut in the quietest pause of the
    last CUT_SEARCH_S before the limit; only that minute is read to find the cut."""
    limit, search = WINDOW_MAX_S * RATE, CUT_SEARCH_S * RATE
    start = 0
    while n_samples - start > limit:
        lo = start + limit - search
        cut = lo + quietest(read(lo, start + limit))
        yield start, cut
        start = cut
    yield start, n_samples


def transcribe_windows(
    read: Reader, n_samples: int, settings: AsrSettings, transcribe: Callable[[np.ndarray, AsrSettings], Transcript]
) -> Transcript:
    """The words of audio too long to hold whole, a window at a time, each by `transcribe` (the
    one-clip path, asr.whisper; see the module's note)."""
    s, total_s = settings, n_samples / RATE
    parts: list[tuple[int, Transcript]] = []
    for first, end in cuts(read, n_samples):
        samples = read(first, end)
        with within(first / RATE, total_s), one_model_at_a_time():
            part = transcribe(samples, s)
        del samples  # let the window go before the next is read
        give_back_memory()
        if part.words and s.fixed_language is None:
            s = replace(s, language=part.language or "auto")  # detected once, then fixed (see the note)
        parts.append((first * 1000 // RATE, part))
    heard(total_s, total_s)
    return joined(parts, settings)


def joined(parts: list[tuple[int, Transcript]], settings: AsrSettings) -> Transcript:
    """The windows' transcripts as one on the clip's clock: words and fillers moved by each
    window's start; what the guards dropped, named by window; timing counts summed."""

    def moved(words: tuple[Word, ...], at: int) -> list[Word]:
        return [Word(w.text, w.begin_ms + at, w.end_ms + at, w.prob) for w in words]

    words = [w for at, p in parts for w in moved(p.words, at)]
    fillers = [w for at, p in parts for w in moved(p.fillers, at)]
    spoken = [p for _, p in parts if p.words]
    dropped = [f"window from {at / 1000:.1f} s: {d}" for at, p in parts for d in p.dropped]
    language = (spoken or [p for _, p in parts])[0].language
    first = parts[0][1]
    return Transcript(
        first.model,
        language,
        tuple(words),
        settings,
        tuple(dropped),
        first.runtime,
        tuple(fillers),
        timing_of(parts),
    )


def timing_of(parts: list[tuple[int, Transcript]]) -> dict[str, object]:
    """One timing record for the windows: what timed the words (the first window's method, or
    "mixed"), the counts summed, and the windows' starts."""
    bys = {p.timing.get("by") for _, p in parts if p.words and p.timing}
    fallback: dict[str, int] = {}
    for _, p in parts:
        for why, n in (p.timing.get("fallback") or {}).items():
            fallback[why] = fallback.get(why, 0) + n
    return {
        "by": bys.pop() if len(bys) == 1 else ("mixed" if bys else (parts[0][1].timing.get("by") or "none")),
        "words": sum(p.timing.get("words", 0) for _, p in parts),
        "timed": sum(p.timing.get("timed", 0) for _, p in parts),
        "fallback": fallback,
        "windows_ms": [at for at, _ in parts],
    }
