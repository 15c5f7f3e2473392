import json

import pytest
from avstack_cli.app import app
from conftest import reference_file, shared_path
from typer.testing import CliRunner

from avstack.tasks.ecog import GtClip, score
from avstack.tasks.ecog.data import load_gt

METRICS = ("acc_cls", "acc_s", "acc_t", "acc_eco", "acc_seq")


def _reference(name):
    return json.loads(reference_file("ecog", f"{name}.json").read_text())


@pytest.mark.parametrize("name", ["edge", "dev"])
def test_reference_scores_match_upstream_exactly(name):
    ref = _reference(name)
    result = score([GtClip.from_json(c) for c in ref["clips"]], ref["predictions"]).to_json()
    exp = ref["expected"]
    assert [c["video_name"] for c in result["per_clip"]] == [c["video_name"] for c in exp["per_clip"]]
    for got, want in zip(result["per_clip"], exp["per_clip"]):
        for m in METRICS:
            assert got[m] == pytest.approx(want[m], abs=1e-9), (want["video_name"], m)
    for m in METRICS:
        assert result["overall"][m] == pytest.approx(exp["overall"][m], abs=1e-9)
    for instr, agg in exp["per_instruction"].items():
        assert result["per_instruction"][instr]["count"] == agg["count"]
        for m in METRICS:
            assert result["per_instruction"][instr][m] == pytest.approx(agg[m], abs=1e-9)


def test_score_cli_accepts_reference_as_jsonl(tmp_path):
    ref = _reference("dev")
    gt, pred = tmp_path / "gt.jsonl", tmp_path / "pred.jsonl"
    gt.write_text("".join(json.dumps(c) + "\n" for c in ref["clips"]))
    pred.write_text("".join(json.dumps(p) + "\n" for p in ref["predictions"]))
    out = tmp_path / "score.json"
    res = CliRunner().invoke(app, ["score", "--task", "ecog", "--gt", str(gt), "--pred", str(pred), "--json", str(out)])
    assert res.exit_code == 0, res.output
    got = json.loads(out.read_text())
    assert got["overall"]["acc_eco"] == pytest.approx(ref["expected"]["overall"]["acc_eco"], abs=1e-9)
    assert set(got["per_level"]) == {"L1", "L2", "L3", "L4"}
    assert 0 < got["overall"]["acc_eco_referent"] < 1


def _clip():
    ans = [
        {"choice": "b", "stroke_begin_time": 100, "stroke_end_time": 200, "points": [[500, 500]]},
        {"choice": "c", "stroke_begin_time": 300, "stroke_end_time": 400, "points": [[100, 100]]},
    ]
    return GtClip("v.mp4", "指令3", 1000, 1000, {"answer": ans})


def test_malformed_prediction_zeroes_only_that_clip_and_is_reported():
    good = {
        "video_name": "v.mp4",
        "selected_options": ["b", "c"],
        "point_list": [{"point": [500, 500], "timestamp": 150}, {"point": [100, 100], "timestamp": 350}],
    }
    res = score([_clip()], [good]).to_json()
    assert res["overall"]["acc_seq"] == 1.0
    bad = dict(good, point_list=["not a dict", {"point": [100, 100], "timestamp": 350}])
    res = score([_clip()], [bad]).to_json()
    assert res["overall"]["acc_eco"] == 0.0  # upstream zeroes the whole clip on an exception
    assert "AttributeError" in res["per_clip"][0]["error"]
    assert res["counts"]["scoring_errors"] == 1


def test_referent_level_micro_eco_weights_referents_not_clips():
    one = GtClip(
        "one.mp4",
        "指令2",
        1000,
        1000,
        {"answer": [{"choice": "a", "stroke_begin_time": 0, "stroke_end_time": 10, "points": [[0, 0]]}]},
    )
    preds = [
        {"video_name": "one.mp4", "selected_options": ["a"], "point_list": [{"point": [0, 0], "timestamp": 5}]},
        {"video_name": "v.mp4", "selected_options": ["x"]},
    ]
    res = score([one, _clip()], preds).to_json()
    assert res["overall"]["acc_eco"] == pytest.approx(0.5)  # mean over clips
    assert res["overall"]["acc_eco_referent"] == pytest.approx(1 / 3)  # 1 of 3 referents


def test_missing_prediction_and_bad_gt_lines_are_counted(tmp_path):
    gt = tmp_path / "gt.jsonl"
    gt.write_text(json.dumps(_clip().to_json()) + "\n{not json\n" + json.dumps({"video_name": "x"}) + "\n")
    clips, errors = load_gt(gt)
    assert len(clips) == 1 and len(errors) == 2
    assert any("'x'" in e for e in errors)
    res = score(clips, [], errors).to_json()
    assert res["counts"]["missing_predictions"] == 1 and res["counts"]["gt_errors"] == 2


SHIPPED = (
    ("ecog", "reference", "edge.json"),
    ("ecog", "reference", "dev.json"),
    ("egogapbench", "coco_default.bundles.jsonl"),
    ("egogapbench", "coco_egoplan.bundles.jsonl"),
    ("egogapbench", "wikimedia_default.bundles.jsonl"),
)


def test_the_shipped_reference_files_are_the_shared_ones_byte_for_byte():
    """The tests read the copies in tests/data/reference (a clone on its own has no ../shared)."""
    differ = [p for p in SHIPPED if reference_file(p[0], p[-1]).read_bytes() != shared_path(*p).read_bytes()]
    assert not differ, differ
