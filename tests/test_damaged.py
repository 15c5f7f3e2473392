"""Damaged and truncated files: the frames (pts and pixels) and the last frame are the file's,
whatever decodes them. A clip cut short, or with zeroed bytes, gives exactly what a sequential
decode on one thread presents (as ffmpeg and players show it), for 1, 2 and 3 decoder threads,
selective and sequential plans, one decoder or spans side by side; and `damage` is the same.

The clips are made here with PyAV (known frame times, the frame index drawn into every picture),
in the layouts cameras, recorders and downloads leave: MP4 with the index first (faststart),
fragmented MP4, Matroska, MPEG-TS, HEVC in MP4. A frame-threaded decoder loses the 1-3 frames
it still held when the data ran out; before the fix these cuts ended 67-133 ms early.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from avstack import media
from avstack.synthetic import synth

KINDS = {
    "h264_faststart.mp4": synth.ClipSpec(movflags="faststart"),
    "h264_fragmented.mp4": synth.ClipSpec(movflags="frag_keyframe+empty_moov"),
    "h264.mkv": synth.ClipSpec(),
    "h264.ts": synth.ClipSpec(),
    "hevc_faststart.mp4": synth.ClipSpec(codec="libx265", movflags="faststart"),
}
SIZE = {"width": 416, "height": 240, "duration_s": 4.0, "gop": 30, "crf": 30}
# decoder threads x plan: every way prepare can decode a clip
CONFIGS = [
    {"threads": t, "decode": d} | ({"thread_type": "NONE"} if t == 1 else {})
    for t in (1, 2, 3)
    for d in ("auto", "sequential")
]


@pytest.fixture(scope="module")
def clips(tmp_path_factory) -> dict[str, tuple[Path, list]]:
    root = tmp_path_factory.mktemp("damaged")
    out = {}
    for name, spec in KINDS.items():
        spec = replace(spec, **SIZE)
        path = root / name
        times = synth.write_clip(path, spec)
        out[name] = (path, times)
    return out


def _packets(path: Path) -> list[tuple[int, int, bool]]:
    """(byte where each video packet starts, its size, is it a keyframe), in file order."""
    import av

    with av.open(str(path)) as c:
        return [(p.pos, p.size, p.is_keyframe) for p in c.demux(c.streams.video[0]) if p.size and p.pos is not None]


def _cuts(path: Path) -> dict[str, int]:
    """Byte offsets to cut at: inside a GOP, just after a keyframe (a few bytes into the packet
    after it), inside the last packet. Offsets go by where packets start: in MPEG-TS a packet's
    payload is spread over 188-byte TS packets, so a start plus a size is no end."""
    packets = _packets(path)
    keys = [i for i, (_, _, key) in enumerate(packets) if key]
    after_key = keys[len(keys) // 2] + 1
    last_start, last_size, _ = packets[-1]
    return {
        "inside a GOP": packets[len(packets) * 2 // 5][0] + 7,
        "just after a keyframe": packets[after_key][0] + 5,
        "inside the last packet": (last_start + min(last_start + last_size, path.stat().st_size)) // 2,
    }


def _decode(path: Path, **cfg) -> tuple[list[tuple[int, int]], list[np.ndarray], list]:
    """(index, pts) and pixels of every sampled frame, and the damage record, via the reader
    and map_frames (spans side by side where the plan splits), as prepare decodes."""
    spec = media.Sampling(fps=4, **cfg)

    def run(sampling: media.Sampling):
        with media.FrameReader(path, sampling) as reader:
            frames = reader.map_frames(lambda f: f, sampling.threads)
            return frames, list(reader.damage)

    (frames, damage), _ = media.with_fallback(run, spec)
    return [(f.index, f.pts_ms) for f in frames], [f.image for f in frames], damage


def _damaged_copies(tmp_path: Path, clips) -> list[Path]:
    out = []
    for name, (path, _) in clips.items():
        data = path.read_bytes()
        for where, at in _cuts(path).items():
            cut = tmp_path / f"{name}.{where.replace(' ', '_')}{path.suffix}"
            cut.write_bytes(data[:at])
            out.append(cut)
    return out


def test_cut_files_give_the_sequential_frames_in_every_configuration(clips, tmp_path):
    checked = 0
    for cut in _damaged_copies(tmp_path, clips):
        try:
            reference = _decode(cut, **CONFIGS[1])  # one thread, sequential: what a player shows
        except media.MediaError as exc:  # nothing decodable left: a clear error naming the file
            assert cut.name in str(exc)
            continue
        times, images, damage = reference
        for cfg in CONFIGS:
            got_times, got_images, got_damage = _decode(cut, **cfg)
            assert got_times == times, (cut.name, cfg)
            assert all(np.array_equal(a, b) for a, b in zip(got_images, images)), (cut.name, cfg)
            assert got_damage == damage, (cut.name, cfg)
        # what the manifest accepts (manifest.ClipRecord): a stream and an int time per entry
        assert all(isinstance(d["stream"], str) and isinstance(d["from_ms"], int) for d in damage), damage
        checked += 1
    assert checked >= 12  # the cuts leave frames to decode in nearly every layout


def test_the_last_frame_is_the_last_one_the_file_holds(clips, tmp_path):
    """Cut inside the last packet: every frame but the last one or two is whole, and the last frame
    sampled is the last one a one-thread decode presents (its drawn index agrees with its pts)."""
    for name, (path, times) in clips.items():
        data = path.read_bytes()
        cut = tmp_path / f"tail{path.suffix}"
        cut.write_bytes(data[: _cuts(path)["inside the last packet"]])
        presented = media.all_frame_times(cut)
        for cfg in CONFIGS:
            got, images, _ = _decode(cut, **cfg)
            assert got[-1][1] == presented[-1], (name, cfg)  # (indices label the scan's packets, cut one too)
            assert presented[-1] >= round(1000 * times[-4]), name  # at most 3 frames lost to the cut
            for (index, pts), image in zip(got, images):
                assert pts == round(1000 * times[synth.read_index(image)]), (name, cfg, index)


def test_zeroed_bytes_inside_a_gop_are_recorded_the_same_everywhere(clips, tmp_path):
    path, _ = clips["h264.mkv"]
    data = bytearray(path.read_bytes())
    packets = _packets(path)
    start = packets[len(packets) // 2][0]
    data[start + 20 : start + 2000] = bytes(1980)
    bad = tmp_path / "zeroed.mkv"
    bad.write_bytes(bytes(data))
    reference = _decode(bad, **CONFIGS[1])
    for cfg in CONFIGS:
        got = _decode(bad, **cfg)
        assert got[0] == reference[0] and got[2] == reference[2], cfg
        assert all(np.array_equal(a, b) for a, b in zip(got[1], reference[1])), cfg


def test_an_mp4_cut_before_its_index_is_a_clear_error(tmp_path):
    """moov at the end (the default MP4 layout) cut short: nothing to play; the error names the
    file and says what was found."""
    path = tmp_path / "moov_at_end.mp4"
    synth.write_clip(path, synth.ClipSpec(**SIZE))
    cut = tmp_path / "cut_moov_at_end.mp4"
    cut.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(media.MediaError, match="cut_moov_at_end.mp4"):
        media.sample_frames(cut, fps=2)
