"""ASR across clips takes each clip in two parts (preparation.clip_halves): its sound reaches the
transcriber before its frames are decoded, and the two meet again in one manifest line."""

from __future__ import annotations

from collections import Counter

from conftest import LAYOUTS, SAMPLES, manifest_dicts
from test_prepare import _mixed_folder

from avstack.preparation import clip_halves as parts
from avstack.preparation import driver
from avstack.preparation.discover import ClipJob
from avstack.preparation.driver import prepare
from avstack.preparation.feeder import AsrFeeder
from avstack.preparation.settings import PrepareSettings


def _jobs(n: int) -> list[ClipJob]:
    return [ClipJob(clip_id=f"c{i}", video=f"c{i}.mp4", path=f"/x/c{i}.mp4") for i in range(n)]


def test_each_audio_part_leads_its_frames_by_the_lead():
    for n, lead in [(1, 3), (5, 0), (5, 2), (9, 4), (3, 10)]:
        order = parts.part_order(_jobs(n), lead)
        assert Counter(order) == Counter((j, k) for j in _jobs(n) for k in (parts.AUDIO, parts.FRAMES))
        at = {(j.clip_id, kind): i for i, (j, kind) in enumerate(order)}
        for i in range(n):
            assert at[(f"c{i}", parts.AUDIO)] < at[(f"c{i}", parts.FRAMES)]
            # clip i + lead's sound comes before clip i's frames, and no later clip's does
            ahead = [j for j in range(n) if at[(f"c{j}", parts.AUDIO)] < at[(f"c{i}", parts.FRAMES)]]
            assert ahead == list(range(min(n, i + lead + 1))), (n, lead, i)


def test_the_transcriber_starts_before_any_frames_are_decoded(tmp_path, monkeypatch):
    """One worker, batched: the first batch (one clip, batch_sizes' ramp) is sent to the
    transcriber before the first clip's frames part returns; every clip ends in one full line."""
    seen: list[tuple[str, int]] = []
    real_framed = parts.ClipJoiner.framed
    feeders: list[AsrFeeder] = []
    real_init = AsrFeeder.__init__

    def init(self, *a, **k):
        real_init(self, *a, **k)
        feeders.append(self)

    def framed(self, rec):
        seen.append((rec.clip_id, len(feeders[0].futures)))
        real_framed(self, rec)

    monkeypatch.setattr(AsrFeeder, "__init__", init)
    monkeypatch.setattr(parts.ClipJoiner, "framed", framed)
    s = PrepareSettings(lang="en", asr_mode="batched")
    report = prepare(SAMPLES, tmp_path / "out", s, layouts=LAYOUTS, workers=1)
    assert not report.failed
    assert seen and seen[0][1] >= 1, seen  # a group was already with the transcriber
    recs = manifest_dicts(tmp_path / "out")
    assert len(recs) == len({r["clip_id"] for r in recs}) == 7
    for r in recs:
        silent = r["clip_id"].endswith("_silent.mp4")  # the samples' clip without a sound track
        assert r["frames"] and bool(r["audio"]) != silent and r["asr"]["words"] is not None, r["clip_id"]
        assert (r["asr"].get("note") == "clip has no audio track") == silent
    assert sum(len(r["asr"]["words"]) for r in recs) >= 10  # real transcripts, joined to their frames


def test_a_bad_clip_fails_once_with_its_own_error_in_parts(tmp_path):
    """Whichever part fails, the clip is one line with the frames part's error first (as a
    whole clip's run gives); the good clips get their frames and their words."""
    root = _mixed_folder(tmp_path)
    s = PrepareSettings(lang="en", asr_mode="batched")
    report = prepare(root, tmp_path / "out", s, workers=2)
    recs = {r["clip_id"]: r for r in manifest_dicts(tmp_path / "out")}
    assert len(recs) == 5 and report.count == 5
    assert {r.clip_id for r in report.failed} == {"corrupt.mp4", "truncated.mp4", "empty.mp4"}
    for bad in ("corrupt.mp4", "empty.mp4", "truncated.mp4"):
        assert recs[bad]["error"]["type"] == "MediaError", recs[bad]
        assert bad in recs[bad]["error"]["message"]
    for good in ("a.mp4", "sub/b.MOV"):
        assert recs[good]["error"] is None and recs[good]["frames"] and recs[good]["asr"] is not None


def test_the_audio_lead_grows_with_the_workers(monkeypatch, tmp_path):
    order: list = []

    def planned(fn, items, workers, *a):
        order.extend(items)
        return iter([])

    monkeypatch.setattr(driver, "map_surviving", planned)
    list(driver._run_parts(_jobs(30), PrepareSettings(asr_batch=4), tmp_path, 3, print))
    first_frames = next(i for i, (_, kind) in enumerate(order) if kind == parts.FRAMES)
    assert first_frames == driver.AUDIO_LEAD_PER_WORKER * 3 + 4 + 1
