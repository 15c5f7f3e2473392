"""Same clip, same words: a clip's prepared record (ASR words and probabilities included) is a
function of its audio, the model and the settings, not of the worker count, decoder threads, the
order the clips are processed in, or what the process transcribed before. And a clip whose decoder
kills its worker is that clip's recorded error, never a broken batch."""

from __future__ import annotations

import os
import signal
import time
from multiprocessing import get_context
from pathlib import Path

import numpy as np
import pytest
from conftest import LAYOUTS, SAMPLES

import avstack.preparation.driver as prep
from avstack import media
from avstack.asr import AsrSettings, transcribe, transcribe_batch
from avstack.manifest import load_manifest
from avstack.preparation.driver import prepare
from avstack.preparation.executors.local import map_surviving
from avstack.preparation.settings import PrepareSettings


def _prepare(out: Path, mode: str, **kw) -> bytes:
    settings = PrepareSettings(lang="en", asr_mode=mode, threads=kw.pop("threads", 0))
    report = prepare(SAMPLES, out, settings, layouts=LAYOUTS, **kw)
    assert not report.failed, report.failed
    return (out / "manifest.jsonl").read_bytes()


@pytest.mark.parametrize("mode", ["single", "batched"])
def test_manifest_is_byte_identical_across_workers_threads_and_order(mode, tmp_path, monkeypatch):
    one = _prepare(tmp_path / "w1", mode, workers=1)
    assert one == _prepare(tmp_path / "w2", mode, workers=2)
    assert one == _prepare(tmp_path / "w2t1", mode, workers=2, threads=1)
    original = prep.discover_all
    monkeypatch.setattr(prep, "discover_all", lambda *a, **k: (original(*a, **k)[0][::-1], []))
    assert one == _prepare(tmp_path / "rev", mode, workers=2)
    recs = load_manifest(tmp_path / "w1")
    words = [w for r in recs for w in (r.asr.to_ecog() if r.asr else {}).get("words", [])]
    assert len(words) >= 10  # the comparison is over real transcripts
    runtime = next(r for r in recs if r.asr and r.asr.words).asr.runtime
    assert runtime["threads"] == 1 and runtime["device"] == "cpu" and runtime["ctranslate2"]
    assert runtime["isa"] != "unknown" and runtime["gemm_s8"] != "unknown"


def test_packed_manifest_is_identical_across_worker_counts(tmp_path):
    assert _prepare(tmp_path / "w1", "packed", workers=1) == _prepare(tmp_path / "w2", "packed", workers=2)


def test_packed_manifest_does_not_depend_on_the_machines_core_count(tmp_path, monkeypatch):
    """Packs run side by side, one per core, and the job's last pack is split: the split (so
    every clip's words) must not follow the core count of the machine."""
    from avstack.preparation import feeder

    monkeypatch.setattr(feeder, "cores", lambda: 1)
    one = _prepare(tmp_path / "c1", "packed", workers=1)
    monkeypatch.setattr(feeder, "cores", lambda: 5)
    assert _prepare(tmp_path / "c5", "packed", workers=1) == one


def _audio(name: str) -> np.ndarray:
    path = next(SAMPLES.rglob(name))
    samples = media.load_audio(path)
    assert samples is not None
    return samples


def _key(tr) -> list[tuple]:
    return [(w.text, w.begin_ms, w.end_ms, w.prob) for w in tr.words]


def test_a_sampled_fallback_does_not_depend_on_what_was_transcribed_before():
    """Noisy, odd speech makes Whisper's temperature fallback sample. CTranslate2 seeds a decoding
    thread's generator once, so without a seed per clip the words moved with whatever the process
    transcribed before (three calls gave 'Rob. Rob. Nah.', 'Rob. Ah.', 'Drop, not.')."""
    s = AsrSettings(language="en", vad=False)
    noisy = (_audio("l2_portrait.mp4") + 0.02 * np.random.default_rng(0).standard_normal(64512)).astype(np.float32)
    first = _key(transcribe(noisy, s))
    for name in ("l2_pick.mp4", "l3_left.mp4"):
        transcribe(_audio(name), s)  # the sampler's state moves on
    assert _key(transcribe(noisy, s)) == first and first
    assert _key(transcribe(noisy, s)) == first


def test_batched_word_times_do_not_depend_on_the_batch():
    """faster-whisper rounds times to 10 ms on the joined timeline: clips start on the 20 ms grid,
    else a clip's times moved with its neighbours' lengths (by up to 10 ms on every word). What is
    left comes from batched decoder numerics: the same words, edges within one Whisper frame
    (20 ms), probabilities within 0.05; which is why prepare composes batches by clip id and keys
    each clip's cache entry by its batch, so a prepared folder never depends on the order."""
    s = AsrSettings(language="en")
    clips = [_audio(n) for n in ("l2_pick.mp4", "l3_left.mp4", "l4_place_pick.mp4")]
    alone = [transcribe_batch([c], s)[0] for c in clips]
    together = transcribe_batch(clips, s)
    backwards = transcribe_batch(clips[::-1], s)[::-1]
    for a, b, c in zip(alone, together, backwards):
        assert [w.text for w in a.words] == [w.text for w in b.words] == [w.text for w in c.words] != []
        for x, y, z in zip(a.words, b.words, c.words):
            assert max(abs(x.begin_ms - y.begin_ms), abs(x.end_ms - y.end_ms), abs(x.end_ms - z.end_ms)) <= 20
            assert abs(x.prob - y.prob) < 0.05 and abs(x.prob - z.prob) < 0.05


def test_a_batch_aligned_side_by_side_gives_the_words_aligned_one_by_one():
    """A GPU batch's clips are aligned in the aligner processes side by side (prepare's feeder;
    on an H200 their alignment one after another was most of the batched ASR's time): every word,
    edge, probability and timing note is the same as aligned here one clip after another."""
    from avstack.asr import acoustic

    if not acoustic.available():
        pytest.skip("the acoustic aligner (pocketsphinx) is not installed")
    s = AsrSettings(language="en")
    clips = [_audio(n) for n in ("l2_pick.mp4", "l3_left.mp4", "l4_place_pick.mp4", "l1_point.mp4")]
    here = transcribe_batch(clips, s)
    with acoustic.in_processes(2):
        assert acoustic.pooled() == 2
        pooled = transcribe_batch(clips, s)
    assert [t.words for t in here] == [t.words for t in pooled] and any(t.words for t in here)
    assert [t.timing for t in here] == [t.timing for t in pooled]


def test_a_clip_that_kills_its_worker_is_recorded_and_the_rest_prepared_once(tmp_path, monkeypatch):
    poison = SAMPLES / "指令2" / "l2_pick.mp4"
    monkeypatch.setenv("AVSTACK_TEST_SEGFAULT", str(poison))
    report = prepare(SAMPLES, tmp_path / "out", PrepareSettings(anchors=("frames",)), workers=2, layouts=LAYOUTS)
    recs = {r.clip_id: r for r in load_manifest(tmp_path / "out")}
    assert len(recs) == report.count == 7 and [r.clip_id for r in report.failed] == ["指令2/l2_pick.mp4"]
    err = recs["指令2/l2_pick.mp4"].error
    assert err["type"] == "WorkerCrash" and "SIGSEGV" in err["message"] and "2 times" in err["message"]
    assert all(r.ok and r.frames for cid, r in recs.items() if cid != "指令2/l2_pick.mp4")
    lines = (tmp_path / "out" / "manifest.jsonl").read_text().splitlines()
    assert len(lines) == 7  # each clip once
    # the same clips without the hook: every good clip's frames came out whole the first time
    monkeypatch.delenv("AVSTACK_TEST_SEGFAULT")
    again = prepare(SAMPLES, tmp_path / "out", PrepareSettings(anchors=("frames",)), workers=2, layouts=LAYOUTS)
    assert again.cache_hits == 6 and not again.failed


def _echo_or_die(item: str) -> str:
    if item == "die":
        time.sleep(0.2)
        os.kill(os.getpid(), signal.SIGKILL)
    return item


def test_a_worker_that_dies_while_a_result_is_handled_loses_no_other_item():
    """The pool breaks while the caller is busy with a finished result (prepare writing its manifest
    line): the next item handed to the broken pool is refused. It must stay to do, not vanish
    (a CI run prepared 6 of 7 clips, one neither recorded nor failed)."""
    got = []
    items = ["a", "die", "b", "c", "d"]
    for result in map_surviving(_echo_or_die, items, 2, get_context("fork"), lambda item, why: f"crashed {item}"):
        got.append(result)
        if len(got) == 1:
            time.sleep(1.0)  # meanwhile the other worker dies
    assert sorted(got) == ["a", "b", "c", "crashed die", "d"]
