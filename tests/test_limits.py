"""Provider limits checked before anything is sent (#59): the error texts each provider returns
for a limit (shared/providers/FACTS.md) read back to the limit they name, a request measured and
checked by hand against Claude's limits (100 images, 2000 px beyond 20 images, 32 MB), and the
held-out check: a 3-minute clip prepared at 1 fps asked of Claude through a local server that
speaks Anthropic's protocol is refused at plan time with nothing sent, naming the cap and the
budget that fits; with --fit-limits every request carries at most 100 images and the plan records
the lowered budget."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest
from avstack_cli.app import app
from typer.testing import CliRunner

from avstack.prompting.messages import Image, Request, Text
from avstack.runs.planning.provider_limits import breaches_of, image_fit, limit_named, measure
from avstack.runs.planning.providers import Limits

CLAUDE = Limits(images=100, image_bytes=5_000_000, request_bytes=32_000_000, side_px=8000, many_images=(20, 2000))


@pytest.mark.parametrize(
    ("text", "limit"),
    [
        ("Request exceeds the maximum size", "request_bytes"),
        ("image dimensions exceed max allowed size for many-image requests: 2000 pixels", "many_images"),
        (
            "messages.0.content.3.image.source.base64: image exceeds 5 MB maximum: 6291456 bytes > 5242880 bytes",
            "image_bytes",
        ),  # fmt: skip
        ("Request payload size exceeds the limit: 20971520 bytes.", "request_bytes"),
        ("The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).", "context_tokens"),
        ("This model's maximum context length is 128000 tokens.", "context_tokens"),
        ("At most 4 image(s) may be provided in one prompt.", "images"),
        ("the request exceeds the available context size, try increasing it", "context_tokens"),
        ("Too many images in request: 251, maximum allowed: 250", "images"),
        ("Number of request tokens has exceeded your rate limit", None),  # a rate limit is no request limit
        ("Overloaded", None),
    ],
)
def test_each_providers_limit_error_names_its_limit(text, limit):
    assert limit_named(text) == limit


def _frames(tmp_path, n, size=(64, 48)):
    out = []
    for i in range(n):
        path = tmp_path / f"f{i}.jpg"
        cv2.imwrite(str(path), np.full((size[1], size[0], 3), i % 250, np.uint8))
        out.append(Image(path.name, i * 1000))
    return out


def test_a_request_measured_and_checked_by_hand(tmp_path):
    frames = _frames(tmp_path, 3)
    req = Request("sys", (Text("abc"), *frames), str(tmp_path))
    m = measure(req)
    sizes = [(tmp_path / f.path).stat().st_size for f in frames]
    assert m.images == 3 and m.largest_side == 64
    assert m.image_bytes == tuple(int(s * 4 / 3) for s in sizes)  # as sent, in base64
    assert m.request_bytes == len("sys") + len("abc") + sum(m.image_bytes)
    assert breaches_of("full", "c1", m, CLAUDE) == []
    tight = Limits(images=2, request_bytes=6 + m.image_bytes[0] + m.image_bytes[1] + 1)
    found = {b.limit: b for b in breaches_of("full", "c1", m, tight)}
    assert set(found) == {"images", "request_bytes"} and found["images"].found == 3
    assert found["images"].fits_images == 2  # two of the three fit both limits (the largest two, to be safe)


def test_claudes_many_image_rule_and_the_budget_that_fits_it(tmp_path):
    big = _frames(tmp_path, 30, size=(2400, 1350))
    m = measure(Request("", tuple(big), str(tmp_path)))
    names = {b.limit for b in breaches_of("full", "c", m, CLAUDE)}
    assert names == {"many_images"}  # 2400 px is within 8000, but not beyond 20 images
    assert image_fit(m, CLAUDE) == 20
    small = measure(Request("", tuple(_frames(tmp_path / "s", 150) if (tmp_path / "s").mkdir() is None else []),
                            str(tmp_path / "s")))  # fmt: skip
    assert {b.limit for b in breaches_of("full", "c", small, CLAUDE)} == {"images"}
    assert image_fit(small, CLAUDE) == 100


@pytest.fixture(scope="module")
def three_minutes(tmp_path_factory):
    """A 3-minute clip prepared at 1 fps (frames only), and one question about it."""
    from avstack.preparation.driver import prepare
    from avstack.preparation.settings import PrepareSettings
    from avstack.synthetic import synth

    root = tmp_path_factory.mktemp("long")
    (root / "videos").mkdir()
    synth.write_clip(root / "videos" / "walk.mp4", synth.ClipSpec(width=320, height=180, fps=5, duration_s=180.0))
    out = root / "prepared"
    report = prepare(root / "videos", out, PrepareSettings(anchors=("frames",), fps=1.0), workers=1)
    assert not report.failed, report.failed
    questions = root / "qa.jsonl"
    row = {"id": "q1", "video": "walk.mp4", "question": "What happens last?", "options": ["A. a", "B. b"]}
    questions.write_text(json.dumps(row | {"answer": "A"}) + "\n")
    return out, questions


def test_a_three_minute_clip_at_1_fps_is_refused_for_claude_then_fitted(three_minutes, tmp_path, monkeypatch):
    from fake_http import serving
    from test_anthropic import KEY, MODEL, Messages, _host

    from avstack.manifest import load_manifest

    prepared, questions = three_minutes
    (rec,) = load_manifest(prepared)
    assert len(rec.frames) >= 170  # one a second over three minutes
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    Messages.bodies, Messages.headers_seen, Messages.script = [], [], {}
    task = ["--task", "videoqa", "--questions", str(questions), "--model", MODEL]
    with serving(Messages) as url:
        for command in ("run", "ablate"):
            res = CliRunner().invoke(app, [command, str(prepared), *task, "--base-url", _host(url),
                                           "--out", str(tmp_path / command)])  # fmt: skip
            assert res.exit_code == 2, res.output
            said = " ".join(res.output.split())
            assert f"sends {len(rec.frames)} images where anthropic allows images 100" in said, said
            assert "item q1" in said and "--max-frames 100" in said and "Nothing was sent" in said
        assert Messages.bodies == []  # refused before anything was sent
        out = tmp_path / "fitted"
        res = CliRunner().invoke(app, ["ablate", str(prepared), *task, "--base-url", _host(url), "--fit-limits",
                                       "--drop", "frame_ts", "--out", str(out)])  # fmt: skip
        assert res.exit_code == 0, res.output
        assert "frame budget lowered to fit anthropic's limits: every frame -> 100f" in res.output
    plan = json.loads((out / "plan.json").read_text())
    assert plan["limits"]["fitted"] == {"every frame": "100f"} and plan["limits"]["breaches"] == {}
    assert set(plan["stacks"]) == {"full@100f", "full-no_frame_ts@100f"}
    assert Messages.bodies and all(
        sum(b["type"] == "image" for b in body["messages"][0]["content"]) == 100 for body in Messages.bodies
    )
    rows = [json.loads(line) for line in (out / "full@100f" / "predictions.jsonl").read_text().splitlines()]
    assert len(rows) == 1 and rows[0]["error"] is None
