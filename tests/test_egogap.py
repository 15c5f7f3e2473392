import json
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

import cv2
import numpy as np
import pytest
from avstack_cli.app import app
from conftest import reference_file
from fake_http import JsonHandler
from typer.testing import CliRunner

from avstack.prompting.messages import Image
from avstack.runs.sending.engine import Asking, RunSettings
from avstack.tasks import backend_for
from avstack.tasks.egogap import EgoGapDataError, build_prompt, load_bundles, parse_letter, score, spearman
from avstack.tasks.egogap.export import export_ms_swift
from avstack.tasks.egogap.inputs import EgogapInputs
from avstack.tasks.egogap.prompt import EXCLUSION_RULE, drop_off_vantage, shuffled, swap_motor
from avstack.tasks.egogap.report import load_egogap_run, write_egogap_report
from avstack.tasks.egogap.runs import image_cache, run_egogap, score_egogap_run, work_items
from avstack.tasks.egogap.stack import EgoGapStack

FILES = ("coco_default", "coco_egoplan", "wikimedia_default")


def _without_eval_prompt(src, dst):
    """A copy of a bundles file with every eval_prompt removed: prompts must come from options alone."""
    lines = []
    for line in src.read_text().splitlines():
        bundle = json.loads(line)
        for item in bundle["mcq_items"]:
            item.pop("eval_prompt")
        lines.append(json.dumps(bundle))
    dst.write_text("\n".join(lines) + "\n")
    return dst


@pytest.mark.parametrize("name", FILES)
def test_prompts_rebuilt_byte_for_byte(name, tmp_path):
    src = reference_file("egogapbench", f"{name}.bundles.jsonl")
    truth = {i.uid: i.eval_prompt for i in load_bundles(src)}
    items = load_bundles(_without_eval_prompt(src, tmp_path / "b.jsonl"))
    assert all(i.eval_prompt is None for i in items)
    style = "egoplan" if "egoplan" in name else "default"
    mismatched = [i.uid for i in items if build_prompt(i, style) != truth[i.uid]]
    assert len(items) == {"wikimedia_default": 107}.get(name, 1000) and not mismatched, mismatched[:3]


def test_egoplan_rebuilt_from_default_file():
    default = load_bundles(reference_file("egogapbench", "coco_default.bundles.jsonl"))
    egoplan = {i.uid: i.eval_prompt for i in load_bundles(reference_file("egogapbench", "coco_egoplan.bundles.jsonl"))}
    assert sum(build_prompt(i, "egoplan") == egoplan[i.uid] for i in default) == 1000


# --------------------------------------------------------------------------- a hand-made bundle file

LABELS4 = {"A": "motor_b", "B": "composition_off", "C": "motor_a", "D": "correct"}
LABELS3 = {"A": "correct", "B": "motor_a", "C": "motor_b"}


def _item(uid, labels, cand_kind):
    return {
        "kind": f"mcq{len(labels)}",
        "n_options": len(labels),
        "uid": uid,
        "cand_kind": cand_kind,
        "status": "pass",
        "options": {k: f"As person {k} of {uid}, do thing {k}" for k in labels},
        "option_labels": labels,
        "correct_letter": next(k for k, v in labels.items() if v == "correct"),
    }


def _bundles(path, n_images=4):
    """n images; each bundle: one n4 direct item and one n3 indirect item."""
    lines = []
    for b in range(n_images):
        items = [_item(f"{b}:x:mcq4", LABELS4, "direct"), _item(f"{b}:y:mcq3", LABELS3, "indirect")]
        lines.append(
            json.dumps({"bundle_uid": f"img:{b}", "image_id": b, "file_name": f"{b:012d}.jpg", "mcq_items": items})
        )
    path.write_text("\n".join(lines) + "\n")
    return path


def _images(folder, n_images=4):
    folder.mkdir(exist_ok=True)
    for b in range(n_images):
        img = np.zeros((60, 80, 3), np.uint8)
        img[:20] = (0, 0, 255)  # a red band on top: a vertical flip moves it to the bottom
        img[:, :5] = (255, 0, 0)
        cv2.imwrite(str(folder / f"{b:012d}.jpg"), img, [cv2.IMWRITE_JPEG_QUALITY, 100])
    return folder


def test_scores_agree_with_hand_computation(tmp_path):
    items = load_bundles(_bundles(tmp_path / "b.jsonl"))
    preds = [
        {"uid": "0:x:mcq4", "raw": '```json\n{"answer": "D", "rationale": "ok"}\n```'},  # n4 correct
        {"uid": "1:x:mcq4", "raw": 'Sure! {"answer": "A", "rationale": "copy"}'},  # n4 motor_b
        {"uid": "2:x:mcq4", "raw": '{"answer": "C"}'},  # n4 motor_a
        {"uid": "3:x:mcq4", "raw": '{"answer": "B",}'},  # n4 off-vantage (trailing comma forgiven)
        {"uid": "0:y:mcq3", "raw": '{"answer": "A"}'},  # n3 correct
        {"uid": "1:y:mcq3", "raw": '{"answer": "D"}'},  # n3: D is not an option -> unparsed
        {"uid": "2:y:mcq3", "raw": "I would wave."},  # unparsed
        # 3:y:mcq3 missing
        {"uid": "nope", "raw": '{"answer": "A"}'},
    ]
    res = score(items, preds)
    g = res["groups"]
    assert (g["overall"]["n"], g["overall"]["correct"]) == (8, 2)
    assert g["n4"]["accuracy"] == 1 / 4 and g["n3"]["accuracy"] == 1 / 4
    assert g["direct"]["accuracy"] == 1 / 4 and g["indirect"]["accuracy"] == 1 / 4
    assert res["n4_errors"]["motor_intrusion_rate"] == 2 / 4
    assert res["n4_errors"]["off_vantage_rate"] == 1 / 4
    assert res["counts"] == {"items": 8, "missing_predictions": 1, "failed": 0, "unparsed": 2, "unknown_uids": 1}
    lo, hi = g["overall"]["ci95"]
    assert 0 <= lo < 0.25 < hi <= 1
    assert score(items, preds)["groups"] == g  # the bootstrap is seeded


def test_parse_is_lenient_about_wrapping_and_strict_about_the_letter():
    abc = ["A", "B", "C"]
    assert parse_letter('```json\n{"answer": "B", "rationale": "x"}\n```', abc) == ("B", None)
    assert parse_letter('{"answer": "(C)"}', abc) == ("C", None)
    assert parse_letter('{"answer": "B) As the umpire"}', abc) == ("B", None)
    assert parse_letter('{"answer": "B", "rationale": "cut', abc) == ("B", None)  # half JSON
    assert parse_letter("B", abc) == ("B", None)
    assert parse_letter('{"answer": "D"}', abc)[0] is None
    assert parse_letter('{"answer": "b"}', abc)[0] is None
    assert parse_letter('{"answer": "A or B"}', abc)[0] is None
    assert parse_letter("The answer is probably A but maybe B", abc)[0] is None


def test_spearman_against_hand_values():
    assert spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    # ties take their mean rank: x ranks 1.5,1.5,3 ; y ranks 1,2,3
    assert spearman([0.5, 0.5, 0.9], [0.1, 0.2, 0.3]) == pytest.approx(np.corrcoef([1.5, 1.5, 3], [1, 2, 3])[0, 1])


def test_shuffle_and_option_ablations_keep_the_key(tmp_path):
    items = load_bundles(_bundles(tmp_path / "b.jsonl"))
    for item in items:
        s = shuffled(item, seed=7)
        assert s.label_of(s.correct_letter) == "correct"
        assert sorted(t for _, t, _ in s.options) == sorted(t for _, t, _ in item.options)
        assert s == shuffled(item, seed=7)
        assert f"{s.correct_letter}) " + next(t for _, t, lab in s.options if lab == "correct") in build_prompt(s)
    assert any(shuffled(i, 7).letters != shuffled(i, 8).letters or shuffled(i, 7) != shuffled(i, 8) for i in items)
    n4 = items[0]
    n3 = drop_off_vantage(n4)
    assert n3.n_options == 3 and n3.kind == "mcq3" and "composition_off" not in [lab for *_, lab in n3.options]
    assert n3.label_of(n3.correct_letter) == "correct" and '"C", "rationale"' in build_prompt(n3)
    swapped = swap_motor(n4, items, seed=1)
    foreign = [t for _, t, lab in swapped.options if lab == "foreign"]
    assert len(foreign) == 1 and not foreign[0].endswith(f"of {n4.uid}, do thing A")
    assert swapped.correct_letter == n4.correct_letter


def test_exclusion_style_is_default_plus_the_rule():
    items = load_bundles(reference_file("egogapbench", "wikimedia_default.bundles.jsonl"))
    for item in items[:5]:
        ex, de = build_prompt(item, "exclusion"), build_prompt(item, "default")
        assert ex.replace(EXCLUSION_RULE, "") == de
        assert ex.index("Note:") < ex.index(EXCLUSION_RULE) < ex.index("Options:")


def test_bad_bundles_name_the_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"bundle_uid": 1, "mcq_items": []}\nnot json\n')
    with pytest.raises(EgoGapDataError, match=r"bad.jsonl:2: not JSON"):
        load_bundles(bad)
    path = _bundles(tmp_path / "b.jsonl", 1)
    rec = json.loads(path.read_text())
    rec["mcq_items"][0]["correct_letter"] = "A"
    path.write_text(json.dumps(rec))
    with pytest.raises(EgoGapDataError, match="0:x:mcq4.*not the option labelled 'correct'"):
        load_bundles(path)


def test_runs_oracle_chance_text_and_image_ablations(tmp_path):
    bundles, images = _bundles(tmp_path / "b.jsonl"), _images(tmp_path / "img")
    (images / "000000000003.jpg").unlink()  # one missing image: its two items fail, others go on
    out = tmp_path / "oracle"
    run_egogap(EgogapInputs(bundles, images), EgoGapStack(shuffle_seed=3), out, Asking(backend_for("egogap", "oracle")))
    res = score_egogap_run(out)
    assert res["groups"]["overall"]["correct"] == 6 and res["counts"]["items"] == 8
    assert res["counts"]["failed"] == 2 and res["counts"]["unparsed"] == 0
    errors = [json.loads(x)["error"] for x in (out / "predictions.jsonl").read_text().splitlines()]
    assert sum(bool(e) for e in errors) == 2 and all("000000000003.jpg" in e for e in errors if e)

    vflip = tmp_path / "vflip"
    run_egogap(
        EgogapInputs(bundles, images), EgoGapStack(image="vflip"), vflip, Asking(backend_for("egogap", "chance"))
    )
    # the flipped picture the run sent, in the one place every EgoGap variant's pictures live
    sent = work_items(load_bundles(bundles), EgoGapStack(image="vflip"), images)[0].request
    (picture,) = [p for p in sent.parts if isinstance(p, Image)]
    assert Path(picture.path).parent == image_cache() / "vflip"
    flipped = cv2.imread(picture.path)
    assert flipped[-5, 40, 2] > 200 and flipped[5, 40, 2] < 60  # the red band is now at the bottom
    assert flipped[30, 2, 0] > 200  # a vertical flip keeps the blue left edge
    chance = score_egogap_run(vflip)
    assert chance["counts"]["unparsed"] == 0 and 0 < chance["groups"]["overall"]["correct"] < 6

    text = tmp_path / "text"
    run_egogap(EgogapInputs(bundles), EgoGapStack(image="text"), text, Asking(backend_for("egogap", "oracle")))
    assert score_egogap_run(text)["groups"]["overall"]["accuracy"] == 1.0  # no image needed, none missing


class MCQServer(JsonHandler):
    """OpenAI chat-completions: answers the option whose text says 'do thing D' for n4, 'A' for n3."""

    bodies: list = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.bodies.append(body)
        content = body["messages"][0]["content"]
        prompt = next(p["text"] for p in content if p["type"] == "text")
        letter = "D" if "D) " in prompt else "A"
        text = "Not JSON at all" if "1:x:mcq4" in prompt else f'```json\n{{"answer": "{letter}"}}\n```'
        self.send_json(200, {"choices": [{"message": {"content": text}}], "usage": {"total_tokens": 3}})


def test_openai_backend_on_egogap_and_report(tmp_path, monkeypatch):
    bundles, images = _bundles(tmp_path / "b.jsonl"), _images(tmp_path / "img")
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), MCQServer)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-egogap-SECRET")
    try:
        backend = backend_for("egogap", "openai:m", base_url=f"http://127.0.0.1:{httpd.server_port}/v1")
        out = tmp_path / "run"
        run_egogap(
            EgogapInputs(bundles, images),
            EgoGapStack(style="egoplan"),
            out,
            Asking(backend, settings=RunSettings(concurrency=2)),
        )
    finally:
        httpd.shutdown()
    first = MCQServer.bodies[0]["messages"]
    assert len(first) == 1 and first[0]["content"][0]["image_url"]["url"].startswith("data:image/jpeg;base64,")
    res = score_egogap_run(out)
    assert res["groups"]["overall"]["correct"] == 7 and res["counts"]["unparsed"] == 1
    for f in out.iterdir():
        assert f.is_dir() or "SECRET" not in f.read_text()
    runs = [out]
    for model, style in (
        ("chance:5", "egoplan"),
        ("chance:5", "default"),
        ("oracle", "egoplan"),
        ("oracle", "default"),
    ):
        d = tmp_path / f"{model}-{style}"
        res = CliRunner().invoke(
            app,
            ["run", "--task", "egogap", "--bundles", str(bundles), "--images", str(images), "--model", model]
            + ["--style", style, "--out", str(d)],
        )
        assert res.exit_code == 0, res.output
        runs.append(d)
    res = CliRunner().invoke(app, ["report", *map(str, runs), "--out", str(tmp_path / "rep")])
    assert res.exit_code == 0, res.output
    text = (tmp_path / "rep" / "report.md").read_text()
    assert "motor intrusion (n4)" in text and "GPT-5.4" in text
    # chance < oracle under both styles: the two models rank alike, rho = 1
    assert (
        "| default-image | egoplan-image | 2 | 1.00 |" in text or "| egoplan-image | default-image | 2 | 1.00 |" in text
    )
    assert (tmp_path / "rep" / "accuracy.png").stat().st_size > 1000 and (tmp_path / "rep" / "scores.csv").is_file()
    again = write_egogap_report([load_egogap_run(r) for r in runs], tmp_path / "rep2").text
    assert (
        again == text
        and (tmp_path / "rep2" / "accuracy.png").read_bytes() == (tmp_path / "rep" / "accuracy.png").read_bytes()
    )


def test_ms_swift_export_splits_by_image(tmp_path):
    items = load_bundles(reference_file("egogapbench", "coco_default.bundles.jsonl"))
    res = export_ms_swift(items, tmp_path / "sft", test_fraction=0.2, rationales={items[0].uid: "I am the umpire."})
    train = [json.loads(x) for x in (tmp_path / "sft" / "train.jsonl").read_text().splitlines()]
    test = [json.loads(x) for x in (tmp_path / "sft" / "test.jsonl").read_text().splitlines()]
    assert res["train"] + res["test"] == 1000 and 100 < len(test) < 320
    assert not {r["images"][0] for r in train} & {r["images"][0] for r in test}
    rec = next(r for r in train + test if r["uid"] == items[0].uid)
    assert rec["messages"][0]["content"] == "<image>" + items[0].eval_prompt
    assert json.loads(rec["messages"][1]["content"]) == {
        "answer": items[0].correct_letter,
        "rationale": "I am the umpire.",
    }


def test_cli_prompts_score_and_export(tmp_path):
    bundles = _bundles(tmp_path / "b.jsonl")
    res = CliRunner().invoke(app, ["egogap", "prompts", str(bundles), "--style", "egoplan"])
    assert res.exit_code == 0, res.output
    lines = [json.loads(x) for x in res.stdout.splitlines()]
    assert [sorted(x) for x in lines[:1]] == [["correct_letter", "image", "prompt", "uid"]] and len(lines) == 8
    assert lines[0]["prompt"].startswith("Imagine") and "Behavior options:" in lines[0]["prompt"]
    pred = tmp_path / "p.jsonl"
    pred.write_text("".join(json.dumps({"uid": x["uid"], "response": x["correct_letter"]}) + "\n" for x in lines))
    res = CliRunner().invoke(
        app,
        [
            "score",
            "--task",
            "egogap",
            "--bundles",
            str(bundles),
            "--pred",
            str(pred),
            "--json",
            str(tmp_path / "s.json"),
        ],
    )
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "s.json").read_text())["groups"]["overall"]["accuracy"] == 1.0
    res = CliRunner().invoke(
        app,
        [
            "egogap",
            "export",
            str(bundles),
            "--to",
            "ms-swift",
            "--out",
            str(tmp_path / "x"),
            "--images",
            str(tmp_path / "none"),
        ],
    )
    assert res.exit_code == 1 and "not found" in res.output


def cli_runs(tmp_path, models=("oracle", "chance")):
    """Runs of the hand-made bundle file through the CLI, one folder per model."""
    bundles, images = _bundles(tmp_path / "b.jsonl"), _images(tmp_path / "img")
    runs = []
    for model in models:
        d = tmp_path / model
        args = ["run", "--task", "egogap", "--bundles", str(bundles), "--images", str(images), "--model", model]
        assert CliRunner().invoke(app, [*args, "--out", str(d)]).exit_code == 0
        runs.append(d)
    return runs
