"""benchmarks/gpu.py runs on a CPU too (`--device cpu --quick`), with the keys of the GPU run that is
committed (benchmarks/gpu.json, measured on a lent H200), so the script cannot rot between the
sessions that get a GPU."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from avstack.asr.types import AsrSettings, Transcript, Word

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _gpu_module():
    spec = importlib.util.spec_from_file_location("gpu_bench", BENCH / "gpu.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _transcript(*words: tuple[str, int, int]) -> Transcript:
    return Transcript("m", "en", tuple(Word(t, b, e, 1.0) for t, b, e in words), AsrSettings(), (), {})


def test_compare_words_by_hand():
    """Two clips: the first the same text with edges 0, 10, 30 and 0 ms apart; the second
    different text (left out of the edge figures)."""
    gpu = _gpu_module()
    got = [_transcript(("put", 100, 310), ("this", 330, 500)), _transcript(("pick", 0, 200))]
    ref = [_transcript(("put", 100, 300), ("this", 300, 500)), _transcript(("put", 0, 200))]
    out = gpu.compare_words(got, ref)
    assert out["identical_text"] == 1 and out["identical_text_share"] == 0.5
    assert out["edges_compared"] == 4
    assert out["edge_diff_median_ms"] == 5.0  # of 0, 10, 30, 0
    assert out["edge_diff_max_ms"] == 30
    assert out["differing"] == [{"device": "pick", "cpu": "put"}]


def _keys(result: dict) -> dict[str, set[str]]:
    """The top-level keys and, per list section, the keys its rows carry."""
    out = {"": set(result)}
    for key in ("asr_rtf", "words_vs_cpu", "real_speech"):
        out[key] = {k for row in result[key] for k in row}
    return out


def _bench(tmp_path: Path, *args: str) -> dict:
    """benchmarks/gpu.py with `args` in a process of its own: its JSON, the run and every section ok."""
    out = tmp_path / "gpu.json"
    cmd = [sys.executable, str(BENCH / "gpu.py"), *args, "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["errors"] == {}, result["errors"]
    return result


@pytest.mark.skipif(importlib.util.find_spec("faster_whisper") is None, reason="faster-whisper is not installed")
def test_cpu_quick_has_every_key(tmp_path):
    result = _bench(tmp_path, "--device", "cpu", "--quick")
    committed = json.loads((BENCH / "gpu.json").read_text())
    mine, theirs = _keys(result), _keys(committed)
    assert mine[""] == theirs[""]
    for key in ("asr_rtf", "words_vs_cpu"):
        assert mine[key] == theirs[key], key
    # the ASR speed: per clip, batched, the transcriber alone, and the long file
    modes = {(r["set"], r["mode"], r["aligner"]) for r in result["asr_rtf"]}
    assert {("short", "per_clip", "auto"), ("short", "batched", "auto"), ("short", "per_clip", "none")} <= modes
    assert {("long", "sequential", "none"), ("long", "batched", "faster-whisper")} <= modes
    for r in result["asr_rtf"]:
        assert r["x_realtime"] == pytest.approx(r["audio_s"] / r["wall_s"], rel=0.02, abs=0.1)
    assert result["meta"]["clips"] >= 6 and result["asr_rtf"][0]["audio_s"] > 20
    for r in result["words_vs_cpu"]:
        assert r["clips"] == result["meta"]["clips"] and 0 <= r["identical_text_share"] <= 1
    # prepare on the device and the CPU, and the hand-written pipeline, in the same run
    sides = {r["side"] for r in result["prepare"]}
    assert {"device", "cpu", "hand", "words"} <= sides
    cpu = next(r for r in result["prepare"] if r["side"] == "cpu")
    assert cpu["ratio_to_cpu"] == 1.0 and cpu["ratio_to_handwritten"] > 0
    assert cpu["profile"]["stages"], "each prepare's profile is kept"
    words = next(r for r in result["prepare"] if r["side"] == "words")
    assert set(words["asr_records_by_device"]) - {"?"} == {"cpu"}  # "?": the silent sample, no ASR run
    # real speech and Ray: measured, or skipped with the reason
    assert result["real_speech"] or "real_speech" in result["skipped"]
    assert result["ray"] or "ray" in result["skipped"]
    if result["ray"]:
        assert result["ray"]["asr_on_device"] == result["ray"]["clips"]


@pytest.mark.skipif(importlib.util.find_spec("faster_whisper") is None, reason="faster-whisper is not installed")
def test_the_simulated_device_runs_the_whole_pipeline_and_profiles_the_asr_thread(tmp_path):
    """`--device sim --quick`: the bundled samples through prepare's GPU pipeline with the
    transcriber's compute replaced by the GPU's measured time. The simulated device gives back the
    CPU's words (the timed run writes the recording run's words), its busy time is the clips'
    audio times the GPU's figure, the ASR thread's profile accounts for it, and no wall time is
    shorter than its critical path."""
    sim = _bench(tmp_path, "--device", "sim", "--quick", "--workers", "1")["simulated"]
    assert sim["same_words_as_recording"] is True
    assert sim["gpu_busy_s"] == pytest.approx(sim["audio_s"] * sim["gpu_rtf"], rel=0.01)
    assert sim["gpu_groups"] >= 2  # batches ramp up (1, 2, 4, ...): the device starts on the first clip
    asr_thread = sim["asr_thread"]
    parts = {"waiting_for_audio_s", "transcribing_s", "waiting_for_aligner_s", "aligning_s", "writing_s"}
    assert set(asr_thread["total"]) == parts and asr_thread["clips"]
    for part in parts:  # the total is the clips' sum
        summed = sum(row[part] for row in asr_thread["clips"].values())
        assert asr_thread["total"][part] == pytest.approx(summed, abs=0.01 * len(asr_thread["clips"]))
    # the transcriber thread's time is the sleeps', plus the little it does around them
    assert sim["gpu_busy_s"] <= asr_thread["total"]["transcribing_s"] <= sim["gpu_busy_s"] + 1.0
    assert 0 < asr_thread["transcriber_busy_share"] <= 1
    assert sim["wall_s"] >= sim["critical_path_s"] >= sim["gpu_busy_s"]
    assert sim["critical_path_shared_cores_s"] >= sim["critical_path_s"]
