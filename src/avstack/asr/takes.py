"""Where a take is cut for the acoustic aligner (asr.acoustic) and what audio each piece is
searched over: at the pauses the transcriber heard, at the longest pauses of the speech energy
until no piece is over CHUNK_S, halves of a piece that failed, each narrowed to its speech."""

from __future__ import annotations

import bisect

from avstack.asr.types import Word

CHUNK_S = 15.0  # longest stretch aligned at once (whole 25 s takes failed to align at all)
PAUSE_MS = 250  # a silence this long is a place to cut a take


def chunks(words: list[Word], regions: list[tuple[int, int]], duration_ms: int) -> list[tuple[int, int, list[int]]]:
    """(start ms, end ms, word indices) per chunk: the take cut at every pause the transcriber
    heard (`heard_pauses`), then at the middle of its longest pause by the speech energy, and each
    side again, until no chunk is over CHUNK_S or a long one has no pause to cut at (it is aligned
    whole, or kept as transcribed); a word goes to the chunk holding its midpoint."""
    pauses = [(b[0] - a[1], (a[1] + b[0]) // 2) for a, b in zip(regions, regions[1:]) if b[0] - a[1] >= PAUSE_MS]

    def cut(a: int, b: int) -> list[int]:
        inside = [p for p in pauses if a < p[1] < b]
        if b - a <= CHUNK_S * 1000 or not inside:
            return []
        mid = max(inside)[1]
        return [*cut(a, mid), mid, *cut(mid, b)]

    heard = heard_pauses(words)
    edges = [0, *heard, duration_ms]
    cuts = sorted({*edges, *(c for a, b in zip(edges, edges[1:]) for c in cut(a, b))})
    owner = [min(max(bisect.bisect_right(cuts, (w.begin_ms + w.end_ms) / 2) - 1, 0), len(cuts) - 2) for w in words]
    return [(a, b, [i for i, k in enumerate(owner) if k == c]) for c, (a, b) in enumerate(zip(cuts, cuts[1:]))]


def heard_pauses(words: list[Word]) -> list[int]:
    """The middle of every gap of PAUSE_MS or more between two of the transcriber's words. Whisper's
    word spans tile continuous speech (each word ends where the next begins), so such a gap is a
    stretch in which it heard no word. A chunk ends there, so no word is aligned across it: in one
    search over both sides, the shared real take's "one" went past a filler and a 1.3 s pause and
    took the onset of the "and" after them, 2.7 s late. The speech energy cannot find every such
    pause on a noisy recording (breath and rumble read as voice), the transcriber's words can."""
    return [(x.end_ms + y.begin_ms) // 2 for x, y in zip(words, words[1:]) if y.begin_ms - x.end_ms >= PAUSE_MS]


def split_at_pause(
    words: list[Word], mine: list[int], regions: list[tuple[int, int]], a: int, b: int
) -> list[tuple[int, int, list[int]]]:
    """The piece a-b cut at the middle of its longest pause (PAUSE_MS or more) into two, each
    word going to the side holding its midpoint; [] when there is no such pause."""
    pauses = [(y[0] - x[1], (x[1] + y[0]) // 2) for x, y in zip(regions, regions[1:]) if y[0] - x[1] >= PAUSE_MS]
    inside = [p for p in pauses if a < p[1] < b]
    if not inside:
        return []
    mid = max(inside)[1]
    left = [i for i in mine if (words[i].begin_ms + words[i].end_ms) / 2 < mid]
    return [(a, mid, left), (mid, b, [i for i in mine if i not in left])]


SPEECH_PAD_MS = 500  # silence kept around a chunk's speech: soft onsets and tails, and frames to learn silence from


def around_speech(a: int, b: int, words: list[Word], regions: list[tuple[int, int]]) -> tuple[int, int]:
    """The chunk a-b narrowed to its speech (its voiced regions and its words' own times) and
    SPEECH_PAD_MS either side. A chunk cut in the middle of a long pause carried seconds of
    noise: its cepstral mean (cmn batch) was mostly the noise's, and a sentence after 14 s of
    it did not align at all (two sentences 28 s apart: the second kept the fallback's times).
    Tuning seeds: connected 36/94 -> 34/96 ms, disfluent p90 508 -> 488, real unchanged."""
    inside = [r for r in regions if r[1] > a and r[0] < b]
    first = min([r[0] for r in inside] + [w.begin_ms for w in words])
    last = max([r[1] for r in inside] + [w.end_ms for w in words])
    return max(a, first - SPEECH_PAD_MS), min(b, last + SPEECH_PAD_MS)
