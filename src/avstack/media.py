"""Media layer on PyAV: probe, frames at their true presentation times, audio.

Time is data: every frame carries `pts * time_base` relative to the video
stream start, never `index / fps`. Access by time (`sample_frames`) is kept
apart from access by index (`Frame.index` is only a label).
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
import cv2
import numpy as np

AUDIO_RATE = 16_000
THREAD_TYPES = ("AUTO", "FRAME", "SLICE", "NONE")


class MediaError(RuntimeError):
    """A clip that cannot be read; the message names the file."""


@dataclass(frozen=True)
class ClipInfo:
    path: str
    duration_ms: int
    fps: float  # nominal (average) frame rate
    vfr: bool
    frame_count: int
    coded_width: int
    coded_height: int
    width: int  # as displayed, after rotation
    height: int
    rotation: int  # counter-clockwise degrees from the display matrix
    has_audio: bool
    video_codec: str
    audio_codec: str | None
    last_pts_ms: int


@dataclass(frozen=True)
class Frame:
    index: int  # position in presentation order (a label, not a time)
    pts_ms: int  # true presentation time, ms from the video stream start
    image: np.ndarray  # RGB, upright as a viewer shows it

    @property
    def pts_s(self) -> float:
        return self.pts_ms / 1000


@dataclass(frozen=True)
class Sample:
    info: ClipInfo
    frames: list[Frame]  # one per distinct frame shown at the target times, in time order
    last: Frame  # the exact last frame of the clip


def ms(t: Fraction) -> int:
    """Round a time in seconds to whole ms (half up)."""
    return math.floor(t * 1000 + Fraction(1, 2))


@contextmanager
def open_video(path: str | os.PathLike[str]) -> Iterator[av.container.InputContainer]:
    try:
        container = av.open(str(path))
    except (av.FFmpegError, OSError) as exc:
        raise MediaError(f"{path}: cannot open ({exc})") from exc
    try:
        if not container.streams.video:
            raise MediaError(f"{path}: no video stream")
        yield container
    finally:
        container.close()


def _stream_start(stream: av.video.stream.VideoStream) -> int | None:
    return stream.start_time if stream.start_time is not None else None


def _packet_pts(container: av.container.InputContainer) -> list[int]:
    """Presentation timestamps of every video packet, sorted (demux only, no decode)."""
    stream = container.streams.video[0]
    pts = [p.pts for p in container.demux(stream) if p.pts is not None and p.size > 0]
    return sorted(pts)


def probe(path: str | os.PathLike[str]) -> ClipInfo:
    """Clip facts from the container, one demux pass and one decoded frame."""
    with open_video(path) as container:
        stream = container.streams.video[0]
        tb = stream.time_base
        pts = _packet_pts(container)
        if not pts or tb is None:
            raise MediaError(f"{path}: no video frames (zero-length or unreadable clip)")
        container.seek(0)
        rotation = _first_rotation(container)
        start = _stream_start(stream)
        start = pts[0] if start is None else min(start, pts[0])
        deltas = np.diff(np.asarray(pts, dtype=np.int64))
        vfr = bool(len(deltas) > 1 and (deltas.max() - deltas.min()) > 1)
        last_rel = Fraction(pts[-1] - start) * tb
        tail = Fraction(int(np.median(deltas))) * tb if len(deltas) else Fraction(0)
        duration = last_rel + tail
        rate = stream.average_rate or stream.guessed_rate
        fps = float(rate) if rate else (len(pts) / float(duration) if duration else 0.0)
        cw, ch = stream.codec_context.width, stream.codec_context.height
        w, h = (ch, cw) if rotation % 180 == 90 else (cw, ch)
        audio = container.streams.audio[0] if container.streams.audio else None
        return ClipInfo(
            path=str(path),
            duration_ms=ms(duration),
            fps=round(fps, 3),
            vfr=vfr,
            frame_count=len(pts),
            coded_width=cw,
            coded_height=ch,
            width=w,
            height=h,
            rotation=rotation,
            has_audio=audio is not None,
            video_codec=stream.codec_context.name,
            audio_codec=audio.codec_context.name if audio is not None else None,
            last_pts_ms=ms(last_rel),
        )


def _first_rotation(container: av.container.InputContainer) -> int:
    try:
        for frame in container.decode(video=0):
            return int(round(frame.rotation)) % 360
    except av.FFmpegError:
        return 0
    return 0


def target_times(duration_ms: int, fps: float = 2.0, max_frames: int | None = None) -> list[Fraction]:
    """t = 0, 1/fps, 2/fps, ... below the duration; uniformly thinned to max_frames."""
    if fps <= 0:
        raise ValueError(f"fps must be > 0, got {fps}")
    step = Fraction(1) / Fraction(fps).limit_denominator(1000)
    end = Fraction(duration_ms, 1000)
    times = []
    k = 0
    while k * step < end or k == 0:
        times.append(k * step)
        k += 1
    if max_frames is not None and 0 < max_frames < len(times):
        idx = np.linspace(0, len(times) - 1, max_frames).round().astype(int)
        times = [times[i] for i in idx]
    return times


def upright(rgb: np.ndarray, rotation: int) -> np.ndarray:
    """Apply the display matrix rotation (counter-clockwise degrees)."""
    k = (rotation // 90) % 4
    return np.ascontiguousarray(np.rot90(rgb, k)) if k else rgb


def _configure_threads(stream: av.video.stream.VideoStream, thread_type: str) -> None:
    if thread_type not in THREAD_TYPES:
        raise ValueError(f"thread_type must be one of {THREAD_TYPES}, got {thread_type!r}")
    if thread_type != "NONE":
        stream.thread_type = thread_type
        stream.thread_count = 0  # let FFmpeg pick from the core count


def sample_frames(
    path: str | os.PathLike[str],
    fps: float = 2.0,
    max_frames: int | None = None,
    times_ms: Iterable[int] | None = None,
    thread_type: str = "AUTO",
    info: ClipInfo | None = None,
    max_side: int | None = None,
) -> Sample:
    """Frames shown at the target times plus the exact last frame, one decode pass.

    The frame shown at time t is the last frame whose pts <= t (the first
    frame for t before it). Only frames that are kept are converted to RGB.
    """
    info = info or probe(path)
    if times_ms is not None:
        targets = sorted(Fraction(int(t), 1000) for t in times_ms)
    else:
        targets = target_times(info.duration_ms, fps, max_frames)
    with open_video(path) as container:
        stream = container.streams.video[0]
        _configure_threads(stream, thread_type)
        tb = stream.time_base or Fraction(1, 90_000)
        start = _stream_start(stream)
        kept: dict[int, Frame] = {}
        prev: tuple[int, Fraction, av.VideoFrame] | None = None
        ti = 0
        index = -1
        try:
            for index, frame in enumerate(container.decode(stream)):
                if frame.pts is None:
                    raise MediaError(f"{path}: frame {index} has no pts")
                if start is None:
                    start = frame.pts
                rel = Fraction(frame.pts - start) * tb
                while ti < len(targets) and targets[ti] < rel:
                    shown = prev if prev is not None else (index, rel, frame)
                    _keep(kept, shown, info.rotation, max_side)
                    ti += 1
                prev = (index, rel, frame)
        except av.FFmpegError as exc:
            if prev is None:
                raise MediaError(f"{path}: decoding failed before the first frame ({exc})") from exc
            raise MediaError(
                f"{path}: decoding failed after frame {index} ({exc}); clip is corrupt or truncated"
            ) from exc
        if prev is None:
            raise MediaError(f"{path}: no decodable video frames")
        if ti < len(targets):
            _keep(kept, prev, info.rotation, max_side)
        last = _keep(kept, prev, info.rotation, max_side)
    frames = sorted(kept.values(), key=lambda f: f.index)
    return Sample(info=info, frames=frames, last=last)


def _keep(
    kept: dict[int, Frame], shown: tuple[int, Fraction, av.VideoFrame], rotation: int, max_side: int | None
) -> Frame:
    index, rel, frame = shown
    if index not in kept:
        rgb = resize_max_side(upright(frame.to_ndarray(format="rgb24"), rotation), max_side)
        kept[index] = Frame(index=index, pts_ms=ms(rel), image=rgb)
    return kept[index]


def all_frame_times(path: str | os.PathLike[str]) -> list[int]:
    """Every frame's pts in ms, by a full decode (the reference for tests and checks)."""
    with open_video(path) as container:
        stream = container.streams.video[0]
        start = _stream_start(stream)
        out = []
        for frame in container.decode(stream):
            if start is None:
                start = frame.pts
            out.append(ms(Fraction((frame.pts or 0) - (start or 0)) * (stream.time_base or Fraction(1, 90_000))))
        return out


def load_audio(path: str | os.PathLike[str], rate: int = AUDIO_RATE) -> np.ndarray | None:
    """First audio stream as mono float32 at `rate` Hz; None when the clip has no audio."""
    try:
        container = av.open(str(path))
    except (av.FFmpegError, OSError) as exc:
        raise MediaError(f"{path}: cannot open ({exc})") from exc
    try:
        if not container.streams.audio:
            return None
        resampler = av.AudioResampler(format="flt", layout="mono", rate=rate)
        chunks = []
        try:
            for frame in container.decode(audio=0):
                for out in resampler.resample(frame):
                    chunks.append(out.to_ndarray().reshape(-1))
            for out in resampler.resample(None):
                chunks.append(out.to_ndarray().reshape(-1))
        except av.FFmpegError as exc:
            raise MediaError(f"{path}: audio decoding failed ({exc})") from exc
        if not chunks:
            return np.zeros(0, dtype=np.float32)
        return np.concatenate(chunks).astype(np.float32, copy=False)
    finally:
        container.close()


def resize_max_side(rgb: np.ndarray, max_side: int | None) -> np.ndarray:
    if not max_side:
        return rgb
    h, w = rgb.shape[:2]
    scale = max_side / max(h, w)
    if scale >= 1:
        return rgb
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    return cv2.resize(rgb, size, interpolation=cv2.INTER_AREA)


def encode_jpeg(rgb: np.ndarray, quality: int = 90, max_side: int | None = None) -> bytes:
    bgr = cv2.cvtColor(resize_max_side(rgb, max_side), cv2.COLOR_RGB2BGR)
    ok, buf = cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, int(quality)])
    if not ok:
        raise MediaError("JPEG encoding failed")
    return buf.tobytes()


def atomic_write(path: str | os.PathLike[str], data: bytes) -> None:
    """Write via a temp file in the same folder and rename: never a half file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_jpeg(path: str | os.PathLike[str], rgb: np.ndarray, quality: int = 90, max_side: int | None = None) -> None:
    atomic_write(path, encode_jpeg(rgb, quality, max_side))
