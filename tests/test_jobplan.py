"""The configuration prepare chooses for a job it is not told how to run (avstack.jobplan)."""

import json

from avstack.api import prepare
from avstack.preparation.jobplan import plan_job
from avstack.synthetic import synth


def _clips(tmp_path, n, seconds):
    paths = []
    for i in range(n):
        p = tmp_path / f"c{i}_{seconds}.mp4"
        synth.write_clip(p, synth.ClipSpec(duration_s=seconds, fps=10, width=160, height=96))
        paths.append(p)
    return paths


def test_workers_and_threads_follow_clips_and_cores(tmp_path):
    many = [tmp_path / f"c{i}.mp4" for i in range(6)]
    plan = plan_job(many, None, 0, "auto", False, False, n_cores=4)
    assert (plan.workers, plan.threads, plan.asr_mode) == (4, 4, "single")  # spans may use every core
    one = plan_job(many[:1], None, 0, "auto", False, False, n_cores=4)
    assert (one.workers, one.threads) == (1, 4)  # one clip: its spans on every core
    two = plan_job(many[:2], None, 0, "auto", False, False, n_cores=4)
    assert (two.workers, two.threads) == (2, 4)
    asked = plan_job(many[:3], 8, 3, "single", True, False, n_cores=4)
    assert (asked.workers, asked.threads, asked.asr_mode) == (3, 3, "single")  # as given (no more workers than clips)
    assert asked.why == ()


def test_asr_mode_is_single_on_a_cpu_whatever_the_clips_and_batched_on_a_gpu(tmp_path):
    # packing short clips into one window made a clip's words depend on its neighbours: never chosen
    short, long = _clips(tmp_path, 3, 3.0), _clips(tmp_path, 2, 15.0)
    assert plan_job(short, None, 0, "auto", True, False, n_cores=2).asr_mode == "single"
    assert plan_job(long, None, 0, "auto", True, False, n_cores=2).asr_mode == "single"
    assert plan_job(short, None, 0, "auto", True, True, n_cores=2).asr_mode == "batched"
    assert plan_job(short, None, 0, "packed", True, False, n_cores=2).asr_mode == "packed"  # asked for: kept
    assert any("each clip decoded alone" in w for w in plan_job(short, None, 0, "auto", True, False, 2).why)


def test_prepare_json_says_what_was_chosen_and_why(tmp_path):
    root = tmp_path / "clips"
    root.mkdir()
    _clips(root, 2, 1.0)
    prepare(root, tmp_path / "out", anchors="frames")
    plan = json.loads((tmp_path / "out" / "prepare.json").read_text())["plan"]
    assert plan["workers"] >= 1 and plan["threads"] >= 1 and plan["asr_mode"] == "single"
    assert any("worker" in line for line in plan["why"])
