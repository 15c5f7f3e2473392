"""How far a transcription has got, for whoever shows it: a long clip's ASR (an hour of audio is
minutes of work) reports each segment's end as faster-whisper yields it, so a progress bar can
advance within the clip, with an ETA, instead of one tick when the clip is done.

Listeners are process-wide (a prepare in this process, its ASR in a stage thread); a worker
process reports to its own, so only in-process transcription is shown."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Listener = Callable[[float, float], None]  # (seconds of audio transcribed, seconds in all)
_listeners: list[Listener] = []
_lock = threading.Lock()
_place = threading.local()  # this thread's window of a longer clip: (its start, the clip's length) in s


@contextmanager
def asr_progress(listener: Listener) -> Iterator[None]:
    """Tell `listener` how far every transcription in this process has got, while inside."""
    with _lock:
        _listeners.append(listener)
    try:
        yield
    finally:
        with _lock:
            _listeners.remove(listener)


@contextmanager
def within(start_s: float, clip_s: float) -> Iterator[None]:
    """Progress inside a window of a longer clip (asr.windows), reported on the clip's own scale:
    done is the window's start plus its own progress, of the clip's length (an honest ETA)."""
    before = getattr(_place, "window", None)
    _place.window = (start_s, clip_s)
    try:
        yield
    finally:
        _place.window = before


def heard(done_s: float, total_s: float) -> None:
    """Report progress to every listener (a listener's error never stops the transcription)."""
    window = getattr(_place, "window", None)
    if window is not None:
        done_s, total_s = window[0] + done_s, window[1]
    with _lock:
        listeners = list(_listeners)
    for listener in listeners:
        try:
            listener(done_s, total_s)
        except Exception:  # noqa: BLE001 - a display must not break the work it shows
            pass
