"""Speech with KNOWN word times: instructions synthesized word by word (eSpeak NG; Mandarin from
pinyin), whole sentences by festival, disfluent takes (fillers, hesitations, restarts, slow and
fast stretches), each word's true begin and end known to the sample."""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from avstack import asr
from avstack.synthetic import synth

if TYPE_CHECKING:  # a TypedDict: only the annotations read it
    from avstack.asr.types import TimedWord


# Instructions like the EcoG ones, from templates; each word is synthesized on its own.
EN_TEMPLATES = (
    "put the {color} {object} on the {place}",
    "take this {object} over there",
    "move that {object} here",
    "pick up the {object} and put it there",
    "hand me the {color} {object}",
    "put it next to the {object}",
)


EN_SLOTS = {
    "color": ("red", "blue", "green", "white", "black"),
    "object": ("cup", "box", "bottle", "phone", "book", "plate", "bag", "apple"),
    "place": ("table", "chair", "shelf", "floor", "desk"),
}


ZH_TEMPLATES = (
    "把 这个 {object} 放到 那里",
    "拿起 {color} 的 {object}",
    "把 那个 {object} 放 在 {place} 上面",
    "把 它 放到 这里",
    "给 我 那个 {color} 的 {object}",
)


ZH_SLOTS = {
    "color": ("红色", "蓝色", "绿色", "白色"),
    "object": ("杯子", "盒子", "瓶子", "手机", "书", "苹果"),
    "place": ("桌子", "椅子", "架子"),
}


PINYIN = {
    "把": "ba3", "这个": "zhe4ge4", "放到": "fang4dao4", "那里": "na4li3", "拿起": "na2qi3", "的": "de5",
    "那个": "na4ge4", "放": "fang4", "在": "zai4", "上面": "shang4mian4", "它": "ta1", "这里": "zhe4li3",
    "给": "gei3", "我": "wo3", "红色": "hong2se4", "蓝色": "lan2se4", "绿色": "lv4se4", "白色": "bai2se4",
    "杯子": "bei1zi", "盒子": "he2zi", "瓶子": "ping2zi", "手机": "shou3ji1", "书": "shu1", "苹果": "ping2guo3",
    "桌子": "zhuo1zi", "椅子": "yi3zi", "架子": "jia4zi",
}  # fmt: skip


VOICES = {"en": "en", "zh": "cmn-latn-pinyin"}


@dataclass(frozen=True)
class Case:
    lang: str
    audio: np.ndarray
    truth: list[TimedWord]
    seed: int


def templates(lang: str) -> tuple[str, ...]:
    return EN_TEMPLATES if lang == "en" else ZH_TEMPLATES


def sentence(lang: str, rng: random.Random, template: int | None = None) -> list[str]:
    slots = EN_SLOTS if lang == "en" else ZH_SLOTS
    pattern = rng.choice(templates(lang)) if template is None else templates(lang)[template]
    text = pattern.format(**{k: rng.choice(v) for k, v in slots.items()})
    return text.split()


def make_case(
    lang: str,
    seed: int,
    noise_level: float = 0.004,
    gap_ms: tuple[int, int] = (60, 350),
    template: int | None = None,
) -> Case:
    """A spoken instruction with chosen gaps between words, starting 200-900 ms in, over noise;
    from a random template, or the one given (an EcoG folder holds one instruction type)."""
    rng = random.Random(f"{lang}:{seed}")
    words = sentence(lang, rng, template)
    spoken = words if lang == "en" else [PINYIN[w] for w in words]
    recs = [(w, synth.speak_word(s, VOICES[lang])) for w, s in zip(words, spoken)]
    starts, t = [], rng.randint(200, 900)
    for _, wav in recs:
        starts.append(t)
        t += int(len(wav) * 1000 / asr.RATE) + rng.randint(*gap_ms)
    duration_s = (t + rng.randint(300, 900)) / 1000
    audio, truth = synth.place_words(recs, starts, duration_s, noise_level=noise_level, seed=seed)
    return Case(lang, audio, truth, seed)


def noise_clips(n: int = 3) -> list[np.ndarray]:
    """Noise-only clips mixed among the speech: any word on them is a hallucination."""
    return [synth.noise(3.0, level=lv, seed=i) for i, lv in enumerate([0.003, 0.01, 0.03][:n])]


# Whole sentences synthesized as one utterance by festival, whose Word relation gives each word's
# start and end (the segments it spans): connected speech, coarticulated, with the synthesizer's own
# pauses, and word times exact by construction. Three voices; light noise and a room echo that
# shifts no time (the direct sound is first and loudest).
FESTIVAL_VOICES = ("kal_diphone", "ked_diphone", "cmu_us_slt_arctic_hts")


CONNECTED_EN = (
    "put the {color} {object} on the {place}",
    "could you take this {object} over there please",
    "move that {object} next to the {color} {object}",
    "pick up the {object} and put it on the {place}",
    "hand me the {color} {object} from the {place}",
    "now place it right here beside the {object}",
    "take the {object} off the {place} and give it to me",
    "put this one there and that one here",
)


_SCHEME = """(voice_{voice})
(set! utt (utt.synth (Utterance Text "{text}")))
(utt.save.wave utt "{wav}" 'riff)
(mapcar (lambda (w) (format t "%s %f %f\\n" (item.name w) (item.feat w "word_start") (item.feat w "word_end")))
        (utt.relation.items utt 'Word))
"""


@functools.lru_cache(maxsize=8)
def festival_available(voice: str = "kal_diphone") -> bool:
    """festival is installed and has this voice (a voice is a package of its own: festvox-kallpc16k
    is kal_diphone, festvox-kdlpc16k ked_diphone)."""
    import shutil
    import subprocess

    if shutil.which("festival") is None:
        return False
    probe = subprocess.run(["festival", "-b", f"(voice_{voice})"], capture_output=True, timeout=60)
    return probe.returncode == 0 and b"not defined" not in probe.stderr + probe.stdout


def festival_utterance(text: str, voice: str) -> tuple[np.ndarray, list[TimedWord]]:
    """16 kHz audio of `text` spoken as one utterance, and each word's true begin and end (ms)."""
    import subprocess
    import tempfile
    from pathlib import Path

    import soundfile as sf

    with tempfile.TemporaryDirectory() as tmp:
        wav = Path(tmp) / "u.wav"
        script = Path(tmp) / "u.scm"
        script.write_text(_SCHEME.format(voice=voice, text=text.replace('"', ""), wav=wav))
        out = subprocess.run(["festival", "-b", str(script)], capture_output=True, text=True, check=True).stdout
        audio, sr = sf.read(wav, dtype="float32")
    words: list[TimedWord] = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3:
            words.append(
                {
                    "text": parts[0],
                    "begin_time": round(float(parts[1]) * 1000),
                    "end_time": round(float(parts[2]) * 1000),
                }
            )
    audio = synth.resample(audio if audio.ndim == 1 else audio.mean(axis=1), sr, asr.RATE)
    return audio / max(1e-6, float(np.abs(audio).max())) * 0.6, words


def _room(audio: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A small room: the direct sound, then a decaying diffuse tail from 5 ms (about -18 dB)."""
    n = int(0.25 * asr.RATE)
    t = np.arange(n) / asr.RATE
    ir = rng.standard_normal(n) * np.exp(-t / 0.06) * 0.12
    ir[: int(0.005 * asr.RATE)] = 0
    ir[0] = 1.0
    wet = np.convolve(audio, ir)[: len(audio)]
    return (wet / max(1e-6, float(np.abs(wet).max())) * 0.6).astype(np.float32)


def connected_case(seed: int, voice: str, noise_level: float = 0.004, echo: bool = True) -> Case:
    """One held-out sentence in one festival voice, placed after 0.3-1.0 s of noise, with 0.5-1.0 s
    after it; the truth shifted by the lead."""
    rng = random.Random(seed)
    template = rng.choice(CONNECTED_EN)
    text = template.format(**{k: rng.choice(v) for k, v in EN_SLOTS.items()})
    speech, words = festival_utterance(text, voice)
    lead, tail = int(rng.uniform(0.3, 1.0) * asr.RATE), int(rng.uniform(0.5, 1.0) * asr.RATE)
    audio = np.concatenate([np.zeros(lead, np.float32), speech, np.zeros(tail, np.float32)])
    nrng = np.random.default_rng(seed)
    if echo:
        audio = _room(audio, nrng)
    audio = (audio + noise_level * nrng.standard_normal(len(audio))).astype(np.float32)
    shift = round(lead * 1000 / asr.RATE)
    truth: list[TimedWord] = [
        {"text": w["text"], "begin_time": w["begin_time"] + shift, "end_time": w["end_time"] + shift} for w in words
    ]
    return Case("en", audio, truth, seed)


# ---------------------------------------------------------------- disfluent synthetic speech
# Spontaneous speech as EcoG's speakers talk ("uh, put that... there"): fillers before and inside
# sentences, hesitation pauses, lengthened (slow) words and fast stretches, repeats and restarts,
# quieter stretches (-15 dB), several utterances in takes of 20-60 s. Every word synthesized on
# its own (espeak-ng) and placed, so its true times are known to the sample; fillers are placed
# too but are not words of the truth (Whisper usually leaves them out; they must not be absorbed).
FILLER_WORDS = ("um", "uh", "er")


@dataclass(frozen=True)
class DisfluentCase(Case):
    fillers: tuple[TimedWord, ...] = ()  # the fillers placed, with their times


def disfluent_case(seed: int, take_s: tuple[int, int] = (20, 60), noise_level: float = 0.004) -> DisfluentCase:
    rng = random.Random(f"disfluent:{seed}")
    target_ms = rng.randint(*take_s) * 1000
    placed: list[tuple[str, np.ndarray, int, bool]] = []  # text, audio, start, is a word of the truth
    utterance_of: list[int] = []  # per placed item, the utterance it belongs to
    t = rng.randint(300, 900)
    while t < target_ms - 4000:
        words = sentence("en", rng)
        if rng.random() < 0.3:  # a restart: the first words, broken off, then the whole
            words = words[: rng.randint(1, 2)] + words
        speed = rng.choice((150, 150, 95, 230))  # normal, slow, fast stretches
        gain = 0.18 if rng.random() < 0.2 else 1.0  # a quieter stretch: -15 dB
        if rng.random() < 0.6:
            placed.append(
                (rng.choice(FILLER_WORDS), synth.speak_word(rng.choice(FILLER_WORDS), "en", speed=110) * gain, t, False)
            )
            t += int(len(placed[-1][1]) * 1000 / asr.RATE) + rng.randint(60, 400)
        for k, w in enumerate(words):
            slow = speed if rng.random() > 0.15 else 80  # a lengthened word
            wav = synth.speak_word(w, "en", speed=slow) * gain
            placed.append((w, wav, t, True))
            t += int(len(wav) * 1000 / asr.RATE) + rng.randint(30, 160)
            if k < len(words) - 1 and rng.random() < 0.12:  # a filler inside, with a hesitation
                t += rng.randint(150, 500)
                f = synth.speak_word(rng.choice(FILLER_WORDS), "en", speed=100) * gain
                placed.append(("uh", f, t, False))
                t += int(len(f) * 1000 / asr.RATE) + rng.randint(150, 500)
        utterance_of += [max(utterance_of, default=-1) + 1] * (len(placed) - len(utterance_of))
        t += rng.randint(800, 2500)  # between utterances
    duration_s = (t + 600) / 1000
    audio, times = synth.place_words(
        [(p[0], p[1]) for p in placed], [p[2] for p in placed], duration_s, noise_level=noise_level, seed=seed
    )
    truth = [tm | {"utterance": u} for tm, p, u in zip(times, placed, utterance_of) if p[3]]
    fillers = tuple(tm for tm, p in zip(times, placed) if not p[3])
    return DisfluentCase("en", audio, truth, seed, fillers)
