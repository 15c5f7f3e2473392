"""The stages of one clip (frames, audio, ASR), each a pure function of the clip and the settings
writing into a content-addressed cache under the output folder, and the clip's record from them.
Both executors (local processes, Ray) call down into these."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from avstack.io import read_json, sha256_file, write_json_atomic, write_wav_float
from avstack.manifest import ClipRecord, FrameRef
from avstack.preparation.discover import ClipJob
from avstack.preparation.settings import CACHE_VERSION, PrepareSettings, cache_key
from avstack.profiling import profiled, stage

if TYPE_CHECKING:
    from avstack import media


def frames_stage(job: ClipJob, video_sha: str, s: PrepareSettings, out: Path) -> dict[str, object]:
    """Sample frames; cached under frames/<key>/ with a JSON index written last. A clip that
    fails part-way leaves no frames behind (the folder is removed), so nothing half-done is
    ever read."""
    from avstack import media

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
        streams=s.streams(),
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
    with stage("writing"):
        write_json_atomic(index_path, result)
    return result | {"cache_hit": False}


def _write_frames(
    job: ClipJob, sampling: media.Sampling, s: PrepareSettings, out: Path, key: str
) -> tuple[media.ClipInfo, str, list[dict[str, object]], list[dict[str, object]]]:
    """Each frame is JPEG-encoded and written as it comes out of the decoder (on the decoding
    threads, or on a writer thread beside one decoder: OpenCV releases the GIL), then dropped:
    bounded memory."""
    from avstack import media
    from avstack.media.images import write_jpeg

    rel_dir = Path("frames") / key
    shutil.rmtree(out / rel_dir, ignore_errors=True)  # a fallback's decode starts clean: no frame of the first left

    def write(frame: media.Frame) -> dict[str, object]:
        rel = rel_dir / f"{frame.index:06d}.jpg"
        write_jpeg(out / rel, frame.image, s.jpeg_quality, None, "bgr")
        return {"index": frame.index, "pts_ms": frame.pts_ms, "path": rel.as_posix()}

    with stage("probe"), media.FrameReader(job.path, sampling, pixel_format="bgr24") as reader:
        with stage("frames"):  # decoding and JPEG encoding interleave on the decoding threads
            frames = reader.map_frames(write, sampling.threads)
        return reader.info, reader.decode_path, frames, reader.damage


def audio_stage(
    job: ClipJob, video_sha: str, s: PrepareSettings, out: Path, info_of: Callable[[], dict[str, Any]]
) -> dict[str, Any] | None:
    """16 kHz mono audio of the heard track as WAV, sample 0 at the clip's time 0 (`info_of` gives
    the clip's probed facts, which fix the clock: asked only when the cache has no WAV); keyed by
    the video and track; None without audio."""
    name = cache_key({"v": CACHE_VERSION, "sha": video_sha, "streams": s.streams().key()})
    rel = Path("audio") / f"{name}.wav"
    meta_path = out / "cache" / "audio" / f"{name}.json"
    cached = read_json(meta_path)
    if cached is not None and (cached.get("path") is None or (out / rel).is_file()):
        return cached if cached.get("path") else None
    info = info_of()
    if "audio" not in info.get("streams", {}):
        write_json_atomic(meta_path, {"path": None})
        return None
    # streamed: a 2 h clip never sits in memory (the WAV's bytes depend on the samples only)
    damage: list[dict[str, object]] = []
    from avstack import media

    origin = media.origin_of(info["streams"])
    chunks = media.iter_audio(job.path, media.AUDIO_RATE, s.streams(), origin, damage)
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


def asr_settings_of(job: ClipJob, s: PrepareSettings) -> Any:
    from avstack import asr  # faster-whisper is heavy: import only when ASR is asked for

    return asr.AsrSettings(
        model=s.asr_model,
        device=s.asr_device,
        language=asr.language_setting(s.lang, job.lang, s.asr_model),
        beam_size=s.asr_beam_size,
        vad=s.asr_vad,
        refine=s.asr_refine,
        threads=s.asr_threads,
        compute_type=s.asr_compute,
        # resolved here, so the cache key names the model that timed the words
        aligner=asr.aligner_setting(s.asr_aligner, s.asr_model),
        fillers=s.asr_fillers,
    )


def asr_cache_path(audio: dict[str, object], settings: Any, out: Path, mode: str = "single", group: str = "") -> Path:
    from avstack import asr
    from avstack.asr.runtime import words_depend_on

    # what the words depend on: the audio, the settings, the code, and what the engine ran on (a
    # node of another CPU kind computes its own); packed and batched words differ from a clip
    # transcribed alone, so each mode has its own entry
    parts = {
        "v": CACHE_VERSION,
        "audio": audio["sha256"],
        "asr": asdict(settings),
        "impl": asr.ASR_VERSION,
        "runtime": words_depend_on(asr.runtime_of(settings)),
    }
    if mode != "single":
        parts |= {"mode": mode, "group": group}
    return out / "cache" / "asr" / f"{cache_key(parts)}.json"


def asr_stage(job: ClipJob, audio: dict[str, Any], s: PrepareSettings, out: Path) -> Any:
    """The clip's words (asr.Transcript): from the ASR cache (read as untrusted input), else
    transcribed and cached."""
    from avstack import asr

    settings = asr_settings_of(job, s)
    path = asr_cache_path(audio, settings, out)
    cached = read_json(path)
    if cached is not None:
        return asr.transcript_from_ecog(cached, str(path))
    import soundfile as sf

    wav = out / audio["path"]
    with sf.SoundFile(wav) as f:
        n_samples = f.frames
    if asr.needs_windows(n_samples):  # a long clip: a window at a time, read as it is needed
        with stage("asr"):
            result = asr.transcribe_long(lambda a, b: read_wav(wav, a, b), n_samples, settings)
    else:
        with stage("asr read"):
            samples, _ = sf.read(wav, dtype="float32")
        with stage("asr"):
            result = asr.transcribe(samples, settings)
    with stage("writing"):
        write_json_atomic(path, result.to_ecog())
    return result


def read_wav(path: Path, first: int, end: int) -> Any:
    """Samples [first, end) of a prepared (mono) WAV, as float32."""
    import soundfile as sf

    with stage("asr read"):
        return sf.read(path, start=first, stop=end, dtype="float32")[0]


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
    """The manifest record of one clip, with where its time went (`profile`, not in the manifest).
    Never raises: failures become `error`."""
    with profiled() as profile:
        rec = _prepare_clip(job, s, out)
    return replace(rec, profile=profile)


def _prepare_clip(job: ClipJob, s: PrepareSettings, out: Path) -> ClipRecord:
    fr: dict[str, Any] = {}  # the frames stage's result, which the sound step reads the clip's facts from
    return built(
        job,
        lambda rec, sha: _with_frames(rec, sha, (job, s, out), fr),
        lambda rec, sha: _with_sound(rec, sha, (job, s, out), fr),
    )


def built(job: ClipJob, *steps: Callable[[ClipRecord, str], ClipRecord]) -> ClipRecord:
    """A clip's record: its listing's, hashed, then each step's in turn (each given the record so
    far and the file's sha256). Never raises: a problem the listing found, a step's `error`, or
    anything a step raises ends it, and the record so far is kept with the error (a bad clip is a
    recorded failure, never a crashed batch)."""
    rec = base_record(job)
    if job.problem:
        return rec.failed(job.problem)
    try:
        with stage("hash"):
            sha = sha256_file(job.path)
        rec = replace(rec, sha256=sha)
        for step in steps:
            rec = step(rec, sha)
            if rec.error:
                break
    except Exception as exc:
        rec = rec.failed(exc)
    return rec


Work = tuple[ClipJob, PrepareSettings, Path]  # a clip's job, what to prepare and where


def _with_frames(rec: ClipRecord, sha: str, work: Work, fr: dict[str, Any]) -> ClipRecord:
    """The frames stage's facts and frames (`fr` keeps the stage's result for the sound step)."""
    job, s, out = work
    fr.update(frames_stage(job, sha, s, out))
    rec = replace(
        rec,
        **{k: fr["info"][k] for k in INFO_FIELDS},
        frames=tuple(FrameRef(**f) for f in fr["frames"]),
        last_frame=FrameRef(**fr["last_frame"]),
        decode_path=fr["decode_path"],
        damage=tuple(fr.get("damage") or ()),
        cache_hit=fr["cache_hit"],
    )
    if job.check is not None and (problem := job.check(rec)):
        return rec.failed(problem)
    return rec


def _with_sound(rec: ClipRecord, sha: str, work: Work, fr: dict[str, Any]) -> ClipRecord:
    job, s, out = work
    if "audio" not in s.anchors and "asr" not in s.anchors:
        return rec
    with stage("audio"):
        audio = audio_stage(job, sha, s, out, lambda: fr["info"])
    rec = replace(rec, audio=audio, damage=rec.damage + tuple((audio or {}).get("damage") or ()))
    if "asr" in s.anchors:
        rec = replace(rec, asr=asr_stage(job, audio, s, out) if audio else no_audio_asr(s))
    return rec


def no_audio_asr(s: PrepareSettings) -> Any:
    """The transcript of a clip with no audio track (asr.types.Transcript)."""
    from avstack.asr.types import Transcript

    return Transcript.unheard(s.asr_model, s.lang, "clip has no audio track")


def crashed_record(job: ClipJob, why: str) -> ClipRecord:
    """The record of a clip whose worker process kept dying on it."""
    return base_record(job).failed(f"{job.video}: {why}", kind="WorkerCrash")
