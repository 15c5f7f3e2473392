"""Synthetic clips with known content and timing, for tests, benchmarks and the demo.

Every frame shows its own index as a row of black/white blocks along the top
edge (`read_index` reads it back), so a test can tell exactly which frame a
sampler returned. Frame pts are set explicitly, so the true times are known.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import av
import numpy as np

from avstack.errors import MissingTool

if TYPE_CHECKING:  # a TypedDict: only the annotations read it
    from avstack.asr.types import TimedWord


INDEX_BITS = 12
BLOCK = 32  # px per bit block; survives JPEG and downscaling to ~1/4


@dataclass(frozen=True)
class ClipSpec:
    width: int = 640
    height: int = 360
    fps: int = 30
    duration_s: float = 2.0
    codec: str = "libx264"  # or "libx265"
    bframes: bool = True
    vfr: bool = False
    rotation: int = 0  # counter-clockwise display rotation
    audio: np.ndarray | None = None  # mono float32 at audio_rate
    audio_rate: int = 16_000
    crf: int = 28
    gop: int = 30
    movflags: str | None = None  # MP4 layout: "faststart" (moov first), "frag_keyframe+empty_moov" (fragmented)


def frame_times(spec: ClipSpec) -> list[Fraction]:
    """Presentation times of every frame: regular, or irregular for VFR."""
    n = max(1, int(round(spec.duration_s * spec.fps)))
    if not spec.vfr:
        return [Fraction(i, spec.fps) for i in range(n)]
    # VFR: intervals cycle through 1/2x, 1x and 2x the nominal period
    base = Fraction(1, spec.fps)
    times, t = [], Fraction(0)
    steps = [base / 2, base, base * 2, base, base / 2 * 3]
    i = 0
    while t < Fraction(spec.duration_s).limit_denominator(1000):
        times.append(t)
        t += steps[i % len(steps)]
        i += 1
    return times


def draw_frame(index: int, width: int, height: int, scene: np.ndarray | None = None) -> np.ndarray:
    """RGB image: a scene (or a gradient), a moving bar, and the index code on top."""
    if scene is not None:
        img = scene.copy()
    else:
        x = np.linspace(40, 200, width, dtype=np.uint8)
        img = np.repeat(np.repeat(x[None, :, None], height, 0), 3, 2)
        img[..., 2] = 255 - img[..., 2]
    bar = (index * 7) % max(1, width - 20)
    img[height // 2 : height // 2 + 20, bar : bar + 20] = (255, 64, 0)
    for b in range(INDEX_BITS):
        on = (index >> b) & 1
        img[0:BLOCK, b * BLOCK : (b + 1) * BLOCK] = 255 if on else 0
    return img


def read_index(rgb: np.ndarray, scale: float = 1.0) -> int:
    """Read back the index code drawn by draw_frame (image may be scaled)."""
    block = BLOCK * scale
    out = 0
    for b in range(INDEX_BITS):
        y, x = int(block / 2), int(block * b + block / 2)
        if rgb[y, x].mean() > 127:
            out |= 1 << b
    return out


def write_clip(path: str | os.PathLike[str], spec: ClipSpec, scene: np.ndarray | None = None) -> list[Fraction]:
    """Write a clip; returns the true presentation time of every frame."""
    times = frame_times(spec)
    tb = Fraction(1, 90_000)
    with av.open(str(path), "w", options={"movflags": spec.movflags} if spec.movflags else {}) as out:
        opts = {"crf": str(spec.crf), "g": str(spec.gop)}
        if spec.codec == "libx264":
            opts["bf"] = "2" if spec.bframes else "0"
        elif spec.codec == "libx265":
            opts["x265-params"] = f"bframes={2 if spec.bframes else 0}:log-level=error"
        vs: Any = out.add_stream(spec.codec, rate=spec.fps, options=opts)
        vs.width, vs.height, vs.pix_fmt = spec.width, spec.height, "yuv420p"
        vs.time_base = tb
        vs.codec_context.time_base = tb
        if spec.rotation:
            vs.set_display_rotation(spec.rotation)
        aus = None
        if spec.audio is not None:
            aus = out.add_stream("aac", rate=spec.audio_rate, layout="mono")
        for i, t in enumerate(times):
            frame = av.VideoFrame.from_ndarray(draw_frame(i, spec.width, spec.height, scene), format="rgb24")
            frame.pts = int(t / tb)
            frame.time_base = tb
            out.mux(vs.encode(frame))
        out.mux(vs.encode(None))
        if aus is not None and spec.audio is not None:
            _write_audio(out, aus, spec.audio, spec.audio_rate)
    return times


def _write_audio(out: av.container.OutputContainer, stream: Any, audio: np.ndarray, rate: int) -> None:
    samples = np.clip(audio, -1, 1).astype(np.float32)
    chunk = 1024
    for start in range(0, len(samples), chunk):
        part = samples[start : start + chunk]
        frame = av.AudioFrame.from_ndarray(part[None, :], format="flt", layout="mono")
        frame.sample_rate = rate
        frame.pts = start
        frame.time_base = Fraction(1, rate)
        out.mux(stream.encode(frame))
    out.mux(stream.encode(None))


def noise(duration_s: float, rate: int = 16_000, level: float = 0.01, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(int(duration_s * rate)) * level).astype(np.float32)


def place_words(
    words: Sequence[tuple[str, np.ndarray]],
    starts_ms: Sequence[int],
    duration_s: float,
    rate: int = 16_000,
    noise_level: float = 0.005,
    seed: int = 0,
) -> tuple[np.ndarray, list[TimedWord]]:
    """Put word recordings on a timeline; returns audio and the true word times."""
    audio = noise(duration_s, rate, noise_level, seed)
    truth: list[TimedWord] = []
    for (text, wav), start in zip(words, starts_ms):
        i = int(start * rate / 1000)
        seg = wav[: max(0, len(audio) - i)]
        audio[i : i + len(seg)] += seg
        truth.append({"text": text, "begin_time": int(start), "end_time": int(start + len(seg) * 1000 / rate)})
    return audio, truth


def espeak_available() -> bool:
    """Can words be spoken: eSpeak NG's library from the espeakng-loader wheel (no system package
    needed), or the espeak-ng program."""
    import shutil

    return _espeak_library() is not None or shutil.which("espeak-ng") is not None


def pinyin_speakable() -> bool:
    """Can Mandarin be spoken from pinyin (the cmn-latn-pinyin voice)? Only by the espeak-ng
    program: the library in the espeakng-loader wheel reads "ba3" so that Whisper hears no
    Mandarin in it (measured: 0 of 5 words recognized where the program's speech gives 5)."""
    import shutil

    return shutil.which("espeak-ng") is not None


_ESPEAK: dict[str, Any] = {}  # the library, loaded once: its callback, the samples it hands over, a lock


def _espeak_library() -> dict[str, Any] | None:
    if "lib" in _ESPEAK:
        return _ESPEAK["lib"] and _ESPEAK
    try:
        import ctypes
        import threading

        import espeakng_loader
    except ImportError:
        _ESPEAK["lib"] = None
        return None
    lib = ctypes.cdll.LoadLibrary(espeakng_loader.get_library_path())
    chunks: list[np.ndarray] = []

    def take(wav: object, n: int, _events: object) -> int:
        if n > 0:
            chunks.append(np.ctypeslib.as_array(wav, shape=(n,)).copy())
        return 0

    callback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.c_void_p)(take)
    synchronous = 2  # AUDIO_OUTPUT_SYNCHRONOUS: samples come to the callback, nothing is played
    rate = lib.espeak_Initialize(synchronous, 0, os.path.dirname(espeakng_loader.get_data_path()).encode(), 0)
    if rate <= 0:
        _ESPEAK["lib"] = None
        return None
    lib.espeak_SetSynthCallback(callback)
    _ESPEAK.update(lib=lib, callback=callback, chunks=chunks, rate=rate, lock=threading.Lock())
    return _ESPEAK


def _espeak(text: str, voice: str, speed: int) -> tuple[np.ndarray, int]:
    """eSpeak NG's samples for `text` and their rate: the espeak-ng program where it is installed,
    else the library from the espeakng-loader wheel (a newer eSpeak NG: English words come out
    within a few samples of the program's, not identical; its pinyin is not Mandarin Whisper
    hears, see pinyin_speakable)."""
    import shutil

    engine = None if shutil.which("espeak-ng") else _espeak_library()
    if engine is not None:
        with engine["lock"]:
            return _in_fresh_state(lambda: _library_pcm(engine, text, voice, speed)), engine["rate"]
    import subprocess
    import tempfile

    import soundfile as sf

    exe = shutil.which("espeak-ng")
    if exe is None:
        raise MissingTool("eSpeak NG is not installed (pip install espeakng-loader, or apt-get install espeak-ng)")
    with tempfile.NamedTemporaryFile(suffix=".wav") as tmp:
        subprocess.run([exe, "-v", voice, "-s", str(speed), "-w", tmp.name, text], check=True, capture_output=True)
        wav, sr = sf.read(tmp.name, dtype="float32")
    return (wav.mean(axis=1) if wav.ndim > 1 else wav), sr


def _library_pcm(engine: dict[str, Any], text: str, voice: str, speed: int) -> np.ndarray:
    engine["chunks"].clear()
    if engine["lib"].espeak_SetVoiceByName(voice.encode()) != 0:
        raise MissingTool(f"eSpeak NG has no voice {voice!r}")
    engine["lib"].espeak_SetParameter(1, speed, 0)  # espeakRATE, words per minute
    data = text.encode()
    # from character 0 (POS_CHARACTER) to the end, UTF-8 text
    engine["lib"].espeak_Synth(data, len(data) + 1, 0, 1, 0, 1, None, None)
    engine["lib"].espeak_Synchronize()
    pcm = np.concatenate(engine["chunks"]) if engine["chunks"] else np.zeros(0, np.int16)
    return pcm.astype(np.float32) / 32768


def _in_fresh_state(synthesize: Callable[[], np.ndarray]) -> np.ndarray:
    """The library's samples as a fresh process gives them: synthesized in a forked child of this
    process, which initialized the library but never spoke. The library carries state from one
    text to the next (the same word came out 8933, 8652, 8644 samples long on three calls, not
    reset by re-initializing or seeding it), which made a test's speech, and so its transcript,
    depend on the tests run before it; the program, a fresh process per text, has no such
    history. Where there is no fork, the samples come from this process."""
    if not hasattr(os, "fork"):
        return synthesize()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: speak, hand the samples over, leave without cleanup
        code = 1
        try:
            os.close(r)
            with os.fdopen(w, "wb") as out:
                out.write(synthesize().tobytes())
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    if status != 0:
        raise RuntimeError(f"eSpeak NG synthesis failed in its child process (status {status})")
    return np.frombuffer(data, np.float32).copy()


def speak_word(text: str, voice: str = "en", rate: int = 16_000, speed: int = 150) -> np.ndarray:
    """One word spoken by eSpeak NG (see _espeak), trimmed to its voiced part."""
    wav, sr = _espeak(text, voice, speed)
    wav = resample(wav, sr, rate)
    loud = np.flatnonzero(np.abs(wav) > 0.02 * np.abs(wav).max()) if wav.size else np.zeros(0, int)
    wav = wav[loud[0] : loud[-1] + 1] if loud.size else wav[:0]
    return (wav / (np.abs(wav).max() + 1e-9) * 0.5).astype(np.float32)


def resample(wav: np.ndarray, sr: int, rate: int) -> np.ndarray:
    if sr == rate:
        return wav
    n = int(round(len(wav) * rate / sr))
    return np.interp(np.linspace(0, len(wav) - 1, n), np.arange(len(wav)), wav).astype(np.float32)


def speak(
    words: Sequence[str],
    starts_ms: Sequence[int],
    duration_s: float,
    voice: str = "en",
    seed: int = 0,
    noise_level: float = 0.005,
) -> tuple[np.ndarray, list[TimedWord]]:
    """A spoken sentence with chosen word onsets; returns audio and true word times."""
    recs = [(w.split("|")[0], speak_word(w.split("|")[-1], voice)) for w in words]
    return place_words(recs, starts_ms, duration_s, noise_level=noise_level, seed=seed)
