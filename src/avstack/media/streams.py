"""Which of a file's streams make the clip: the ones a player would pick, unless asked otherwise.

A file may hold several video streams (a second angle, a preview) and several audio tracks
(languages, commentary). By default the clip is what ffmpeg, PyAV's `streams.best` and torchcodec
take: FFmpeg's `av_find_best_stream`, which ranks the default disposition first (and a stream
for the hearing or visually impaired last), then streams with decodable frames, then the higher
bit rate. Before this, avstack took the first video stream, which on a file whose default is
the second showed another picture than a player."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import av

from avstack.errors import UsageError
from avstack.media.errors import MediaError


@dataclass(frozen=True)
class StreamPick:
    """What was asked: `video`, the file's stream index (as ffprobe numbers them); `audio`, the
    file's stream index or a language as the file tags it ("eng", "de"); `audio_track`, the Nth
    audio stream (0 = the first; the older way to ask). None everywhere: ffmpeg's pick."""

    video: int | None = None
    audio: int | str | None = None
    audio_track: int | None = None

    def __post_init__(self) -> None:
        if self.audio is not None and self.audio_track is not None:
            raise UsageError(
                f"ask for one audio stream: --audio-stream {self.audio} or --audio-track {self.audio_track}, not both"
            )

    @classmethod
    def of(cls, value: StreamPick | int | None) -> StreamPick:
        """A pick from what older callers pass: an audio track number, or None."""
        return value if isinstance(value, StreamPick) else cls(audio_track=value)

    def key(self) -> dict[str, object]:
        """The pick as it enters cache keys (the streams heard and seen decide every frame's time)."""
        return {"video": self.video, "audio": self.audio, "audio_track": self.audio_track}

    def video_of(self, container: av.container.InputContainer) -> tuple[Any, str]:
        """The video stream, and why it is the one."""
        streams = list(container.streams.video)
        if not streams:
            raise MediaError(f"{container.name}: no video stream")
        if self.video is not None:
            chosen = [s for s in streams if s.index == self.video]
            if not chosen:
                raise MediaError(
                    f"{container.name}: video stream {self.video} asked for (--video-stream); "
                    f"its video streams are {', '.join(str(s.index) for s in streams)}"
                )
            return chosen[0], f"asked for (--video-stream {self.video})"
        return _best(container, "video", streams)

    def audio_of(self, container: av.container.InputContainer) -> tuple[Any, str]:
        """The audio stream heard (None when the file has none), and why it is the one."""
        streams = list(container.streams.audio)
        if not streams:
            return None, "no audio stream"
        if self.audio_track is not None:
            if not 0 <= self.audio_track < len(streams):
                raise MediaError(
                    f"{container.name}: audio track {self.audio_track} asked for (--audio-track), "
                    f"the file has {len(streams)}"
                )
            return streams[self.audio_track], f"asked for (--audio-track {self.audio_track})"
        if self.audio is None:
            return _best(container, "audio", streams)
        if isinstance(self.audio, int) or str(self.audio).isdigit():
            chosen = [s for s in streams if s.index == int(self.audio)]
            if not chosen:
                found = ", ".join(str(s.index) for s in streams)
                raise MediaError(
                    f"{container.name}: audio stream {self.audio} asked for (--audio-stream); "
                    f"its audio streams are {found}"
                )
            return chosen[0], f"asked for (--audio-stream {self.audio})"
        return _by_language(container, streams, str(self.audio))


def _best(
    container: av.container.InputContainer, kind: Literal["video", "audio"], streams: list[Any]
) -> tuple[Any, str]:
    if len(streams) == 1:
        return streams[0], f"the only {kind} stream"
    best = container.streams.best(kind) or streams[0]
    marks = "default disposition" if best.disposition & av.stream.Disposition.default else "no default marked"
    return best, f"ffmpeg's pick of {len(streams)} {kind} streams ({marks})"


def language(stream: Any) -> str | None:
    tag = (stream.metadata or {}).get("language")
    return tag.lower() if tag and tag.lower() != "und" else None


def _by_language(container: av.container.InputContainer, streams: list[Any], wanted: str) -> tuple[object, str]:
    chosen = [s for s in streams if language(s) == wanted.lower()]
    if not chosen:
        tags = ", ".join(f"{s.index}: {language(s) or 'untagged'}" for s in streams)
        raise MediaError(
            f"{container.name}: no audio stream in language {wanted!r} (--audio-stream); its audio streams: {tags}"
        )
    marked = [s for s in chosen if s.disposition & av.stream.Disposition.default]
    return (marked or chosen)[0], f"asked for (--audio-stream {wanted}: language {wanted})"


def candidates(container: av.container.InputContainer, kind: str) -> list[int]:
    return [s.index for s in getattr(container.streams, kind)]
