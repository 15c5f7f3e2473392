"""Decoding frames: which to decode (the plan), the selective and sequential decoders, damage.

Time is data: every frame carries `pts * time_base` on the clip's clock, never `index / fps`."""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import av

from avstack.errors import UsageError
from avstack.limits import DEFAULT_MAX_PIXELS
from avstack.media.probe import (
    THREAD_TYPES,
    ClipInfo,
    Frame,
    MediaError,
    PacketScan,
    droppable_tails,
    ms,
    target_times,
    upright,
)
from avstack.media.streams import StreamPick


def configure_threads(stream: av.video.stream.VideoStream, thread_type: str, threads: int = 0) -> None:
    if thread_type not in THREAD_TYPES:
        raise UsageError(f"thread_type must be one of {THREAD_TYPES}, got {thread_type!r}")
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
    audio_track: int | None = None  # the heard track (it can start the clip's clock); None: default
    streams: StreamPick | None = None  # the streams asked for (media.streams); None: audio_track's pick

    @property
    def pick(self) -> StreamPick:
        return self.streams if self.streams is not None else StreamPick.of(self.audio_track)

    def targets(self, info: ClipInfo) -> list[Fraction]:
        if self.times_ms is not None:
            return sorted(Fraction(int(t), 1000) for t in self.times_ms)
        return target_times(info.duration_ms, self.fps, self.max_frames)


def plan_frames(
    scan: PacketScan, origin: Fraction, tb: Fraction, targets: list[Fraction], codec: str, decode: str = "auto"
) -> Plan:
    """The frame shown at each target (last pts <= t, else the first) plus the last frame.

    Selective decoding is planned only where the packet scan can be trusted and skipping can help.
    """
    if decode not in DECODE_PATHS:
        raise UsageError(f"decode must be one of {DECODE_PATHS}, got {decode!r}")
    rel = [Fraction(p) * tb - origin for p in scan.pts]
    needed = {}
    for t in targets:
        i = max(bisect.bisect_right(rel, t) - 1, 0)
        needed[scan.pts[i]] = i
    needed[scan.pts[-1]] = len(scan.pts) - 1
    if decode == "sequential":
        path, reason = "sequential", "requested"
    elif not scan.complete:
        path, reason = "sequential", "packets without pts or with repeated pts"
    elif scan.damaged:
        path, reason = "sequential", f"{scan.damaged} damaged packets: decoded as a player presents them"
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


def make_frame(index: int, rel: Fraction, frame: av.VideoFrame, rotation: int, max_side: int | None, fmt: str) -> Frame:
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


def decode_selective(
    container: av.container.InputContainer,
    stream: Any,
    plan: Plan,
    origin: Fraction,
    tb: Fraction,
    stats: dict[str, int],
) -> Iterator[tuple[int, Fraction, av.VideoFrame]]:
    """Decode reference frames and the needed ones (of the video stream `stream`); skip every
    other unreferenced frame."""
    ctx = stream.codec_context
    for packet in container.demux(stream):
        # set per packet: FFmpeg copies skip_frame into the frame thread that takes the packet
        if packet.pts is None or packet.pts in plan.needed:
            ctx.skip_frame = "DEFAULT"
        else:
            ctx.skip_frame = "ALL" if packet.pts in plan.drop else "NONREF"
        try:
            frames = ctx.decode(packet)
        except av.FFmpegError as exc:  # the sequential pass steps over damage; a plan cannot
            raise SelectiveDecodeError(f"{container.name}: damaged packet at pts {packet.pts} ({exc})") from exc
        for frame in frames:
            stats["decoded"] += 1
            if frame.pts in plan.needed:
                yield plan.needed[frame.pts], Fraction(frame.pts) * tb - origin, frame


def frame_threaded(stream: Any) -> bool:
    ctx = stream.codec_context
    return bool(ctx.thread_type & av.codec.context.ThreadType.FRAME) and ctx.thread_count != 1


def tolerant_frames(
    container: av.container.InputContainer, stream: Any, origin: Fraction, damage: list[dict[str, object]]
) -> Iterator[av.VideoFrame]:
    """Every decodable frame; a packet the decoder rejects is stepped over (the frame before it
    stays shown, as in a player) and its span recorded in `damage`; data that ends inside a packet
    ends the demuxing, and the decoder is drained of what it holds.

    A frame-threaded decoder cannot do this: damage there drops the frames its other threads held
    (a clip cut short loses its last 1-3 frames, with or without an error), so any error, or fewer
    frames out than pictures sent in, raises DamagedDecodeError and the clip is decoded again on
    one thread (with_fallback): the frames of a damaged file are the file's, whatever decodes it."""
    tb = stream.time_base or Fraction(1, 90_000)
    threaded = frame_threaded(stream)
    sent = received = 0
    read_to = Fraction(0)  # where the readable packets end, on the clip's clock
    packets = container.demux(stream)
    while True:
        try:
            packet: av.Packet | None = next(packets)
        except StopIteration:
            break
        except av.FFmpegError as exc:  # the data ends inside a packet or a box
            if threaded:
                raise DamagedDecodeError(f"{container.name}: unreadable data ({exc})") from exc
            at = ms(read_to)  # the rest of the stream is lost from here (how much the data does not say)
            damage.append({"stream": "video", "from_ms": at, "to_ms": at, "what": f"unreadable data ({exc})"})
            packet = None
        flush = packet is None or packet.size <= 0
        if not flush and packet is not None and packet.pts is not None:
            read_to = max(read_to, (packet.pts + (packet.duration or 0)) * tb - origin)
        try:
            frames = stream.codec_context.decode(None if flush else packet)
        except av.FFmpegError as exc:
            if threaded:
                raise DamagedDecodeError(f"{container.name}: damaged packet with frame threads ({exc})") from exc
            if packet is not None and packet.pts is not None:
                t0 = Fraction(packet.pts) * tb - origin
                t1 = t0 + Fraction(packet.duration or 0) * tb
                damage.append({"stream": "video", "from_ms": ms(t0), "to_ms": ms(t1)})
            if flush:
                break
            continue
        sent += not flush
        received += len(frames)
        yield from frames
        if packet is None:
            break
    if threaded and received < sent:
        raise DamagedDecodeError(f"{container.name}: {sent} pictures sent, {received} frames out (frame threads)")


def decode_sequential(
    container: av.container.InputContainer,
    stream: Any,
    plan: Plan,
    origin: Fraction,
    tb: Fraction,
    path: str,
    stats: dict[str, int],
    damage: list[dict[str, object]],
    all_pts: list[int],
) -> Iterator[tuple[int, Fraction, av.VideoFrame]]:
    """Every frame decoded; the one shown at a target is yielded once the next frame passes it.
    A frame's index is its place among the presented frames (from the packet scan)."""
    prev: tuple[int, Fraction, av.VideoFrame] | None = None
    ti = 0
    for frame in tolerant_frames(container, stream, origin, damage):
        stats["decoded"] += 1
        if frame.pts is None:
            raise MediaError(f"{path}: frame {stats['decoded'] - 1} has no pts")
        index = min(bisect.bisect_left(all_pts, frame.pts), max(len(all_pts) - 1, 0))
        rel = Fraction(frame.pts) * tb - origin
        while ti < len(plan.targets) and plan.targets[ti] < rel:
            yield prev if prev is not None else (index, rel, frame)
            ti += 1
        prev = (index, rel, frame)
    if prev is None:
        raise MediaError(f"{path}: no decodable video frames")
    yield prev  # shown at every remaining target, and the last frame


def crash_for_tests(path: str) -> None:
    """Test hook: AVSTACK_TEST_SEGFAULT names a file whose decoding kills this process with
    SIGSEGV, as a crashing decoder would (tests of the executors' crash handling)."""
    target = os.environ.get("AVSTACK_TEST_SEGFAULT")
    if target and os.path.realpath(path) == os.path.realpath(target):
        import signal

        os.kill(os.getpid(), signal.SIGSEGV)


class SelectiveDecodeError(MediaError):
    """A selective plan that did not deliver every planned frame (the sequential pass will)."""


class DamagedDecodeError(SelectiveDecodeError):
    """A frame-threaded decoder met damage (see tolerant_frames): decode again on one thread."""
