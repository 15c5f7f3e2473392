"""`prepare`: decode clips once, cache frames/audio/ASR by content, write a manifest.

The manifest is rebuilt from the cached results of the stages, so an interrupted run loses
nothing and trusts nothing half-written."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from multiprocessing import get_context
from pathlib import Path

from avstack.errors import UsageError
from avstack.io import DataError, Progress, write_json_atomic
from avstack.manifest import PREPARED_FORMAT as FORMAT  # 2: one clock per clip (streams, damage); older folders refused
from avstack.manifest import ClipRecord, ManifestWriter
from avstack.preparation.clip_halves import AUDIO, ClipJoiner, crashed_part, part_order, prepare_part
from avstack.preparation.discover import VIDEO_SUFFIXES, ClipJob, Layout, discover_all
from avstack.preparation.executors.local import map_surviving
from avstack.preparation.feeder import AsrFeeder, asr_mode, asr_order
from avstack.preparation.jobplan import JobPlan, plan_job
from avstack.preparation.settings import PrepareSettings
from avstack.preparation.stages import crashed_record, prepare_clip
from avstack.profiling import merged, profiled, stage
from avstack.profiling import summarize as summarize_profile
from avstack.version import __version__


@dataclass
class PrepareReport:
    """What a prepare did: counts and the failed records (the records themselves are in the
    manifest, read on demand: the driver never holds them all)."""

    manifest: Path
    count: int = 0
    cache_hits: int = 0
    failed: list[ClipRecord] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # files of a plain folder that are not videos by name
    profile: dict = field(default_factory=dict)  # wall and CPU time per stage (avstack.profiling.summarize)
    # "clip: video stream 3 of 0, 3 (why)": each clip whose file offered several streams of a kind
    stream_choices: list[str] = field(default_factory=list)

    @property
    def records(self) -> list[ClipRecord]:
        from avstack.manifest import load_manifest

        return load_manifest(self.manifest.parent)

    def summary_lines(self, out: Path, shown: int = 20) -> tuple[list[str], list[str]]:
        """What `avstack prepare` prints: (stdout lines, stderr lines): counts and time, files with
        several streams, skipped files, failed clips (at most `shown` of each list)."""
        from avstack.profiling import line

        n, bad = self.count, self.failed
        said = [f"prepared {n - len(bad)}/{n} clips into {out} ({self.cache_hits} from cache)"]
        if self.profile.get("stages"):
            said.append(line(self.profile))
        said += [f"  streams {c}" for c in self.stream_choices[:shown]]
        if len(self.stream_choices) > shown:
            said.append(f"  ... and {len(self.stream_choices) - shown} more clips with several streams of a kind")
        warned = [
            f"  skipped {name}: not a video by its name (--include GLOB to take it)" for name in self.skipped[:shown]
        ]
        if len(self.skipped) > shown:
            warned.append(f"  ... and {len(self.skipped) - shown} more skipped files")
        for rec in bad:
            err = rec.error or {}
            warned.append(f"  FAILED {rec.clip_id}: {err.get('type')}: {err.get('message')}")
        return said, warned


EXECUTORS = ("local", "ray")
# how far each clip's audio part runs ahead of the frames parts, in clips per worker (plus one
# batch): enough that the transcriber always has the next group's sound, few enough that only a
# handful of transcribed clips wait for their frames
AUDIO_LEAD_PER_WORKER = 2


def prepare(
    data_root: str | Path,
    out: str | Path,
    settings: PrepareSettings | None = None,
    workers: int | None = None,
    progress: Progress | None = None,
    layouts: Sequence[Layout] = (),
    executor: str = "local",
    ray_address: str | None = None,
    include: Sequence[str] = (),
) -> PrepareReport:
    """Prepare every clip below data_root into out/; writes out/manifest.jsonl as clips finish.
    `layouts` are the folder layouts to recognise (a task's, e.g. EcoG's); else a plain folder of
    videos. `executor`: `local` (worker processes here) or `ray` (Ray Data on a cluster, the same
    stage functions; see avstack.preparation.executors.ray)."""
    if executor not in EXECUTORS:
        raise UsageError(f"--executor must be one of {', '.join(EXECUTORS)}; found {executor!r}")
    s = settings or PrepareSettings()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    jobs, skipped = discover_all(data_root, layouts, s.lang if s.lang not in (None, "auto") else None, include)
    if not jobs:
        raise DataError(
            f"no clips found under {data_root}: no task folder layout (EcoG's 指令N folders) and no video "
            f"files ({', '.join(VIDEO_SUFFIXES)})"
        )
    asr_mode(s)  # an unknown mode is refused before any work
    plan = plan_job(
        [Path(j.path) for j in jobs],
        workers if executor == "local" else 1,
        s.threads,
        s.asr_mode,
        "asr" in s.anchors,
        "asr" in s.anchors and s.asr_mode == "auto" and _asr_on_gpu(s),
        local=executor == "local",
    )
    workers, s = plan.workers, replace(s, threads=plan.threads, asr_mode=plan.asr_mode)
    mode = asr_mode(s)
    if mode != "single":  # decoded in the order ASR takes them, so packs fill while decoding goes on
        jobs = asr_order(jobs, mode)
    writer = ManifestWriter(out)
    started = time.perf_counter()
    profiles: list[dict] = []
    choices: list[str] = []

    def add(rec: ClipRecord) -> None:
        choices.extend(stream_choices(rec))
        with profiled() as writing:  # the driver's own share: the manifest line
            with stage("writing"):
                writer.add(rec)
        profiles.append(merged(rec.profile, writing))

    def run(stage_settings: PrepareSettings) -> Iterable[ClipRecord]:
        if executor == "ray":
            from avstack.preparation.executors.ray import run_ray

            return run_ray(jobs, stage_settings, out, ray_address, progress, asr_on_gpu=gpu_actors)
        return _run_jobs(jobs, stage_settings, out, workers or 1, progress)

    # ASR per clip in the stage (single; batched on a Ray cluster's GPU actors), else here across
    # clips: packs and CPU batches are composed in the jobs' order, whatever executor decodes
    gpu_actors = executor == "ray" and mode == "batched" and _ray_gpus(ray_address) > 0
    asr_thread = None
    if mode == "single" or gpu_actors:
        for rec in run(s):
            add(rec)
    else:
        # decoders in the workers; ASR here, across clips, while they go on
        media_only = replace(s, anchors=tuple(dict.fromkeys([*(a for a in s.anchors if a != "asr"), "audio"])))
        if executor == "local":  # each clip's sound ahead of frames, so the transcriber starts at once
            joiner = ClipJoiner(add)
            feeder = AsrFeeder(jobs, s, out, mode, joiner.heard)
            parts = _run_parts(jobs, media_only, out, workers or 1, feeder.add)
            for rec in (progress or (lambda it, n: it))(parts, len(jobs)):
                joiner.framed(rec)
            feeder.finish()
            if joiner.waiting():  # every part returns once (map_surviving) and the feeder emits each
                raise RuntimeError(f"prepare: clips left with one part of two: {', '.join(joiner.waiting()[:5])}")
        else:
            feeder = AsrFeeder(jobs, s, out, mode, add)
            for rec in run(media_only):
                feeder.add(rec)
            feeder.finish()
        asr_thread = feeder.clock.summary()
    manifest = writer.finish()
    profile = summarize_profile(profiles, time.perf_counter() - started, workers or 1)
    if asr_thread is not None:  # ASR across clips: where the feeder's time went (preparation.asr_clock)
        profile["asr_thread"] = asr_thread
    _write_prepare_json(out, data_root, s, writer.count, len(writer.failed), executor, plan, profile)
    return PrepareReport(manifest, writer.count, writer.cache_hits, writer.failed, skipped, profile, choices)


def stream_choices(rec: ClipRecord) -> list[str]:
    """A line for each kind of stream the clip's file held several of, or was asked for by index."""
    lines = []
    for kind, chosen in (rec.streams or {}).items():
        if isinstance(chosen, dict) and "why" in chosen:
            of = ", ".join(str(i) for i in chosen.get("of", []))
            lines.append(f"{rec.clip_id}: {kind} stream {chosen.get('index')} of {of} ({chosen['why']})")
    return lines


def _asr_on_gpu(s: PrepareSettings) -> bool:
    from avstack import asr

    return asr.pick_device(s.asr_device, s.asr_compute)[0] == "cuda"


def _ray_gpus(address: str | None) -> int:
    from avstack.preparation.executors.ray import cluster_gpus

    return cluster_gpus(address)


def _run_jobs(
    jobs: list[ClipJob],
    s: PrepareSettings,
    out: Path,
    workers: int,
    progress: Progress | None,
) -> Iterable[ClipRecord]:
    wrap = progress or (lambda it, n: it)
    if workers <= 1:
        yield from wrap((prepare_clip(j, s, out) for j in jobs), len(jobs))
        return
    # spawn: decoder and CTranslate2 threads do not survive a fork safely
    ctx = get_context("spawn")
    run_one = partial(prepare_clip, s=s, out=out)
    results = map_surviving(run_one, jobs, workers, ctx, crashed_record, _init_worker, (os.getpid(), _warm_model(s)))
    yield from wrap(results, len(jobs))


def _run_parts(
    jobs: list[ClipJob], s: PrepareSettings, out: Path, workers: int, heard: Callable[[ClipRecord], None]
) -> Iterator[ClipRecord]:
    """Each clip's audio part (to `heard` as it comes) and frames part (yielded: one per clip, for
    the progress bar), audio parts AUDIO_LEAD clips ahead (preparation.clip_halves)."""
    lead = AUDIO_LEAD_PER_WORKER * workers + s.asr_batch
    order = part_order(jobs, lead)
    run_one = partial(prepare_part, s=s, out=out)
    if workers <= 1:
        results: Iterable[tuple[str, ClipRecord]] = (run_one(p) for p in order)
    else:
        ctx = get_context("spawn")
        results = map_surviving(run_one, order, workers, ctx, crashed_part, _init_worker, (os.getpid(), None))
    for kind, rec in results:
        if kind == AUDIO:
            heard(rec)
        else:
            yield rec


def _init_worker(parent_pid: int, warm: tuple[str, str, int, str] | None = None) -> None:
    from avstack.lifeline import tie_to_parent

    tie_to_parent(parent_pid)  # a killed prepare leaves no worker writing on
    if warm is not None:
        from avstack.asr.models import warm_up

        # the model loads while the first clip's frames and audio decode: a worker's first
        # transcription no longer waits for the whole load (tiny.en: about a second a worker)
        warm_up(*warm)


def _warm_model(s: PrepareSettings) -> tuple[str, str, int, str] | None:
    """What a worker loads before its first clip asks: the transcriber, when this job's workers
    transcribe (ASR per clip in the stage)."""
    if "asr" not in s.anchors or asr_mode(s) != "single":
        return None
    return s.asr_model, s.asr_device, s.asr_threads, s.asr_compute


def _write_prepare_json(
    out: Path,
    data_root: str | Path,
    s: PrepareSettings,
    clips: int,
    failed: int,
    executor: str,
    plan: JobPlan,
    profile: dict,
) -> None:
    meta = {
        "format": FORMAT,
        "avstack_version": __version__,
        "data_root": str(Path(data_root).resolve()),
        "settings": asdict(s),
        "clips": clips,
        "failed": failed,
        "plan": plan.to_json(),  # what was chosen for this job, and why (avstack.jobplan)
        # where the time went: wall and CPU seconds per stage, summed over clips (avstack.profiling);
        # this run's, so it differs from run to run (the manifest does not)
        "profile": profile,
    }
    write_json_atomic(out / "prepare.json", meta | ({"executor": executor} if executor != "local" else {}))
