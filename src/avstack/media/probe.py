"""A clip's facts from one demux pass: streams, packets, the clip's one clock (time 0 is where a
player starts it), rotation; the records frames and samples travel in."""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import av
import numpy as np

from avstack.errors import UsageError
from avstack.media.errors import MediaError
from avstack.media.streams import StreamPick, language

AUDIO_RATE = 16_000


THREAD_TYPES = ("AUTO", "FRAME", "SLICE", "NONE")


SPAN_PIXELS = 3840 * 2160  # pictures decoded side by side in one reader (spans), at most


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
def open_media(path: str | os.PathLike[str]) -> Iterator[av.container.InputContainer]:
    """A container of any kind, closed after use; a file PyAV cannot open is a MediaError."""
    try:
        container = av.open(str(path))
    except (av.FFmpegError, OSError) as exc:
        raise MediaError(f"{path}: cannot open ({exc})") from exc
    try:
        yield container
    finally:
        container.close()


@contextmanager
def open_video(path: str | os.PathLike[str]) -> Iterator[av.container.InputContainer]:
    """A container that has a video stream (else a MediaError)."""
    with open_media(path) as container:
        if not container.streams.video:
            raise MediaError(f"{path}: no video stream")
        yield container


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


def pick_audio(container: av.container.InputContainer, track: StreamPick | int | None = None) -> object:
    """The audio stream a person hears (media.streams: ffmpeg's pick unless asked; an int is
    the Nth audio track, 0 = the first); None when there is none."""
    return StreamPick.of(track).audio_of(container)[0]


def video_stream(container: av.container.InputContainer, index: int | None = None) -> Any:
    """The clip's video stream: the file's stream `index` (as probed into `ClipInfo.streams`),
    else the one a player would pick."""
    return StreamPick(video=index).video_of(container)[0]


def scan_packets(container: av.container.InputContainer, audio: Any = None, video: object = None) -> PacketScan:
    """Video packets as presented (packets an edit list discards are not shown, so not counted),
    and the span of `audio`'s packets, in one demux pass (`video`: the clip's video stream,
    default the one a player would pick)."""
    stream = video if video is not None else video_stream(container)
    decode_order, missing, discarded, damaged = [], 0, 0, 0
    # the audio's span in its own time base's ticks, made exact seconds once at the end: an hour
    # holds some 56,000 AAC packets, and Fraction arithmetic on each cost a third of a second
    a_first: int | None = None
    a_end: int | None = None
    a_tb = audio.time_base if audio is not None else None
    for p in container.demux(*([stream, audio] if audio is not None else [stream])):
        if p.size <= 0 or p.is_discard:
            discarded += p.is_discard and p.stream.type == "video"
            continue
        if p.stream.type == "audio":
            if p.pts is not None and a_tb is not None:
                end = p.pts + (p.duration or 0)
                a_first = p.pts if a_first is None or p.pts < a_first else a_first
                a_end = end if a_end is None or end > a_end else a_end
            continue
        damaged += p.is_corrupt
        if p.pts is None:
            missing += 1
        else:
            decode_order.append((p.pts, bool(p.is_keyframe)))
    in_decode = [pts for pts, _ in decode_order]
    ordered = sorted(in_decode)
    span = None
    if a_first is not None and a_end is not None and a_tb is not None:
        span = (Fraction(a_first) * a_tb, Fraction(a_end) * a_tb)
    return PacketScan(
        pts=ordered,
        decode_order=decode_order,
        reordered=in_decode != ordered,
        complete=missing == 0 and len(set(ordered)) == len(ordered),
        audio_span=span,
        discarded=discarded,
        damaged=damaged,
    )


def gops(order: list[tuple[int, bool]]) -> list[range]:
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
    spans = gops(order)
    drop: set[int] = set()
    for j, gop in enumerate(spans):
        if j + 1 < len(spans) and _is_open(order, spans[j + 1]):
            continue
        last = max((i for i in gop if order[i][0] in needed), default=gop.start - 1)
        drop.update(order[i][0] for i in range(last + 1, gop.stop))
    return frozenset(drop)


def probe(path: str | os.PathLike[str], audio_track: StreamPick | int | None = None) -> ClipInfo:
    """Clip facts from the container, one demux pass and one decoded frame (`audio_track`: the
    streams asked for, media.streams.StreamPick, or the Nth audio track)."""
    with open_video(path) as container:
        return describe(container, path, audio_track)[0]


def describe(
    container: av.container.InputContainer, path: str | os.PathLike[str], pick: StreamPick | int | None = None
) -> tuple[ClipInfo, PacketScan]:
    pick = StreamPick.of(pick)
    stream, video_why = pick.video_of(container)
    tb = stream.time_base
    audio, audio_why = pick.audio_of(container)
    scan = scan_packets(container, audio, stream)
    pts = scan.pts
    if not pts or tb is None:
        raise MediaError(f"{path}: no video frames (zero-length or unreadable clip)")
    container.seek(0)
    rotation = _first_rotation(container, stream)
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
    # which stream, and why, where the file offered a choice (prepare's summary names such files)
    if len(container.streams.video) > 1 or pick.video is not None:
        streams["video"] |= {"why": video_why, "of": [s.index for s in container.streams.video]}
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
        if len(container.streams.audio) > 1 or audio_why.startswith("asked"):
            streams["audio"] |= {"why": audio_why, "of": [s.index for s in container.streams.audio]}
            streams["audio"] |= {"language": lang} if (lang := language(audio)) else {}
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


def _first_rotation(container: av.container.InputContainer, stream: Any) -> int:
    try:
        for frame in container.decode(stream):
            return int(round(frame.rotation)) % 360
    except av.FFmpegError:
        return 0
    return 0


def target_times(duration_ms: int, fps: float = 2.0, max_frames: int | None = None) -> list[Fraction]:
    """t = 0, 1/fps, 2/fps, ... below the duration; uniformly thinned to max_frames."""
    if fps <= 0:
        raise UsageError(f"fps must be > 0, got {fps}")
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
