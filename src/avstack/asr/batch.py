"""Many clips through one model call (a GPU batch), in two parts: the device hears every clip
(`hear_batch`), then the CPU finishes each (`finish`: the guards and the aligner, on the clip's
own audio). prepare's feeder runs the parts on different threads, so the next batch is heard
while the last is aligned; `transcribe_batch` runs them one after the other. Either way a
clip's words are the same: `finish` depends on that clip alone."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from avstack.asr import acoustic
from avstack.asr.models import load_model
from avstack.asr.types import RATE, AsrSettings, Heard, Transcript, Word
from avstack.asr.whisper import finish_transcript, segment_words, silent_apart, transcribe

BATCH_MAX_S = 30  # one Whisper window per clip
GRID = RATE // 50  # Whisper's 20 ms frame, in samples


def transcribe_batch(
    clips: list[np.ndarray], settings: AsrSettings | None = None, batch_size: int = 16
) -> list[Transcript]:
    """Many clips through one model call, batched (BatchedInferencePipeline over the clips laid end to
    end, one window each). Needs a fixed language and clips up to 30 s; else clips go one by one."""
    heard = hear_batch(clips, settings or AsrSettings(), batch_size)
    todo = [k for k, h in enumerate(heard) if isinstance(h, Heard)]
    out = [h if isinstance(h, Transcript) else None for h in heard]
    # each clip's guards and alignment on its own audio: side by side where the aligner has
    # processes (asr.acoustic.in_processes), the same result as one after another
    with ThreadPoolExecutor(max(1, min(acoustic.pooled(), len(todo)))) as pool:
        for k, tr in zip(todo, pool.map(finish, [h for h in heard if isinstance(h, Heard)])):
            out[k] = tr
    return [t for t in out if t is not None]


def finish(heard: Heard) -> Transcript:
    """The CPU's part of one clip: the guards, and the words' edges from its own audio."""
    h = heard
    return finish_transcript(list(h.words), list(h.dropped), h.language, h.samples, h.settings, h.regions, h.own_audio)


def hear_batch(clips: list[np.ndarray], s: AsrSettings, batch_size: int = 16) -> list[Transcript | Heard]:
    """The device's part: each clip's words as the transcriber gave them (a Transcript already for
    a clip without speech, and for every clip where batching does not apply: no fixed language,
    or a clip over BATCH_MAX_S, which then go one by one, whole)."""
    lang = s.fixed_language
    if lang is None or any(len(c) > BATCH_MAX_S * RATE for c in clips):
        return [transcribe(c, s) for c in clips]
    from faster_whisper import BatchedInferencePipeline

    out, todo = silent_apart(clips, s, lang)
    if not todo:
        return [t for t in out if t is not None]
    # each clip starts on the 20 ms grid: faster-whisper rounds times to 10 ms on the joined
    # timeline, so an offset off the grid would move a clip's words with its neighbours' lengths
    lengths = [_on_grid(len(clips[i])) for i in todo]
    starts = np.cumsum([0] + lengths) / RATE
    windows = [{"start": float(starts[k]), "end": float(starts[k] + len(clips[i]) / RATE)} for k, i in enumerate(todo)]
    pipe = BatchedInferencePipeline(load_model(s.model, s.device, s.threads, 1, s.compute_type))
    joined = np.zeros(sum(lengths), np.float32)
    for k, i in enumerate(todo):
        at = int(round(starts[k] * RATE))
        joined[at : at + len(clips[i])] = clips[i]
    segments, _ = pipe.transcribe(
        joined,
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
        found = chunk_of.get(seg.seek)
        nearest = min(int(np.searchsorted(starts, seg.start + 1e-3, side="right")) - 1, len(todo) - 1)
        k = found if found is not None else nearest
        words[k].extend(segment_words(seg, float(starts[k]), dropped[k]))
    heard = {i: Heard(tuple(words[k]), tuple(dropped[k]), lang, clips[i], s) for k, i in enumerate(todo)}
    return [heard[i] if t is None else t for i, t in enumerate(out)]


def _on_grid(n: int) -> int:
    """`n` samples rounded up to whole 20 ms frames."""
    return -(-n // GRID) * GRID
