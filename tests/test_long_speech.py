"""Long continuous speech a window at a time (asr.windows): windows cut in pauses, words on the
clip's clock in every window, the language fixed once, progress on the clip's scale, and the file
read a window at a time. The windows are made short here (seconds, not minutes) so a minute of
the long read (avstack.synthetic.longread: every word's true time known) shows what hours would;
benchmarks/long.py --continuous measures the real lengths (memory, time, drift)."""

from __future__ import annotations

import statistics

import numpy as np
import pytest
import soundfile as sf
from conftest import needs_espeak

from avstack import asr
from avstack.asr import windows
from avstack.asr.types import RATE, AsrSettings

TINY = AsrSettings(model="tiny.en", language="en")


@pytest.fixture()
def short_windows(monkeypatch):
    """Windows of at most 20 s, each cut in the quietest pause of its last 8 s."""
    monkeypatch.setattr(windows, "WINDOW_MAX_S", 20)
    monkeypatch.setattr(windows, "CUT_SEARCH_S", 8)


@pytest.fixture(scope="module")
def read_minute():
    pytest.importorskip("faster_whisper")
    from avstack.synthetic import longread, synth

    if not synth.espeak_available():
        pytest.skip("no eSpeak NG (pip install espeakng-loader, or apt-get install espeak-ng)")
    return longread.read_aloud(62.0)


def _edge_errors(words, truth) -> list[int]:
    errors = []
    for t in truth:
        near = [w for w in words if w.text.strip(" .,!?;:").lower() == t["text"]]
        best = min(near, key=lambda w: abs(w.begin_ms - t["begin_time"]), default=None)
        if best is not None and abs(best.begin_ms - t["begin_time"]) <= 1000:
            errors += [abs(best.begin_ms - t["begin_time"]), abs(best.end_ms - t["end_time"])]
    return errors


def test_a_cut_is_the_quietest_pause_of_the_last_stretch(short_windows):
    rng = np.random.default_rng(3)
    audio = (rng.standard_normal(50 * RATE) * 0.2).astype(np.float32)  # loud everywhere...
    audio[int(15.1 * RATE) : int(15.6 * RATE)] *= 0.001  # ...but one pause inside the first search span
    read_spans: list[int] = []

    def read(a: int, b: int) -> np.ndarray:
        read_spans.append(b - a)
        return audio[a:b]

    cuts = list(windows.cuts(read, len(audio)))
    assert cuts[0][0] == 0 and cuts[-1][1] == len(audio)
    assert all(a2 == b1 for (_, b1), (a2, _) in zip(cuts, cuts[1:]))  # no gap, no overlap
    assert all(b - a <= 20 * RATE for a, b in cuts)
    assert 15.1 * RATE < cuts[0][1] < 15.6 * RATE  # inside the pause
    assert max(read_spans) <= 8 * RATE  # only the stretch searched was read to find a cut
    assert list(windows.cuts(read, 19 * RATE)) == [(0, 19 * RATE)]  # a short clip: one window


@needs_espeak
def test_words_of_every_window_are_on_the_clips_clock(short_windows, read_minute):
    audio, truth = read_minute
    tr = asr.transcribe(audio, TINY)
    starts = tr.timing["windows_ms"]
    assert len(starts) == 4 and starts[0] == 0 and all(b - a <= 20_000 for a, b in zip(starts, starts[1:]))
    assert [w.begin_ms for w in tr.words] == sorted(w.begin_ms for w in tr.words)
    late = [t for t in truth if t["begin_time"] > starts[-1]]
    errors = _edge_errors([w for w in tr.words if w.begin_ms > starts[-1]], late)
    assert len(errors) >= len(late)  # at least half the last window's words found (two edges each)
    # the short-clip bounds of tests/test_asr.py (connected speech, tiny.en): median 40, p90 120 ms
    assert statistics.median(errors) <= 40 and sorted(errors)[int(0.9 * (len(errors) - 1))] <= 120
    # no word straddles a cut: each cut sits in a pause of the read
    for cut in starts[1:]:
        assert not any(t["begin_time"] < cut < t["end_time"] for t in truth), cut


@needs_espeak
def test_windows_move_few_words_and_the_file_is_read_a_window_at_a_time(short_windows, read_minute, tmp_path):
    """Windowed against whole: how many words moved, and by how much (the whole pass is what a
    clip of up to WINDOW_MAX_S gets); the prepared WAV is read in windows, never whole."""
    audio, truth = read_minute
    wav = tmp_path / "read.wav"
    sf.write(wav, audio, RATE, subtype="FLOAT")
    spans: list[int] = []

    def read(a: int, b: int) -> np.ndarray:
        spans.append(b - a)
        return sf.read(wav, start=a, stop=b, dtype="float32")[0]

    windowed = asr.transcribe_long(read, len(audio), TINY)
    assert max(spans) <= 20 * RATE
    assert windowed.words == asr.transcribe(sf.read(wav, dtype="float32")[0], TINY).words  # file or memory: alike
    whole = windows_off(audio)
    shifts = moved(whole.words, windowed.words)
    # with a cut every 15-20 s (three cuts a minute, where the real windows cut once in 5 minutes):
    # most words kept, half of them to the ms, the typical one unmoved
    assert len(shifts) >= 0.75 * len(whole.words), (len(shifts), len(whole.words))
    assert statistics.median(shifts) == 0 and sum(s == 0 for s in shifts) >= 0.4 * len(shifts)
    errors_w, errors_whole = _edge_errors(windowed.words, truth), _edge_errors(whole.words, truth)
    assert len(errors_w) >= 0.9 * len(errors_whole)  # as many words found
    assert statistics.median(errors_w) <= statistics.median(errors_whole) + 10


def moved(before, after) -> list[int]:
    """For each word both transcripts share (by text, in order: difflib), how far its farther
    edge moved, in ms."""
    import difflib

    match = difflib.SequenceMatcher(a=[w.text for w in before], b=[w.text for w in after], autojunk=False)
    return [
        max(
            abs(before[m.a + k].begin_ms - after[m.b + k].begin_ms), abs(before[m.a + k].end_ms - after[m.b + k].end_ms)
        )
        for m in match.get_matching_blocks()
        for k in range(m.size)
    ]


def windows_off(audio: np.ndarray):
    saved = windows.WINDOW_MAX_S
    windows.WINDOW_MAX_S = 10**6
    try:
        return asr.transcribe(audio, TINY)
    finally:
        windows.WINDOW_MAX_S = saved


@needs_espeak
def test_progress_runs_over_the_whole_clip_and_the_language_is_fixed_once(short_windows, read_minute, monkeypatch):
    from avstack.asr import whisper
    from avstack.asr.progress import asr_progress

    audio, _ = read_minute
    asked: list[str] = []
    plain = whisper.transcribe_one

    def spy(samples, s, **how):
        asked.append(s.language)
        return plain(samples, s, **how)

    monkeypatch.setattr(whisper, "transcribe_one", spy)
    seen: list[tuple[float, float]] = []
    with asr_progress(lambda done, total: seen.append((done, total))):
        tr = whisper.transcribe_long(lambda a, b: audio[a:b], len(audio), AsrSettings(model="tiny.en"))
    total = len(audio) / RATE
    assert all(t == pytest.approx(total) for _, t in seen) and seen[-1][0] == pytest.approx(total)
    done = [d for d, _ in seen]
    assert any(20 < d < total - 1 for d in done)  # reports from a later window, on the clip's scale
    assert asked[0] == "auto" and set(asked[1:]) == {"en"} and tr.language == "en"


@needs_espeak
def test_prepare_reads_a_long_clips_audio_a_window_at_a_time(short_windows, read_minute, tmp_path, monkeypatch):
    """`prepare` (one worker, in this process) on a minute of the read: the WAV is read in windows,
    never whole; the record says where each window starts; the words are on the clip's clock."""
    from avstack.manifest import load_manifest
    from avstack.preparation import stages
    from avstack.preparation.driver import prepare
    from avstack.preparation.settings import PrepareSettings
    from avstack.synthetic import synth

    audio, truth = read_minute
    (tmp_path / "in").mkdir()
    synth.write_clip(tmp_path / "in" / "read.mp4", synth.ClipSpec(320, 180, 2, len(audio) / RATE, audio=audio))
    reads: list[int] = []
    plain = stages.read_wav

    def spy(path, first, end):
        reads.append(end - first)
        return plain(path, first, end)

    monkeypatch.setattr(stages, "read_wav", spy)
    s = PrepareSettings(fps=0.5, asr_model="tiny.en", lang="en")
    report = prepare(tmp_path / "in", tmp_path / "out", s, workers=1)
    assert not report.failed, report.failed
    (rec,) = load_manifest(tmp_path / "out")
    assert reads and max(reads) <= 20 * RATE
    assert len(rec.asr.to_ecog()["timing"]["windows_ms"]) >= 3
    found = rec.asr.to_ecog()["words"]
    errors = []
    for t in truth:
        near = [w for w in found if w["text"].strip(" .,!?;:").lower() == t["text"]]
        best = min(near, key=lambda w: abs(w["begin_time"] - t["begin_time"]), default=None)
        if best is not None and abs(best["begin_time"] - t["begin_time"]) <= 1000:
            errors.append(abs(best["begin_time"] - t["begin_time"]))
    # AAC shifts nothing on the clip's clock (tests/test_clock.py); the short-clip bound holds
    assert len(errors) >= 0.6 * len(truth) and statistics.median(errors) <= 40


@needs_espeak
def test_a_window_whose_fallback_samples_is_decoded_once_to_the_same_words():
    """A long clip's window is decoded once, by the model seeded from its audio: the words a clip
    transcribed alone gets after its sampled fallback is decoded again, without the first decode,
    and its progress never runs back (the second decode reported the window again from its start,
    and the ETA with it). Half a minute of the read under noise where tiny.en's temperature
    fallback samples (float32: on any CPU). The noise is the first of a few that samples with the
    voice at hand: eSpeak NG's program and the espeakng-loader library speak a little
    differently (found by trying levels and seeds with each)."""
    pytest.importorskip("faster_whisper")
    from avstack.asr import whisper
    from avstack.asr.progress import asr_progress
    from avstack.synthetic import longread, synth

    audio, _ = longread.read_aloud(30.0)
    s = AsrSettings(model="tiny.en", language="en", aligner="none", device="cpu")  # a GPU decodes first
    real = whisper._decode

    def transcribed(transcribe, noisy):
        sampled: list[bool] = []
        reported: list[float] = []

        def counted(model, samples, options):
            result = real(model, samples, options)
            sampled.append(result[2])
            return result

        whisper._decode = counted
        try:
            with asr_progress(lambda done, _total: reported.append(done)):
                words = transcribe(noisy, s).words
        finally:
            whisper._decode = real
        return words, sampled, reported

    for level, seed in ((0.08, 3), (0.1, 3)):  # the program's voice, then the library's
        noisy = (audio + synth.noise(len(audio) / RATE, level=level, seed=seed)[: len(audio)]).astype(np.float32)
        alone, sampled, reported = transcribed(whisper.transcribe_one, noisy)
        if sampled == [True, True] and len(alone) >= 20:
            break  # sampled, then decoded again from the clip's seed
    else:
        pytest.fail(f"no noise made tiny.en's fallback sample on this voice (last: {sampled}, {len(alone)} words)")
    words, once, in_window = transcribed(whisper.transcribe_window, noisy)
    assert len(once) == 1  # the seeded decode alone
    assert words == alone
    assert any(a > b for a, b in zip(reported, reported[1:])) and in_window == sorted(in_window)
