"""The media layer on PyAV: a clip's facts and its one clock (probe), which frames to decode and
how (decode), frames by time (frames, spans), the heard audio (audio), JPEG files (images), which
of a file's streams make the clip (streams).

Time is data: every frame carries `pts * time_base` on the clip's clock, never `index / fps`;
access by time is kept apart from access by index.

May import: avstack.io, avstack.limits. Nothing else of avstack (a decoder knows no ASR, no
prompt, no task).
"""

from avstack.media.audio import has_audio, has_video, iter_audio, load_audio
from avstack.media.decode import (
    DECODE_PATHS,
    SELECTIVE_CODECS,
    DamagedDecodeError,
    Plan,
    Sampling,
    SelectiveDecodeError,
    check_pixels,
    plan_frames,
)
from avstack.media.frames import FrameReader, all_frame_times, sample_frames, with_fallback
from avstack.media.probe import (
    AUDIO_RATE,
    THREAD_TYPES,
    ClipInfo,
    Frame,
    MediaError,
    PacketScan,
    Sample,
    clip_origin,
    droppable_tails,
    ms,
    open_video,
    origin_of,
    pick_audio,
    probe,
    scan_packets,
    target_times,
    upright,
    video_stream,
)
from avstack.media.streams import StreamPick

__all__ = [
    "AUDIO_RATE", "DECODE_PATHS", "SELECTIVE_CODECS", "THREAD_TYPES", "ClipInfo", "DamagedDecodeError", "Frame",
    "FrameReader", "MediaError", "PacketScan", "Plan", "Sample", "Sampling", "SelectiveDecodeError", "StreamPick",
    "all_frame_times",
    "check_pixels", "clip_origin", "droppable_tails", "has_audio", "has_video", "iter_audio", "load_audio", "ms",
    "open_video",
    "origin_of", "pick_audio", "plan_frames", "probe", "sample_frames", "scan_packets", "target_times", "upright",
    "video_stream", "with_fallback",
]  # fmt: skip
