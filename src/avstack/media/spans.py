"""A selective decoding plan split into independent spans, decoded side by side on threads.

A closed GOP (no picture shown before its keyframe follows it in decoding) refers to nothing
before its keyframe, so a decoder started at that keyframe makes the same pictures as one that
ran from the first packet. A plan therefore splits at closed keyframes into spans that threads
decode at once (FFmpeg releases the GIL while it decodes): one clip keeps every core busy, and a
clip's last GOPs no longer run on one core while the others idle. Open GOPs (x265's default,
whose leading pictures look back) stay joined to the span before them, and a span ends at its
last needed packet, so GOP tails and GOPs with no needed frame are never decoded.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, TypeVar

import av

from avstack.media.decode import Plan, SelectiveDecodeError, configure_threads
from avstack.media.probe import Frame, gops, open_video

R = TypeVar("R")


@dataclass(frozen=True)
class Span:
    """Packets [start, stop) in decode order; `start` is a closed keyframe (or the first packet)."""

    start: int
    stop: int

    @property
    def cost(self) -> int:
        return self.stop - self.start


def _independent(order: list[tuple[int, bool]], gop: range, needed: Any, hevc: bool) -> bool:
    """A decoder started at this GOP's keyframe makes every needed picture of it exactly: the GOP
    is closed, or (HEVC) no needed picture leads it. HEVC forbids a trailing picture to refer to
    one that precedes its IRAP in decoding or output order, so an open GOP's trailing pictures
    never look back and its leading ones, unneeded, are skipped; H.264 makes no such promise."""
    key_pts, key = order[gop.start]
    if not key:
        return False
    leading = [order[i][0] for i in gop[1:] if order[i][0] < key_pts]
    return not leading or (hevc and not any(p in needed for p in leading))


def _units(order: list[tuple[int, bool]], needed: Any, hevc: bool) -> list[list[int]]:
    """[start, last needed index or -1] per independent GOP and the dependent GOPs after it."""
    units: list[list[int]] = []
    for gop in gops(order):
        # a file's last packet may be cut short; a keyframe cut short is concealed from the picture
        # decoded before it, so it stays with the span before it, as a sequential decode has it
        cut_key = gop.start == len(order) - 1 and len(order) > 1
        independent = _independent(order, gop, needed, hevc) and not cut_key
        last = max((i for i in gop if order[i][0] in needed), default=-1)
        if independent or not units:
            units.append([gop.start, last])
        elif last >= 0:
            units[-1][1] = last
    return units


def plan_spans(order: list[tuple[int, bool]], needed: object, hevc: bool = False) -> list[Span]:
    """One span per independent GOP that holds a needed packet (with the dependent GOPs after it),
    from its keyframe to its last needed packet. Never joined: a join would decode the packets
    between (an open GOP's leading pictures), and a few more spans than threads even out the end."""
    return [Span(a, last + 1) for a, last in _units(order, needed, hevc) if last >= 0]


def _seek_to(container: av.container.InputContainer, stream: Any, key_pts: int, reused: bool) -> None:
    # a reused container is sought even to the start: PyAV's seek flushes the decoder, which the
    # span before it left drained
    if key_pts != 0 or reused:
        container.seek(key_pts, stream=stream, backward=True, any_frame=False)


class _Decoders:
    """One open container per thread, reused span after span: opening an hour-long MP4 (its
    sample tables) cost 8 ms, which over an hour's 728 spans was six seconds of a 14 s decode."""

    def __init__(self, path: str, index: int):
        self.path, self.index, self.local = path, index, threading.local()  # index: the video stream
        self.opened: list[Any] = []
        self.lock = threading.Lock()

    def get(self) -> tuple[av.container.InputContainer, bool]:
        """This thread's container, and whether a span used it before."""
        container = getattr(self.local, "container", None)
        if container is not None:
            return container, True
        cm = open_video(self.path)
        container = cm.__enter__()
        stream: Any = container.streams[self.index]  # a video stream (FrameReader chose it)
        configure_threads(stream, "NONE")  # one span, one core: the spans are the threads
        with self.lock:
            self.opened.append(cm)
        self.local.container = container
        return container, False

    def close(self) -> None:
        for cm in self.opened:
            cm.__exit__(None, None, None)


def decode_span(
    decoders: _Decoders,
    where: dict[int, int],
    span: Span,
    order: list[tuple[int, bool]],
    plan: Plan,
    origin: Fraction,
    make_frame: Callable[[int, Fraction, av.VideoFrame], Frame],
    consume: Callable[[Frame], R],
) -> tuple[list[tuple[int, R]], int]:
    """consume() of each needed frame in the span, and how many frames the decoder made, on this
    thread's container (`decoders`; `where`: each packet's place in decode order). Packets must
    come back exactly as the plan's scan saw them, else SelectiveDecodeError (the caller falls
    back to one sequential pass)."""
    container, reused = decoders.get()
    path = decoders.path
    stream: Any = container.streams[decoders.index]  # a video stream (FrameReader chose it)
    tb = stream.time_base or Fraction(1, 90_000)
    ctx = stream.codec_context
    _seek_to(container, stream, order[span.start][0] if span.start else 0, reused)
    out: list[tuple[int, R]] = []
    decoded, i = 0, span.start

    def take(frames: list[av.VideoFrame]) -> None:
        nonlocal decoded
        for frame in frames:
            decoded += 1
            index = None if frame.pts is None else plan.needed.get(frame.pts)
            if index is not None and frame.pts is not None:
                out.append((index, consume(make_frame(index, Fraction(frame.pts) * tb - origin, frame))))

    for packet in container.demux(stream):
        if packet.size <= 0:
            continue
        if i == span.start and packet.pts != order[i][0]:
            if where.get(packet.pts, -1) > i:
                raise SelectiveDecodeError(f"{path}: a seek to packet {i} went past it")
            continue  # before the span's keyframe (a seek may land on an earlier one)
        if packet.pts != order[i][0]:
            raise SelectiveDecodeError(
                f"{path}: packet {i} in decode order has pts {packet.pts}, the scan saw {order[i][0]}"
            )
        if packet.pts in plan.needed:
            ctx.skip_frame = "DEFAULT"
        elif packet.pts in plan.drop or (span.start and packet.pts < order[span.start][0]):
            ctx.skip_frame = "ALL"  # never needed, or shown before the span's keyframe (see _independent)
        else:
            ctx.skip_frame = "NONREF"
        try:
            take(ctx.decode(packet))
        except av.FFmpegError as exc:
            raise SelectiveDecodeError(f"{path}: damaged packet at pts {packet.pts} ({exc})") from exc
        i += 1
        if i == span.stop:
            break
    if i != span.stop:
        raise SelectiveDecodeError(f"{path}: span {span.start}-{span.stop} ended at packet {i}")
    take(ctx.decode(None))  # the pictures still held for reordering
    return out, decoded


def decode_spans(
    source: tuple[str, int],
    spans: list[Span],
    order: list[tuple[int, bool]],
    plan: Plan,
    origin: Fraction,
    make_frame: Callable[[int, Fraction, av.VideoFrame], Frame],
    consume: Callable[[Frame], R],
    threads: int,
) -> tuple[list[R], int]:
    """Every span on `threads` threads, longest first; results in time order (`source`: the file
    and its video stream's index)."""
    path = source[0]
    decoders = _Decoders(*source)
    where = {pts: k for k, (pts, _) in enumerate(order)}
    try:
        with ThreadPoolExecutor(threads) as pool:
            jobs = [
                pool.submit(decode_span, decoders, where, s, order, plan, origin, make_frame, consume)
                for s in sorted(spans, key=lambda s: -s.cost)
            ]
            parts = [j.result() for j in jobs]
    finally:
        decoders.close()
    results = sorted((r for part, _ in parts for r in part), key=lambda r: r[0])
    seen = [index for index, _ in results]
    if sorted(set(seen)) != sorted(set(plan.needed.values())) or len(seen) != len(set(seen)):
        raise SelectiveDecodeError(
            f"{path}: spans returned frames {len(set(seen))} of {len(plan.needed)} planned ({len(seen)} in all)"
        )
    return [r for _, r in results], sum(d for _, d in parts)
