"""Frame budgets at stack time (#59): prepare once, then each stack picks its frames (`--fps`,
`--max-frames`) uniformly in time from the prepared ones, each at its true pts and with its tag;
a budget is in the stack's name (so in the answer key, the plan and the exports) and can be an
axis of the ablation with its own paired delta."""

from __future__ import annotations

import json
import random

import pytest
from avstack_cli.app import app
from typer.testing import CliRunner

from avstack.manifest import load_manifest
from avstack.prompting.budget import FrameBudget
from avstack.prompting.stacks import make_stack, parse_stack_name


def test_picked_by_time_not_by_index_on_a_variable_rate_clip():
    # a burst of frames at the start, then sparse ones: every 3rd frame would be 0, 20, 1010 ms
    pts = [0, 10, 20, 30, 500, 1000, 1010, 1500, 1990, 2000]
    assert FrameBudget(fps=1).pick(pts) == [0, 5, 9]  # the frames nearest 0, 1000, 2000 ms
    assert FrameBudget(max_frames=3).pick(pts) == [0, 5, 9]
    assert FrameBudget(max_frames=5).pick(pts) == [0, 4, 5, 7, 9]  # ticks 0, 500, 1000, 1500, 2000
    assert FrameBudget(fps=2, max_frames=3).pick(pts) == [0, 5, 9]
    assert FrameBudget(max_frames=50).pick(pts) == list(range(10))  # under the budget: every frame
    assert FrameBudget(max_frames=1).pick(pts) == [0]
    assert FrameBudget(fps=100).pick(pts) == list(range(10))  # denser than prepared: every frame once


def _brute(times, n):
    """Brute force: for each of n evenly spaced ticks in turn, the nearest untaken frame."""
    ticks = [times[0] + (times[-1] - times[0]) * k / (n - 1) for k in range(n)]
    taken = []
    for t in ticks:
        free = [i for i in range(len(times)) if i not in taken]
        taken.append(min(free, key=lambda i: (abs(times[i] - t), i)))
    return sorted(taken)


def test_max_frames_equals_a_brute_force_pick_on_random_clips():
    rng = random.Random(7)
    for _ in range(300):
        times = sorted(rng.sample(range(0, 180_000), rng.randint(2, 60)))
        n = rng.randint(2, 70)
        got = FrameBudget(max_frames=n).pick(times)
        assert got == (_brute(times, n) if n < len(times) else list(range(len(times))))
        assert got[0] == 0 and got[-1] == len(times) - 1 and len(got) == min(n, len(times))


@pytest.mark.parametrize(
    "name", ["full@32f", "full@0.5fps", "full@1fps-8f", "full-no_frame_ts@index@shared-first@2fps", "text"]
)
def test_a_budget_is_in_the_stack_name_and_round_trips(name):
    assert parse_stack_name(name).name == name


def test_a_stack_without_frames_has_no_budget_to_name():
    assert make_stack("text", budget=FrameBudget(max_frames=8)).name == "text"
    assert make_stack("full", ["frames"], budget=FrameBudget(max_frames=8)).name == "full-no_frames"
    with pytest.raises(ValueError, match="--max-frames: expected at least 1"):
        FrameBudget(max_frames=0)
    with pytest.raises(ValueError, match="--fps: expected a positive"):
        FrameBudget(fps=-1)


def test_a_run_sends_the_budgeted_frames_with_their_true_times(prepared, tmp_path):
    out = tmp_path / "req.jsonl"
    args = ["stacks", str(prepared), "--out", str(out), "--format", "neutral", "--max-frames", "3"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "full@3f" in res.output
    records = {r.clip_id: r for r in load_manifest(prepared) if r.ok}
    for line in out.read_text().splitlines():
        row = json.loads(line)
        rec = records[row["clip_id"]]
        images = [p for p in row["request"]["parts"] if p["type"] == "image"]
        keep = FrameBudget(max_frames=3).pick([f.pts_ms for f in rec.frames])
        assert [p["path"] for p in images] == [rec.frames[i].path for i in keep]
        tags = [p["text"] for p in row["request"]["parts"] if p["type"] == "text" and "<timestamp_ms>" in p["text"]]
        told = [int(t.split("<timestamp_ms>")[1].split("<")[0]) for t in tags]
        assert told == [rec.frames[i].pts_ms for i in keep]  # each keeps its true pts in its tag


def test_frame_budget_is_an_axis_of_the_ablation_with_its_delta(prepared, tmp_path):
    out = tmp_path / "abl"
    args = ["ablate", str(prepared), "--model", "deixis", "--drop", "word_ts", "--max-frames", "2,4"]
    res = CliRunner().invoke(app, [*args, "--out", str(out)])
    assert res.exit_code == 0, res.output
    for stack in ("full@2f", "full@4f", "full-no_word_ts@2f", "full-no_word_ts@4f"):
        assert (out / stack / "score.json").exists(), stack
    plan = json.loads((out / "plan.json").read_text())
    clips = sum(r.ok for r in load_manifest(prepared))
    assert plan["stacks"]["full@2f"]["images"] == 2 * clips
    assert plan["stacks"]["full@4f"]["images"] <= 4 * clips
    report = (out / "report.md").read_text()
    assert "full@4f" in report  # compared with the first budget's baseline, paired
    from test_egogap import _bundles, _images

    egogap = ["--bundles", str(_bundles(tmp_path / "b.jsonl")), "--images", str(_images(tmp_path / "img"))]
    bad = CliRunner().invoke(app, ["run", "--task", "egogap", "--model", "chance", "--out", str(tmp_path / "e"),
                                   *egogap, "--max-frames", "4"])  # fmt: skip
    assert bad.exit_code != 0 and "--fps/--max-frames" in bad.output


def test_an_export_knows_the_budget(prepared, tmp_path):
    res = CliRunner().invoke(
        app, ["export", str(prepared), "--to", "jsonl", "--out", str(tmp_path), "--max-frames", "2"]
    )
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in (tmp_path / "data.jsonl").read_text().splitlines()]
    assert rows and all(r["stack"] == "full@2f" for r in rows)
    assert all(json.dumps(r).count(".jpg") <= 2 for r in rows)  # two frames each, however many were prepared
