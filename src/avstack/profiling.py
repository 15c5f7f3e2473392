"""Where a clip's preparation spends its time: wall and CPU seconds per stage.

A stage is a `with stage("name"):` block anywhere below `prepare_clip` (hashing, probing, frames,
audio, the Whisper decode, the acoustic alignment, the fallback timing, writing). Time is charged
to the innermost open stage only, so stages nest without counting anything twice ("asr" holds
what the ASR does outside its decode, alignment and fallback). Outside a `profiled()` block a
stage costs one context-variable lookup and records nothing, so library callers pay nothing.

CPU time is the process's (`time.process_time`: every thread of it), which is the clip's own in a
prepare worker (one clip at a time per process); wall time is the stage's elapsed time. The
per-clip figures travel with the record (`ClipRecord.profile`, never in the manifest) and are
summed per stage in `prepare.json` and the end-of-run line (`summarize`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

# the stages in the order a clip goes through them (the end-of-run line keeps this order)
STAGES = (
    "hash",
    "probe",
    "frames",
    "audio",
    "asr read",
    "model load",
    "asr decode",
    "alignment",
    "fallback",
    "asr",
    "writing",
)


class _Profile:
    def __init__(self) -> None:
        self.totals: dict[str, list[float]] = {}
        self.open: list[list[Any]] = []  # [name, wall at (re)start, cpu at (re)start]

    def _charge(self, now: tuple[float, float]) -> None:
        name, wall, cpu = self.open[-1]
        into = self.totals.setdefault(name, [0.0, 0.0])
        into[0] += now[0] - wall
        into[1] += now[1] - cpu

    def enter(self, name: str) -> None:
        now = (time.perf_counter(), time.process_time())
        if self.open:
            self._charge(now)  # the outer stage pauses while this one runs
        self.open.append([name, *now])

    def leave(self) -> None:
        now = (time.perf_counter(), time.process_time())
        self._charge(now)
        self.open.pop()
        if self.open:
            self.open[-1][1:] = now  # the outer stage resumes


_current: ContextVar[_Profile | None] = ContextVar("avstack_profile", default=None)


@contextmanager
def stage(name: str) -> Iterator[None]:
    """Charge the time inside to `name` (when a profile is being taken)."""
    prof = _current.get()
    if prof is None:
        yield
        return
    prof.enter(name)
    try:
        yield
    finally:
        prof.leave()


@contextmanager
def profiled() -> Iterator[dict[str, tuple[float, float]]]:
    """Take a profile of the block: the dict yielded is filled on exit with stage -> (wall s, CPU s)."""
    prof = _Profile()
    token = _current.set(prof)
    result: dict[str, tuple[float, float]] = {}
    try:
        yield result
    finally:
        _current.reset(token)
        result.update({k: (round(w, 4), round(c, 4)) for k, (w, c) in prof.totals.items()})


def merged(*profiles: Mapping[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
    """Profiles added up stage by stage (one clip's parts, or many clips)."""
    out: dict[str, tuple[float, float]] = {}
    for prof in profiles:
        for name, (wall, cpu) in prof.items():
            w0, c0 = out.get(name, (0.0, 0.0))
            out[name] = (w0 + wall, c0 + cpu)
    return out


def summarize(per_clip: Sequence[Mapping[str, tuple[float, float]]], wall_s: float, workers: int) -> dict[str, object]:
    """The stages summed over clips (wall and CPU seconds, share of the summed wall), with the run's
    own wall time and worker count: summed stage time over workers x wall shows how busy they were."""
    totals = merged(*per_clip)
    summed = sum(w for w, _ in totals.values())
    order = [s for s in STAGES if s in totals] + sorted(set(totals) - set(STAGES))
    return {
        "wall_s": round(wall_s, 3),
        "workers": workers,
        "clips": len(per_clip),
        "stages": {
            s: {
                "wall_s": round(totals[s][0], 3),
                "cpu_s": round(totals[s][1], 3),
                "share_pct": round(100 * totals[s][0] / summed, 1) if summed else 0.0,
            }
            for s in order
        },
    }


def line(summary: Mapping[str, Any]) -> str:
    """The end-of-run line: each stage's wall seconds (summed over clips) and its share."""
    parts = [f"{name} {v['wall_s']:.1f}s ({v['share_pct']:.0f}%)" for name, v in summary.get("stages", {}).items()]
    clips, wall, workers = summary.get("clips", 0), summary.get("wall_s", 0), summary.get("workers", 1)
    head = f"stages over {clips} clips, {wall:.1f}s wall on {workers} workers"
    return head + (": " + ", ".join(parts) if parts else "") + _asr_thread_line(summary.get("asr_thread"))


def _asr_thread_line(asr: Mapping[str, Any] | None) -> str:
    """ASR across clips (prepare's feeder): where its time went, and how busy the transcriber was."""
    if not asr:
        return ""
    t = asr["total"]
    return (
        f"\nASR across clips, {asr['wall_s']:.1f}s wall: transcribing {t['transcribing_s']:.1f}s "
        f"(busy {100 * asr['transcriber_busy_share']:.0f}%), waiting for audio {t['waiting_for_audio_s']:.1f}s, "
        f"aligning {t['aligning_s']:.1f}s (queued {t['waiting_for_aligner_s']:.1f}s), writing {t['writing_s']:.1f}s"
    )
