"""`avstack export --to lmms-eval`: the generated task folder, exercised through its own hooks.

lmms-eval itself does not install beside avstack's pins (it needs av<16 and torchvision); it runs
in a venv of its own in tests/test_harness_real.py. Here, in avstack's own venv, the test loads
the generated YAML and `utils.py` the way lmms-eval does (the YAML with its `!function` tags
resolved to the module's functions, the Parquet shards through `datasets`) and calls the hooks:
oracle answers score 100%, the deixis answers of a run score exactly what `avstack score` gives
them."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest
from avstack_cli.app import app
from typer.testing import CliRunner

from avstack.tasks.ecog.metrics import METRICS

yaml = pytest.importorskip("yaml", reason="pyyaml is needed to read the task file")
datasets = pytest.importorskip("datasets", reason="the lmms-eval export reads Parquet through datasets")


def _load_task(folder, prefix="avstack_ecog"):
    """The task YAML with `!function utils.x` resolved against the folder's utils.py, as lmms-eval does."""
    spec = importlib.util.spec_from_file_location("avstack_lmms_utils", folder / "utils.py")
    utils = importlib.util.module_from_spec(spec)
    sys.modules["avstack_lmms_utils"] = utils
    spec.loader.exec_module(utils)

    class Loader(yaml.SafeLoader):
        pass

    def function(loader, node):
        return getattr(utils, loader.construct_scalar(node).split(".")[1])

    Loader.add_constructor("!function", function)
    (path,) = folder.glob(f"{prefix}_*.yaml")
    return yaml.load(path.read_text(), Loader=Loader), utils


def test_lmms_eval_task_folder_scores_like_avstack(prepared, tmp_path):
    out = tmp_path / "lmms"
    res = CliRunner().invoke(app, ["export", str(prepared), "--to", "lmms-eval", "--out", str(out)])
    assert res.exit_code == 0, res.output
    task, utils = _load_task(out)
    assert task["task"] == "avstack_ecog_full" and task["output_type"] == "generate_until"
    assert [m["metric"] for m in task["metric_list"]] == list(METRICS)
    docs = datasets.load_dataset("parquet", data_files=task["dataset_kwargs"]["data_files"], split="test")
    assert len(docs) == 7
    doc = docs[0]
    visuals = task["doc_to_visual"](doc)
    text = task["doc_to_text"](doc)
    assert len(visuals) == text.count("<image>") == len(doc["image_pts_ms"])
    assert all(f"<timestamp_ms>{p}\n<image>" in text for p in doc["image_pts_ms"])  # true pts kept in the text
    # oracle answers: 100% on every metric
    from avstack.tasks.ecog.baselines import oracle_answer

    # one schema for every task: the clip's size is in the row's extra
    sizes = [json.loads(d["extra"]) for d in docs]
    scores = [
        task["process_results"](d, [json.dumps(oracle_answer(json.loads(d["answer"]), z["width"], z["height"]))])
        for d, z in zip(docs, sizes)
    ]
    agg = {m: task["metric_list"][i]["aggregation"]([s[m] for s in scores]) for i, m in enumerate(METRICS)}
    assert agg == {m: 1.0 for m in METRICS}
    # the deixis answers of a real run: the same per-clip scores as `avstack score`
    run = tmp_path / "run"
    assert CliRunner().invoke(app, ["run", str(prepared), "--model", "deixis", "--out", str(run)]).exit_code == 0
    raw = {p["video_name"]: p["raw"] for p in map(json.loads, (run / "predictions.jsonl").read_text().splitlines())}
    per_clip = json.loads((run / "score.json").read_text())["per_clip"]
    ours = {c["video_name"]: {m: c[m] for m in METRICS} for c in per_clip}
    theirs = {d["id"]: task["process_results"](d, [raw[d["id"]]]) for d in docs}
    assert theirs == ours


def test_videoqa_exports_to_lmms_eval_and_hf_and_scores_like_avstack(prepared, questions, tmp_path):
    """Your own videos and questions, exported: the lmms-eval task's hooks give each answer of a
    real run the score `avstack run` gave it; --to hf writes one row per question."""
    base = ["export", str(prepared), "--task", "videoqa", "--questions", str(questions)]
    out = tmp_path / "lmms"
    res = CliRunner().invoke(app, [*base, "--to", "lmms-eval", "--out", str(out)])
    assert res.exit_code == 0, res.output
    task, _ = _load_task(out, "avstack_videoqa")
    assert task["task"] == "avstack_videoqa_full" and [m["metric"] for m in task["metric_list"]] == ["correct"]
    docs = datasets.load_dataset("parquet", data_files=task["dataset_kwargs"]["data_files"], split="test")
    n = len(questions.read_text().splitlines())
    assert len(docs) == n and len(task["doc_to_visual"](docs[0])) == len(docs[0]["image_pts_ms"]) > 1
    messages = task["doc_to_messages"](docs[0])
    assert "What is pointed at?" in json.dumps([p.get("text") for m in messages for p in m["content"]])
    assert [task["process_results"](d, ['{"answer": "A"}'])["correct"] for d in docs] == [1.0] * n
    run = tmp_path / "run"
    args = ["run", str(prepared), "--task", "videoqa", "--questions", str(questions), "--model", "chance"]
    assert CliRunner().invoke(app, [*args, "--out", str(run)]).exit_code == 0
    raw = {p["id"]: p["raw"] for p in map(json.loads, (run / "predictions.jsonl").read_text().splitlines())}
    import csv

    ours = {r["item_id"]: float(r["correct"]) for r in csv.DictReader((run / "per_item.csv").open())}
    theirs = {d["id"]: task["process_results"](d, [raw[d["id"]]])["correct"] for d in docs}
    assert theirs == ours and 0 < sum(ours.values()) < n  # chance: some right, some wrong
    hf = tmp_path / "hf"
    res = CliRunner().invoke(app, [*base, "--to", "hf", "--out", str(hf)])
    assert res.exit_code == 0, res.output
    assert len(datasets.load_dataset("parquet", data_files={"test": str(hf / "test-*.parquet")}, split="test")) == n


def test_egogap_exports_one_line_per_item_and_stack(tmp_path):
    from test_egogap import _bundles, _images

    bundles, images = _bundles(tmp_path / "b.jsonl"), _images(tmp_path / "img")
    for variant in ("image", "vflip"):
        out = tmp_path / variant
        args = ["export", "--task", "egogap", "--bundles", str(bundles), "--images", str(images), "--to", "jsonl"]
        res = CliRunner().invoke(app, [*args, "--variant", variant, "--out", str(out)])
        assert res.exit_code == 0, res.output
        rows = [json.loads(line) for line in (out / "data.jsonl").read_text().splitlines()]
        assert len(rows) == 8 and {r["stack"] for r in rows} == {f"default-{variant}"}
        assert all(len(r["images"]) == 1 and json.loads(r["answer"])["correct_letter"] for r in rows)
    res = CliRunner().invoke(app, [*args, "--drop", "asr", "--out", str(tmp_path / "x")])
    assert res.exit_code == 2 and "--task egogap takes no --drop" in res.output
