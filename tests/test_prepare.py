import json
import shutil

import pytest
from avstack_cli.app import app
from conftest import LAYOUTS, manifest_dicts
from typer.testing import CliRunner

from avstack import media
from avstack.preparation.driver import prepare
from avstack.preparation.settings import PrepareSettings, parse_anchors
from avstack.synthetic import synth

FRAMES_ONLY = PrepareSettings(anchors=("frames",))


def _mixed_folder(tmp_path):
    root = tmp_path / "videos"
    root.mkdir()
    synth.write_clip(root / "a.mp4", synth.ClipSpec(duration_s=1.5))
    (root / "sub").mkdir()
    synth.write_clip(root / "sub" / "b.MOV", synth.ClipSpec(duration_s=1.0, rotation=90, width=480, height=272))
    (root / "corrupt.mp4").write_bytes(b"\x00\x01not a video" * 100)
    good = (root / "a.mp4").read_bytes()
    (root / "truncated.mp4").write_bytes(good[: len(good) // 3])
    (root / "empty.mp4").write_bytes(b"")
    return root


def test_manifest_has_true_pts_and_upright_last_frame(sample_root, tmp_path):
    out = tmp_path / "out"
    report = prepare(sample_root, out, FRAMES_ONLY, workers=1, layouts=LAYOUTS)
    assert not report.failed
    for rec in manifest_dicts(out):
        truth = media.all_frame_times(sample_root / rec["video"])
        assert [f["pts_ms"] for f in rec["frames"]] == [truth[f["index"]] for f in rec["frames"]]
        assert rec["last_frame"]["index"] == len(truth) - 1
        assert rec["last_frame"] == rec["frames"][-1]
        assert rec["task_template"].startswith("指令") and rec["eval_gt"]["answer"]
        import cv2

        img = cv2.imread(str(out / rec["last_frame"]["path"]))
        assert img.shape[1::-1] == (rec["width"], rec["height"])  # stored as displayed
    rot = next(r for r in manifest_dicts(out) if r["video"].endswith(".MOV"))
    assert rot["rotation"] == 90 and rot["height"] > rot["width"]
    vfr = next(r for r in manifest_dicts(out) if "left" in r["video"])
    assert vfr["vfr"] is True


def test_mixed_folder_keeps_good_clips_records_bad_and_exits_nonzero(tmp_path):
    root = _mixed_folder(tmp_path)
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["prepare", str(root), "--out", str(out), "--anchors", "frames", "--workers", "2"])
    assert res.exit_code == 1, res.output
    recs = {r["clip_id"]: r for r in manifest_dicts(out)}
    assert set(recs) == {"a.mp4", "sub/b.MOV", "corrupt.mp4", "truncated.mp4", "empty.mp4"}
    assert recs["a.mp4"]["error"] is None and recs["a.mp4"]["frames"]
    assert recs["sub/b.MOV"]["error"] is None
    for bad in ("corrupt.mp4", "empty.mp4", "truncated.mp4"):
        assert recs[bad]["error"]["type"] == "MediaError", recs[bad]
        assert bad in recs[bad]["error"]["message"]
    assert "FAILED corrupt.mp4" in res.output
    # a rerun decodes nothing for the good clips
    res2 = CliRunner().invoke(app, ["prepare", str(root), "--out", str(out), "--anchors", "frames", "--workers", "1"])
    assert "(2 from cache)" in res2.output


def test_rerun_is_a_cache_hit_and_changed_setting_recomputes(tmp_path, monkeypatch):
    root = tmp_path / "v"
    root.mkdir()
    synth.write_clip(root / "a.mp4", synth.ClipSpec(duration_s=1.0))
    out = tmp_path / "out"
    prepare(root, out, FRAMES_ONLY, workers=1, layouts=LAYOUTS)
    calls = []
    real = media.FrameReader
    monkeypatch.setattr(media, "FrameReader", lambda *a, **k: calls.append(1) or real(*a, **k))
    assert prepare(root, out, FRAMES_ONLY, workers=1, layouts=LAYOUTS).cache_hits == 1
    assert calls == []
    prepare(root, out, PrepareSettings(anchors=("frames",), fps=4), workers=1, layouts=LAYOUTS)
    assert calls == [1]
    rec = manifest_dicts(out)[0]
    assert len(rec["frames"]) == 5  # 0, .25, .5, .75 s + last
    assert rec["decode_path"].startswith("selective")  # an H.264 clip with B-frames


def test_half_written_cache_is_not_trusted(tmp_path):
    root = tmp_path / "v"
    root.mkdir()
    synth.write_clip(root / "a.mp4", synth.ClipSpec(duration_s=1.0))
    out = tmp_path / "out"
    prepare(root, out, FRAMES_ONLY, workers=1, layouts=LAYOUTS)
    rec = manifest_dicts(out)[0]
    (out / rec["frames"][1]["path"]).unlink()  # as if killed mid-write
    report = prepare(root, out, FRAMES_ONLY, workers=1, layouts=LAYOUTS)
    assert report.cache_hits == 0 and (out / rec["frames"][1]["path"]).is_file()


def test_video_name_escaping_the_root_is_refused(sample_root, tmp_path):
    root = tmp_path / "data"
    shutil.copytree(sample_root / "指令2", root / "指令2")
    ann = json.loads((root / "指令2" / "annotations.json").read_text())
    ann.append(dict(ann[0], id="evil", video_name="../../etc/passwd"))
    (root / "指令2" / "annotations.json").write_text(json.dumps(ann))
    report = prepare(root, tmp_path / "out", FRAMES_ONLY, workers=1, layouts=LAYOUTS)
    bad = [r for r in [r.to_json() for r in report.records] if r["error"]]
    assert len(bad) == 1 and "escapes the data root" in bad[0]["error"]["message"]
    assert len(report.records) == 3


def test_missing_video_and_duplicate_ids(sample_root, tmp_path):
    root = tmp_path / "data"
    shutil.copytree(sample_root / "指令2", root / "指令2")
    ann = json.loads((root / "指令2" / "annotations.json").read_text())
    ann.append(dict(ann[0]))  # duplicate id: dropped
    ann.append(dict(ann[0], id="ghost", video_name="ghost.mp4"))
    (root / "指令2" / "annotations.json").write_text(json.dumps(ann))
    report = prepare(root, tmp_path / "out", FRAMES_ONLY, workers=1, layouts=LAYOUTS)
    assert len(report.records) == 3
    ghost = next(r for r in [r.to_json() for r in report.records] if "ghost" in r["clip_id"])
    assert "missing" in ghost["error"]["message"]


def test_parse_anchors():
    assert parse_anchors("full") == ("frames", "audio", "asr")
    assert parse_anchors("frames") == ("frames",)
    assert parse_anchors("asr,frames") == ("frames", "audio", "asr")
    with pytest.raises(ValueError, match="expects"):
        parse_anchors("frames,telepathy")


def test_frames_are_written_as_decoded_not_held(tmp_path):
    """Peak numpy memory while preparing stays at a few frames, not all the frames kept."""
    import tracemalloc

    root = tmp_path / "v"
    root.mkdir()
    synth.write_clip(root / "a.mp4", synth.ClipSpec(1280, 720, 30, 6.0))
    frame_bytes = 1280 * 720 * 3
    tracemalloc.start()
    try:
        report = prepare(root, tmp_path / "out", FRAMES_ONLY, workers=1, layouts=LAYOUTS)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    kept = len([r.to_json() for r in report.records][0]["frames"])
    assert kept >= 12 and peak < 4 * frame_bytes, (kept, peak / frame_bytes)
