"""ASR across clips while the decoders go on: packs (CPU) and batches (GPU), in the jobs' order."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

from avstack.errors import UsageError
from avstack.io import read_json, write_json_atomic
from avstack.limits import cores
from avstack.manifest import ClipRecord
from avstack.preparation.asr_clock import AsrClock
from avstack.preparation.discover import ClipJob
from avstack.preparation.settings import ASR_MODES, PrepareSettings, cache_key
from avstack.preparation.stages import asr_cache_path, asr_settings_of, no_audio_asr

TAIL_PACKS = 2  # the last, partial pack of a packed job is split in this many


class AsrFeeder:
    """ASR across clips in this process while the decoders go on: clips arrive as their audio is
    ready, wait until a full pack (CPU) or batch (GPU) of one language is there, and are
    transcribed on one background thread (CTranslate2 releases the GIL). Clips are grouped in
    the jobs' order whatever order the workers finish in, so the same folder packs the same way.
    Each record leaves through `emit` with its `asr` (from the cache when there), or with the
    error of the group it failed with: only waiting clips are held, never the whole batch."""

    def __init__(
        self, jobs: list[ClipJob], s: PrepareSettings, out: Path, mode: str, emit: Callable[[ClipRecord], None]
    ) -> None:
        self.s, self.out, self.mode, self.emit = s, out, mode, emit
        self.order = deque(j.clip_id for j in asr_order(jobs, mode))
        self.jobs = {j.clip_id: j for j in jobs}
        self.arrived: dict[str, ClipRecord] = {}
        self.pending: dict[object, list[ClipRecord]] = {}
        self.made: dict[object, int] = {}  # groups sent so far, per settings
        # batched: each settings' batch sizes, planned on how many of the jobs share them (batch_sizes)
        counts: dict[object, int] = {}
        for j in jobs:
            key = asr_settings_of(j, s)
            counts[key] = counts.get(key, 0) + 1
        self.sizes = {key: batch_sizes(n, s.asr_batch) for key, n in counts.items()}
        self.samples: dict[str, Any] = {}  # packed: a waiting clip's audio, read once
        self.seconds: dict[str, float] = {}  # packed: what it takes of a window
        # packs side by side, one per core (each transcription keeps its fixed threads, so the
        # words do not move); a GPU batch takes the device alone
        parallel = 1 if mode == "batched" else cores()
        self.aligners = ExitStack()
        if parallel > 1:
            from avstack.asr.models import set_replicas

            set_replicas(parallel)
        # the acoustic aligner in processes, one per core: in a GPU batch too, whose clips were
        # aligned one after another on this thread (benchmarks/gpu.py on an H200, 43 short clips:
        # batched ASR 14 s with the aligner, 5 s for the transcriber alone); the same words
        from avstack.asr import acoustic  # the ASR package is heavy: only when ASR runs

        if cores() > 1 and self.s.asr_aligner in ("auto", "acoustic") and acoustic.available():
            self.aligners.enter_context(acoustic.in_processes(cores()))
        # the transcriber's threads hear a group and hand its clips to the finishers (the guards and
        # the aligner, which sends the search to its processes): the next group is heard while the
        # last is aligned, and a clip's words depend on that clip alone there (asr.batch)
        finishers = max(1, cores())
        self.pool = ThreadPoolExecutor(parallel, thread_name_prefix="avstack-transcriber")
        self.finishers = ThreadPoolExecutor(finishers, thread_name_prefix="avstack-aligner")
        self.futures: list[Future[None]] = []
        self.finishing: list[Future[None]] = []
        self.emitting = threading.Lock()  # the manifest is written by one finisher at a time
        self.clock = AsrClock(parallel, finishers)
        self.aligner_cpu_from = self._aligner_cpu_s()

    def add(self, rec: ClipRecord) -> None:
        self.arrived[rec.clip_id] = rec
        while self.order and self.order[0] in self.arrived:
            cid = self.order.popleft()
            self._take(self.jobs.pop(cid), self.arrived.pop(cid))

    def _take(self, job: ClipJob, rec: ClipRecord) -> None:
        if rec.error:
            self._emit(rec)
            return
        if not rec.audio:
            self._emit(replace(rec, asr=no_audio_asr(self.s)))
            return
        settings = asr_settings_of(job, self.s)
        if self.mode == "packed":  # packs are planned on each clip's speech span: read it now
            import soundfile as sf

            from avstack import asr

            try:
                samples = sf.read(self.out / rec.audio["path"], dtype="float32")[0]
            except Exception as exc:  # this clip fails; the rest go on
                self._emit(rec.failed(exc))
                return
            self.samples[rec.clip_id] = samples
            self.seconds[rec.clip_id] = asr.packed_seconds(samples)
        items = [*self.pending.get(settings, []), rec]
        while ready := self._ready(items, settings):  # the same groups on every run
            self.futures.append(self.pool.submit(self._run, settings, items[:ready]))
            self.made[settings] = self.made.get(settings, 0) + 1
            items = items[ready:]
        self.pending[settings] = items

    def _ready(self, items: list[ClipRecord], settings: Any) -> int:
        """How many of the waiting clips make the next full group: the next planned batch (see
        batch_sizes; past the plan, full batches), or a pack that the next clip could not join."""
        from avstack import asr

        if self.mode == "batched":
            planned, made = self.sizes.get(settings, []), self.made.get(settings, 0)
            size = planned[made] if made < len(planned) else self.s.asr_batch
            return size if len(items) >= size else 0
        packs = asr.plan_packs([self.seconds[rec.clip_id] for rec in items])
        return len(packs[0]) if len(packs) > 1 else 0

    def finish(self) -> None:
        for settings, items in self.pending.items():
            for group in self._last_groups(items):
                self.futures.append(self.pool.submit(self._run, settings, group))
        self.pending = {}
        try:
            for f in self.futures:
                f.result()
            self.pool.shutdown()  # every group heard: every finisher queued
            for f in self.finishing:
                f.result()
        finally:
            self.pool.shutdown()
            self.finishers.shutdown()
            self.aligners.close()
            self.clock.stop(self._aligner_cpu_s() - self.aligner_cpu_from)

    def _last_groups(self, items: list[ClipRecord]) -> list[list[ClipRecord]]:
        """The clips left at the end (one pack that never filled): split into TAIL_PACKS smaller
        packs, so the job's tail does not run on one core while the others idle. A fixed number,
        never the cores: the split depends only on the clips (their order and speech spans), so a
        clip's words are the same on every run and every machine."""
        parts = min(TAIL_PACKS, len(items)) if self.mode == "packed" else 1
        if parts <= 1:
            return [items] if items else []
        total = sum(self.seconds[rec.clip_id] for rec in items)
        groups: list[list[ClipRecord]] = [[]]
        used = 0.0
        for rec in items:
            if groups[-1] and used >= total * len(groups) / parts:
                groups.append([])
            groups[-1].append(rec)
            used += self.seconds[rec.clip_id]
        return groups

    def _run(self, settings: Any, items: list[ClipRecord]) -> None:
        """Hear one group (a batch, or the clips of one or more packs) on this transcriber thread,
        and queue each clip's finishing: a clip's words in it depend on the whole group, so the
        group's audio is part of each member's cache key."""
        from avstack import asr

        group = cache_key([(rec.audio or {})["sha256"] for rec in items])
        paths = [asr_cache_path(rec.audio or {}, settings, self.out, self.mode, group) for rec in items]
        cached = [read_json(p) for p in paths]
        waiting = [self.samples.pop(rec.clip_id, None) for rec in items]
        if all(c is not None for c in cached):
            for rec, c, path in zip(items, cached, paths):
                self._emit(replace(rec, asr=asr.transcript_from_ecog(c, str(path))))
            return
        began = time.perf_counter()
        try:
            import soundfile as sf

            clips = [
                w if w is not None else sf.read(self.out / (rec.audio or {})["path"], dtype="float32")[0]
                for rec, w in zip(items, waiting)
            ]
            if self.mode == "batched":
                heard = asr.hear_batch(clips, settings, batch_size=self.s.asr_batch)
            else:
                heard = asr.hear_packed(clips, settings)
        except Exception as exc:  # this group's clips fail; the rest go on
            for rec in items:
                self._emit(rec.failed(exc))
            return
        ended = time.perf_counter()
        self.clock.heard([(rec.clip_id, len(c) / asr.RATE) for rec, c in zip(items, clips)], began, ended)
        for rec, path, h in zip(items, paths, heard):
            self.finishing.append(self.finishers.submit(self._finish, rec, path, h, ended))

    def _finish(self, rec: ClipRecord, path: Path, heard: Any, queued: float) -> None:
        """One clip's CPU part on a finisher thread: its guards and aligner, its cache, its line."""
        from avstack import asr

        began, cpu = time.perf_counter(), time.thread_time()
        try:
            tr = heard if isinstance(heard, asr.Transcript) else asr.finish(heard)
        except Exception as exc:  # this clip fails; the rest go on
            self._emit(rec.failed(exc))
            return
        aligned, cpu = time.perf_counter(), time.thread_time() - cpu
        write_json_atomic(path, tr.to_ecog())
        self._emit(replace(rec, asr=tr))
        self.clock.finished(rec.clip_id, queued, began, aligned, time.perf_counter(), cpu)

    @staticmethod
    def _aligner_cpu_s() -> float:
        from avstack.asr.pool_cpu import process_cpu_seconds

        return process_cpu_seconds()

    def _emit(self, rec: ClipRecord) -> None:
        with self.emitting:
            self.emit(rec)


def batch_sizes(n: int, most: int) -> list[int]:
    """The batch sizes of `n` clips: 1, 2, 4, ... up to `most` at the start, full batches, and the
    same steps down at the end (with fewer clips, as far as they go). At the start the device
    begins on the first clip decoded instead of waiting for `most` (the simulated device, 7 short
    clips on 2 cores: the first batch waited 1.0 s for all seven); at the end the last clips are
    heard and aligned while the rest are, instead of a full batch heard alone while the cores
    wait. The sizes depend on the count alone, never on timing: a clip's batch, hence its words,
    is the same on every run."""
    head: list[int] = []
    step, left = 1, n
    while step < most and left >= 2 * step:
        head.append(step)
        left -= 2 * step
        step *= 2
    middle = [most] * (left // most) + ([left % most] if left % most else [])
    return head + middle + head[::-1]


def asr_order(jobs: Sequence[ClipJob], mode: str) -> list[ClipJob]:
    """The order clips meet ASR across clips: by clip id, whatever order an executor ran them in
    (batches and packs are then the same on every run); packed takes the folders in turn (an
    EcoG folder holds one instruction type, and clips saying the same thing prime each other)."""
    from avstack import asr

    ordered = sorted(jobs, key=lambda j: j.clip_id)
    if mode != "packed":
        return ordered
    folders = [j.task_template or Path(j.clip_id).parent.as_posix() for j in ordered]
    return [ordered[i] for i in asr.interleave(folders)]


def asr_mode(s: PrepareSettings) -> str:
    """single (each clip in its worker), batched (GPU) or packed, once the job plan has resolved
    `auto` (avstack.jobplan: the one place that chooses)."""
    if s.asr_mode not in ASR_MODES:
        raise UsageError(f"asr_mode: expected one of {', '.join(ASR_MODES)}, got {s.asr_mode!r}")
    from avstack.asr.models import COMPUTE_TYPES  # the ASR package is heavy: only when asked

    if s.asr_compute not in COMPUTE_TYPES:
        raise UsageError(f"asr_compute: expected one of {', '.join(COMPUTE_TYPES)}, got {s.asr_compute!r}")
    if "asr" not in s.anchors or s.asr_mode == "auto":
        return "single"
    return s.asr_mode
