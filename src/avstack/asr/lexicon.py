"""English pronunciations for the acoustic aligner (asr.acoustic): the en-us dictionary the
PocketSphinx model ships (cmudict), transcript words as it spells them, and a letter-by-letter
spelling for words it lacks."""

from __future__ import annotations

import re
from functools import lru_cache

_NORM = re.compile(r"[^a-z']+")

# letters to en-us phones, for words the dictionary lacks (pairs first)
_PAIRS = {"th": "TH", "sh": "SH", "ch": "CH", "ng": "NG", "ph": "F", "ee": "IY", "oo": "UW", "ck": "K", "qu": "K W"}
_LETTERS = {
    "a": "AE", "b": "B", "c": "K", "d": "D", "e": "EH", "f": "F", "g": "G", "h": "HH", "i": "IH", "j": "JH",
    "k": "K", "l": "L", "m": "M", "n": "N", "o": "AA", "p": "P", "q": "K", "r": "R", "s": "S", "t": "T",
    "u": "AH", "v": "V", "w": "W", "x": "K S", "y": "Y", "z": "Z", "'": "",
}  # fmt: skip
_DIGITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


@lru_cache(maxsize=1)
def lexicon() -> dict[str, list[str]]:
    """The en-us pronouncing dictionary (cmudict, shipped with the model), read once per process:
    word -> its pronunciations in the dictionary's order."""
    from pocketsphinx import get_model_path

    entries: dict[str, list[str]] = {}
    with open(get_model_path("en-us/cmudict-en-us.dict"), encoding="utf-8") as f:
        for line in f:
            entry, _, phones = line.partition(" ")
            entries.setdefault(re.sub(r"\(\d+\)$", "", entry), []).append(phones.split("#")[0].strip())
    return entries


def spoken(text: str) -> str:
    """A transcript word as the dictionary spells it: lower case, letters and apostrophes; digits
    spelled out one by one."""
    t = text.lower().replace("’", "'")
    t = "".join(f" {_DIGITS[int(c)]} " if c.isdigit() else c for c in t)
    return " ".join(_NORM.sub(" ", t).split())


def letter_phones(word: str) -> str:
    phones, i = [], 0
    while i < len(word):
        pair = word[i : i + 2]
        if pair in _PAIRS:
            phones.append(_PAIRS[pair])
            i += 2
            continue
        phones.append(_LETTERS.get(word[i], ""))
        i += 1
    return " ".join(p for p in phones if p) or "AH"
