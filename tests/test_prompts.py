"""Prompts as files and the time format as an ablation axis: snapshots per format and language,
a user's templates end to end, strict rendering, and the overlay read back from the pixels."""

from __future__ import annotations

import json
import shutil
import threading
from http.server import ThreadingHTTPServer

import cv2
import numpy as np
import pytest
from avstack_cli.app import app
from conftest import LAYOUTS
from fake_http import JsonHandler
from test_stacks import RECORD, SNAPSHOTS, UPDATE, _flat
from typer.testing import CliRunner

from avstack.manifest import ClipRecord, load_manifest
from avstack.preparation.driver import prepare
from avstack.preparation.settings import PrepareSettings
from avstack.prompting import overlay
from avstack.prompting.stacks import make_stack, parse_stack_name
from avstack.prompting.timefmt import TS_FORMATS, parse_frame_tag, parse_words, words_block
from avstack.synthetic import synth
from avstack.tasks.ecog.inputs import EcogInputs
from avstack.tasks.ecog.prompt import build_request


@pytest.fixture(scope="module")
def fake_prepared(tmp_path_factory):
    """RECORD's frames as real JPEGs (the overlay format draws on them)."""
    folder = tmp_path_factory.mktemp("p")
    for f in RECORD["frames"]:
        (folder / f["path"]).parent.mkdir(parents=True, exist_ok=True)
        cv2.imwrite(str(folder / f["path"]), np.full((360, 640, 3), 90, np.uint8))
    return folder


FORMATS = [(ts, "json") for ts in TS_FORMATS] + [("ms", "srt"), ("ms", "inline")]


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize(("ts", "words"), FORMATS)
def test_snapshot_of_every_time_format(fake_prepared, lang, ts, words):
    stack = make_stack("full", [], ts, words)
    req = build_request(ClipRecord.from_json(dict(RECORD, lang=lang)), stack, str(fake_prepared))
    path = SNAPSHOTS / f"ecog_{lang}_{stack.name}.txt"
    text = _flat(req)
    if UPDATE or not path.exists():
        path.write_text(text, encoding="utf-8")
        if not UPDATE:
            pytest.fail(f"snapshot {path.name} was missing and has been written; rerun")
    assert text == path.read_text(encoding="utf-8")
    assert parse_stack_name(stack.name) == stack


@pytest.mark.parametrize("ts", [t for t in TS_FORMATS if t != "overlay"])
def test_frame_tags_parse_back(ts):
    from avstack.prompting.timefmt import frame_tag

    for pts in (0, 467, 1001, 61_234):
        got = parse_frame_tag(ts, frame_tag(ts, pts, 14))
        want = {"index": None, "qwen": round(pts, -2)}.get(ts, pts)
        assert got == want, (ts, pts, got)


@pytest.mark.parametrize("fmt", ["json", "srt", "inline"])
def test_word_blocks_parse_back(fmt):
    words = RECORD["asr"]["words"]
    back = parse_words(
        fmt, words_block(fmt, "put this there", [{k: w[k] for k in ("text", "begin_time", "end_time")} for w in words])
    )
    assert [w["text"] for w in back] == ["put", "this", "there"]
    assert [w["begin_time"] for w in back] == [100, 320, 700]
    if fmt != "inline":
        assert [w["end_time"] for w in back] == [300, 500, 950]


def test_overlay_is_read_back_at_every_true_pts_of_a_vfr_clip(tmp_path):
    root = tmp_path / "v"
    root.mkdir()
    synth.write_clip(root / "vfr.mp4", synth.ClipSpec(duration_s=3.0, vfr=True))
    out = tmp_path / "out"
    prepare(root, out, PrepareSettings(anchors=("frames",), fps=4), workers=1, layouts=LAYOUTS)
    rec = load_manifest(out)[0]
    assert rec.vfr and len(rec.frames) > 8
    req = build_request(rec, make_stack("full", [], "overlay"), str(out))
    images = [p for p in req.parts if type(p).__name__ == "Image"]
    assert not any("timestamp" in getattr(p, "text", "") for p in req.parts)  # no text tag
    assert len(images) == len(rec.frames)
    for part, frame in zip(images, rec.frames):
        img = cv2.imread(str(out / part.path))
        assert overlay.read(img) == frame.pts_ms, part.path
    # readable at 448 px: the digits are at least 14 px tall after the shrink
    h = overlay.cell_size(min(img.shape[:2]))[1] * 448 / max(img.shape[:2])
    assert h >= 14
    # cached per frame: a second build reuses the files
    mtimes = [(out / p.path).stat().st_mtime_ns for p in images]
    build_request(rec, make_stack("full", [], "overlay"), str(out))
    assert [(out / p.path).stat().st_mtime_ns for p in images] == mtimes


def test_two_clips_frames_in_folders_of_one_name_get_overlays_of_their_own(tmp_path):
    """A manifest made elsewhere may put two clips' frames under folders of one last name
    (a/k/000000.jpg, b/k/000000.jpg): each overlaid copy is made from its own picture."""
    for folder, shade in (("a", 30), ("b", 220)):
        (tmp_path / folder / "k").mkdir(parents=True)
        cv2.imwrite(str(tmp_path / folder / "k" / "000000.jpg"), np.full((360, 640, 3), shade, np.uint8))
    first = overlay.overlay_frame(tmp_path, "a/k/000000.jpg", 1234)
    second = overlay.overlay_frame(tmp_path, "b/k/000000.jpg", 1234)
    assert first != second
    for rel, shade in ((first, 30), (second, 220)):
        img = cv2.imread(str(tmp_path / rel))
        assert overlay.read(img) == 1234 and abs(int(np.median(img)) - shade) <= 2, rel


# --------------------------------------------------------------------------- a user's own templates

USER_SYSTEM = """Answer as JSON. Options: {{ (object_choices + space_choices) | join("; ") }}.
{% if coord_order == "yx" %}Points are [y, x].{% else %}Points are [x, y].{% endif %} Task {{ task_template }}.
"""
USER_USER = """{% for f in frames %}
{{ part }}{{ f.tag or ("frame " ~ loop.index) }}
{{ part }}{{ f.image }}
{% endfor %}
{{ part }}CLIP {{ instruction if not silent else "(silent)" }}
{% if asr_shown %}
{{ asr_block }}
{% endif %}
Return selected_options and point_list.
"""


@pytest.fixture()
def user_prompts(tmp_path):
    folder = tmp_path / "my_prompts"
    folder.mkdir()
    (folder / "system.j2").write_text(USER_SYSTEM, encoding="utf-8")
    (folder / "user.j2").write_text(USER_USER, encoding="utf-8")
    return folder


class Capture(JsonHandler):
    bodies: list = []
    answers: dict = {}

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.bodies.append(body)
        texts = " ".join(c.get("text", "") for c in body["messages"][-1]["content"] if c["type"] == "text")
        clip = next(c for c in self.answers if f"CLIP say {c}" in texts)
        self.send_json(200, {"choices": [{"message": {"content": self.answers[clip]}}]})


def test_a_user_prompt_folder_end_to_end_through_run_and_export(prepared, user_prompts, tmp_path):
    from test_run import _with_markers

    from avstack.prompting.templates import folder_hash
    from avstack.tasks.ecog.baselines import Oracle

    prep = _with_markers(prepared, tmp_path)
    Capture.answers = {
        r.clip_id: Oracle().answer(None, {"eval_gt": r.eval_gt, "width": r.width, "height": r.height}).text
        for r in load_manifest(prep)
    }
    Capture.bodies = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Capture)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        out = tmp_path / "run"
        res = CliRunner().invoke(
            app,
            [
                "run",
                str(prep),
                "--model",
                "openai:m",
                "--base-url",
                f"http://127.0.0.1:{httpd.server_port}/v1",
                "--prompt",
                str(user_prompts),
                "--out",
                str(out),
            ],
        )
    finally:
        httpd.shutdown()
    assert res.exit_code == 0, res.output
    assert "| overall | 7 | 100.0 | 100.0 | 100.0 | 100.0 | 100.0 |" in res.output
    first = Capture.bodies[0]["messages"]
    assert first[0]["content"].startswith("Answer as JSON. Options: ")
    user = first[1]["content"]
    assert user[0]["type"] == "text" and user[1]["type"] == "image_url"  # frames first, as the template says
    assert user[-1]["type"] == "text" and user[-1]["text"].startswith("CLIP say ")
    meta = json.loads((out / "run.json").read_text())
    assert meta["prompt"] == {"templates": str(user_prompts.resolve()), "sha256": folder_hash(user_prompts)}
    res = CliRunner().invoke(app, ["report", str(out), "--out", str(tmp_path / "rep")])
    assert folder_hash(user_prompts)[:12] in (tmp_path / "rep" / "report.md").read_text()
    # export with the same templates
    res = CliRunner().invoke(
        app, ["export", str(prep), "--to", "jsonl", "--prompt", str(user_prompts), "--out", str(tmp_path / "exp")]
    )
    assert res.exit_code == 0, res.output
    rows = [json.loads(x) for x in (tmp_path / "exp" / "data.jsonl").read_text().splitlines()]
    assert all(r["question"].startswith("<timestamp_ms>0\n<image>") and "CLIP say" in r["question"] for r in rows)
    assert all(r["system"].startswith("Answer as JSON.") for r in rows)


def test_an_undefined_variable_names_itself_and_its_line(prepared, user_prompts, tmp_path):
    text = (user_prompts / "user.j2").read_text().replace("Return selected_options", "{{ nonsense }} Return")
    (user_prompts / "user.j2").write_text(text)
    res = CliRunner().invoke(
        app, ["stacks", str(prepared), "--prompt", str(user_prompts), "--out", str(tmp_path / "s.jsonl")]
    )
    assert res.exit_code == 2
    assert f"{user_prompts.resolve() / 'user.j2'}:9: UndefinedError: 'nonsense' is undefined" in res.output
    res = CliRunner().invoke(app, ["prompts", "check", str(user_prompts)])
    assert res.exit_code == 1 and "UNKNOWN in user.j2: nonsense" in res.output


def test_prompts_check_says_where_frames_go(user_prompts):
    res = CliRunner().invoke(app, ["prompts", "check", str(user_prompts)])
    assert res.exit_code == 0, res.output
    assert "frames: parts 1..22; the first follows '<timestamp_ms>0'" in res.output
    shutil.copytree(user_prompts, user_prompts.parent / "broken")
    (user_prompts.parent / "broken" / "user.j2").write_text("{{ instruction }}\n")
    res = CliRunner().invoke(app, ["prompts", "check", str(user_prompts.parent / "broken")])
    assert res.exit_code == 1 and "FRAMES: 0 images placed for 8 frames" in res.output


def test_ablate_over_time_formats(prepared, tmp_path):
    out = tmp_path / "ts"
    res = CliRunner().invoke(
        app, ["ablate", str(prepared), "--model", "deixis", "--ts-format", "ms,index,overlay", "--out", str(out)]
    )
    assert res.exit_code == 0, res.output
    scores = {
        s: json.loads((out / s / "score.json").read_text())["overall"]["acc_t"]
        for s in ("full", "full@index", "full@overlay")
    }
    assert scores["full@overlay"] == scores["full"]  # the baseline reads the burned-in times
    assert scores["full@index"] < scores["full"]  # frame numbers alone: the clip's span is lost
    assert "deixis full@index" in res.output and "Prompts (template sha256)" in (out / "report.md").read_text()
    assert EcogInputs().prompt is None
