"""Mandarin instructions joined from real recorded syllables (Debian's `gcin-voice`), each
character's begin and end known to the sample.

`gcin-voice` ships 1,200 toned syllables per speaker, recorded one by one, as
`/usr/share/gcin-voice/ogg/<zhuyin><tone>/<speaker>.ogg` (tone 1 has no digit). Speaker "3" is the
set avstack is tuned on; speaker "5" is held out (the maker takes any speaker, so others can run
the held-out check; nothing here reads it while tuning). A syllable is trimmed to its own speech
energy and the syllables of a phrase are joined end to end, so a character's truth is where its
trimmed recording lies. This is real voice, not connected speech: citation-form syllables, no
blending across a boundary, no tone sandhi.

Each case: 0.3-0.9 s of room noise, then the instruction's phrases (a pause of 300-800 ms at
each comma), then 0.3-0.9 s more; some cases say a phrase quietly (-20 dB) or loudly (peaks near
full scale), as a speaker turning away from the phone or leaning into it does.
"""

from __future__ import annotations

import functools
import random
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from avstack.asr.evaluation.cases import Case
from avstack.asr.types import RATE
from avstack.errors import UsageError

if TYPE_CHECKING:  # a TypedDict: only the annotations read it
    from avstack.asr.types import TimedWord


GCIN = Path("/usr/share/gcin-voice/ogg")
TUNING_SPEAKER = "3"  # the held-out speaker is "5": never read while tuning

# EcoG-like instructions (指令2-6: one or two referents, "this/that/here/there", relations)
INSTRUCTIONS = (
    "把这个放到那里",
    "先放这个，再拿那个",
    "请把这个放在它的右边",
    "把那个杯子拿过来",
    "把这个盒子放在桌子上面",
    "拿起那个红色的瓶子，放到这里",
    "把它放到左边",
    "这个放这里，那个放那里",
    "把这本书放在那个架子上",
    "先拿这个，然后放到那边",
    "给我那个蓝色的杯子",
    "把这个手机放到它的左边",
    "把苹果放在盘子旁边",
    "请把那个放到这里来",
    "把这个拿起来，放到那个上面",
    "先把这个放下，再把那个拿走",
    "这个，放到那里去",
    "把白色的盒子放在椅子下面",
    "你把那个绿色的东西给我",
    "把这个放到它的前面，然后把那个拿给我",
)

_TONE_MARKS = {"ˊ": "2", "ˇ": "3", "ˋ": "4", "˙": "5"}
QUIET_GAIN = 0.1  # -20 dB
LOUD_PEAK = 0.97


def available(speaker: str = TUNING_SPEAKER) -> bool:
    """Is `gcin-voice` installed with this speaker's recordings (and pypinyin to read the text)?"""
    try:
        import pypinyin  # noqa: F401
    except ImportError:
        return False
    return (GCIN / "ㄅㄚ3" / f"{speaker}.ogg").is_file()


def syllables(text: str) -> list[tuple[str, str]]:
    """(character, zhuyin with its tone digit) for each Han character of `text`, read in context
    (pypinyin's phrase dictionary picks a polyphone's reading)."""
    from pypinyin import Style, pinyin

    out = []
    readings = pinyin(text, style=Style.BOPOMOFO, errors=lambda s: [[""] for _ in s])  # type: ignore[arg-type,return-value]
    for ch, (zy,) in zip(text, readings):
        if not zy or not ("\u4e00" <= ch <= "\u9fff"):
            continue
        tone = next((_TONE_MARKS[c] for c in zy if c in _TONE_MARKS), "1")
        out.append((ch, "".join(c for c in zy if c not in _TONE_MARKS) + tone))
    return out


def recording(zhuyin_tone: str, speaker: str) -> Path:
    """The speaker's recording of a toned syllable; where that tone is missing (the neutral tone
    has no recordings), the same syllable in the nearest tone the speaker recorded."""
    base, tone = zhuyin_tone[:-1], zhuyin_tone[-1]
    order = [tone, "1", "4", "3", "2"] if tone != "5" else ["1", "4", "2", "3"]
    for t in dict.fromkeys(order):
        for folder in ((base,) if t == "1" else ()) + (base + t,):
            path = GCIN / folder / f"{speaker}.ogg"
            if path.is_file():
                return path
    raise FileNotFoundError(f"gcin-voice: no recording of {zhuyin_tone!r} by speaker {speaker!r} under {GCIN}")


def trimmed(samples: np.ndarray, hop: int = RATE // 200, below_peak_db: float = 30.0) -> np.ndarray:
    """A syllable trimmed to its own energy: from the first to the last 5 ms frame within
    `below_peak_db` of its loudest (the recordings' own floor lies about 30 dB under)."""
    n = len(samples) // hop * hop
    db = 10 * np.log10((samples[:n].reshape(-1, hop).astype(np.float64) ** 2).mean(axis=1) + 1e-12)
    loud = np.flatnonzero(db > db.max() - below_peak_db)
    return samples[loud[0] * hop : (loud[-1] + 1) * hop]


@functools.lru_cache(maxsize=4096)
def syllable_audio(zhuyin_tone: str, speaker: str) -> np.ndarray:
    from avstack.media.audio import load_audio

    path = recording(zhuyin_tone, speaker)
    audio = load_audio(path)
    if audio is None or not len(audio):
        raise UsageError(f"{path}: expected a recorded syllable, found no audio")
    return trimmed(audio)


def gcin_case(text: str, speaker: str, seed: int, noise_level: float = 0.002) -> Case:
    """One instruction spoken by `speaker`, syllable by syllable (see the module's docstring);
    the truth is per character."""
    rng = random.Random(f"gcin:{speaker}:{seed}:{text}")
    phrases = [p for p in text.replace("，", ",").split(",") if p]
    style = rng.choice(("plain", "plain", "quiet", "loud"))
    styled = rng.randrange(len(phrases))  # the phrase said quietly or loudly
    pieces: list[np.ndarray] = [np.zeros(rng.randint(300, 900) * RATE // 1000, np.float32)]
    truth: list[TimedWord] = []
    at = len(pieces[0])
    for k, phrase in enumerate(phrases):
        if k:
            gap = np.zeros(rng.randint(300, 800) * RATE // 1000, np.float32)
            pieces.append(gap)
            at += len(gap)
        gain = rng.uniform(0.5, 0.8)
        sounds = [(ch, syllable_audio(zt, speaker)) for ch, zt in syllables(phrase)]
        if k == styled and style == "quiet":
            gain = QUIET_GAIN
        elif k == styled and style == "loud":
            gain = LOUD_PEAK / max(float(np.abs(s).max()) for _, s in sounds)
        for ch, sound in sounds:
            pieces.append((sound * gain).astype(np.float32))
            truth.append(
                {"text": ch, "begin_time": round(at * 1000 / RATE), "end_time": round((at + len(sound)) * 1000 / RATE)}
            )
            at += len(sound)
    pieces.append(np.zeros(rng.randint(300, 900) * RATE // 1000, np.float32))
    audio = np.concatenate(pieces)
    audio += np.random.default_rng(seed).normal(0, noise_level, len(audio)).astype(np.float32)
    return Case("zh", np.clip(audio, -1, 1).astype(np.float32), truth, seed)


def gcin_cases(speaker: str = TUNING_SPEAKER, texts: tuple[str, ...] = INSTRUCTIONS, seed: int = 0) -> list[Case]:
    """Every instruction of `texts` by `speaker`, one case each."""
    return [gcin_case(t, speaker, seed + i) for i, t in enumerate(texts)]
