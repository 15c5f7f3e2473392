"""Media layer on PyAV: probe, frames at their true presentation times, audio.

Time is data: every frame carries `pts * time_base` relative to the video
stream start, never `index / fps`. Access by time (`sample_frames`) is kept
apart from access by index (`Frame.index` is only a label).
"""

from __future__ import annotations

import bisect
import math
import os
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import Any

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
    decode_path: str = "sequential"  # which decoding ran, and why
    decoded: int = 0  # frames the decoder produced
    frame_count: int = 0  # frames in the stream


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


@dataclass(frozen=True)
class PacketScan:
    """What one demux pass (no decoding) says about the video packets."""

    pts: list[int]  # sorted presentation timestamps, one per frame
    decode_order: list[tuple[int, bool]]  # (pts, is keyframe) in decode order
    reordered: bool  # decode order differs from presentation order (B-frames)
    complete: bool  # every non-empty packet had a pts and no pts repeats


def scan_packets(container: av.container.InputContainer) -> PacketScan:
    stream = container.streams.video[0]
    decode_order, missing = [], 0
    for p in container.demux(stream):
        if p.size <= 0:
            continue
        if p.pts is None:
            missing += 1
        else:
            decode_order.append((p.pts, bool(p.is_keyframe)))
    in_decode = [pts for pts, _ in decode_order]
    ordered = sorted(in_decode)
    return PacketScan(
        pts=ordered,
        decode_order=decode_order,
        reordered=in_decode != ordered,
        complete=missing == 0 and len(set(ordered)) == len(ordered),
    )


def _gops(order: list[tuple[int, bool]]) -> list[range]:
    """Decode-order spans from each keyframe to the next."""
    starts = [i for i, (_, key) in enumerate(order) if key]
    if not starts or starts[0] != 0:
        starts = [0, *starts]
    return [range(a, b) for a, b in zip(starts, [*starts[1:], len(order)])]


def _is_open(order: list[tuple[int, bool]], gop: range) -> bool:
    """Leading pictures (shown before their keyframe) may reference the previous GOP."""
    key_pts = order[gop.start][0]
    return any(order[i][0] < key_pts for i in gop[1:])


def droppable_tails(order: list[tuple[int, bool]], needed: Iterable[int]) -> frozenset[int]:
    """Packets no needed frame can depend on: in each GOP, those decoded after its last needed
    packet, when the next GOP is closed (a later packet is never a reference for an earlier one,
    and nothing after a closed keyframe looks back past it)."""
    needed = set(needed)
    gops = _gops(order)
    drop: set[int] = set()
    for j, gop in enumerate(gops):
        if j + 1 < len(gops) and _is_open(order, gops[j + 1]):
            continue
        last = max((i for i in gop if order[i][0] in needed), default=gop.start - 1)
        drop.update(order[i][0] for i in range(last + 1, gop.stop))
    return frozenset(drop)


def probe(path: str | os.PathLike[str]) -> ClipInfo:
    """Clip facts from the container, one demux pass and one decoded frame."""
    with open_video(path) as container:
        return _describe(container, path)[0]


def _describe(container: av.container.InputContainer, path: str | os.PathLike[str]) -> tuple[ClipInfo, PacketScan]:
    stream = container.streams.video[0]
    tb = stream.time_base
    scan = scan_packets(container)
    pts = scan.pts
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
    info = ClipInfo(
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
    return info, scan


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


def _configure_threads(stream: av.video.stream.VideoStream, thread_type: str, threads: int = 0) -> None:
    if thread_type not in THREAD_TYPES:
        raise ValueError(f"thread_type must be one of {THREAD_TYPES}, got {thread_type!r}")
    if thread_type != "NONE":
        stream.thread_type = thread_type
        stream.thread_count = threads  # 0: FFmpeg picks from the core count


DECODE_PATHS = ("auto", "selective", "sequential")
SELECTIVE_CODECS = ("h264", "hevc")  # decoders whose skip_frame=NONREF drops exactly the unreferenced frames


@dataclass(frozen=True)
class Decoding:
    """First item of iter_frames: the clip's facts and which decoding runs (and why)."""

    info: ClipInfo
    path: str


@dataclass(frozen=True)
class Plan:
    """Which frames (by pts) must come out, and how they will be decoded."""

    targets: list[Fraction]
    needed: dict[int, int]  # pts -> display index
    path: str  # selective | sequential
    reason: str  # why this path
    drop: frozenset[int] = frozenset()  # pts of packets not decoded at all (selective)


@dataclass(frozen=True)
class Sampling:
    """What to sample and how to decode it (frames are the same whatever the decoding)."""

    fps: float = 2.0
    max_frames: int | None = None  # uniform thinning when there are more targets
    times_ms: tuple[int, ...] | None = None  # explicit targets instead of fps
    max_side: int | None = None
    thread_type: str = "AUTO"
    threads: int = 0  # decoder threads; 0: one per core
    decode: str = "auto"  # auto | selective | sequential

    def targets(self, info: ClipInfo) -> list[Fraction]:
        if self.times_ms is not None:
            return sorted(Fraction(int(t), 1000) for t in self.times_ms)
        return target_times(info.duration_ms, self.fps, self.max_frames)


def plan_frames(
    scan: PacketScan, start: int, tb: Fraction, targets: list[Fraction], codec: str, decode: str = "auto"
) -> Plan:
    """The frame shown at each target (last pts <= t, else the first) plus the last frame.

    Selective decoding is planned only where the packet scan can be trusted and skipping can help.
    """
    if decode not in DECODE_PATHS:
        raise ValueError(f"decode must be one of {DECODE_PATHS}, got {decode!r}")
    rel = [Fraction(p - start) * tb for p in scan.pts]
    needed = {}
    for t in targets:
        i = max(bisect.bisect_right(rel, t) - 1, 0)
        needed[scan.pts[i]] = i
    needed[scan.pts[-1]] = len(scan.pts) - 1
    if decode == "sequential":
        path, reason = "sequential", "requested"
    elif not scan.complete:
        path, reason = "sequential", "packets without pts or with repeated pts"
    elif codec not in SELECTIVE_CODECS:
        path, reason = "sequential", f"no selective plan for {codec}"
    else:
        drop = droppable_tails(scan.decode_order, needed)
        return Plan(targets, needed, "selective", f"unreferenced frames and {len(drop)} GOP-tail frames skipped", drop)
    return Plan(targets, needed, path, reason)


def _frame(index: int, rel: Fraction, frame: av.VideoFrame, rotation: int, max_side: int | None, fmt: str) -> Frame:
    image = resize_max_side(upright(frame.to_ndarray(format=fmt), rotation), max_side)
    return Frame(index=index, pts_ms=ms(rel), image=image)


def _decode_selective(
    container: av.container.InputContainer, plan: Plan, start: int, tb: Fraction, stats: dict[str, int]
) -> Iterator[tuple[int, Fraction, av.VideoFrame]]:
    """Decode reference frames and the needed ones; skip every other unreferenced frame."""
    stream = container.streams.video[0]
    ctx = stream.codec_context
    for packet in container.demux(stream):
        # set per packet: FFmpeg copies skip_frame into the frame thread that takes the packet
        if packet.pts is None or packet.pts in plan.needed:
            ctx.skip_frame = "DEFAULT"
        else:
            ctx.skip_frame = "ALL" if packet.pts in plan.drop else "NONREF"
        for frame in ctx.decode(packet):
            stats["decoded"] += 1
            if frame.pts in plan.needed:
                yield plan.needed[frame.pts], Fraction(frame.pts - start) * tb, frame


def _decode_sequential(
    container: av.container.InputContainer,
    plan: Plan,
    start: int | None,
    tb: Fraction,
    path: str,
    stats: dict[str, int],
) -> Iterator[tuple[int, Fraction, av.VideoFrame]]:
    """Every frame decoded; the one shown at a target is yielded once the next frame passes it."""
    stream = container.streams.video[0]
    prev: tuple[int, Fraction, av.VideoFrame] | None = None
    ti = 0
    for index, frame in enumerate(container.decode(stream)):
        stats["decoded"] += 1
        if frame.pts is None:
            raise MediaError(f"{path}: frame {index} has no pts")
        if start is None:
            start = frame.pts
        rel = Fraction(frame.pts - start) * tb
        while ti < len(plan.targets) and plan.targets[ti] < rel:
            yield prev if prev is not None else (index, rel, frame)
            ti += 1
        prev = (index, rel, frame)
    if prev is None:
        raise MediaError(f"{path}: no decodable video frames")
    yield prev  # shown at every remaining target, and the last frame


def iter_frames(
    path: str | os.PathLike[str],
    sampling: Sampling = Sampling(),
    info: ClipInfo | None = None,
    pixel_format: str = "rgb24",
    stats: dict[str, int] | None = None,
) -> Iterator[Decoding | Frame]:
    """Frames shown at the target times and the exact last frame, each once, in time order.

    Yields first a Decoding (clip info; "selective: ..." or "sequential: ..."), then the
    frames as soon as they are decoded, so a caller that writes and drops them holds only a
    few at a time. `pixel_format="bgr24"` suits OpenCV writers. `stats` gets `decoded`
    (frames the decoder produced) and `frames` (frames in the stream).
    """
    stats = {} if stats is None else stats
    stats["decoded"] = 0
    with open_video(path) as container:
        stream = container.streams.video[0]
        _configure_threads(stream, sampling.thread_type, sampling.threads)
        tb = stream.time_base or Fraction(1, 90_000)
        if info is None:
            info, scan = _describe(container, path)
        else:
            scan = scan_packets(container)
        if not scan.pts:
            raise MediaError(f"{path}: no video frames (zero-length or unreadable clip)")
        stats["frames"] = len(scan.pts)
        start = _stream_start(stream)
        origin = scan.pts[0] if start is None else start
        plan = plan_frames(scan, origin, tb, sampling.targets(info), info.video_codec, sampling.decode)
        container.seek(0)
        if plan.path == "selective":
            source = _decode_selective(container, plan, origin, tb, stats)
        else:
            source = _decode_sequential(container, plan, start, tb, str(path), stats)
        yield Decoding(info, f"{plan.path}: {plan.reason}")
        seen: set[int] = set()
        index = -1
        try:
            for index, rel, frame in source:
                if index not in seen:
                    seen.add(index)
                    yield _frame(index, rel, frame, info.rotation, sampling.max_side, pixel_format)
        except av.FFmpegError as exc:
            raise MediaError(
                f"{path}: decoding failed after frame {index} ({exc}); clip is corrupt or truncated"
                if seen
                else f"{path}: decoding failed before the first frame ({exc})"
            ) from exc
        if plan.path == "selective" and len(seen) != len(plan.needed):
            raise MediaError(f"{path}: selective decode returned {len(seen)} of {len(plan.needed)} planned frames")


def sample_frames(path: str | os.PathLike[str], info: ClipInfo | None = None, **sampling: Any) -> Sample:
    """All sampled frames in memory; keywords are Sampling's (fps, max_frames, times_ms, max_side,
    thread_type, threads, decode). A selective plan that does not deliver every planned frame
    falls back to the sequential pass, and says so in decode_path."""
    if sampling.get("times_ms") is not None:
        sampling["times_ms"] = tuple(sampling["times_ms"])
    spec = Sampling(**sampling)
    stats: dict[str, int] = {}
    try:
        items = list(iter_frames(path, spec, info, stats=stats))
    except MediaError as exc:
        if spec.decode == "sequential" or "selective" not in str(exc):
            raise
        items = list(iter_frames(path, replace(spec, decode="sequential"), info, stats=stats))
        head = items[0]
        assert isinstance(head, Decoding)
        items[0] = Decoding(head.info, f"sequential: fallback after a failed selective plan ({exc})")
    head, frames = items[0], [f for f in items[1:] if isinstance(f, Frame)]
    assert isinstance(head, Decoding)
    return Sample(head.info, frames, frames[-1], head.path, stats["decoded"], stats["frames"])


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


def encode_jpeg(image: np.ndarray, quality: int = 90, max_side: int | None = None, order: str = "rgb") -> bytes:
    """JPEG bytes of an RGB (or, with order="bgr", an OpenCV BGR) image."""
    image = resize_max_side(image, max_side)
    bgr = image if order == "bgr" else cv2.cvtColor(image, cv2.COLOR_RGB2BGR)
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


def write_jpeg(
    path: str | os.PathLike[str], image: np.ndarray, quality: int = 90, max_side: int | None = None, order: str = "rgb"
) -> None:
    atomic_write(path, encode_jpeg(image, quality, max_side, order))
