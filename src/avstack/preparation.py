"""`prepare`: decode clips once, cache frames/audio/ASR by content, write a manifest.

Each stage is a pure function of a clip record and the settings, writing into
a content-addressed cache under the output folder; the manifest is rebuilt
from those cached results, so an interrupted run loses nothing and trusts
nothing half-written.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from multiprocessing import get_context
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import __version__
from .discover import VIDEO_SUFFIXES, ClipJob, Layout, discover_all
from .io import DataError, Progress, read_json, sha256_file, write_json_atomic, write_wav_float
from .jobplan import JobPlan, cores, plan_job
from .limits import DEFAULT_MAX_PIXELS
from .manifest import PREPARED_FORMAT as FORMAT  # 2: one clock per clip (streams, damage); older folders refused
from .manifest import ClipRecord, FrameRef, ManifestWriter
from .survive import map_surviving

if TYPE_CHECKING:
    from . import media

# media (PyAV, numpy), images (OpenCV) and soundfile are imported by the stages that use them, in
# the workers: the driver of a frames job never loads them, so its start-up stays short

ANCHORS = ("frames", "audio", "asr")
ASR_MODES = ("auto", "single", "packed", "batched")
CACHE_VERSION = 2  # 2: frames and audio on the clip's one clock (the earliest stream start)


@dataclass(frozen=True)
class PrepareSettings:
    anchors: tuple[str, ...] = ANCHORS
    fps: float = 2.0
    max_frames: int | None = None
    max_side: int | None = None
    max_pixels: int | None = DEFAULT_MAX_PIXELS  # a clip with larger frames is refused (a bound on memory)
    jpeg_quality: int = 90
    thread_type: str = "AUTO"
    decode: str = "auto"  # auto | selective | sequential (frames are identical; speed differs)
    threads: int = 0  # decoder threads per worker (its spans side by side); 0: chosen (avstack.jobplan)
    asr_model: str = "tiny.en"
    asr_device: str = "auto"
    lang: str | None = None  # None/"auto": detect (or take the clip's own field)
    asr_beam_size: int = 5
    asr_vad: bool = True
    # auto: batched on a GPU, else single | single: each clip alone, in its worker | batched: one
    # window per clip, batched (BatchedInferencePipeline) | packed: short clips laid end to end, one
    # window for several (asr.transcribe_packed: much faster on a CPU; neighbours share context)
    asr_mode: str = "auto"
    asr_batch: int = 16  # clips per batch when batched
    asr_refine: bool = True  # snap word edges to speech-energy edges (see benchmarks/asr_timing.py)
    asr_threads: int = 1  # CPU threads of one transcription: fixed, so words never depend on workers or cores
    # what times the words (asr.AsrSettings.aligner): auto (= acoustic: phone HMMs on the clip's
    # own audio for English, else the transcriber's own), self, none, or a model name (asr.align)
    asr_aligner: str = "auto"
    asr_fillers: bool = False  # the fillers found ("um", "uh") reported as words too
    audio_track: int | None = None  # the audio track heard (0 = first); None: the default-marked one

    def frame_key(self, video_sha: str) -> str:
        return _key(
            {
                "v": CACHE_VERSION,
                "sha": video_sha,
                "fps": self.fps,
                "max_frames": self.max_frames,
                "max_side": self.max_side,
                "q": self.jpeg_quality,
                "audio_track": self.audio_track,  # the heard track can start the clip's clock
            }
        )


def parse_anchors(text: str) -> tuple[str, ...]:
    """`full` or a comma list of frames, audio, asr."""
    names = [a.strip() for a in text.split(",") if a.strip()]
    if names == ["full"]:
        return ANCHORS
    bad = [a for a in names if a not in ANCHORS]
    if bad or not names:
        raise ValueError(f"--anchors expects 'full' or a comma list of {', '.join(ANCHORS)}; found {text!r}")
    wanted = set(names) | ({"audio"} if "asr" in names else set())  # ASR needs the audio
    return tuple(a for a in ANCHORS if a in wanted)


def _key(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:20]


# --------------------------------------------------------------------------- stages


def frames_stage(job: ClipJob, video_sha: str, s: PrepareSettings, out: Path) -> dict[str, Any]:
    """Sample frames; cached under frames/<key>/ with a JSON index written last. A clip that
    fails part-way leaves no frames behind (the folder is removed), so nothing half-done is
    ever read."""
    from . import media

    key = s.frame_key(video_sha)
    index_path = out / "cache" / "frames" / f"{key}.json"
    cached = read_json(index_path)
    if cached is not None and all((out / f["path"]).is_file() for f in cached["frames"]):
        return cached | {"cache_hit": True}
    sampling = media.Sampling(
        s.fps,
        s.max_frames,
        None,
        s.max_side,
        s.thread_type,
        s.threads,
        s.decode,
        max_pixels=s.max_pixels,
        audio_track=s.audio_track,
    )
    try:
        written, note = media.with_fallback(lambda sp: _write_frames(job, sp, s, out, key), sampling)
    except BaseException:
        shutil.rmtree(out / "frames" / key, ignore_errors=True)
        raise
    info, decode_path, frames, damage = written
    result = {
        "info": asdict(info) | {"path": None},
        "frames": frames,
        "damage": damage,
        "last_frame": frames[-1],
        "decode_path": note or decode_path,
        "thread_type": s.thread_type,
    }
    write_json_atomic(index_path, result)
    return result | {"cache_hit": False}


def _write_frames(
    job: ClipJob, sampling: media.Sampling, s: PrepareSettings, out: Path, key: str
) -> tuple[media.ClipInfo, str, list[dict[str, Any]], list[dict[str, Any]]]:
    """Each frame is JPEG-encoded and written as it comes out of the decoder (on the decoding
    threads, or on a writer thread beside one decoder: OpenCV releases the GIL), then dropped:
    bounded memory."""
    from . import media
    from .images import write_jpeg

    rel_dir = Path("frames") / key
    shutil.rmtree(out / rel_dir, ignore_errors=True)  # a fallback's decode starts clean: no frame of the first left

    def write(frame: media.Frame) -> dict[str, Any]:
        rel = rel_dir / f"{frame.index:06d}.jpg"
        write_jpeg(out / rel, frame.image, s.jpeg_quality, None, "bgr")
        return {"index": frame.index, "pts_ms": frame.pts_ms, "path": rel.as_posix()}

    with media.FrameReader(job.path, sampling, pixel_format="bgr24") as reader:
        frames = reader.map_frames(write, sampling.threads)
        return reader.info, reader.decode_path, frames, reader.damage


def audio_stage(
    job: ClipJob, video_sha: str, s: PrepareSettings, out: Path, info: dict[str, Any]
) -> dict[str, Any] | None:
    """16 kHz mono audio of the heard track as WAV, sample 0 at the clip's time 0 (`info` is the
    frames stage's, which fixed the clock); keyed by the video and track; None without audio."""
    name = _key({"v": CACHE_VERSION, "sha": video_sha, "track": s.audio_track})
    rel = Path("audio") / f"{name}.wav"
    meta_path = out / "cache" / "audio" / f"{name}.json"
    cached = read_json(meta_path)
    if cached is not None and (cached.get("path") is None or (out / rel).is_file()):
        return cached if cached.get("path") else None
    if "audio" not in info.get("streams", {}):
        write_json_atomic(meta_path, {"path": None})
        return None
    # streamed: a 2 h clip never sits in memory (the WAV's bytes depend on the samples only)
    damage: list[dict[str, Any]] = []
    from . import media

    origin = media.origin_of(info["streams"])
    chunks = media.iter_audio(job.path, media.AUDIO_RATE, s.audio_track, origin, damage)
    n, sha = write_wav_float(out / rel, chunks, media.AUDIO_RATE)
    meta = {
        "path": rel.as_posix(),
        "sha256": sha,
        "rate": media.AUDIO_RATE,
        "duration_ms": int(n * 1000 / media.AUDIO_RATE),
        "damage": damage,
    }
    write_json_atomic(meta_path, meta)
    return meta


def _asr_settings(job: ClipJob, s: PrepareSettings) -> Any:
    from . import asr  # faster-whisper is heavy: import only when ASR is asked for

    return asr.AsrSettings(
        model=s.asr_model,
        device=s.asr_device,
        language=asr.language_setting(s.lang, job.lang, s.asr_model),
        beam_size=s.asr_beam_size,
        vad=s.asr_vad,
        refine=s.asr_refine,
        threads=s.asr_threads,
        # resolved here, so the cache key names the model that timed the words
        aligner=asr.aligner_setting(s.asr_aligner, s.asr_model),
        fillers=s.asr_fillers,
    )


def _asr_cache(audio: dict[str, Any], settings: Any, out: Path, mode: str = "single", group: str = "") -> Path:
    from . import asr

    # what the words depend on: the audio, the settings, the code, and what the engine ran on (a
    # node of another CPU kind computes its own); packed and batched words differ from a clip
    # transcribed alone, so each mode has its own entry
    parts = {
        "v": CACHE_VERSION,
        "audio": audio["sha256"],
        "asr": asdict(settings),
        "impl": asr.ASR_VERSION,
        "runtime": asr.runtime_of(settings),
    }
    if mode != "single":
        parts |= {"mode": mode, "group": group}
    return out / "cache" / "asr" / f"{_key(parts)}.json"


def asr_stage(job: ClipJob, audio: dict[str, Any], s: PrepareSettings, out: Path) -> dict[str, Any]:
    from . import asr

    settings = _asr_settings(job, s)
    path = _asr_cache(audio, settings, out)
    cached = read_json(path)
    if cached is not None:
        return cached
    import soundfile as sf

    samples, _ = sf.read(out / audio["path"], dtype="float32")
    result = asr.transcribe(samples, settings).to_ecog()
    write_json_atomic(path, result)
    return result


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
        self.pending: dict[Any, list[ClipRecord]] = {}
        self.samples: dict[str, Any] = {}  # packed: a waiting clip's audio, read once
        self.seconds: dict[str, float] = {}  # packed: what it takes of a window
        # packs side by side, one per core (each transcription keeps its fixed threads, so the
        # words do not move); a GPU batch takes the device alone
        parallel = 1 if mode == "batched" else cores()
        self.aligners = ExitStack()
        if parallel > 1:
            from .asr import acoustic
            from .asr.models import set_replicas

            set_replicas(parallel)
            if self.s.asr_aligner in ("auto", "acoustic") and acoustic.available():
                self.aligners.enter_context(acoustic.in_processes(parallel))
        self.pool = ThreadPoolExecutor(parallel)
        self.futures: list[Future[None]] = []

    def add(self, rec: ClipRecord) -> None:
        self.arrived[rec.clip_id] = rec
        while self.order and self.order[0] in self.arrived:
            cid = self.order.popleft()
            self._take(self.jobs.pop(cid), self.arrived.pop(cid))

    def _take(self, job: ClipJob, rec: ClipRecord) -> None:
        if rec.error:
            self.emit(rec)
            return
        if not rec.audio:
            self.emit(replace(rec, asr=_no_audio_asr(self.s)))
            return
        settings = _asr_settings(job, self.s)
        if self.mode == "packed":  # packs are planned on each clip's speech span: read it now
            import soundfile as sf

            from . import asr

            try:
                samples = sf.read(self.out / rec.audio["path"], dtype="float32")[0]
            except Exception as exc:  # this clip fails; the rest go on
                self.emit(rec.failed(exc))
                return
            self.samples[rec.clip_id] = samples
            self.seconds[rec.clip_id] = asr.packed_seconds(samples)
        items = [*self.pending.get(settings, []), rec]
        while ready := self._ready(items):  # one group at a time: the same groups on every run
            self.futures.append(self.pool.submit(self._run, settings, items[:ready]))
            items = items[ready:]
        self.pending[settings] = items

    def _ready(self, items: list[ClipRecord]) -> int:
        """How many of the waiting clips make the next full group: a batch, or a pack that the
        next clip could not join."""
        from . import asr

        if self.mode == "batched":
            return self.s.asr_batch if len(items) >= self.s.asr_batch else 0
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
        finally:
            self.pool.shutdown()
            self.aligners.close()

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
        """One group (a batch, or the clips of one or more packs): a clip's words in it depend on
        the whole group, so the group's audio is part of each member's cache key."""
        from . import asr

        group = _key([(rec.audio or {})["sha256"] for rec in items])
        paths = [_asr_cache(rec.audio or {}, settings, self.out, self.mode, group) for rec in items]
        cached = [read_json(p) for p in paths]
        waiting = [self.samples.pop(rec.clip_id, None) for rec in items]
        if all(c is not None for c in cached):
            for rec, c in zip(items, cached):
                self.emit(replace(rec, asr=c))
            return
        try:
            import soundfile as sf

            clips = [
                w if w is not None else sf.read(self.out / (rec.audio or {})["path"], dtype="float32")[0]
                for rec, w in zip(items, waiting)
            ]
            if self.mode == "batched":
                results = asr.transcribe_batch(clips, settings, batch_size=self.s.asr_batch)
            else:
                results = asr.transcribe_packed(clips, settings)
        except Exception as exc:  # this group's clips fail; the rest go on
            for rec in items:
                self.emit(rec.failed(exc))
            return
        for rec, path, tr in zip(items, paths, results):
            write_json_atomic(path, tr.to_ecog())
            self.emit(replace(rec, asr=tr.to_ecog()))


def asr_order(jobs: Sequence[ClipJob], mode: str) -> list[ClipJob]:
    """The order clips meet ASR across clips: by clip id, whatever order an executor ran them in
    (batches and packs are then the same on every run); packed takes the folders in turn (an
    EcoG folder holds one instruction type, and clips saying the same thing prime each other)."""
    from . import asr

    ordered = sorted(jobs, key=lambda j: j.clip_id)
    if mode != "packed":
        return ordered
    folders = [j.task_template or Path(j.clip_id).parent.as_posix() for j in ordered]
    return [ordered[i] for i in asr.interleave(folders)]


def asr_mode(s: PrepareSettings) -> str:
    """single (each clip in its worker), batched (GPU) or packed, once the job plan has resolved
    `auto` (avstack.jobplan: the one place that chooses)."""
    if s.asr_mode not in ASR_MODES:
        raise ValueError(f"asr_mode: expected one of {', '.join(ASR_MODES)}, got {s.asr_mode!r}")
    if "asr" not in s.anchors or s.asr_mode == "auto":
        return "single"
    return s.asr_mode


# --------------------------------------------------------------------------- one clip


def base_record(job: ClipJob) -> ClipRecord:
    return ClipRecord(
        clip_id=job.clip_id,
        video=job.video,
        task_template=job.task_template,
        lang=job.lang,
        scene=job.scene,
        source_asr=job.source_asr,
        eval_gt=job.eval_gt,
    )


INFO_FIELDS = ("duration_ms", "width", "height", "rotation", "vfr", "fps", "has_audio", "streams")


def prepare_clip(job: ClipJob, s: PrepareSettings, out: Path) -> ClipRecord:
    """The manifest record of one clip. Never raises: failures become `error`."""
    rec = base_record(job)
    if job.problem:
        return rec.failed(job.problem)
    try:
        sha = sha256_file(job.path)
        rec = replace(rec, sha256=sha)
        fr = frames_stage(job, sha, s, out)
        frames = tuple(FrameRef(**f) for f in fr["frames"])
        rec = replace(
            rec,
            **{k: fr["info"][k] for k in INFO_FIELDS},
            frames=frames,
            last_frame=FrameRef(**fr["last_frame"]),
            decode_path=fr["decode_path"],
            damage=tuple(fr.get("damage") or ()),
            cache_hit=fr["cache_hit"],
        )
        if job.check is not None and (problem := job.check(rec)):
            return rec.failed(problem)
        if "audio" in s.anchors or "asr" in s.anchors:
            audio = audio_stage(job, sha, s, out, fr["info"])
            rec = replace(rec, audio=audio, damage=rec.damage + tuple((audio or {}).get("damage") or ()))
            if "asr" in s.anchors:
                rec = replace(rec, asr=asr_stage(job, audio, s, out) if audio else _no_audio_asr(s))
    except Exception as exc:  # a bad clip is a recorded failure, never a crashed batch
        rec = rec.failed(exc)
    return rec


def _no_audio_asr(s: PrepareSettings) -> dict[str, Any]:
    return {"model": s.asr_model, "language": s.lang, "text": "", "words": [], "note": "clip has no audio track"}


# --------------------------------------------------------------------------- many clips


@dataclass
class PrepareReport:
    """What a prepare did: counts and the failed records (the records themselves are in the
    manifest, read on demand: the driver never holds them all)."""

    manifest: Path
    count: int = 0
    cache_hits: int = 0
    failed: list[ClipRecord] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # files of a plain folder that are not videos by name

    @property
    def records(self) -> list[ClipRecord]:
        from .manifest import load_manifest

        return load_manifest(self.manifest.parent)


EXECUTORS = ("local", "ray")


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
    stage functions; see avstack.ray_exec)."""
    if executor not in EXECUTORS:
        raise ValueError(f"--executor must be one of {', '.join(EXECUTORS)}; found {executor!r}")
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

    def run(stage_settings: PrepareSettings) -> Iterable[ClipRecord]:
        if executor == "ray":
            from .ray_exec import run_ray

            return run_ray(jobs, stage_settings, out, ray_address, progress, asr_on_gpu=gpu_actors)
        return _run_jobs(jobs, stage_settings, out, workers or 1, progress)

    # ASR per clip in the stage (single; batched on a Ray cluster's GPU actors), else here across
    # clips: packs and CPU batches are composed in the jobs' order, whatever executor decodes
    gpu_actors = executor == "ray" and mode == "batched" and _ray_gpus(ray_address) > 0
    if mode == "single" or gpu_actors:
        for rec in run(s):
            writer.add(rec)
    else:
        # decoders in the workers; ASR here, across clips, while they go on
        media_only = replace(s, anchors=tuple(dict.fromkeys([*(a for a in s.anchors if a != "asr"), "audio"])))
        feeder = AsrFeeder(jobs, s, out, mode, writer.add)
        for rec in run(media_only):
            feeder.add(rec)
        feeder.finish()
    manifest = writer.finish()
    _write_prepare_json(out, data_root, s, writer.count, len(writer.failed), executor, plan)
    return PrepareReport(manifest, writer.count, writer.cache_hits, writer.failed, skipped)


def _asr_on_gpu(s: PrepareSettings) -> bool:
    from . import asr

    return asr.pick_device(s.asr_device)[0] == "cuda"


def _ray_gpus(address: str | None) -> int:
    from .ray_exec import cluster_gpus

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
    results = map_surviving(run_one, jobs, workers, ctx, crashed_record, _init_worker, (os.getpid(),))
    yield from wrap(results, len(jobs))


def crashed_record(job: ClipJob, why: str) -> ClipRecord:
    """The record of a clip whose worker process kept dying on it."""
    return base_record(job).failed(f"{job.video}: {why}", kind="WorkerCrash")


def _init_worker(parent_pid: int) -> None:
    from .lifeline import tie_to_parent

    tie_to_parent(parent_pid)  # a killed prepare leaves no worker writing on


def _write_prepare_json(
    out: Path, data_root: str | Path, s: PrepareSettings, clips: int, failed: int, executor: str, plan: JobPlan
) -> None:
    meta = {
        "format": FORMAT,
        "avstack_version": __version__,
        "data_root": str(Path(data_root).resolve()),
        "settings": asdict(s),
        "clips": clips,
        "failed": failed,
        "plan": plan.to_json(),  # what was chosen for this job, and why (avstack.jobplan)
    }
    write_json_atomic(out / "prepare.json", meta | ({"executor": executor} if executor != "local" else {}))
