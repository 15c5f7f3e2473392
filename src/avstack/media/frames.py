"""Frames by time: the reader over a plan, the fallback ladder, sampling in memory, every frame's time.

Access by time (`sample_frames`) is kept apart from access by index (`Frame.index` is only a label)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import replace
from fractions import Fraction
from typing import TYPE_CHECKING, Any, TypeVar

import av

from avstack.media.decode import (
    DamagedDecodeError,
    Sampling,
    SelectiveDecodeError,
    check_pixels,
    configure_threads,
    crash_for_tests,
    decode_selective,
    decode_sequential,
    frame_threaded,
    make_frame,
    plan_frames,
    tolerant_frames,
)
from avstack.media.probe import (
    SPAN_PIXELS,
    ClipInfo,
    Frame,
    MediaError,
    Sample,
    clip_origin,
    describe,
    ms,
    open_video,
    probe,
    scan_packets,
    video_stream,
)

if TYPE_CHECKING:  # spans are planned on demand (selective decode splits)
    from avstack.media.spans import Span

T = TypeVar("T")


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
        crash_for_tests(self.path)
        self._cm = open_video(path)
        self._container = self._cm.__enter__()
        try:
            self._plan(info)
        except BaseException:
            self.close()
            raise

    def _plan(self, info: ClipInfo | None) -> None:
        container, s = self._container, self.sampling
        # the stream probed into `info` (ClipInfo.streams), else the one asked for or a player's pick
        index = info.streams.get("video", {}).get("index") if info is not None else s.pick.video
        stream = self._stream = video_stream(container, index)
        configure_threads(stream, s.thread_type, s.threads)
        self._tb = stream.time_base or Fraction(1, 90_000)
        if info is None:
            info, scan = describe(container, self.path, s.pick)
        else:
            scan = scan_packets(container, None, stream)
        if not scan.pts:
            raise MediaError(f"{self.path}: no video frames (zero-length or unreadable clip)")
        check_pixels(info, s.max_pixels)
        self.info, self.frame_count = info, len(scan.pts)
        self._origin = clip_origin(info)
        self._all_pts = scan.pts
        self._scan = scan
        self.damage: list[dict[str, object]] = []
        self.plan = plan_frames(scan, self._origin, self._tb, s.targets(info), info.video_codec, s.decode)
        self.decode_path = f"{self.plan.path}: {self.plan.reason}"
        if scan.damaged and frame_threaded(stream):
            # frame threads drop what they hold at damage (see tolerant_frames): with_fallback
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
            return decode_selective(self._container, self._stream, self.plan, self._origin, self._tb, stats)
        return decode_sequential(
            self._container,
            self._stream,
            self.plan,
            self._origin,
            self._tb,
            self.path,
            stats,
            self.damage,
            self._all_pts,
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
                    yield make_frame(index, rel, frame, self.info.rotation, self.sampling.max_side, self.pixel_format)
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

    def spans(self) -> list[Span]:
        """The independent spans a selective plan splits into (one: nothing to split;
        avstack.spans says when a split is exact)."""
        from avstack.media.spans import Span, plan_spans

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
        from avstack.limits import cores
        from avstack.media import spans

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
            return make_frame(index, rel, frame, self.info.rotation, self.sampling.max_side, self.pixel_format)

        results, self.decoded = spans.decode_spans(
            (self.path, self._stream.index),
            parts,
            self._scan.decode_order,
            self.plan,
            self._origin,
            make,
            consume,
            threads,
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
        stream = video_stream(container, info.streams["video"]["index"])
        stream.codec_context.thread_count = 1
        tb = stream.time_base or Fraction(1, 90_000)
        frames = tolerant_frames(container, stream, origin, [])
        return [ms(Fraction(frame.pts or 0) * tb - origin) for frame in frames]
