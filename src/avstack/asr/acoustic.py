"""Word edges from the acoustics: the words Whisper heard, force-aligned to the clip's own audio
with phone HMMs (PocketSphinx 5 and the en-us acoustic model its wheel ships; the method of MFA and
Gentle).

Why: Whisper's word times come from cross-attention, which follows the text, not the sound. On
real speech that shows as a word that starts where a filler the transcript left out began ("um
this" gives "this" the "um"), words squeezed to a few ms, drawn-out words that end early. An HMM
aligner scores every 10 ms frame against the phones of the words, so a word takes the frames
that sound like it: a phone lasts at least 3 frames (no word collapses), and between any two
words the grammar allows silence, noise, and the fillers people say ("um", "uh", "er"), so an
unspoken-for hesitation gets its own span instead of being absorbed by a neighbour.

How: the take is cut at every pause the transcriber heard and into chunks of at most CHUNK_S
(asr.takes), each narrowed to its speech and half a second either side; each chunk's words are
aligned as a finite-state grammar: optional fillers, word 1, optional fillers, word 2, ..., with
silence and noise allowed anywhere. Words outside the dictionary get a letter-by-letter
pronunciation (an approximation: its length is about right, which is what an edge needs). An
edge next to a pause the aligner found moves to the speech energy's own edge
(`to_energy_edges`). A chunk the word lattice cannot align (no path, or a different word
sequence) is searched again at once with wide beams and read off the Viterbi back-trace, whose
words forced to the HMM's shortest go untimed alone; a chunk that fails both is halved at its
longest pause and tried again, and one that cannot be halved is noted. Untimed words keep the
transcriber's times inside the room their timed neighbours leave (refine.between_timed); the
caller (asr.whisper) gives them the times of the path before this one, the same way, and says
how many words each way and why (`asr.timing`); `guard` keeps a word's own times where the
alignment cannot show it did better.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np

from avstack.asr import pinyin
from avstack.asr.lexicon import letter_phones, lexicon, spoken
from avstack.asr.pool_cpu import run_timed
from avstack.asr.refine import PHONE_MS, between_timed, syllable_edges
from avstack.asr.takes import around_speech, chunks, split_at_pause
from avstack.asr.types import RATE, Word

# the hesitations people make that Whisper tends to leave out; shorter ones ("ah" AA, "mm" M) are
# single phones that the aligner matched to the onsets and tails of words
FILLERS = ("um", "uh", "er")
SILENCE = ("<sil>", "<s>", "</s>")
# a hesitation ("uh", "um") is drawn out: filled pauses last about 200-500 ms in conversational
# speech; a filler-shaped sound shorter than this against a word is part of the word
MIN_FILLER_MS = 200
EDGE_REACH_MS = 100  # how far an edge next to a pause may move to where the speech energy starts or stops
FRAME_MS = 10  # PocketSphinx's frame
STATES = 3  # frames a phone takes at the least: its HMM's three states, one frame each
MIN_WORD_MS = PHONE_MS  # one phone of three 10 ms states: anything shorter is not an alignment
# a word the back-trace holds at the HMM's shortest (STATES frames a phone) with this many phones or
# more was forced there, not found: a one- or two-phone function word ("a", "I", "the") really is
# 30-60 ms in fast spontaneous speech (the shared real take's reference: "a" 40 ms, "I" 30 ms),
# while a three-phone word at 90 ms is a misheard word pushed through (word-by-word tuning seeds:
# "bag" at 90 ms)
FORCED_PHONES = 3
# the back-trace's beams: wide, since the grammar already fixes the words (a handful of paths, so
# width costs little) and in spontaneous speech the right path runs far below the best partial one
# for a while (a reduced word, a filler, a cough): at the old 1e-48, pieces holding 33 of the
# shared real take's 59 words (tiny.en) found no path; at 1e-120 none (1e-80 left some, 1e-160
# changed nothing; benchmarks/asr_timing.py --speech shared)
BACKTRACE_BEAM = 1e-120


def available() -> bool:
    """Is the aligner installed (the pocketsphinx wheel, with its en-us model)?"""
    try:
        import pocketsphinx  # noqa: F401
    except ImportError:
        return False
    return True


def _decoder(vocabulary: set[str], lattice: bool = True) -> object:
    """A fresh decoder for each clip: its noise tracker and feature state carry over from one
    utterance to the next, so a shared one made a clip's fillers depend on what the process
    aligned before. Its dictionary holds only the clip's words and the fillers: loading all of
    cmudict took 120 ms a decoder, half of a short clip's alignment; with the words read once
    per process (`lexicon`) a decoder takes 10 ms. A word the dictionary lacks is spelled by
    its letters (`letter_phones`). `lattice` False: the second try on a chunk the first could
    not align (wide beams, BACKTRACE_BEAM, the result read off the Viterbi back-trace)."""
    from pocketsphinx import Config, Decoder, get_model_path

    known = lexicon()
    lines = []
    for word in sorted(vocabulary | set(FILLERS)):
        spelled = [pinyin.phones(word)] if word.startswith(pinyin.PREFIX) else known.get(word)
        for k, phones in enumerate(spelled or [letter_phones(word)]):
            lines.append(f"{word}({k + 1}) {phones}" if k else f"{word} {phones}")
    with tempfile.TemporaryDirectory(prefix="avstack-dict-") as tmp:
        path = Path(tmp) / "words.dict"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        config = Config(
            hmm=get_model_path("en-us/en-us"),
            dict=str(path),
            lm=None,
            samprate=RATE,
            # each chunk normalized by its own cepstral mean: "live" CMN carries the mean over from the
            # chunks decoded before, so a clip's edges moved with what this process aligned earlier
            cmn="batch",
            # a pause between two words as likely as none: the default (0.005) suits read speech
            # decoded against a language model; here the words are known, and spontaneous speech
            # pauses between them (at the default, words swallowed the pauses after them)
            silprob=1.0,
            # the words are known, so the search holds few paths: beams narrower than decoding's
            # (1e-48) cost the alignment nothing (tuning seeds 6 / 23 ms either way) and 16% of its
            # time; at 1e-20 a real sentence's word fell out of the beam (packed p90 74 -> 157 ms)
            beam=1e-30 if lattice else BACKTRACE_BEAM,
            wbeam=1e-25 if lattice else BACKTRACE_BEAM,
            pbeam=1e-30 if lattice else BACKTRACE_BEAM,
            loglevel="FATAL",
            bestpath=lattice,
        )
        return Decoder(config)


@dataclass(frozen=True)
class ChunkResult:
    """One chunk's alignment: per transcript word (begin, end) in ms or None, and the fillers found."""

    spans: list[tuple[int, int] | None]
    fillers: list[Word]
    at_pause: list[tuple[bool, bool]]  # per word: its begin, its end next to silence the aligner found
    # per word: held at the shortest the HMM allows (STATES frames a phone) with FORCED_PHONES phones
    # or more: forced there, not found
    forced: tuple[bool, ...] = ()

    def without_forced(self) -> ChunkResult:
        """The forced words untimed (span None), the rest as aligned."""
        spans = [None if f else span for span, f in zip(self.spans, self.forced)]
        return ChunkResult(spans, self.fillers, self.at_pause, self.forced)


def _grammar(tokens: list[list[str]], fillers: tuple[str, ...] = FILLERS) -> str:
    filler = "[ <filler> ]" if fillers else ""
    body = " ".join(f"{filler} {' '.join(t)}" for t in tokens if t)
    alternatives = " | ".join(fillers or FILLERS)
    return f"#JSGF V1.0;\ngrammar take;\n<filler> = {alternatives};\npublic <take> = {body} {filler};\n"


LANGUAGES = ("en", "zh")  # the languages whose words the en-us phone models can time (asr.pinyin for zh)


def fillers_of(language: str) -> tuple[str, ...]:
    """The fillers allowed between a language's words. None for Mandarin: the en-us "um" and "uh"
    took whole syllables there (a citation "ge" became "um" and "ge" moved onto the next
    syllable, 1.3 s late, on gcin-voice's speaker 3), and Whisper writes Mandarin hesitations
    (嗯, 呃) as characters, which are aligned as syllables."""
    return () if language == "zh" else FILLERS


def word_tokens(words: list[Word], language: str) -> list[list[str]]:
    """Each word's tokens in the aligner's dictionary: English words as cmudict spells them;
    Mandarin characters (one unit each) as their syllables (asr.pinyin)."""
    if language == "zh":
        return [[t] if t else [] for t in pinyin.syllable_tokens([w.text for w in words])]
    return [spoken(w.text).split() for w in words]


def _align_chunk(
    decoder: Any, tokens: list[list[str]], samples: np.ndarray, offset_ms: int, allowed: tuple[str, ...] = FILLERS
) -> ChunkResult | None:
    """Force-align the words spelled by `tokens` (asr.acoustic.word_tokens) to `samples` (which
    start at `offset_ms` on the clip's clock), with the fillers `allowed` between them; None when
    there is no path through the grammar or it comes back with other words."""
    if not any(tokens):
        return None
    pcm = (np.clip(samples, -1.0, 1.0) * 32767).astype(np.int16).tobytes()
    decoder.add_jsgf_string("take", _grammar(tokens, allowed))
    decoder.activate_search("take")
    decoder.start_utt()
    decoder.process_raw(pcm, full_utt=True)
    decoder.end_utt()
    if decoder.hyp() is None:
        return None
    raw = list(decoder.seg())
    segs = [(re.sub(r"\(\d+\)$", "", s.word), s.start_frame, s.end_frame) for s in raw]
    shortest = {(s.start_frame, s.end_frame): STATES * len((decoder.lookup_word(s.word) or "").split()) for s in raw}
    frames = len(samples) * 1000 // RATE // FRAME_MS
    # where a word meets silence or a filler, its edge is an onset or offset of speech energy
    # (to_energy_edges): the filler and silence models share the pause between them loosely
    apart = set(SILENCE) | set(FILLERS)
    quiet_ends = {0} | {b + 1 for w, _, b in segs if w in apart}
    quiet_starts = {frames, max(b for _, _, b in segs) + 1} | {a for w, a, _ in segs if w in apart}
    expected = [t for ts in tokens for t in ts]
    said = [(w, a, b) for w, a, b in segs if w in expected or w in FILLERS]
    # optional fillers are the ones beyond what the transcript says; one shorter than a hesitation
    # that touches a word is that word's own onset or tail (see MIN_FILLER_MS)
    spans: list[tuple[int, int] | None] = []
    fillers: list[Word] = []
    at_pause: list[tuple[bool, bool]] = []
    forced: list[bool] = []
    k = 0
    for n, ts in enumerate(tokens):
        if not ts:
            spans.append(None)
            at_pause.append((False, False))
            forced.append(False)
            continue
        before: list[tuple[str, int, int]] = []
        while k < len(said) and said[k][0] != ts[0] and said[k][0] in FILLERS:
            before.append(said[k])
            k += 1
        got = said[k : k + len(ts)]
        if [w for w, _, _ in got] != ts:
            return None  # the path took other words: no alignment to trust
        k += len(ts)
        first, last = got[0][1], got[-1][2]
        least = sum(shortest.get((a, b), 0) for _, a, b in got)
        forced.append(sum(b - a + 1 for _, a, b in got) <= least and least >= STATES * FORCED_PHONES)
        if before and _onset_or_tail(before[-1], first):
            first = before.pop()[1]
        upcoming = next((t[0] for t in tokens[n + 1 :] if t), None)
        if k < len(said) and said[k][0] in FILLERS and said[k][0] != upcoming and _onset_or_tail(said[k], last):
            last = said[k][2]
            k += 1
        fillers += [_filler(f, offset_ms) for f in before]
        spans.append((offset_ms + first * FRAME_MS, offset_ms + (last + 1) * FRAME_MS))
        at_pause.append((first in quiet_ends, last + 1 in quiet_starts))
    fillers += [_filler(s, offset_ms) for s in said[k:] if s[0] in FILLERS]
    return ChunkResult(spans, fillers, at_pause, tuple(forced))


def _onset_or_tail(filler: tuple[str, int, int], word_frame: int) -> bool:
    """Is this filler the word's own onset or tail: touching it (no silence between) and shorter
    than a hesitation? The filler models are vowels and nasals, and the aligner fits them to the
    vowel that opens "over", "and", "up" or the one that ends "there". (Also asking it to be
    shorter than the word moved the shared real take's "I" after "uh" from 340 to 230 ms early,
    still past 100, changed no figure of the real sets, and cost the held-out disfluent base p90
    15 ms: not taken.)"""
    _, a, b = filler
    touching = b + 1 == word_frame or a == word_frame + 1
    return touching and (b - a + 1) * FRAME_MS < MIN_FILLER_MS


def _filler(seg: tuple[str, int, int], offset_ms: int) -> Word:
    return Word(seg[0], offset_ms + seg[1] * FRAME_MS, offset_ms + (seg[2] + 1) * FRAME_MS, 0.0)


def to_energy_edges(
    span: tuple[int, int], at_pause: tuple[bool, bool], regions: list[tuple[int, int]]
) -> tuple[int, int]:
    """An edge the aligner put next to a pause moves to the speech energy's own edge there (within
    EDGE_REACH_MS): the HMM's 10 ms frames and its silence model place such an edge only roughly,
    while a word's onset is a clear rise of energy. A word's end only moves later: what ends a
    word (a stop's release, a voiceless tail) is quiet, below the energy's voicing threshold, so
    an energy offset before the aligner's end is no evidence that the word had ended (moved
    there, ends came out early: tuning seeds p90 36 ms against 25). Edges inside speech stay."""
    begin, end = span
    onsets = [a for a, _ in regions if abs(a - begin) <= EDGE_REACH_MS]
    offsets = [b for _, b in regions if 0 <= b - end <= EDGE_REACH_MS]
    if at_pause[0] and onsets:
        begin = min(onsets, key=lambda a: abs(a - begin))
    if at_pause[1] and offsets:
        end = min(offsets, key=lambda b: abs(b - end))
    return (begin, end) if end - begin >= MIN_WORD_MS else span


def guard(model: Word, aligned: tuple[int, int] | None) -> Word:
    """The aligned edges where they can be trusted, else the model's own times: no alignment, or a
    word shorter than one phone can be."""
    if aligned is None or aligned[1] - aligned[0] < MIN_WORD_MS:
        return model
    return Word(model.text, aligned[0], aligned[1], model.prob)


# why a word kept the transcriber's times (None: the acoustics timed it)
NOT_ALIGNED = "its chunk did not align"
FORCED = "forced to the HMM's shortest"
SHORTER_THAN_A_PHONE = "aligned shorter than a phone"
Alignment = tuple[list[Word], list[Word], list[str], list[str | None]]
_pool: ProcessPoolExecutor | None = None
_pool_size = 0  # its processes


@contextmanager
def in_processes(n: int) -> Iterator[None]:
    """While inside, `align` runs in `n` processes of its own. For callers that align from
    several threads (prepare's packed ASR): PocketSphinx holds the GIL through a chunk's whole
    search, which stalled the transcription threads and the prepare driver meanwhile (24 short
    clips: alignment took 11 s of thread time for 3.5 s of work). The processes start now
    (spawn, tied to this one) and read the dictionary while the frames decode."""
    global _pool, _pool_size
    pool = ProcessPoolExecutor(n, mp_context=get_context("spawn"), initializer=_start_worker, initargs=(os.getpid(),))
    _pool, _pool_size = pool, n
    try:
        yield
    finally:
        _pool = None
        pool.shutdown(cancel_futures=True)


def pooled() -> int:
    """How many aligner processes `align` uses now (0: it aligns in this process)."""
    return _pool_size if _pool is not None else 0


def _start_worker(parent_pid: int) -> None:
    from avstack.lifeline import tie_to_parent

    tie_to_parent(parent_pid)  # a killed prepare leaves no aligner behind
    if available():
        lexicon()


def align(words: list[Word], samples: np.ndarray, regions: list[tuple[int, int]], language: str = "en") -> Alignment:
    """The words with acoustic edges (guarded), the fillers found between them, notes on the
    chunks that kept the transcriber's times, and per word None where the acoustics timed it, else
    why not (NOT_ALIGNED, FORCED, SHORTER_THAN_A_PHONE). Mandarin (`language` "zh") is aligned
    character by character: `words` are single characters there. The
    same result in this process or in the pool (`in_processes`): each clip gets a fresh decoder."""
    pool = _pool
    if pool is not None:
        try:
            return run_timed(pool, _align_here, words, samples, regions, language)
        except BrokenProcessPool:  # an aligner process died: this process aligns instead
            pass
    return _align_here(words, samples, regions, language)


def _align_here(
    words: list[Word], samples: np.ndarray, regions: list[tuple[int, int]], language: str = "en"
) -> Alignment:
    duration_ms = int(len(samples) * 1000 / RATE)
    out = list(words)
    why: list[str | None] = [NOT_ALIGNED] * len(words)
    fillers: list[Word] = []
    notes: list[str] = []
    tokens = word_tokens(words, language)
    vocabulary = {t for ts in tokens for t in ts}
    decoder = _decoder(vocabulary)
    backtrace = None
    todo = list(chunks(words, regions, duration_ms))
    while todo:
        a, b, mine = todo.pop(0)
        if not mine:
            continue
        a, b = around_speech(a, b, [words[i] for i in mine], regions)
        piece = samples[a * RATE // 1000 : b * RATE // 1000]
        try:
            result = _align_chunk(decoder, [tokens[i] for i in mine], piece, a, fillers_of(language))
            if result is None:
                # search once more, wider, and read the words off the Viterbi back-trace instead
                # of the word lattice: the lattice step finds no path on some chunks whose search
                # did reach the grammar's end (a festival sentence heard word for word), and on
                # spontaneous speech the narrow beams lose the path (BACKTRACE_BEAM). The words
                # must still come back in order (_align_chunk); a word the path holds at the HMM's
                # shortest is no evidence (FORCED_PHONES) and goes untimed alone. The lattice's
                # own alignments are not judged this way: a short "the" really is that short.
                backtrace = backtrace or _decoder(vocabulary, lattice=False)
                result = _align_chunk(backtrace, [tokens[i] for i in mine], piece, a, fillers_of(language))
                result = result and result.without_forced()
        except Exception as exc:  # noqa: BLE001 - the transcriber's times still stand
            result = None
            notes.append(f"acoustic alignment error {type(exc).__name__}: {exc}")
        if result is None:
            # one misheard word (or a word whose time put it in the wrong chunk) fails the
            # whole grammar: halve at the longest pause and try again, so only the part holding
            # it goes untimed (tuning seeds: 9 chunks of 9-17 words were failing whole)
            halves = split_at_pause(words, mine, regions, a, b)
            if halves:
                todo[:0] = halves
                continue
            notes.append(f"acoustic alignment failed for {len(mine)} words at {a}-{b} ms: transcriber's times kept")
            continue
        forced = result.forced or (False,) * len(mine)
        for i, span, pause, was_forced in zip(mine, result.spans, result.at_pause, forced):
            edges = span and to_energy_edges(span, pause, regions)
            out[i] = guard(words[i], edges)
            if edges is None:
                why[i] = FORCED if was_forced else NOT_ALIGNED
            else:
                why[i] = None if edges[1] - edges[0] >= MIN_WORD_MS else SHORTER_THAN_A_PHONE
        fillers += result.fillers
    if language == "zh":
        out = syllable_edges(out, [w is None for w in why], samples)
    # a word not timed keeps the transcriber's times, in the room its timed neighbours leave
    return between_timed(out, words, [w is None for w in why]), fillers, notes, why
