"""The clip's own sound for a stack that hears it (`omni`): the prepared 16 kHz WAV, which lies on
the clip's clock (sample 0 is where a player starts the clip, avstack.media.audio), so a time
heard in it is a time on the frames' clock too."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from avstack.io import DataError, inside, write_wav_float
from avstack.manifest import ClipRecord

RATE = 16_000


def clip_sound(record: ClipRecord, prepared_dir: str | Path, stack_name: str) -> str:
    """The path (relative to the prepared folder) of the sound a request carries for `record`:
    its prepared audio; for a clip with no audio track, silence as long as the clip (written
    once into the prepared folder: a clip without sound is heard as silent, never dropped).
    DataError naming the clip when the folder was prepared without audio."""
    audio = record.audio or {}
    if audio.get("path"):
        inside(prepared_dir, audio["path"], f"clip {record.clip_id!r}: audio")  # a manifest is input too
        return str(audio["path"])
    if record.has_audio is False and isinstance(record.duration_ms, int) and record.duration_ms > 0:
        rel = f"audio/silence/{record.duration_ms}ms.wav"
        path = Path(prepared_dir) / rel
        if not path.is_file():
            write_wav_float(path, [np.zeros(record.duration_ms * RATE // 1000, np.float32)], RATE)
        return rel
    raise DataError(
        f"clip {record.clip_id!r}: the {stack_name} stack sends the clip's sound; expected its prepared audio "
        f"(prepare with --anchors full, or one that lists audio), found none in the manifest"
    )
