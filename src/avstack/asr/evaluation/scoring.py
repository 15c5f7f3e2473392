"""Word-boundary accuracy: transcripts scored against known word times (edges, recognition,
collapsed words, the word after a filler)."""

from __future__ import annotations

import functools
import re
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import TYPE_CHECKING, Any

import numpy as np

from avstack import asr
from avstack.asr.evaluation.cases import Case, DisfluentCase, noise_clips

if TYPE_CHECKING:  # a TypedDict: only the annotations read it
    from avstack.asr.types import TimedWord


_STRIP = re.compile(r"[\W_]+", re.UNICODE)


def _tokens(words: Sequence[tuple[str, int, int]], lang: str) -> list[tuple[str, int, bool, bool]]:
    """(token, word index, first token of its word, last token of its word). Chinese is compared
    by character, so a different segmentation still counts the characters it got right, and a
    character by its toneless pinyin: a homophone written another way (在/再, the traditional
    script) was heard, and its edges are the ones to score."""
    out = []
    for i, (text, _, _) in enumerate(words):
        norm = _STRIP.sub("", text.lower())
        parts = [_toneless(c) for c in norm] if lang == "zh" else ([norm] if norm else [])
        out += [(p, i, k == 0, k == len(parts) - 1) for k, p in enumerate(parts)]
    return out


@functools.lru_cache(maxsize=8192)
def _toneless(char: str) -> str:
    """A character's toneless pinyin (the character itself without pypinyin or a reading)."""
    try:
        from pypinyin import lazy_pinyin
    except ImportError:
        return char
    return (lazy_pinyin(char, errors=lambda s: [s]) or [char])[0]  # type: ignore[arg-type,return-value]


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


def score_case(truth: Sequence[TimedWord], hyp: Sequence[asr.Word], lang: str) -> CaseScore:
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


def correct_words(truth: Sequence[TimedWord], hyp: Sequence[asr.Word], lang: str) -> list[bool]:
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


def _ms(values: list[int], q: float) -> int | None:
    """A percentile in whole ms; None when there is nothing to take it of (a take with no word heard)."""
    return round(_pct(values, q)) if values else None


def evaluate(
    cases: list[Case], settings: asr.AsrSettings, noise_cases: int = 3, mode: str = "single"
) -> dict[str, object]:
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
    return head | {"vad": settings.vad} | row | {"repetition_loops_cut": loops, "per_case": per_case(cases, speech)}


def per_case(cases: Sequence[Case], transcripts: Sequence[asr.Transcript]) -> list[dict[str, object]]:
    """Each case's own figures and what timed its words (the transcript's `timing`: how many the
    acoustics timed, how many fell back and why)."""
    out = []
    for case, tr in zip(cases, transcripts):
        one = summarize([case], [list(tr.words)], 0, 0.0)
        keep = ("words", "recognized_pct", "boundary_median_ms", "boundary_p90_ms", "collapsed", "after_filler_ok")
        out.append({k: one[k] for k in keep if k in one} | {"timing": tr.timing})
    return out


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


def summarize(cases: list[Case], hyps: list[list[asr.Word]], noise_words: int, rtf: float) -> dict[str, object]:
    """The harness's figures for words `hyps` (one list per case): recognition, edge errors
    (begin and end apart), signed bias, and the words' confidence against whether they were right
    (`reliability`: per probability bin, how many words and the share that were recognized); on
    disfluent takes also the words right after a filler that begin within 50 ms (`after_filler_ok`)."""
    total = CaseScore(0, 0)
    for case, words in zip(cases, hyps):
        for truth, heard in utterances(case.truth, words):
            _add(total, score_case(truth, heard, case.lang))
    row = _summary(cases, hyps, total, noise_words, rtf)
    if any(isinstance(c, DisfluentCase) for c in cases):
        row["after_filler_ok"] = after_filler_share(cases, hyps)
    return row


def utterances(truth: list[TimedWord], hyp: Sequence[asr.Word]) -> list[tuple[list[TimedWord], list[asr.Word]]]:
    """A long take scored utterance by utterance (truth words marked "utterance"), each against
    the words heard in its stretch (cut at the middle of the pauses between utterances): matched
    over a whole take, a repeated word ("the", "put") could pair with one said a minute away."""
    if not truth or "utterance" not in truth[0]:
        return [(truth, list(hyp))]
    groups: dict[int, list[TimedWord]] = {}
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
) -> dict[str, object]:
    both = total.begin_errors + total.end_errors
    return {
        "clips": len(cases),
        "words": total.words,
        "recognized_pct": round(100 * total.recognized / max(1, total.words), 1),
        "begin_median_ms": _ms(total.begin_errors, 50),
        "begin_p90_ms": _ms(total.begin_errors, 90),
        "end_median_ms": _ms(total.end_errors, 50),
        "end_p90_ms": _ms(total.end_errors, 90),
        "boundary_median_ms": _ms(both, 50),
        "boundary_p90_ms": _ms(both, 90),
        "within_50_pct": round(100 * sum(e <= 50 for e in both) / len(both), 1) if both else None,
        "bias_ms": _ms(total.signed, 50),
        "collapsed": total.collapsed,
        "rtf": round(rtf, 4),
        "noise_only_words": noise_words,
        "reliability": reliability(cases, hyps),
        "tail": tail_causes(total.causes, _pct(both, 90)),
        "mean_words_per_clip": round(statistics.mean([len(c.truth) for c in cases]), 1),
    }


def tail_causes(causes: list[tuple[int, str]], p90: float) -> dict[str, object]:
    """The tail (edges with errors at or above the p90) by where the edges lie: the share next to
    a pause, next to a misheard word, inside continuous speech; and each kind's share of all edges,
    so a cause over-represented in the tail shows."""
    tail = [kind for err, kind in causes if err >= p90 and err > 0]
    kinds = (PAUSE, MISHEARD, INSIDE)
    return {
        "from_ms": round(p90) if np.isfinite(p90) else None,
        "edges": len(tail),
        "share_pct": {k: round(100 * tail.count(k) / max(1, len(tail))) for k in kinds},
        "of_all_pct": {k: round(100 * sum(kind == k for _, kind in causes) / max(1, len(causes))) for k in kinds},
    }


PROB_BINS = (0.0, 0.3, 0.5, 0.7, 0.9, 1.01)


def reliability(cases: list[Case], hyps: list[list[asr.Word]]) -> list[dict[str, object]]:
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
