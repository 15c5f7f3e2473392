"""Media layer on PyAV: probe, frames at their true presentation times, audio.

Time is data: every frame carries `pts * time_base` relative to the video
stream start, never `index / fps`. Access by time (`sample_frames`) is kept
apart from access by index (`Frame.index` is only a label).
"""

from __future__ import annotations

import bisect
import math
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any, TypeVar

import av
import numpy as np

AUDIO_RATE = 16_000
DEFAULT_MAX_PIXELS = 7680 * 4320  # 8K UHD: what one decoded frame may cost (about 100 MB as RGB)
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
    max_pixels: int | None = DEFAULT_MAX_PIXELS  # refuse frames larger than this (None: no bound)

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


def check_pixels(info: ClipInfo, max_pixels: int | None) -> None:
    """Refuse a clip whose frames would cost more than `max_pixels` each, before any is decoded."""
    if max_pixels and info.coded_width * info.coded_height > max_pixels:
        raise MediaError(
            f"{info.path}: frames of {info.coded_width}x{info.coded_height} px exceed the limit of "
            f"{max_pixels} px (--max-pixels; --max-side shrinks frames but the decoder still makes them whole)"
        )


def _frame(index: int, rel: Fraction, frame: av.VideoFrame, rotation: int, max_side: int | None, fmt: str) -> Frame:
    """The frame as an upright array; with max_side, scaled by the decoder's scaler first, so no
    full-size array is ever made."""
    w, h = frame.width, frame.height
    if max_side and max(w, h) > max_side:
        scale = max_side / max(w, h)
        size = {"width": max(1, round(w * scale)), "height": max(1, round(h * scale))}
        image = frame.reformat(**size, format=fmt, interpolation="AREA").to_ndarray()
    else:
        image = frame.to_ndarray(format=fmt)
    return Frame(index=index, pts_ms=ms(rel), image=upright(image, rotation))


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


def _crash_for_tests(path: str) -> None:
    """Test hook: AVSTACK_TEST_SEGFAULT names a file whose decoding kills this process with
    SIGSEGV, as a crashing decoder would (tests of the executors' crash handling)."""
    target = os.environ.get("AVSTACK_TEST_SEGFAULT")
    if target and os.path.realpath(path) == os.path.realpath(target):
        import signal

        os.kill(os.getpid(), signal.SIGSEGV)


class SelectiveDecodeError(MediaError):
    """A selective plan that did not deliver every planned frame (the sequential pass will)."""


class FrameReader:
    """Frames shown at the target times and the exact last frame, each once, in time order.

    Opening it reads the clip's facts (`info`) and plans the decoding (`decode_path`:
    "selective: ..." or "sequential: ..."); iterating yields Frames as soon as they are decoded,
    so a caller that writes and drops them holds only a few at a time. `pixel_format="bgr24"`
    suits OpenCV writers. `decoded` counts frames the decoder produced, `frame_count` the
    frames in the stream. Use it as a context manager, or call close().
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        sampling: Sampling = Sampling(),
        info: ClipInfo | None = None,
        pixel_format: str = "rgb24",
    ):
        self.path, self.sampling, self.pixel_format = str(path), sampling, pixel_format
        self.decoded = 0
        _crash_for_tests(self.path)
        self._cm = open_video(path)
        self._container = self._cm.__enter__()
        try:
            self._plan(info)
        except BaseException:
            self.close()
            raise

    def _plan(self, info: ClipInfo | None) -> None:
        container, s = self._container, self.sampling
        stream = container.streams.video[0]
        _configure_threads(stream, s.thread_type, s.threads)
        self._tb = stream.time_base or Fraction(1, 90_000)
        if info is None:
            info, scan = _describe(container, self.path)
        else:
            scan = scan_packets(container)
        if not scan.pts:
            raise MediaError(f"{self.path}: no video frames (zero-length or unreadable clip)")
        check_pixels(info, s.max_pixels)
        self.info, self.frame_count = info, len(scan.pts)
        self._start = _stream_start(stream)
        self._origin = scan.pts[0] if self._start is None else self._start
        self.plan = plan_frames(scan, self._origin, self._tb, s.targets(info), info.video_codec, s.decode)
        self.decode_path = f"{self.plan.path}: {self.plan.reason}"
        container.seek(0)

    def __enter__(self) -> FrameReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._cm.__exit__(None, None, None)

    def _source(self, stats: dict[str, int]) -> Iterator[tuple[int, Fraction, av.VideoFrame]]:
        if self.plan.path == "selective":
            return _decode_selective(self._container, self.plan, self._origin, self._tb, stats)
        return _decode_sequential(self._container, self.plan, self._start, self._tb, self.path, stats)

    def __iter__(self) -> Iterator[Frame]:
        stats = {"decoded": 0}
        seen: set[int] = set()
        index = -1
        try:
            for index, rel, frame in self._source(stats):
                self.decoded = stats["decoded"]
                if index not in seen:
                    seen.add(index)
                    yield _frame(index, rel, frame, self.info.rotation, self.sampling.max_side, self.pixel_format)
        except av.FFmpegError as exc:
            raise MediaError(
                f"{self.path}: decoding failed after frame {index} ({exc}); clip is corrupt or truncated"
                if seen
                else f"{self.path}: decoding failed before the first frame ({exc})"
            ) from exc
        self.decoded = stats["decoded"]
        if self.plan.path == "selective" and len(seen) != len(self.plan.needed):
            raise SelectiveDecodeError(
                f"{self.path}: selective decode returned {len(seen)} of {len(self.plan.needed)} planned frames"
            )


T = TypeVar("T")


def with_fallback(decode: Callable[[Sampling], T], sampling: Sampling) -> tuple[T, str | None]:
    """Run `decode` with the sampling asked for; when a selective plan fails to deliver, run it
    again sequentially (identical frames). Returns the result and, after a fallback, the
    decode_path that says so."""
    try:
        return decode(sampling), None
    except SelectiveDecodeError as exc:
        if sampling.decode == "sequential":
            raise
        note = f"sequential: fallback after a failed selective plan ({exc})"
        return decode(replace(sampling, decode="sequential")), note


def sample_frames(path: str | os.PathLike[str], info: ClipInfo | None = None, **sampling: Any) -> Sample:
    """All sampled frames in memory; keywords are Sampling's (fps, max_frames, times_ms, max_side,
    thread_type, threads, decode). A selective plan that does not deliver every planned frame
    falls back to the sequential pass, and says so in decode_path."""
    if sampling.get("times_ms") is not None:
        sampling["times_ms"] = tuple(sampling["times_ms"])

    def decode(spec: Sampling) -> Sample:
        with FrameReader(path, spec, info) as reader:
            frames = list(reader)
            return Sample(reader.info, frames, frames[-1], reader.decode_path, reader.decoded, reader.frame_count)

    sample, note = with_fallback(decode, Sampling(**sampling))
    return replace(sample, decode_path=note) if note else sample


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


def has_audio(path: str | os.PathLike[str]) -> bool:
    with _open_any(path) as container:
        return bool(container.streams.audio)


@contextmanager
def _open_any(path: str | os.PathLike[str]) -> Iterator[av.container.InputContainer]:
    try:
        container = av.open(str(path))
    except (av.FFmpegError, OSError) as exc:
        raise MediaError(f"{path}: cannot open ({exc})") from exc
    try:
        yield container
    finally:
        container.close()


def iter_audio(path: str | os.PathLike[str], rate: int = AUDIO_RATE) -> Iterator[np.ndarray]:
    """The first audio stream as mono float32 chunks at `rate` Hz, as they are decoded (nothing
    is held beyond one chunk); no chunk at all when the clip has no audio stream."""
    with _open_any(path) as container:
        if not container.streams.audio:
            return
        resampler = av.AudioResampler(format="flt", layout="mono", rate=rate)
        try:
            for frame in container.decode(audio=0):
                for out in resampler.resample(frame):
                    yield out.to_ndarray().reshape(-1).astype(np.float32, copy=False)
            for out in resampler.resample(None):
                yield out.to_ndarray().reshape(-1).astype(np.float32, copy=False)
        except av.FFmpegError as exc:
            raise MediaError(f"{path}: audio decoding failed ({exc})") from exc


def load_audio(path: str | os.PathLike[str], rate: int = AUDIO_RATE) -> np.ndarray | None:
    """First audio stream as mono float32 at `rate` Hz, in memory; None when the clip has no audio."""
    if not has_audio(path):
        return None
    chunks = list(iter_audio(path, rate))
    return np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.float32)
