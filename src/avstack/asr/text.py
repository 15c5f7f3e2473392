"""Text guards on Whisper's words (punctuation, clamping, repetition loops) and Chinese handling
(simplified script, jieba word grouping)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from functools import lru_cache

import numpy as np

from avstack.asr.types import Word

_PUNCT_ONLY = re.compile(r"^[\W_]+$", re.UNICODE)


def is_punctuation(text: str) -> bool:
    return not text or bool(_PUNCT_ONLY.match(text)) or all(unicodedata.category(c)[0] in "PSZ" for c in text)


def clean_token(text: str) -> str:
    return text.strip().strip("\"'“”‘’«»()[]{}")


def collapse_repeats(words: list[Word], min_repeats: int = 3, max_n: int = 4) -> tuple[list[Word], int]:
    """Cut Whisper repetition loops: an n-gram repeated >= min_repeats times in a row is kept once."""
    removed = 0
    n = 1
    while n <= max_n:
        i, out = 0, []
        keys = [w.text.lower().strip(".,!?。，！？") for w in words]
        while i < len(words):
            gram = keys[i : i + n]
            reps = 1
            while keys[i + reps * n : i + (reps + 1) * n] == gram and len(gram) == n:
                reps += 1
            if reps >= min_repeats:
                out.extend(words[i : i + n])
                removed += (reps - 1) * n
                i += reps * n
            else:
                out.append(words[i])
                i += 1
        words = out
        n += 1
    return words, removed


def sanitize(words: list[Word], duration_ms: int) -> list[Word]:
    """Drop punctuation-only words; clamp to the audio; make end >= begin; keep order."""
    out = []
    for w in words:
        text = clean_token(w.text)
        if is_punctuation(text):
            continue
        begin = min(max(0, w.begin_ms), duration_ms)
        end = min(max(begin, w.end_ms), duration_ms)
        if begin >= duration_ms:
            continue
        out.append(Word(text, begin, end, w.prob))
    return out


def to_simplified(text: str) -> str:
    return str(_to_simplified()(text))


@lru_cache(maxsize=1)
def _to_simplified() -> Callable[[str], object]:
    """OpenCC's traditional-to-simplified converter, built once (it reads its tables)."""
    from opencc import OpenCC

    convert: Callable[[str], object] = OpenCC("t2s").convert
    return convert


def characters(words: list[Word]) -> tuple[list[Word], list[int]]:
    """Each word's characters as units of their own, each an equal share of its word's span, and
    per unit the index of its word: Mandarin is aligned syllable by syllable (asr.pinyin), and
    a character is one syllable."""
    units, owner = [], []
    for k, w in enumerate(words):
        n = len(w.text)
        for i, ch in enumerate(w.text):
            b = w.begin_ms + (w.end_ms - w.begin_ms) * i // n
            e = w.begin_ms + (w.end_ms - w.begin_ms) * (i + 1) // n
            units.append(Word(ch, b, e, w.prob))
            owner.append(k)
    return units, owner


def from_characters(words: list[Word], units: list[Word], owner: list[int]) -> list[Word]:
    """The words again, each from its first character's begin to its last character's end."""
    spans: dict[int, list[Word]] = {}
    for u, k in zip(units, owner):
        spans.setdefault(k, []).append(u)
    return [Word(w.text, spans[k][0].begin_ms, spans[k][-1].end_ms, w.prob) for k, w in enumerate(words) if k in spans]


def group_chinese(words: list[Word]) -> list[Word]:
    """Whisper gives characters or fragments; group them into jieba words.

    Each character gets a share of its fragment's time span; a grouped word
    runs from its first character's begin to its last character's end.
    """
    import jieba

    jieba.setLogLevel(60)
    chars: list[tuple[str, int, int, float]] = []
    for w in words:
        n = len(w.text)
        for i, ch in enumerate(w.text):
            b = w.begin_ms + (w.end_ms - w.begin_ms) * i // n
            e = w.begin_ms + (w.end_ms - w.begin_ms) * (i + 1) // n
            chars.append((ch, b, e, w.prob))
    text = "".join(c[0] for c in chars)
    out, pos = [], 0
    for token in jieba.cut(text, HMM=True):
        span = chars[pos : pos + len(token)]
        pos += len(token)
        if not span or is_punctuation(token):
            continue
        out.append(Word(token, span[0][1], span[-1][2], float(np.mean([c[3] for c in span]))))
    return out
