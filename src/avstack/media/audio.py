"""The heard audio track, mono at 16 kHz, placed on the clip's clock (gaps filled, overlaps trimmed)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import av
import numpy as np

from avstack.media.probe import AUDIO_RATE, ms, open_media, pick_audio
from avstack.media.streams import StreamPick


def has_audio(path: str | os.PathLike[str]) -> bool:
    with open_media(path) as container:
        return bool(container.streams.audio)


def has_video(path: str | os.PathLike[str]) -> bool:
    with open_media(path) as container:
        return bool(container.streams.video)


def iter_audio(
    path: str | os.PathLike[str],
    rate: int = AUDIO_RATE,
    track: StreamPick | int | None = None,
    origin: Fraction | None = None,
    damage: list[dict[str, object]] | None = None,
) -> Iterator[np.ndarray]:
    """The heard audio track (`pick_audio`) as mono float32 chunks at `rate` Hz, placed on the clip's
    clock: sample 0 is time `origin` (container seconds; default the track's own start), a track
    that starts later is preceded by silence, a gap in its timestamps is filled with silence and
    an overlap trimmed (as a player does), and a packet the decoder rejects is silence, its span
    appended to `damage`. Nothing is held beyond one chunk; no chunk when there is no audio."""
    with open_media(path) as container:
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

    def __init__(self, stream: Any, rate: int, origin: Fraction | None, damage: list[dict[str, object]]):
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
    path: str | os.PathLike[str],
    rate: int = AUDIO_RATE,
    track: StreamPick | int | None = None,
    origin: Fraction | None = None,
) -> np.ndarray | None:
    """The heard audio track as mono float32 at `rate` Hz, in memory (see iter_audio); None when
    the clip has no audio."""
    if not has_audio(path):
        return None
    chunks = list(iter_audio(path, rate, track, origin))
    return np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.float32)
