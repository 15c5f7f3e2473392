import json
import shutil

from avstack_cli.app import app
from typer.testing import CliRunner

from avstack.tasks.ecog import score
from avstack.tasks.ecog.data import GtClip
from avstack.tasks.ecog.parse import parse_answer

GOOD = {"selected_options": ["A"], "point_list": [{"point": [10, 20], "timestamp": 5}]}


def test_parse_fences_prose_trailing_commas():
    fenced = "Sure!\n```json\n" + json.dumps(GOOD) + "\n```\nHope that helps."
    assert parse_answer(fenced) == (GOOD, None)
    prose = 'Here you go: {"selected_options": ["A"], "point_list": [{"point": [10, 20], "timestamp": 5},],}'
    assert parse_answer(prose) == (GOOD, None)


def test_parse_yx_models_are_turned_to_xy_and_point_lists_kept_for_averaging():
    yx = {"selected_options": ["A"], "point_list": [{"point": [20, 10], "timestamp": 5}]}
    assert parse_answer(json.dumps(yx), coord_order="yx")[0] == GOOD
    multi = {"selected_options": ["a"], "point_list": [{"point": [[0, 0], [200, 200]], "timestamp": 5}]}
    pred, err = parse_answer(json.dumps(multi))
    clip = GtClip(
        "v",
        "指令2",
        1000,
        1000,
        {"answer": [{"choice": "a", "stroke_begin_time": 0, "stroke_end_time": 9, "points": [[100, 100]]}]},
    )
    assert score([clip], [dict(pred, video_name="v")]).to_json()["overall"]["acc_s"] == 1.0  # mean (100, 100)


def test_unusable_answers_become_empty_predictions_with_an_error():
    for text in ("", "I cannot tell.", '{"selected_options": ["A"', "[1, 2]"):
        pred, err = parse_answer(text)
        assert pred == {} and err, text
    pred, err = parse_answer('{"selected_options": ["A"]}')
    assert err == "answer lacks point_list" and pred == {"selected_options": ["A"]}


def test_ecog_gt_command_names_bad_clips_and_keeps_the_rest(sample_root, tmp_path):
    root = tmp_path / "data"
    shutil.copytree(sample_root, root)
    gt = json.loads((root / "指令2" / "eval_gt.json").read_text())
    name = next(iter(gt))
    gt[name]["answer"][0]["mask"]["mask_base64"] = "bm90IGEgcG5n"  # "not a png"
    (root / "指令2" / "eval_gt.json").write_text(json.dumps(gt))
    res = CliRunner().invoke(app, ["ecog", "gt", str(root), "--lang", "en"])
    assert res.exit_code == 1
    lines = [json.loads(x) for x in res.stdout.splitlines() if x.startswith("{")]
    assert len(lines) == 6 and {r["level"] for r in lines} == {"L1", "L2", "L3", "L4"}
    rot = next(r for r in lines if r["video_name"] == "指令3/l3_put.MOV")  # the clip id runs use
    assert (rot["width"], rot["height"]) == (360, 640)  # displayed size of the rotated clip
    assert name in res.stderr and "does not decode" in res.stderr
