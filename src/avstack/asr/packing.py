"""Packed ASR: short clips laid end to end share one Whisper window; segments given back to clips."""

from __future__ import annotations

import zlib

import numpy as np

from avstack.asr.batch import finish
from avstack.asr.refine import speech_span, voiced_regions
from avstack.asr.types import RATE, AsrSettings, Heard, Transcript, Word
from avstack.asr.whisper import REPETITIVE, silent_apart, transcribe, transcribe_words

PACK_WINDOW_S = 28.0  # under Whisper's 30 s window, so a pack is decoded in one pass


PACK_GAP_S = 1.0  # silence between packed clips: a clear pause, and room for edge drift


def plan_packs(durations_s: list[float], window_s: float = PACK_WINDOW_S, gap_s: float = PACK_GAP_S) -> list[list[int]]:
    """Clips in order, grouped greedily into packs that fit one window (a longer clip is alone)."""
    packs: list[list[int]] = []
    used = window_s + 1.0
    for i, d in enumerate(durations_s):
        if packs and used + gap_s + d <= window_s:
            packs[-1].append(i)
            used += gap_s + d
        else:
            packs.append([i])
            used = d
    return packs


def interleave(groups: list[str]) -> list[int]:
    """Indices taking one item from each group in turn (groups in first-seen order). Packing
    clips of one instruction type together lets a misheard word repeat down the pack; mixing
    the types keeps the context that helps (benchmarks/asr_timing.py --layout folders)."""
    queues: dict[str, list[int]] = {}
    for i, g in enumerate(groups):
        queues.setdefault(g, []).append(i)
    out: list[int] = []
    while len(out) < len(groups):
        for q in queues.values():
            if q:
                out.append(q.pop(0))
    return out


def transcribe_packed(
    clips: list[np.ndarray], settings: AsrSettings | None = None, window_s: float = PACK_WINDOW_S
) -> list[Transcript]:
    """hear_packed, each clip then finished (its guards and aligner) in turn."""
    return [h if isinstance(h, Transcript) else finish(h) for h in hear_packed(clips, settings, window_s)]


def hear_packed(
    clips: list[np.ndarray], settings: AsrSettings | None = None, window_s: float = PACK_WINDOW_S
) -> list[Transcript | Heard]:
    """Short clips laid end to end with 1 s pauses and transcribed a window at a time; each segment
    (or word, see `clips_of`) is given back to its clip. Whisper pads every input to 30 s, so on
    a CPU one window of several short clips costs about what one clip alone costs.

    The trade-off (benchmarks/asr_timing.py): 2.5-6x less ASR time, and the shared context helps
    on varied sentences; but clips that say nearly the same thing prime each other (a misheard
    word repeats into the next clip), so it is an option, not the default. Needs a fixed
    language; else clips go one by one. A packed clip comes back heard, not yet finished
    (asr.batch.finish: its guards and aligner); a clip alone in its pack, finished."""
    s = settings or AsrSettings()
    lang = s.fixed_language
    found, todo = silent_apart(clips, s, lang)
    out: list[Transcript | Heard | None] = list(found)
    if lang is None:
        for i in todo:
            out[i] = transcribe(clips[i], s)
        return [t for t in out if t is not None]
    gap = np.zeros(int(PACK_GAP_S * RATE), np.float32)
    voiced = {i: voiced_regions(clips[i]) for i in todo}
    # packs are planned on what each clip takes of the window (prepare's feeder plans the same)
    kept = {i: speech_span(len(clips[i]), voiced[i]) for i in todo}
    for pack in plan_packs([(kept[i][1] - kept[i][0]) / RATE for i in todo], window_s, PACK_GAP_S):
        members = [todo[k] for k in pack]
        if len(members) == 1:
            out[members[0]] = transcribe(clips[members[0]], s)
            continue
        pieces, starts, t = [], [], 0
        # a pack is composed the same way on every run (prepare.asr_order), so its offsets need no
        # grid: its clips' words depend on the whole pack anyway (cached per pack)
        for i in members:
            a, b = kept[i]
            starts.append(t)
            pieces += [clips[i][a:b].astype(np.float32), gap]
            t += b - a + len(gap)
        segments, dropped, _ = transcribe_words(np.concatenate(pieces[:-1]), s, lang, packed=True)
        bounds = [(t0 * 1000 // RATE, (t0 + kept[i][1] - kept[i][0]) * 1000 // RATE) for t0, i in zip(starts, members)]
        # a clip's time 0 on the pack's timeline (its kept span starts kept[i][0] samples in)
        zero = [lo - kept[i][0] * 1000 // RATE for (lo, _), i in zip(bounds, members)]
        regions = [(z + a, z + b, k) for k, z in enumerate(zero) for a, b in voiced[members[k]]]
        per_clip: dict[int, list[Word]] = {i: [] for i in members}
        for seg in segments:
            for k, w in zip(clips_of(seg, bounds, regions), seg):
                per_clip[members[k]].append(Word(w.text, w.begin_ms - zero[k], w.end_ms - zero[k], w.prob))
        note = f"packed: {len(members)} clips in one window"
        for i in members:
            mine = [*dropped, note]
            if _repetitive(per_clip[i]):
                mine.append(f"repetitive clip: {''.join(w.text for w in per_clip[i])[:60]!r}")
                per_clip[i] = []
            out[i] = Heard(tuple(per_clip[i]), tuple(mine), lang, clips[i], s, voiced[i], own_audio=False)
    return [t for t in out if t is not None]


def packed_seconds(samples: np.ndarray) -> float:
    """How much of a pack's window this clip takes (its speech span, see speech_span)."""
    a, b = speech_span(len(samples), voiced_regions(samples))
    return (b - a) / RATE


def clips_of(
    seg: list[Word], bounds: list[tuple[int, int]], regions: list[tuple[int, int, int]], whole: float = 2 / 3
) -> list[int]:
    """The packed clip each word of a segment belongs to. Whisper's segments follow the sentences
    but its times can slip across a pause (a clip's first word placed in the previous clip's
    tail, a last word in the next clip's silence). A segment lying mostly (`whole`) in one clip
    with speech, none of its words on another clip's speech, goes there entire; else each word
    goes to the clip whose voiced regions
    (begin, end, clip) it overlaps most, or the nearest one: a clip without clear speech gets
    no words while another has some."""
    if not seg:
        return []
    speaking = {k for _, _, k in regions}
    a, b = seg[0].begin_ms, seg[-1].end_ms
    overlap = [max(0, min(b, hi) - max(a, lo)) for lo, hi in bounds]
    top = max(range(len(bounds)), key=overlap.__getitem__)
    # a word on another clip's speech means the segment runs across the pause: word by word
    elsewhere = any(min(w.end_ms, hi) > max(w.begin_ms, lo) for w in seg for lo, hi, k in regions if k != top)
    if overlap[top] >= whole * max(1, sum(overlap)) and (top in speaking or not speaking) and not elsewhere:
        return [top] * len(seg)

    def locate(w: Word) -> int:
        if not regions:
            mid = (w.begin_ms + w.end_ms) / 2
            return min(range(len(bounds)), key=lambda j: max(bounds[j][0] - mid, mid - bounds[j][1], 0))
        best = max(regions, key=lambda r: min(w.end_ms, r[1]) - max(w.begin_ms, r[0]))
        return best[2]  # the most overlapped, or (all negative) the nearest region's clip

    return [locate(w) for w in seg]


def _repetitive(words: list[Word]) -> bool:
    text = "".join(w.text for w in words).encode()
    return len(text) > 0 and len(text) / len(zlib.compress(text)) > REPETITIVE
