"""A clip in two parts when ASR runs across clips (the feeder): its audio, then its frames.

The transcriber needs only a clip's sound, and decoding it is a small part of a clip's work
(the frames are most of it). So the workers take each clip's audio part ahead of frames parts:
hash, probe, the 16 kHz WAV, handed to the feeder at once, so the device starts on the first
clip's sound instead of waiting for its frames (#67). The frames part is the usual frames stage.
The two meet again here, by clip, before the record is written: a manifest line always holds
both, whichever came first.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from pathlib import Path

from avstack.manifest import ClipRecord
from avstack.preparation.discover import ClipJob
from avstack.preparation.settings import PrepareSettings
from avstack.preparation.stages import audio_stage, built, crashed_record, prepare_clip
from avstack.profiling import merged, profiled, stage

AUDIO, FRAMES = "audio", "frames"
Part = tuple[ClipJob, str]


def part_order(jobs: Sequence[ClipJob], lead: int) -> list[Part]:
    """Every clip's audio part, each `lead` clips ahead of the frames parts: the device is fed
    from the start, and no more than `lead` clips wait for their frames (all audio first would
    hold a whole job's ASR until the frames came, and write no manifest line till then)."""
    order: list[Part] = [(j, AUDIO) for j in jobs[:lead]]
    for i, job in enumerate(jobs):
        if i + lead < len(jobs):
            order.append((jobs[i + lead], AUDIO))
        order.append((job, FRAMES))
    return order


def prepare_part(part: Part, s: PrepareSettings, out: Path) -> tuple[str, ClipRecord]:
    """One part of one clip (never raises: a failure is the part's record's `error`). `s` holds
    the media anchors only; ASR is the feeder's."""
    job, kind = part
    if kind == FRAMES:
        frames_only = replace(s, anchors=tuple(a for a in s.anchors if a not in ("audio", "asr")))
        return kind, prepare_clip(job, frames_only, out)
    with profiled() as profile:
        rec = _audio_part(job, s, out)
    return kind, replace(rec, profile=profile)


def _audio_part(job: ClipJob, s: PrepareSettings, out: Path) -> ClipRecord:
    return built(job, lambda rec, sha: _with_audio(rec, sha, job, s, out))


def _with_audio(rec: ClipRecord, sha: str, job: ClipJob, s: PrepareSettings, out: Path) -> ClipRecord:
    with stage("audio"):
        audio = audio_stage(job, sha, s, out, lambda: _probed(job, s))
    return replace(rec, audio=audio, damage=tuple((audio or {}).get("damage") or ()))


def _probed(job: ClipJob, s: PrepareSettings) -> dict[str, object]:
    """The clip's facts as the frames stage probes them (the same `describe`, the same streams)."""
    from avstack import media

    with stage("probe"):
        return asdict(media.probe(job.path, s.streams()))


def crashed_part(part: Part, why: str) -> tuple[str, ClipRecord]:
    return part[1], crashed_record(part[0], why)


class ClipJoiner:
    """Holds each clip's first part until its second comes, then hands `emit` the whole record:
    the frames part's, with the audio part's sound, ASR, damage and time added (or the first
    failure of the two). Parts arrive on the decoders' loop and the feeder's finisher threads."""

    def __init__(self, emit: Callable[[ClipRecord], None]) -> None:
        self.emit = emit
        self.frames: dict[str, ClipRecord] = {}
        self.heard_: dict[str, ClipRecord] = {}
        self.lock = threading.Lock()

    def framed(self, rec: ClipRecord) -> None:
        self._meet(rec, self.heard_, self.frames, lambda other: joined(rec, other))

    def heard(self, rec: ClipRecord) -> None:
        self._meet(rec, self.frames, self.heard_, lambda other: joined(other, rec))

    def _meet(
        self,
        rec: ClipRecord,
        partners: dict[str, ClipRecord],
        mine: dict[str, ClipRecord],
        join: Callable[[ClipRecord], ClipRecord],
    ) -> None:
        with self.lock:
            other = partners.pop(rec.clip_id, None)
            if other is None:
                mine[rec.clip_id] = rec
                return
            self.emit(join(other))

    def waiting(self) -> list[str]:
        """Clips with one part only (none once every part came back)."""
        return sorted(set(self.frames) | set(self.heard_))


def joined(frames: ClipRecord, audio: ClipRecord) -> ClipRecord:
    """One clip's record from its two parts. The frames part fails first, as in a whole clip's
    run, where the frames stage comes first."""
    both = merged(audio.profile, frames.profile)
    if frames.error or audio.error:
        failed = frames if frames.error else replace(frames, error=audio.error)
        return replace(failed, profile=both)
    return replace(frames, audio=audio.audio, asr=audio.asr, damage=frames.damage + audio.damage, profile=both)
