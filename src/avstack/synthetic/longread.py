"""Continuous speech with known word times, as long as asked: the licence texts a Debian machine
keeps in /usr/share/common-licenses (else a built-in passage), read aloud word by word by eSpeak
NG and laid end to end with short gaps (longer after a sentence), over low noise. Every word's
true begin and end is where it was laid, so word edges can be checked at any hour of the read
(benchmarks/long.py: does timing drift from the first ten minutes to the last?)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from avstack.synthetic import synth

LICENSES = Path("/usr/share/common-licenses")
WORD_GAP_MS, SENTENCE_GAP_MS = 70, 450  # between words; after a sentence's last word
FALLBACK = (
    "The licenses for most software are designed to take away your freedom to share and change it. "
    "By contrast, the general public license is intended to guarantee your freedom to share and change "
    "free software, to make sure the software is free for all its users. When we speak of free software, "
    "we are referring to freedom, not price. You should also get a copy of the license with the program."
)


def sentences() -> Iterator[list[str]]:
    """The text's sentences as lists of plain words (letters only, lower case), without end."""
    files = sorted(p for p in LICENSES.glob("*") if p.is_file()) if LICENSES.is_dir() else []
    text = " ".join(p.read_text(errors="ignore") for p in files) or FALLBACK
    said = [s for s in (re.findall(r"[a-z]+", part.lower()) for part in re.split(r"[.;:!?]", text)) if s]
    while True:
        for sentence in said:
            yield sentence[:40]  # a list of clauses read as one breath at most


def read_aloud(seconds: float, rate: int = 16_000, seed: int = 0) -> tuple[np.ndarray, list[dict[str, object]]]:
    """`seconds` of continuous reading and the true time of every word laid down."""
    audio = synth.noise(seconds, rate, 0.002, seed)
    spoken: dict[str, np.ndarray] = {}
    truth: list[dict[str, object]] = []
    at = 500  # ms
    for sentence in sentences():
        for k, word in enumerate(sentence):
            wav = spoken.get(word)
            if wav is None:
                wav = spoken[word] = synth.speak_word(word)
            end = at + len(wav) * 1000 // rate
            if end > seconds * 1000 - 500:
                return audio, truth
            i = at * rate // 1000
            audio[i : i + len(wav)] += wav
            truth.append({"text": word, "begin_time": at, "end_time": end})
            at = end + (SENTENCE_GAP_MS if k == len(sentence) - 1 else WORD_GAP_MS)
    return audio, truth
