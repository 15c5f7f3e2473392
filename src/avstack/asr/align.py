"""Word times from an aligner model's cross-attention: the words one model heard, timed by another.

Whisper times words by dynamic time warping over the cross-attention of a few "alignment heads"
(decoder heads whose attention follows the audio). How closely those heads follow the audio is
a property of the model: tiny's heads sit in a 4-layer decoder and trail the speech (on connected
speech its edges are about 100 ms late, a lag no amount of energy snapping can undo, since inside
continuous speech the energy has no edge at word boundaries); base's 6-layer decoder follows it to
within a few tens of ms. So the words keep the transcriber's text and confidence and take their
times from the aligner, decoding nothing: one encoder pass of the aligner over the clip's own audio
and one teacher-forced decoder pass over the known tokens (`benchmarks/asr_timing.py --speech
connected`). The clip's own audio, in every ASR mode: a packed or batched clip's times then do not
depend on its neighbours.

The encoder sees 10 s windows (a clip up to 10 s padded to one, a longer one cut between words):
measured on held-out connected speech (whole clips), Whisper's full 30 s window times edges a little better
(median / p90 48 / 113 ms against 48 / 122) at 2.2x the cost (base's encoder on one CPU thread:
0.94 s a window against 0.12 s), and the aligner runs on every clip.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Any

import numpy as np

from avstack.asr.models import load_model, replicas
from avstack.asr.refine import speech_span, voiced_regions
from avstack.asr.types import RATE, Word

WINDOW_S = 10  # another model's encoder input per window, in s (the module docstring says why 10)
WHISPER_WINDOW_S = 30  # the transcriber timing its own words again: the window it timed them in
FRAME_MS = 20  # one encoder frame (tokens_per_second = 50)
MAX_TOKENS = 400  # under the decoder's 448 positions, with room for the start sequence
NO_SPACES = {"zh", "ja", "th", "lo", "my", "yue"}  # Whisper writes these without spaces between words


def aligner_setting(requested: str, model: str) -> str:
    """What times `model`'s words, the one place "auto" is resolved: "acoustic" (phone HMMs on the
    clip's own audio where the en-us phone models can time the language, English and Mandarin,
    asr.acoustic.LANGUAGES; elsewhere the model's own cross-attention, as "self"). Measured on
    real speech, a bigger model's cross-attention (base timing tiny's words) and the energy
    rules made the tail worse than the model alone; the acoustics made it better
    (benchmarks/asr_timing.py --speech real, zh-real)."""
    if requested in ("auto", ""):
        return "acoustic"
    return requested  # acoustic, self, none, or a model name


def aligner_model(aligner: str, model: str, own_audio: bool) -> tuple[str, int] | None:
    """The model to time words with now and its window (s), or None when the transcription's own
    times stand: the transcriber's times are its own cross-attention on the clip's audio, unless
    the clip was transcribed inside a pack (`own_audio` False). Timed again by itself, a packed
    clip gets Whisper's 30 s window, the one a clip transcribed alone is timed in (measured: with
    10 s, base's packed p90 was 121 ms against 108 alone)."""
    if aligner == "none" or (aligner == "self" and own_audio):
        return None
    if aligner in ("self", model):
        return model, WHISPER_WINDOW_S
    return aligner, WINDOW_S


@dataclass(frozen=True)
class _Piece:
    """One word as the aligner sees it: its index in the transcript and its tokens (the core, then
    any trailing punctuation, whose first token is where the word ends)."""

    index: int
    core: list[int]
    tail: list[int]


def _is_punct(ch: str) -> bool:
    return unicodedata.category(ch)[0] == "P"


def _split_punct(text: str) -> tuple[str, str]:
    """A word's text without leading punctuation, and its trailing punctuation apart."""
    core = text.strip()
    tail = ""
    while core and _is_punct(core[-1]):
        core, tail = core[:-1], core[-1] + tail
    while core and _is_punct(core[0]):
        core = core[1:]
    return core, tail


def _pieces(words: list[Word], tokenizer: Any, language: str) -> list[_Piece]:
    lead = "" if language in NO_SPACES else " "
    out = []
    for i, w in enumerate(words):
        core, tail = _split_punct(w.text)
        if not core:
            continue  # punctuation alone: keeps the transcriber's times
        out.append(_Piece(i, tokenizer.encode(lead + core), tokenizer.encode(tail) if tail else []))
    return out


def _windows(
    words: list[Word], pieces: list[_Piece], span: tuple[int, int], window_s: int = WINDOW_S
) -> list[tuple[int, int, list[_Piece]]]:
    """Pieces grouped into encoder windows (first and last sample, pieces) inside `span`, the
    clip's speech: speech up to `window_s` is one window; longer speech is cut between words,
    each window starting 1 s before its first word (by the transcriber's times, good to a few
    hundred ms) and holding words that end 1 s before the window does."""
    a, b = span
    if b - a <= window_s * RATE:
        return [(a, b, group) for group in _token_capped(pieces)]
    out: list[tuple[int, int, list[_Piece]]] = []
    k = 0
    while k < len(pieces):
        start = min(max(a, (words[pieces[k].index].begin_ms - 1000) * RATE // 1000), b)
        limit = start * 1000 // RATE + (window_s - 1) * 1000
        j = k + 1
        while j < len(pieces) and words[pieces[j].index].end_ms <= limit:
            j += 1
        out += [(start, min(b, start + window_s * RATE), group) for group in _token_capped(pieces[k:j])]
        k = j
    return out


def _token_capped(pieces: list[_Piece]) -> list[list[_Piece]]:
    """One window's pieces, split where the tokens would overflow the decoder (very dense speech)."""
    out: list[list[_Piece]] = [[]]
    used = 0
    for p in pieces:
        n = len(p.core) + len(p.tail)
        if out[-1] and used + n > MAX_TOKENS:
            out.append([])
            used = 0
        out[-1].append(p)
        used += n
    return [g for g in out if g]


def _token_times(model: Any, tokenizer: Any, audio: np.ndarray, tokens: list[int], window_s: int) -> np.ndarray:
    """The time (ms from the window's start) at which the warping path reaches each token, and the
    end-of-text after the last: the aligner's word edges."""
    features = model.feature_extractor(audio)
    width = window_s * 100  # mel frames, 10 ms each
    frames = max(1, min(features.shape[-1] - 1, width))
    window = np.zeros((features.shape[0], width), features.dtype)
    window[:, :frames] = features[:, :frames]  # the rest is padding, as Whisper pads a short input
    encoded = model.encode(window)
    result = model.model.align(encoded, tokenizer.sot_sequence, [tokens], frames, median_filter_width=7)[0]
    path = np.asarray(result.alignments, dtype=np.int64).reshape(-1, 2)
    first = np.flatnonzero(np.diff(path[:, 0], prepend=-1) > 0)  # where the path steps onto a token
    steps = path[first]
    steps = steps[steps[:, 0] <= len(tokens)]
    times = np.zeros(len(tokens) + 1, np.int64)
    times[steps[:, 0]] = steps[:, 1] * FRAME_MS
    return np.maximum.accumulate(times)


VAD_PAD_S = 0.4  # faster-whisper's VAD padding (speech_pad_ms): what a clip alone is timed with


def realign(
    words: list[Word],
    samples: np.ndarray,
    aligner: str,
    language: str,
    device: str,
    threads: int,
    window_s: int = WINDOW_S,
    regions: list[tuple[int, int]] | None = None,
    compute_type: str = "auto",
) -> list[Word]:
    """`words` with begin and end from `aligner`'s cross-attention over `samples` (the clip's audio)
    in windows of `window_s`; text and probability unchanged. The windows hold the clip's speech
    (`regions`, its voiced regions) with the padding faster-whisper's VAD gives a clip transcribed
    alone: silence before the speech is room for the warping path to drift in (measured: p90
    114 -> 103 ms for base on connected speech, 122 -> 117 for tiny.en's words timed by base)."""
    from faster_whisper.tokenizer import Tokenizer

    if not words:
        return words
    model = load_model(aligner, device, threads, replicas(), compute_type)
    tokenizer = Tokenizer(model.hf_tokenizer, model.model.is_multilingual, task="transcribe", language=language)
    span = speech_span(len(samples), voiced_regions(samples) if regions is None else regions, VAD_PAD_S)
    out = list(words)
    for start, stop, group in _windows(words, _pieces(words, tokenizer, language), span, window_s):
        tokens = [t for p in group for t in (*p.core, *p.tail)]
        times = _token_times(model, tokenizer, samples[start:stop], tokens, window_s)
        offset = start * 1000 // RATE
        at = 0
        for p in group:
            # a word ends where its trailing punctuation (or else the next word) begins
            begin, end = times[at], times[at + len(p.core)]
            w = words[p.index]
            out[p.index] = Word(w.text, int(offset + begin), int(offset + max(begin, end)), w.prob)
            at += len(p.core) + len(p.tail)
    return out
