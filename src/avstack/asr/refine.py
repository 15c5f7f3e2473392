"""Speech energy: is there speech at all, where are the voiced regions, and word edges snapped to them."""

from __future__ import annotations

import numpy as np

from avstack.asr.types import RATE, Word

SPEECH_FLOOR_DB = -45.0  # a 30 ms window this loud may be speech, whatever the noise
QUIET_SPEECH_DB = -70.0  # under this nothing is heard (dither, digital silence)
OVER_NOISE_DB = 6.0  # a quieter clip has speech when its loudest window stands this far over its noise


CHUNK_WINDOWS = 65_536  # windows squared at a time: an hour's float64 squares would take 0.9 GB at once


def mean_squares(samples: np.ndarray, win: int) -> np.ndarray:
    """Each whole `win`-sample window's mean square (float64), computed a block of windows at a
    time: the same numbers as squaring the whole clip at once, without its float64 copies."""
    frames = samples[: len(samples) // win * win].reshape(-1, win)
    out = np.empty(len(frames), dtype=np.float64)
    for a in range(0, len(frames), CHUNK_WINDOWS):
        out[a : a + CHUNK_WINDOWS] = (frames[a : a + CHUNK_WINDOWS].astype(np.float64) ** 2).mean(axis=1)
    return out


def window_levels(samples: np.ndarray) -> tuple[float, float]:
    """(the loudest 30 ms window, the clip's noise: its 10th-percentile window) in dB."""
    db = 20 * np.log10(np.sqrt(mean_squares(samples, int(0.03 * RATE)) + 1e-12))
    return float(db.max()), float(np.percentile(db, 10))


def speech_present(samples: np.ndarray, floor_db: float = SPEECH_FLOOR_DB) -> bool:
    """Cheap guard before Whisper: is any 30 ms window loud enough to be speech at all? Loud
    enough is `floor_db`, or, for a quiet recording (a speaker far from the phone), standing
    OVER_NOISE_DB over the clip's own noise: steady noise varies by a dB or two from window to
    window, speech by tens. The absolute floor alone dropped a quiet Mandarin instruction
    (peaks at -38 dBFS) that plain faster-whisper heard whole."""
    if samples.size < RATE // 10:
        return False
    loudest, noise = window_levels(samples)
    return loudest > floor_db or (loudest > QUIET_SPEECH_DB and loudest - noise >= OVER_NOISE_DB)


def no_speech_why(samples: np.ndarray) -> str:
    """Why speech_present said no, with the levels it saw."""
    if samples.size < RATE // 10:
        return f"no speech energy: {samples.size} samples, under 0.1 s"
    loudest, noise = window_levels(samples)
    return (
        f"no speech energy: the loudest 30 ms at {loudest:.0f} dB, under {SPEECH_FLOOR_DB:.0f} dB and "
        f"{loudest - noise:.1f} dB over the clip's noise (speech stands {OVER_NOISE_DB:.0f} dB over it)"
    )


def voiced_regions(
    samples: np.ndarray, hop_ms: int = 10, merge_ms: int = 60, min_ms: int = 30
) -> list[tuple[int, int]]:
    """(onset, offset) in ms of stretches clearly above the noise floor."""
    hop = RATE * hop_ms // 1000
    if samples.size < hop * 5:
        return []
    db = 10 * np.log10(mean_squares(samples, hop) + 1e-12)
    floor, peak = np.percentile(db, 10), np.percentile(db, 99)
    if peak - floor < 15:
        return []  # no clear speech above the floor: nothing to snap to
    voiced = db > floor + max(10.0, 0.3 * (peak - floor))
    regions: list[list[int]] = []
    for i in np.flatnonzero(voiced):
        start, end = int(i) * hop_ms, (int(i) + 1) * hop_ms
        if regions and start - regions[-1][1] <= merge_ms:
            regions[-1][1] = end
        else:
            regions.append([start, end])
    return [(a, b) for a, b in regions if b - a >= min_ms]


SPEECH_MARGIN_S = 0.5  # kept around a clip's voiced speech when packed: soft onsets and tails


def speech_span(n: int, regions: list[tuple[int, int]], margin_s: float = SPEECH_MARGIN_S) -> tuple[int, int]:
    """The samples of a clip a pack carries: from its first voiced region to its last, with a
    margin (the whole clip when nothing is voiced). The silence before and after is padding
    Whisper would pay for in the window and a place for its times to slip into."""
    if not regions:
        return 0, n
    margin = int(margin_s * RATE)
    return max(0, regions[0][0] * RATE // 1000 - margin), min(n, regions[-1][1] * RATE // 1000 + margin)


def refine_edges(words: list[Word], samples: np.ndarray, reach_ms: int = 150) -> list[Word]:
    """Snap word edges to speech-energy edges where pauses make them visible.

    Whisper's word spans tile the audio (each word ends where the next begins), so pauses get
    split between neighbours. A voiced region is given to the one word whose midpoint it holds,
    else to the word it overlaps most (within `reach_ms`); a region holding several midpoints is
    continuous speech and is left alone. A word takes the span of the regions it was given.
    """
    return snap_to_regions(words, voiced_regions(samples), reach_ms)


def snap_to_regions(words: list[Word], regions: list[tuple[int, int]], reach_ms: int = 150) -> list[Word]:
    """refine_edges with the voiced regions given (the packed path finds them clip by clip)."""
    if not regions or not words:
        return words
    owned: dict[int, list[tuple[int, int]]] = {}
    for on, off in regions:
        mids = [i for i, w in enumerate(words) if on <= (w.begin_ms + w.end_ms) / 2 <= off]
        if len(mids) > 1:
            continue
        if mids:
            owner = mids[0]
        else:
            overlap = [min(off, w.end_ms + reach_ms) - max(on, w.begin_ms - reach_ms) for w in words]
            owner = int(np.argmax(overlap))
            if overlap[owner] <= 0:
                continue
        owned.setdefault(owner, []).append((on, off))
    snapped = [
        Word(w.text, min(a for a, _ in spans), max(b for _, b in spans), w.prob) if (spans := owned.get(i)) else w
        for i, w in enumerate(words)
    ]
    return in_order(snapped)  # interleaved regions: keep order, no overlap


def in_order(words: list[Word]) -> list[Word]:
    """No word begins before the one before it ends: an edge that would overlap its neighbour is
    moved to the neighbour's end (the word keeps at least zero length)."""
    out: list[Word] = []
    for w in words:
        if out and w.begin_ms < out[-1].end_ms:
            begin = out[-1].end_ms
            w = Word(w.text, begin, max(begin, w.end_ms), w.prob)
        out.append(w)
    return out


def bound_to_speech(words: list[Word], regions: list[tuple[int, int]]) -> list[Word]:
    """No word edge in silence: an edge outside every voiced region moves to the edge of the
    voiced speech the word overlaps. Whisper's alignment tiles the audio, so the first word of a
    stretch starts where the VAD's padding starts (up to 400 ms before the speech) and a last word
    runs on into the pause after it; the speech energy says where the talking is. Edges inside
    continuous speech are left to Whisper (there the energy has no edge to offer)."""
    if not regions:
        return words

    def inside(t: int) -> bool:
        return any(a <= t <= b for a, b in regions)

    out = []
    for w in words:
        over = [(a, b) for a, b in regions if a < w.end_ms and b > w.begin_ms]
        if not over:
            out.append(w)
            continue
        begin = w.begin_ms if inside(w.begin_ms) else max(w.begin_ms, over[0][0])
        end = w.end_ms if inside(w.end_ms) else min(w.end_ms, over[-1][1])
        out.append(Word(w.text, begin, max(begin, end), w.prob))
    return out


PAUSE_MS = 200  # longer than a stop closure (50-150 ms): a gap this long is a pause between words


def own_region_edges(words: list[Word], regions: list[tuple[int, int]], pause_ms: int = PAUSE_MS) -> list[Word]:
    """The edges of speech next to a pause belong to the words that reach them: the first word of
    a stretch of speech begins where the speech does, the last ends where it does, when a pause
    (`pause_ms`) separates that stretch from the next. Inside a stretch of several words the
    alignment cannot see the pause, and its warping path spreads the pause over a neighbour: the
    word after a comma starts in the pause (300 ms early), the last word ends before its sound
    has (about 100 ms early); nobody else said that speech. A word belongs to the region holding
    its midpoint, else to the one it overlaps most; a stretch with one word is left to
    snap_to_regions (applied to those too, it made word-by-word Mandarin's p90 52 -> 78 ms)."""
    if not regions or not words:
        return words

    def owner(w: Word) -> int | None:
        mid = (w.begin_ms + w.end_ms) / 2
        for r, (a, b) in enumerate(regions):
            if a <= mid <= b:
                return r
        overlap = [min(b, w.end_ms) - max(a, w.begin_ms) for a, b in regions]
        best = int(np.argmax(overlap))
        return best if overlap[best] > 0 else None

    edges = [[w.begin_ms, w.end_ms] for w in words]
    owners = [owner(w) for w in words]
    for r, (a, b) in enumerate(regions):
        mine = [i for i, o in enumerate(owners) if o == r]
        if len(mine) < 2:
            continue  # a word alone in its speech already has its edges (snap_to_regions)
        if r == 0 or a - regions[r - 1][1] >= pause_ms:
            edges[mine[0]][0] = a
        if r + 1 == len(regions) or regions[r + 1][0] - b >= pause_ms:
            edges[mine[-1]][1] = b
    return in_order([Word(w.text, begin, max(begin, end), w.prob) for w, (begin, end) in zip(words, edges)])


def _letters(w: Word) -> int:
    return max(1, sum(ch.isalnum() for ch in w.text))


def share_by_letters(words: list[Word], begin: int, end: int) -> list[Word]:
    """`words` laid over [begin, end] in order, each a share as long as its letters: where the
    alignment has no time to offer, a word's length in letters stands for its length in phones."""
    total = sum(_letters(w) for w in words)
    out, t = [], float(begin)
    for w in words:
        nxt = t + (end - begin) * _letters(w) / total
        out.append(Word(w.text, round(t), round(nxt), w.prob))
        t = nxt
    return out


def pull_into_speech(words: list[Word], regions: list[tuple[int, int]]) -> list[Word]:
    """Words lying wholly in silence go back into the speech next to them. In a pack, Whisper's
    segment end can run into the pause after a clip, and the alignment spreads the clip's last
    words over that pause (a second or more after the talking stopped): the words are right, their
    times are not. A run of such words joins the nearest voiced region; with the word already at
    that edge of the region they share the stretch from where that word begins to the region's
    edge, in order (or the whole region when no word has it)."""
    if not regions or not words:
        return words

    def speaking(w: Word) -> bool:
        return any(a < w.end_ms and b > w.begin_ms for a, b in regions)

    out = list(words)
    i = 0
    while i < len(out):
        if speaking(out[i]):
            i += 1
            continue
        j = i
        while j < len(out) and not speaking(out[j]):
            j += 1
        before = [r for r in regions if r[1] <= out[i].begin_ms]
        after = [r for r in regions if r[0] >= out[j - 1].end_ms]
        gap_before = out[i].begin_ms - before[-1][1] if before else None
        gap_after = after[0][0] - out[j - 1].end_ms if after else None
        if gap_before is not None and (gap_after is None or gap_before <= gap_after):
            a, b = before[-1]
            k = i - 1 if i > 0 and out[i - 1].end_ms > a else i  # the word already at that edge
            start = max(a, out[k].begin_ms) if k < i else a
            out[k:j] = share_by_letters(out[k:j], start, b)
        elif gap_after is not None:
            a, b = after[0]
            k = j + 1 if j < len(out) and out[j].begin_ms < b else j
            end = min(b, out[k - 1].end_ms) if k > j else b
            out[i:k] = share_by_letters(out[i:k], a, end)
            j = k
        i = j
    return out


PHONE_MS = 30  # one phone of three 10 ms HMM states: the shortest a word is said in


def between_timed(aligned: list[Word], fallback: list[Word], timed: list[bool]) -> list[Word]:
    """The aligned words, and each run of untimed words in the room its timed neighbours leave
    (from the end of the one before to the begin of the one after): the fallback's times where
    they fit; a run that sticks out is moved inside, whole, to the nearer side (its lengths kept);
    one longer than the room, or with a word under a phone, shares the room by letters from where
    it lies. The fallback does not know where the acoustics put the words around it (base placed
    the shared real take's "one" after a filler and a 1.3 s pause that the aligned word after it
    follows): no untimed word crosses a timed one, and none is left at 0 ms."""
    out = [a if t else f for a, f, t in zip(aligned, fallback, timed)]
    i = 0
    while i < len(out):
        if timed[i]:
            i += 1
            continue
        j = i
        while j < len(out) and not timed[j]:
            j += 1
        lo = out[i - 1].end_ms if i else 0
        hi = out[j].begin_ms if j < len(out) else max(lo, max(w.end_ms for w in out[i:j]))
        out[i:j] = _into_room(in_order(out[i:j]), lo, hi)
        i = j
    return in_order(ends_before_next(out))


def ends_before_next(words: list[Word]) -> list[Word]:
    """A word that runs into the next one so far that in_order (which moves the next one's begin)
    would leave the next under a phone ends where the next begins instead, when that leaves it a
    phone's length. An end can have been moved later by the speech energy (a voiceless tail,
    asr.acoustic.to_energy_edges) into a short word after it: "uh, up" on a held-out disfluent
    take left "up" 20 ms. Where the next word keeps a phone's length, nothing changes."""
    out = list(words)
    for k in range(len(out) - 1):
        a, b = out[k], out[k + 1]
        squeezes = a.end_ms > b.begin_ms and b.end_ms - a.end_ms < PHONE_MS
        if squeezes and b.begin_ms - a.begin_ms >= PHONE_MS:
            out[k] = Word(a.text, a.begin_ms, b.begin_ms, a.prob)
    return out


def _into_room(run: list[Word], lo: int, hi: int) -> list[Word]:
    """`run` (in order) placed inside [lo, hi] (see between_timed)."""
    begin, end = run[0].begin_ms, max(w.end_ms for w in run)
    shift = lo - begin if begin < lo else min(0, hi - end)
    if end - begin <= hi - lo:
        run = [Word(w.text, w.begin_ms + shift, w.end_ms + shift, w.prob) for w in run]
    if all(w.end_ms - w.begin_ms >= PHONE_MS for w in run) and run[0].begin_ms >= lo and run[-1].end_ms <= hi:
        return run
    start = min(max(run[0].begin_ms, lo), hi)
    stop = min(hi, max(run[-1].end_ms, start + PHONE_MS * len(run)))
    start = max(lo, min(start, stop - PHONE_MS * len(run)))
    return share_by_letters(run, start, stop)


def energy_db(samples: np.ndarray, hop_ms: int = 10) -> np.ndarray:
    """Frame energy in dB, one value per `hop_ms` frame."""
    return 10 * np.log10(mean_squares(samples, RATE * hop_ms // 1000) + 1e-12)


JUNCTION_REACH_MS = 30  # how far past the aligner's edges a syllable junction is looked for
SOUND_MARGIN_DB = 6.0  # above the noise floor: where a fading syllable is still heard
SILENT_RUN_MS = 50  # this long unheard in a gap is a pause, not a dip between two syllables
SOUND_REACH_MS = 300  # how far an edge next to a pause may move out to where the sound fades


def syllable_edges(units: list[Word], timed: list[bool], samples: np.ndarray) -> list[Word]:
    """Mandarin syllable edges from the speech energy, where the en-us aligner leaves gaps.

    A gap between two timed syllables with no silence in it (every frame heard, but for runs
    under SILENT_RUN_MS): they meet at the energy's lowest frame in the gap. A Mandarin syllable
    ends in its vowel or nasal, fading, and the next one's initial (a stop's closure, a
    fricative) starts low; the en-us silence model takes that fade and that closure for a pause,
    ending one syllable early and starting the next late, while the dip between them is where
    one stops and the other starts (gcin-voice speaker 3: p90 135 -> 88 ms).

    A gap with silence in it (a pause), and the take's first and last syllables: the edge moves
    out to where the sound fades into the noise floor (within SOUND_REACH_MS): a final vowel or
    nasal fades over 100-300 ms, under the voicing threshold but still heard (phrase-final
    syllables ended 100-250 ms early). Untimed syllables are not moved, nor their neighbours'
    edges towards them."""
    if not units:
        return units
    db = energy_db(samples)
    heard = db > np.percentile(db, 10) + SOUND_MARGIN_DB
    out = list(units)
    for k in range(-1, len(out)):
        a = out[k] if k >= 0 and timed[k] else None
        b = out[k + 1] if k + 1 < len(out) and timed[k + 1] else None
        if (k >= 0 and a is None) or (k + 1 < len(out) and b is None):
            continue
        lo, hi = (a.end_ms if a else 0) // 10, (b.begin_ms // 10 if b else len(db))
        if a and b and hi <= lo:
            continue
        if a and b and not _silent_run(heard[lo:hi]):
            lo2 = max(a.begin_ms + PHONE_MS, a.end_ms - JUNCTION_REACH_MS) // 10
            hi2 = min(b.end_ms - PHONE_MS, b.begin_ms + JUNCTION_REACH_MS) // 10
            if lo2 < hi2 <= len(db):
                at = (lo2 + int(np.argmin(db[lo2:hi2]))) * 10
                out[k], out[k + 1] = Word(a.text, a.begin_ms, at, a.prob), Word(b.text, at, b.end_ms, b.prob)
            continue
        reach = SOUND_REACH_MS // 10
        end, begin = lo, hi
        while a and end < min(hi, lo + reach) and heard[end]:
            end += 1
        while b and begin > max(lo, hi - reach, end) and heard[begin - 1]:
            begin -= 1
        if a:
            out[k] = Word(a.text, a.begin_ms, max(a.end_ms, end * 10), a.prob)
        if b:
            out[k + 1] = Word(b.text, min(b.begin_ms, begin * 10), b.end_ms, b.prob)
    return out


def _silent_run(heard: np.ndarray) -> bool:
    """Does `heard` (per 10 ms frame) hold a run of unheard frames of SILENT_RUN_MS or more?"""
    run = 0
    for h in heard:
        run = 0 if h else run + 1
        if run * 10 >= SILENT_RUN_MS:
            return True
    return False
