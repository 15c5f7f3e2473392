"""One clock: frames, audio and the record on the player's timeline, for files built the way
phones, cameras and ffmpeg pipelines build them.

Every clip is made here by ffmpeg from sources with a white flash (video, from FLASH_S for 0.19 s)
and a 1 kHz beep (audio, from BEEP_S); where it lands on the player's timeline follows from how the
clip was built (an -itsoffset, a trim), cross-checked with ffprobe's stream start times. The truth
never comes from avstack."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from avstack import media
from avstack.manifest import load_manifest
from avstack.prepare import PrepareSettings, prepare

pytestmark = pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="ffmpeg is not installed")

FLASH_S, BEEP_S, LONG_S = 1.0, 1.5, 3


def _video(d: float = LONG_S, rate: str = "25") -> list[str]:
    flash = f"drawbox=c=white:t=fill:enable='between(t,{FLASH_S},{FLASH_S + 0.19})'"
    src = f"color=c=black:s=320x240:r={rate}:d={d},{flash}"
    return ["-f", "lavfi", "-i", src]


def _audio(d: float = LONG_S, beep: float = BEEP_S, rate: int = 48000, layout: str = "mono") -> list[str]:
    src = f"aevalsrc='if(between(t,{beep},{beep + 0.2}),0.5*sin(2*PI*1000*t),0)':s={rate}:d={d}:c={layout}"
    return ["-f", "lavfi", "-i", src]


# name -> (ffmpeg arguments after the inputs, inputs, flash on the clock (s), beep on the clock (s))
CASES: dict[str, tuple[list[str], list[str], float, float]] = {
    "plain.mp4": (["-c:v", "libx264", "-bf", "2", "-c:a", "aac"], _video() + _audio(), 1.0, 1.5),
    "audio_late.mp4": (["-c:v", "libx264", "-c:a", "aac"], _video() + ["-itsoffset", "0.48"] + _audio(), 1.0, 1.98),
    "video_late.mp4": (["-c:v", "libx264", "-c:a", "aac"], ["-itsoffset", "0.4"] + _video() + _audio(), 1.4, 1.5),
    "mpegts.ts": (["-c:v", "libx264", "-c:a", "mp2"], _video() + _audio(), 1.0, 1.5),
    "matroska.mkv": (["-c:v", "libx264", "-c:a", "flac"], _video() + ["-itsoffset", "0.25"] + _audio(), 1.0, 1.75),
    "vp9_opus.webm": (
        ["-c:v", "libvpx-vp9", "-deadline", "realtime", "-c:a", "libopus"], _video() + _audio(), 1.0, 1.5
    ),
    "pts_offset.mp4": (["-c:v", "libx264", "-c:a", "aac", "-output_ts_offset", "0.7"], _video() + _audio(), 1.0, 1.5),
    "bframes_no_editlist.mp4": (
        ["-c:v", "libx264", "-bf", "3", "-c:a", "aac", "-use_editlist", "0"], _video() + _audio(), 1.0, 1.5
    ),
    "stereo_44k.mp4": (["-c:v", "libx264", "-c:a", "aac"], _video() + _audio(rate=44100, layout="stereo"), 1.0, 1.5),
    # 29.97 fps: the first frame at or after 1 s is frame 30, at 30 x 1001/30000 = 1.001 s
    "ntsc.mp4": (["-c:v", "libx264", "-c:a", "aac"], _video(rate="30000/1001") + _audio(), 1.001, 1.5),
    "audio_longer.mp4": (["-c:v", "libx264", "-c:a", "aac"], _video(d=2) + _audio(d=4, beep=3.2), 1.0, 3.2),
    "audio_shorter.mp4": (["-c:v", "libx264", "-c:a", "aac"], _video(d=4) + _audio(d=2), 1.0, 1.5),
    # two audio tracks, the second marked default: a player plays its beep (at 2.0 s), not the first's
    "two_tracks.mkv": (
        ["-map", "0", "-map", "1", "-map", "2", "-c:v", "libx264", "-c:a", "aac",
         "-disposition:a:0", "0", "-disposition:a:1", "default"],
        _video() + _audio() + _audio(beep=2.0), 1.0, 2.0,
    ),
}


def _ffprobe_starts(path: Path) -> dict[str, float]:
    out = subprocess.run(
        ["ffprobe", "-v", "error", "-show_entries", "stream=codec_type,start_time:format=start_time", "-of", "json",
         str(path)],
        capture_output=True, text=True, check=True,
    ).stdout
    info = json.loads(out)
    starts: dict[str, float] = {"format": float(info["format"].get("start_time", 0))}
    for st in info["streams"]:
        starts.setdefault(st["codec_type"], float(st.get("start_time", 0)))
    return starts


def _truth(clips: Path, name: str) -> tuple[int, int]:
    """(flash, beep) in ms on the player's clock. Both streams' content is placed as built (the
    offsets in CASES); where the container itself starts the video later than the file (B-frame
    delay without an edit list, AAC priming before a pts offset, MPEG-TS mux delay), ffprobe's
    video start less the file's start moves both, as a player (which starts at the file's start)
    shows them."""
    starts = _ffprobe_starts(clips / name)
    shift = starts["video"] - starts["format"] if name != "video_late.mp4" else 0.0
    flash, beep = TRUTH[name]
    if name == "trimmed.mp4":  # where the copy cut lands is ffmpeg's choice: the frames it presents say
        shown = _ffprobe_frame_times(clips / name)
        cut = round(LONG_S * 25) - len(shown)  # source frames before the first one presented
        return round((shown[round(FLASH_S * 25) - cut] - starts["format"]) * 1000), round(beep * 1000)
    return round((flash + shift) * 1000), round((beep + shift) * 1000)


def _ffprobe_frame_times(path: Path) -> list[float]:
    """Presentation times of the video frames ffprobe presents (edit lists applied)."""
    out = subprocess.run(
        ["ffprobe", "-v", "error", "-select_streams", "v", "-show_entries", "frame=pts_time", "-of", "csv=p=0",
         str(path)],
        capture_output=True, text=True, check=True,
    ).stdout
    return sorted(float(x) for x in out.split())


@pytest.fixture(scope="module")
def clips(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("awkward")
    for name, (args, inputs, _, _) in CASES.items():
        subprocess.run(["ffmpeg", "-v", "error", "-y", *inputs, *args, str(root / name)], check=True)
    # a stream-copied trim: an edit list hides the packets before 0.5 s (the cut is mid-GOP)
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-ss", "0.5", "-i", str(root / "plain.mp4"), "-c", "copy",
                    str(root / "trimmed.mp4")], check=True)
    (root / "notes.txt").write_text("not a video")
    return root


TRUTH = {name: (flash, beep) for name, (_, _, flash, beep) in CASES.items()} | {"trimmed.mp4": (0.5, 1.0)}


def _white(image: np.ndarray) -> bool:
    return float(image.mean()) > 128


TRIM_GAP = pytest.mark.xfail(
    strict=True,
    reason="known gap: in a stream-copied trim the first audio packet carries AAC priming that the edit list "
    "hides; the clock starts at that packet, 9 ms before the first sample ffprobe presents",
)


@pytest.mark.parametrize("name", [n if n != "trimmed.mp4" else pytest.param(n, marks=TRIM_GAP) for n in sorted(TRUTH)])
def test_the_flash_frame_is_at_its_presentation_time(clips, name):
    flash_ms = _truth(clips, name)[0]
    # a frame's time is exact (a fraction); its pts_ms is rounded: ask for the frame shown 1 ms on
    before, at = media.sample_frames(clips / name, times_ms=[flash_ms - 2, flash_ms + 1]).frames[:2]
    assert not _white(before.image) and before.pts_ms < flash_ms - 1
    assert _white(at.image) and abs(at.pts_ms - flash_ms) <= 1, (name, at.pts_ms, flash_ms)


def test_ffprobe_agrees_with_how_the_clips_were_built(clips):
    """The offsets that place the streams are in the files (a check on the construction)."""
    a = _ffprobe_starts(clips / "audio_late.mp4")
    assert 0.45 <= a["audio"] - a["video"] <= 0.49  # 0.48 s, less AAC priming held in the edit list
    m = _ffprobe_starts(clips / "matroska.mkv")
    assert abs(m["audio"] - m["video"] - 0.25) < 0.03
    t = _ffprobe_starts(clips / "mpegts.ts")
    assert t["video"] > 1.0 and t["audio"] > 1.0  # MPEG-TS starts far from 0; the clock does not


@pytest.fixture(scope="module")
def prepared_clips(clips, tmp_path_factory) -> tuple[Path, object]:
    out = tmp_path_factory.mktemp("awkward_prepared")
    report = prepare(clips, out, PrepareSettings(anchors=("frames", "audio"), fps=2.0), workers=2)
    return out, report


def test_every_container_is_found_and_other_files_are_named(prepared_clips):
    out, report = prepared_clips
    assert report.skipped == ["notes.txt"]
    assert {r.clip_id for r in load_manifest(out)} == set(TRUTH)
    assert not report.failed, report.failed


@pytest.mark.parametrize("name", sorted(TRUTH))
def test_the_beep_in_the_wav_is_at_its_presentation_time(clips, prepared_clips, name):
    out, _ = prepared_clips
    rec = next(r for r in load_manifest(out) if r.clip_id == name)
    samples, rate = sf.read(out / rec.audio["path"], dtype="float32")
    onset_ms = np.argmax(np.abs(samples) > 0.1) * 1000 / rate
    assert abs(onset_ms - _truth(clips, name)[1]) <= 10, (name, onset_ms)
    # the record says which clock and which track
    assert rec.streams["video"]["start_ms"] >= 0 and rec.streams["audio"]["start_ms"] >= 0
    assert min(rec.streams["video"]["start_ms"], rec.streams["audio"]["start_ms"]) == 0
    assert rec.duration_ms == max(rec.streams["video"]["end_ms"], rec.streams["audio"]["end_ms"])


def test_the_default_track_is_heard_and_another_can_be_chosen(clips, prepared_clips, tmp_path):
    out, _ = prepared_clips
    rec = next(r for r in load_manifest(out) if r.clip_id == "two_tracks.mkv")
    assert rec.streams["audio"]["track"] == 1
    path = clips / "two_tracks.mkv"
    first = media.load_audio(path, track=0, origin=media.clip_origin(media.probe(path, audio_track=0)))
    # the first track's beep (1.5 s), not the default's (2.0 s); within 25 ms: MKV keeps AAC's
    # 21 ms priming (no edit list to trim it), which a player plays too
    assert first is not None and abs(np.argmax(np.abs(first) > 0.1) / 16 - 1500) <= 25


def test_the_last_frame_is_the_last_one_displayed(prepared_clips, clips):
    out, _ = prepared_clips
    for rec in load_manifest(out):
        truth = media.all_frame_times(clips / rec.video)
        assert rec.last_frame is not None and rec.last_frame.pts_ms == max(truth), rec.clip_id


def test_a_trim_counts_only_what_it_presents(prepared_clips, clips):
    out, _ = prepared_clips
    rec = next(r for r in load_manifest(out) if r.clip_id == "trimmed.mp4")
    assert abs(rec.duration_ms - 2500) <= 30  # 3 s less the 0.5 s cut, not the GOP it kept
    assert rec.frames[0].index == 0 and rec.frames[0].pts_ms == rec.streams["video"]["start_ms"] <= 21
    assert rec.last_frame is not None and rec.last_frame.index == len(_ffprobe_frame_times(clips / "trimmed.mp4")) - 1


def test_a_corrupt_audio_packet_is_silence_and_named(clips, tmp_path):
    """An MPEG-TS whose audio packets are overwritten in the middle: the clip is still prepared,
    the beep still lands on time, the damage is listed."""
    data = bytearray((clips / "mpegts.ts").read_bytes())
    audio_pid = None
    hits = 0
    for off in range(0, len(data) - 188, 188):
        if data[off] != 0x47:
            continue
        pid = ((data[off + 1] & 0x1F) << 8) | data[off + 2]
        if pid == 0x101:  # ffmpeg's second elementary stream (the audio)
            audio_pid = pid
            hits += 1
            if hits in (40, 41, 42):  # about 1 s in: garbage payload, headers intact
                data[off + 8 : off + 188] = bytes(range(180))
    assert audio_pid is not None
    bad = tmp_path / "bad" / "damaged.ts"
    bad.parent.mkdir()
    bad.write_bytes(bytes(data))
    report = prepare(bad.parent, tmp_path / "out", PrepareSettings(anchors=("frames", "audio")), workers=1)
    rec = load_manifest(tmp_path / "out")[0]
    assert not report.failed and rec.audio is not None
    samples, rate = sf.read(tmp_path / "out" / rec.audio["path"], dtype="float32")
    assert abs(len(samples) / rate * 1000 - rec.streams["audio"]["end_ms"]) <= 30  # nothing shifted
    onset = np.argmax(np.abs(samples[int(1.4 * rate):]) > 0.1) * 1000 / rate + 1400
    assert abs(onset - _truth(clips, "mpegts.ts")[1]) <= 10


def test_a_folder_prepared_by_an_older_avstack_is_refused_in_one_line(prepared_clips, tmp_path):
    import shutil as sh

    from avstack.io import DataError

    out, _ = prepared_clips
    old = tmp_path / "old"
    sh.copytree(out, old)
    meta = json.loads((old / "prepare.json").read_text())
    meta.pop("format")
    (old / "prepare.json").write_text(json.dumps(meta))
    with pytest.raises(DataError, match=r"format 1; this avstack reads format 2\): re-run `avstack prepare`"):
        load_manifest(old)
