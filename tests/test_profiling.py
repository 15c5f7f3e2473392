"""The stage profile of a prepare (avstack.profiling): time charged to the innermost stage, every
stage of a full prepare in prepare.json and the end-of-run line, nothing of it in the manifest,
and the transcriber loaded once per worker while its first clip decodes."""

from __future__ import annotations

import json
import time

from avstack_cli.app import app
from conftest import manifest_dicts
from typer.testing import CliRunner

from avstack.profiling import line, profiled, stage, summarize


def test_time_goes_to_the_innermost_open_stage_only():
    with profiled() as prof:
        with stage("outer"):
            time.sleep(0.02)
            with stage("inner"):
                time.sleep(0.2)
            time.sleep(0.02)
    inner_wall, inner_cpu = prof["inner"]
    outer_wall, _ = prof["outer"]
    assert inner_wall >= 0.2 and inner_cpu < 0.1  # asleep: wall time, hardly any CPU
    # counted twice, the outer would hold the inner's 0.2 s too
    assert 0.04 <= outer_wall < 0.2, prof
    with stage("nowhere"):  # outside profiled(): nothing is recorded, nothing breaks
        pass


def test_the_summary_adds_clips_up_in_stage_order():
    clips = [{"asr decode": (1.0, 0.9), "hash": (0.1, 0.1)}, {"asr decode": (3.0, 2.9), "custom": (0.5, 0.5)}]
    got = summarize(clips, wall_s=2.5, workers=2)
    assert list(got["stages"]) == ["hash", "asr decode", "custom"]
    assert got["stages"]["asr decode"] == {"wall_s": 4.0, "cpu_s": 3.8, "share_pct": round(100 * 4.0 / 4.6, 1)}
    assert got["clips"] == 2 and got["workers"] == 2
    assert line(got).startswith("stages over 2 clips, 2.5s wall on 2 workers: hash 0.1s (2%), asr decode 4.0s (87%)")


def test_a_full_prepare_profiles_every_stage_and_the_manifest_knows_nothing_of_it(sample_root, tmp_path):
    out = tmp_path / "out"
    args = ["prepare", str(sample_root), "--out", str(out), "--lang", "en", "--workers", "2"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    profile = json.loads((out / "prepare.json").read_text())["profile"]
    stages = profile["stages"]
    for name in ("hash", "probe", "frames", "audio", "model load", "asr decode", "alignment", "writing"):
        assert name in stages and stages[name]["wall_s"] >= 0 and stages[name]["cpu_s"] >= 0, (name, stages)
    assert stages["asr decode"]["wall_s"] > 0 and stages["frames"]["wall_s"] > 0
    assert profile["clips"] == len(manifest_dicts(out)) and profile["workers"] == 2
    # the clips' stages happen inside the run: their sum cannot exceed the workers' wall time
    assert sum(v["wall_s"] for v in stages.values()) <= profile["wall_s"] * profile["workers"] + 0.5
    assert f"stages over {profile['clips']} clips" in res.output and "asr decode" in res.output
    first = (out / "manifest.jsonl").read_bytes()
    assert b'"profile"' not in first
    res = CliRunner().invoke(app, args)  # again, from the cache: another profile, the same manifest
    assert res.exit_code == 0, res.output
    assert (out / "manifest.jsonl").read_bytes() == first
    again = json.loads((out / "prepare.json").read_text())["profile"]["stages"]
    assert "asr decode" not in again  # cached words: nothing decoded


def test_a_warm_up_and_the_first_clip_share_one_model():
    from avstack.asr import models

    thread = models.warm_up("tiny.en", "cpu", 1, "auto")
    model = models.load_model("tiny.en", "cpu", 1, 1, "auto")  # waits for the warm-up's load
    thread.join()
    assert models.load_model("tiny.en", "cpu", 1, 1, "auto") is model
