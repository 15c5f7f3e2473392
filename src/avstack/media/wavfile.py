"""A sound in the WAV sample format a server decodes: the prepared WAV holds IEEE float32 (RIFF
format 3), which OpenAI documents nowhere and some decoders refuse; PCM16 is what every WAV reader
takes."""

from __future__ import annotations

import io

import numpy as np

from avstack.errors import UsageError

SOUND_FORMATS = ("prepared", "pcm16")  # the prepared file's bytes as they are, or 16-bit PCM


def pcm16_wav(data: bytes) -> bytes:
    """The same sound as a 16-bit PCM WAV: each sample rounded to the nearest of 32,768 steps
    (x * 32768, clipped to the int16 range), so a reader that divides by 32768 gets every sample
    back within half a step; the rate and channels are kept."""
    import soundfile as sf

    samples, rate = sf.read(io.BytesIO(data), dtype="float64", always_2d=True)
    steps = np.clip(np.rint(samples * 32768.0), -32768, 32767).astype(np.int16)
    out = io.BytesIO()
    sf.write(out, steps, rate, subtype="PCM_16", format="WAV")
    return out.getvalue()


def in_format(data: bytes, fmt: str) -> bytes:
    """A WAV file's bytes in the sample format `fmt` (SOUND_FORMATS); a file already PCM16 is kept."""
    if fmt not in SOUND_FORMATS:
        raise UsageError(f"audio format: expected one of {', '.join(SOUND_FORMATS)}, got {fmt!r}")
    if fmt == "prepared" or is_pcm16(data):
        return data
    return pcm16_wav(data)


def is_pcm16(data: bytes) -> bool:
    """Whether a WAV file holds 16-bit integer PCM (its header, as libsndfile reads it)."""
    import soundfile as sf

    return bool(sf.info(io.BytesIO(data)).subtype == "PCM_16")
