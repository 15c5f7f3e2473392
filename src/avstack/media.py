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
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any, TypeVar

import av
import numpy as np

from .limits import DEFAULT_MAX_PIXELS

AUDIO_RATE = 16_000
THREAD_TYPES = ("AUTO", "FRAME", "SLICE", "NONE")
SPAN_PIXELS = 3840 * 2160  # pictures decoded side by side in one reader (spans), at most
T = TypeVar("T")


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
    # the clip's one clock: time 0 is where a player starts it (the earliest start of the streams
    # used); each stream's span on it, and which audio track is the one heard
    streams: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Frame:
    """A decoded frame: its place among the presented frames (`index`, a label), its presentation
    time on the clip's clock (`pts_ms`), and the RGB image, upright as a viewer shows it."""

    index: int  # position in presentation order (a label, not a time)
    pts_ms: int  # true presentation time, ms on the clip's clock (0: where a player starts it)
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


@dataclass(frozen=True)
class PacketScan:
    """What one demux pass (no decoding) says about the video packets (and the audio's span)."""

    pts: list[int]  # sorted presentation timestamps, one per frame
    decode_order: list[tuple[int, bool]]  # (pts, is keyframe) in decode order
    reordered: bool  # decode order differs from presentation order (B-frames)
    complete: bool  # every non-empty packet had a pts and no pts repeats
    audio_span: tuple[Fraction, Fraction] | None = None  # (first pts, last pts + duration) in seconds
    discarded: int = 0  # video packets an edit list hides (decoded as references, never shown)
    damaged: int = 0  # video packets the demuxer flags corrupt (a file cut short ends in one)


def pick_audio(container: av.container.InputContainer, track: int | None = None) -> Any:
    """The audio stream a person hears: the track asked for (0 = the first audio track), else
    the one marked default, else the first; None when there is none."""
    streams = list(container.streams.audio)
    if not streams:
        return None
    if track is not None:
        if not 0 <= track < len(streams):
            raise MediaError(
                f"{container.name}: audio track {track} asked for (--audio-track), the file has {len(streams)}"
            )
        return streams[track]
    default = [a for a in streams if a.disposition & av.stream.Disposition.default]
    return default[0] if default else streams[0]


def scan_packets(container: av.container.InputContainer, audio: Any = None) -> PacketScan:
    """Video packets as presented (packets an edit list discards are not shown, so not counted),
    and the span of `audio`'s packets, in one demux pass."""
    stream = container.streams.video[0]
    decode_order, missing, discarded, damaged = [], 0, 0, 0
    a_first: Fraction | None = None
    a_end: Fraction | None = None
    for p in container.demux(*([stream, audio] if audio is not None else [stream])):
        if p.size <= 0 or p.is_discard:
            discarded += p.is_discard and p.stream.type == "video"
            continue
        if p.stream.type == "audio":
            if p.pts is not None and p.stream.time_base is not None:
                t0 = Fraction(p.pts) * p.stream.time_base
                t1 = t0 + Fraction(p.duration or 0) * p.stream.time_base
                a_first = t0 if a_first is None else min(a_first, t0)
                a_end = t1 if a_end is None else max(a_end, t1)
            continue
        damaged += p.is_corrupt
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
        audio_span=(a_first, a_end) if a_first is not None and a_end is not None else None,
        discarded=discarded,
        damaged=damaged,
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


def probe(path: str | os.PathLike[str], audio_track: int | None = None) -> ClipInfo:
    """Clip facts from the container, one demux pass and one decoded frame."""
    with open_video(path) as container:
        return _describe(container, path, audio_track)[0]


def _describe(
    container: av.container.InputContainer, path: str | os.PathLike[str], audio_track: int | None = None
) -> tuple[ClipInfo, PacketScan]:
    stream = container.streams.video[0]
    tb = stream.time_base
    audio = pick_audio(container, audio_track)
    scan = scan_packets(container, audio)
    pts = scan.pts
    if not pts or tb is None:
        raise MediaError(f"{path}: no video frames (zero-length or unreadable clip)")
    container.seek(0)
    rotation = _first_rotation(container)
    deltas = np.diff(np.asarray(pts, dtype=np.int64))
    vfr = bool(len(deltas) > 1 and (deltas.max() - deltas.min()) > 1)
    tail = Fraction(int(np.median(deltas))) * tb if len(deltas) else Fraction(0)
    v_start, v_last = Fraction(pts[0]) * tb, Fraction(pts[-1]) * tb
    audio_span = scan.audio_span
    if audio is not None and audio_span is not None and audio.start_time is not None:
        # where the demuxer says the audio starts, not its first packet: an encoder's priming
        # (AAC's 1024 samples, Opus's pre-skip) leads the first packet and is never heard. MP4's
        # edit list says so; Matroska and WebM carry it as the codec delay, which FFmpeg 8's
        # demuxer (the one PyAV ships, and a current player's) applies to the start time. Taken
        # from the first packet, such a clip's clock sat 7-21 ms after the player's.
        audio_span = (Fraction(audio.start_time) * (audio.time_base or 1), audio_span[1])
    spans = {"video": (v_start, v_last + tail)} | ({"audio": audio_span} if audio_span else {})
    origin = min(a for a, _ in spans.values())  # a player starts at the earliest stream
    end = max(b for _, b in spans.values())
    rate = stream.average_rate or stream.guessed_rate
    video_span = v_last + tail - v_start
    fps = float(rate) if rate else (len(pts) / float(video_span) if video_span else 0.0)
    cw, ch = stream.codec_context.width, stream.codec_context.height
    w, h = (ch, cw) if rotation % 180 == 90 else (cw, ch)
    streams: dict[str, Any] = {
        "origin_s": str(origin),  # container time of time 0 (exact, as a fraction of seconds)
        "video": {"index": stream.index, "start_ms": ms(v_start - origin), "end_ms": ms(v_last + tail - origin)},
    }
    if audio is not None:
        a0, a1 = audio_span or (origin, origin)
        ctx = audio.codec_context
        streams["audio"] = {
            "index": audio.index,
            "track": list(container.streams.audio).index(audio),
            "start_ms": ms(a0 - origin),
            "end_ms": ms(a1 - origin),
            "sample_rate": ctx.sample_rate,
            "channels": ctx.channels,
        }
    info = ClipInfo(
        path=str(path),
        duration_ms=ms(end - origin),
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
        last_pts_ms=ms(v_last - origin),
        streams=streams,
    )
    return info, scan


def clip_origin(info: ClipInfo) -> Fraction:
    """Container time (s) of the clip's time 0."""
    return origin_of(info.streams)


def origin_of(streams: dict[str, Any]) -> Fraction:
    return Fraction(streams.get("origin_s", "0"))


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
    audio_track: int | None = None  # the heard track (it can start the clip's clock); None: default

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
        raise ValueError(f"decode must be one of {DECODE_PATHS}, got {decode!r}")
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
    container: av.container.InputContainer, plan: Plan, origin: Fraction, tb: Fraction, stats: dict[str, int]
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
        try:
            frames = ctx.decode(packet)
        except av.FFmpegError as exc:  # the sequential pass steps over damage; a plan cannot
            raise SelectiveDecodeError(f"{container.name}: damaged packet at pts {packet.pts} ({exc})") from exc
        for frame in frames:
            stats["decoded"] += 1
            if frame.pts in plan.needed:
                yield plan.needed[frame.pts], Fraction(frame.pts) * tb - origin, frame


def _frame_threaded(stream: Any) -> bool:
    ctx = stream.codec_context
    return bool(ctx.thread_type & av.codec.context.ThreadType.FRAME) and ctx.thread_count != 1


def _tolerant_frames(
    container: av.container.InputContainer, origin: Fraction, damage: list[dict[str, Any]]
) -> Iterator[av.VideoFrame]:
    """Every decodable frame; a packet the decoder rejects is stepped over (the frame before it
    stays shown, as in a player) and its span recorded in `damage`; data that ends inside a packet
    ends the demuxing, and the decoder is drained of what it holds.

    A frame-threaded decoder cannot do this: damage there drops the frames its other threads held
    (a clip cut short loses its last 1-3 frames, with or without an error), so any error, or fewer
    frames out than pictures sent in, raises DamagedDecodeError and the clip is decoded again on
    one thread (with_fallback): the frames of a damaged file are the file's, whatever decodes it."""
    stream = container.streams.video[0]
    tb = stream.time_base or Fraction(1, 90_000)
    threaded = _frame_threaded(stream)
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


def _decode_sequential(
    container: av.container.InputContainer,
    plan: Plan,
    origin: Fraction,
    tb: Fraction,
    path: str,
    stats: dict[str, int],
    damage: list[dict[str, Any]],
    all_pts: list[int],
) -> Iterator[tuple[int, Fraction, av.VideoFrame]]:
    """Every frame decoded; the one shown at a target is yielded once the next frame passes it.
    A frame's index is its place among the presented frames (from the packet scan)."""
    prev: tuple[int, Fraction, av.VideoFrame] | None = None
    ti = 0
    for frame in _tolerant_frames(container, origin, damage):
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


def _crash_for_tests(path: str) -> None:
    """Test hook: AVSTACK_TEST_SEGFAULT names a file whose decoding kills this process with
    SIGSEGV, as a crashing decoder would (tests of the executors' crash handling)."""
    target = os.environ.get("AVSTACK_TEST_SEGFAULT")
    if target and os.path.realpath(path) == os.path.realpath(target):
        import signal

        os.kill(os.getpid(), signal.SIGSEGV)


class SelectiveDecodeError(MediaError):
    """A selective plan that did not deliver every planned frame (the sequential pass will)."""


class DamagedDecodeError(SelectiveDecodeError):
    """A frame-threaded decoder met damage (see _tolerant_frames): decode again on one thread."""


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
            info, scan = _describe(container, self.path, s.audio_track)
        else:
            scan = scan_packets(container)
        if not scan.pts:
            raise MediaError(f"{self.path}: no video frames (zero-length or unreadable clip)")
        check_pixels(info, s.max_pixels)
        self.info, self.frame_count = info, len(scan.pts)
        self._origin = clip_origin(info)
        self._all_pts = scan.pts
        self._scan = scan
        self.damage: list[dict[str, Any]] = []
        self.plan = plan_frames(scan, self._origin, self._tb, s.targets(info), info.video_codec, s.decode)
        self.decode_path = f"{self.plan.path}: {self.plan.reason}"
        if scan.damaged and _frame_threaded(stream):
            # frame threads drop what they hold at damage (see _tolerant_frames): with_fallback
            # decodes on one thread, before a frame is decoded here
            raise DamagedDecodeError(f"{self.path}: {scan.damaged} damaged packets")
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
        return _decode_sequential(
            self._container, self.plan, self._origin, self._tb, self.path, stats, self.damage, self._all_pts
        )

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

    def spans(self) -> list[Any]:
        """The independent spans a selective plan splits into (one: nothing to split;
        avstack.spans says when a split is exact)."""
        from .spans import Span, plan_spans

        scan, plan = self._scan, self.plan
        if plan.path != "selective" or scan.discarded:
            return [Span(0, len(scan.decode_order))]
        return plan_spans(scan.decode_order, plan.needed, self.info.video_codec == "hevc")

    def map_frames(self, consume: Callable[[Frame], T], threads: int = 0) -> list[T]:
        """consume(frame) for every frame the iteration yields, results in time order. Where the
        plan splits, its spans are decoded on `threads` threads (0: one per core), side by side,
        and consume runs on them (it must be thread-safe); else one decoder, with consume on a
        second thread while it goes on. The frames are the same either way; spans decode fewer
        (never an open GOP's unneeded leading pictures, nor the tail before them)."""
        from . import spans
        from .jobplan import cores

        threads = threads or cores()
        parts = self.spans()
        # each span decoder holds its own reference pictures: at most SPAN_PIXELS of them decode
        # at once, so memory stays what one decoder of a 4K clip needs
        pixels = max(1, self.info.coded_width * self.info.coded_height)
        side_by_side = min(threads, len(parts), max(1, SPAN_PIXELS // pixels))
        if len(parts) <= 1 or (side_by_side <= 1 < threads):
            return _pipelined(iter(self), consume)  # one decoder (its own frame threads)
        threads = side_by_side

        def make(index: int, rel: Fraction, frame: av.VideoFrame) -> Frame:
            return _frame(index, rel, frame, self.info.rotation, self.sampling.max_side, self.pixel_format)

        results, self.decoded = spans.decode_spans(
            self.path, parts, self._scan.decode_order, self.plan, self._origin, make, consume, threads
        )
        return results


def _pipelined(frames: Iterator[Frame], consume: Callable[[Frame], T], in_flight: int = 3) -> list[T]:
    """consume() on a second thread while the next frames decode, at most `in_flight` frames
    waiting: bounded memory (OpenCV and FFmpeg release the GIL)."""
    from collections import deque
    from concurrent.futures import Future, ThreadPoolExecutor

    results: list[T] = []
    pending: deque[Future[T]] = deque()
    with ThreadPoolExecutor(1) as worker:
        for frame in frames:
            pending.append(worker.submit(consume, frame))
            while len(pending) >= in_flight:
                results.append(pending.popleft().result())
        results.extend(f.result() for f in pending)
    return results


def with_fallback(decode: Callable[[Sampling], T], sampling: Sampling) -> tuple[T, str | None]:
    """Run `decode` with the sampling asked for; when a selective plan fails to deliver, run it
    again sequentially (identical frames), and where damage met a frame-threaded decoder, on one
    thread (the frames a sequential decode presents). Returns the result and, after a fallback,
    the decode_path that says so."""
    try:
        return decode(sampling), None
    except SelectiveDecodeError as exc:
        error = exc
    ladder = [
        (replace(sampling, decode="sequential"), "sequential: fallback after a failed selective plan"),
        (
            replace(sampling, decode="sequential", thread_type="NONE", threads=1),
            "sequential, one thread: fallback after damage",
        ),
    ]
    for spec, why in ladder:
        if spec == sampling or (isinstance(error, DamagedDecodeError) and spec.threads != 1):
            continue  # tried already, or a step that damage would defeat again
        try:
            return decode(spec), f"{why} ({error})"
        except DamagedDecodeError as exc:
            error = exc
    raise error


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
    """Every frame's pts in ms on the clip's clock, by a full decode on one thread, stepping over
    damage as a player does (a reference for checks)."""
    info = probe(path)
    origin = clip_origin(info)
    with open_video(path) as container:
        stream = container.streams.video[0]
        stream.codec_context.thread_count = 1
        tb = stream.time_base or Fraction(1, 90_000)
        frames = _tolerant_frames(container, origin, [])
        return [ms(Fraction(frame.pts or 0) * tb - origin) for frame in frames]


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


def iter_audio(
    path: str | os.PathLike[str],
    rate: int = AUDIO_RATE,
    track: int | None = None,
    origin: Fraction | None = None,
    damage: list[dict[str, Any]] | None = None,
) -> Iterator[np.ndarray]:
    """The heard audio track (`pick_audio`) as mono float32 chunks at `rate` Hz, placed on the clip's
    clock: sample 0 is time `origin` (container seconds; default the track's own start), a track
    that starts later is preceded by silence, a gap in its timestamps is filled with silence and
    an overlap trimmed (as a player does), and a packet the decoder rejects is silence, its span
    appended to `damage`. Nothing is held beyond one chunk; no chunk when there is no audio."""
    with _open_any(path) as container:
        stream = pick_audio(container, track)
        if stream is None:
            return
        placer = _AudioPlacer(stream, rate, origin, damage if damage is not None else [])
        for packet in container.demux(stream):
            yield from placer.packet(packet)
        yield from placer.flush()


class _AudioPlacer:
    """Decoded audio laid at its timestamps on the clip's clock (see iter_audio)."""

    SLACK_S = Fraction(1, 500)  # 2 ms: timestamp jitter below this is not a gap

    def __init__(self, stream: Any, rate: int, origin: Fraction | None, damage: list[dict[str, Any]]):
        self.stream, self.rate, self.damage = stream, rate, damage
        self.tb = stream.time_base or Fraction(1, stream.codec_context.sample_rate or rate)
        self.origin = origin
        self.resampler = av.AudioResampler(format="flt", layout="mono", rate=rate)
        self.written = 0  # output samples so far
        self.fed: Fraction | None = None  # clock time (s) up to which input has been fed

    def _out(self, frames: list[av.AudioFrame]) -> Iterator[np.ndarray]:
        for out in frames:
            chunk = out.to_ndarray().reshape(-1).astype(np.float32, copy=False)
            self.written += len(chunk)
            yield chunk

    def _silence(self, seconds: Fraction) -> Iterator[np.ndarray]:
        n = int(seconds * self.rate)
        for i in range(0, n, self.rate):
            chunk = np.zeros(min(self.rate, n - i), np.float32)
            self.written += len(chunk)
            yield chunk

    def packet(self, packet: av.Packet) -> Iterator[np.ndarray]:
        try:
            frames = self.stream.codec_context.decode(packet if packet.size > 0 else None)
        except av.FFmpegError:
            if packet.pts is not None and self.origin is not None:
                t0 = Fraction(packet.pts) * self.tb - self.origin
                t1 = t0 + Fraction(packet.duration or 0) * self.tb
                self.damage.append({"stream": "audio", "from_ms": ms(t0), "to_ms": ms(t1)})
            return  # the gap it leaves is filled with silence at the next frame
        for frame in frames:
            yield from self._frame(frame)

    def _frame(self, frame: av.AudioFrame) -> Iterator[np.ndarray]:
        if frame.pts is None:
            yield from self._out(self.resampler.resample(frame))
            return
        start = Fraction(frame.pts) * self.tb
        if self.origin is None:
            self.origin = start
        t = start - self.origin
        if self.fed is None:
            self.fed = Fraction(0)
        if t > self.fed + self.SLACK_S:  # a later start or a gap: silence until this frame
            yield from self._out(self.resampler.resample(None))
            self.resampler = av.AudioResampler(format="flt", layout="mono", rate=self.rate)
            yield from self._silence(t - Fraction(self.written, self.rate))
            self.fed = t
        elif t < self.fed - self.SLACK_S:  # an overlap: what was already played is dropped
            skip = int((self.fed - t) * frame.sample_rate)
            if skip >= frame.samples:
                return
            frame = _tail(frame, skip)
            t = self.fed
        self.fed = t + Fraction(frame.samples, frame.sample_rate)
        yield from self._out(self.resampler.resample(frame))

    def flush(self) -> Iterator[np.ndarray]:
        try:
            for frame in self.stream.codec_context.decode(None):
                yield from self._frame(frame)
        except av.FFmpegError:
            pass
        yield from self._out(self.resampler.resample(None))


def _tail(frame: av.AudioFrame, skip: int) -> av.AudioFrame:
    """The frame without its first `skip` samples."""
    data = frame.to_ndarray()
    planar = frame.format.is_planar
    data = data[:, skip:] if planar else data[:, skip * len(frame.layout.channels) :]
    out = av.AudioFrame.from_ndarray(
        np.ascontiguousarray(data),  # type: ignore[arg-type]
        format=frame.format.name,
        layout=frame.layout.name,
    )
    out.sample_rate = frame.sample_rate
    return out


def load_audio(
    path: str | os.PathLike[str], rate: int = AUDIO_RATE, track: int | None = None, origin: Fraction | None = None
) -> np.ndarray | None:
    """The heard audio track as mono float32 at `rate` Hz, in memory (see iter_audio); None when
    the clip has no audio."""
    if not has_audio(path):
        return None
    chunks = list(iter_audio(path, rate, track, origin))
    return np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.float32)
