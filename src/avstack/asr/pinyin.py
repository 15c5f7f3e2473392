"""Mandarin syllables as en-us phones, for the acoustic aligner (asr.acoustic): each character a
token of its own, its pinyin read in context (pypinyin) and spelled with the en-us model's phones.

Why this can time Mandarin: a Mandarin character is one syllable, (initial) + final, and almost
every initial is an obstruent or a nasal (b p m f d t n l g k h j q x zh ch sh r z c s) whose
closest en-us phone has the same manner: a stop's closure and burst, a fricative's noise, a
nasal's murmur. Those are what a syllable boundary is made of, and an HMM finds them frame by
frame, as it does in English. The vowels are approximate (there is no en-us [ɤ] or [y]), but an
edge needs the boundary's sound, not the vowel's quality, and the grammar fixes which syllable
comes next. Tones are not modelled (the en-us models know none; they only colour the vowel).
Zero-initial syllables (a, ai, an, e, ou, er and the y-/w- glides) join their neighbour with no
closure; there the edge rests on the glide's formant movement, weaker evidence.
"""

from __future__ import annotations

import re
from functools import lru_cache

from avstack.errors import UsageError

PREFIX = "zh_"  # tokens are "zh_ba": never an English word or one of the fillers ("er" is 儿)

_INITIALS = {
    "b": "B", "p": "P", "m": "M", "f": "F", "d": "D", "t": "T", "n": "N", "l": "L", "g": "G", "k": "K",
    "h": "HH", "j": "JH", "q": "CH", "x": "SH", "zh": "JH", "ch": "CH", "sh": "SH", "r": "R",
    "z": "Z", "c": "T S", "s": "S",
}  # fmt: skip

# finals in pypinyin's strict spelling (iou, uei, uen, v for ü)
_FINALS = {
    "a": "AA", "o": "AO", "e": "AH", "ai": "AY", "ei": "EY", "ao": "AW", "ou": "OW", "an": "AA N",
    "en": "AH N", "ang": "AA NG", "eng": "AH NG", "ong": "UH NG", "er": "ER", "i": "IY", "ia": "Y AA",
    "ie": "Y EH", "iao": "Y AW", "iou": "Y OW", "ian": "Y EH N", "in": "IY N", "iang": "Y AA NG",
    "ing": "IY NG", "iong": "Y UH NG", "u": "UW", "ua": "W AA", "uo": "W AO", "uai": "W AY", "uei": "W EY",
    "uan": "W AA N", "uen": "W AH N", "uang": "W AA NG", "ueng": "W AH NG", "v": "IY", "ve": "Y EH",
    "van": "Y EH N", "vn": "IY N", "io": "Y AO", "m": "M", "n": "N", "ng": "NG", "ê": "EH",
}  # fmt: skip

# the "empty" vowel after z c s (apical) and zh ch sh r (retroflex): no [i] at all
_APICAL = {"z": "IH", "c": "IH", "s": "IH", "zh": "ER", "ch": "ER", "sh": "ER", "r": "ER"}
_HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


def is_han(char: str) -> bool:
    return bool(_HAN.fullmatch(char))


def syllable_tokens(chars: list[str]) -> list[str]:
    """One aligner token per character, read in context (a polyphone takes the reading its
    neighbours give it): "zh_" + initial + "_" + final; "" for a character with no reading (a
    digit, a Latin letter), which the aligner leaves untimed."""
    from pypinyin import Style, pinyin

    text = "".join(chars)
    if len(text) != len(chars):
        raise UsageError(f"expected one character per unit, found {chars!r}")
    initials = pinyin(text, style=Style.INITIALS, strict=True, errors=lambda s: [["?"] for _ in s])  # type: ignore[arg-type,return-value]
    finals = pinyin(text, style=Style.FINALS, strict=True, errors=lambda s: [["?"] for _ in s])  # type: ignore[arg-type,return-value]
    out = []
    for ch, (ini,), (fin,) in zip(text, initials, finals):
        known = is_han(ch) and fin in _FINALS and (ini in _INITIALS or ini == "")
        out.append(f"{PREFIX}{ini}_{fin}" if known else "")
    return out


@lru_cache(maxsize=4096)
def phones(token: str) -> str:
    """A syllable token's en-us phones ("zh_b_a" -> "B AA")."""
    ini, _, fin = token[len(PREFIX) :].partition("_")
    if fin == "i" and ini in _APICAL:
        vowel = _APICAL[ini]
    else:
        vowel = _FINALS[fin]
    return f"{_INITIALS[ini]} {vowel}" if ini else vowel
