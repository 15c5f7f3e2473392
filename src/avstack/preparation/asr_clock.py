"""Where the time of prepare's ASR across clips goes (the feeder's threads), per clip and in
total: waiting for audio (the transcriber idle, no group ready), transcribing (a group's time,
shared among its clips by their audio length), waiting for the aligner (a heard clip queued),
aligning (the guards and the aligner), writing (the ASR cache and the manifest line). The
transcriber's busy share is its transcribing time over the feeder's wall time and threads: on a
GPU, how much of the time the device had work."""

from __future__ import annotations

import threading
import time

PARTS = ("waiting_for_audio_s", "transcribing_s", "waiting_for_aligner_s", "aligning_s", "writing_s")


class AsrClock:
    def __init__(self, transcriber_threads: int, aligner_threads: int) -> None:
        self.started = time.perf_counter()
        self.ended: float | None = None
        self.threads = (transcriber_threads, aligner_threads)
        self.free_since: dict[int, float] = {}  # a transcriber thread: when its last group ended
        self.clips: dict[str, dict[str, float]] = {}
        self.busy_s = 0.0
        self.groups = 0
        self.finish_cpu_s = 0.0  # the finisher threads' own CPU (guards, an in-process search)
        self.aligner_cpu_s = 0.0  # the aligner processes' CPU for this feeder's clips
        self.lock = threading.Lock()

    def heard(self, clips: list[tuple[str, float]], began: float, ended: float) -> None:
        """A group (clip id, audio seconds) transcribed from `began` to `ended` on this thread."""
        me = threading.get_ident()
        with self.lock:
            idle = max(0.0, began - self.free_since.get(me, self.started))
            self.free_since[me] = ended
            self.busy_s += ended - began
            self.groups += 1
            total = sum(s for _, s in clips)
            for cid, seconds in clips:
                share = seconds / total if total else 1.0 / len(clips)
                row = self._row(cid)
                row["waiting_for_audio_s"] += idle / len(clips)
                row["transcribing_s"] += (ended - began) * share

    def finished(self, clip_id: str, queued: float, began: float, aligned: float, written: float, cpu_s: float) -> None:
        """A clip's CPU part: queued for the aligner, aligned (`cpu_s` of its thread), its cache and
        manifest line written."""
        with self.lock:
            self.finish_cpu_s += cpu_s
            row = self._row(clip_id)
            row["waiting_for_aligner_s"] += began - queued
            row["aligning_s"] += aligned - began
            row["writing_s"] += written - aligned

    def stop(self, aligner_cpu_s: float = 0.0) -> None:
        self.ended = time.perf_counter()
        self.aligner_cpu_s = aligner_cpu_s

    def _row(self, clip_id: str) -> dict[str, float]:
        return self.clips.setdefault(clip_id, dict.fromkeys(PARTS, 0.0))

    def summary(self) -> dict[str, object]:
        wall = (self.ended or time.perf_counter()) - self.started
        total = {p: round(sum(r[p] for r in self.clips.values()), 3) for p in PARTS}
        return {
            "wall_s": round(wall, 3),
            "transcriber_threads": self.threads[0],
            "aligner_threads": self.threads[1],
            "groups": self.groups,
            "total": total,
            # CPU seconds: the finishers' threads, and the searches in the aligner's processes
            "finishing_cpu_s": round(self.finish_cpu_s, 3),
            "aligner_process_cpu_s": round(self.aligner_cpu_s, 3),
            # the transcriber's own time over what its threads had: on a GPU, the device's busy share
            "transcriber_busy_share": round(self.busy_s / (wall * self.threads[0]), 3) if wall > 0 else 0.0,
            "clips": {cid: {p: round(v, 3) for p, v in row.items()} for cid, row in sorted(self.clips.items())},
        }
