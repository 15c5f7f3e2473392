"""The interface ablation (#53): {frames with their times, the file} x {speech as word-timed text,
speech as sound}: the `omni` and `video_asr` stacks, their requests as each API documents them,
a real local server recording what it is sent, the plan's audio tokens, and the report's 2x2."""

from __future__ import annotations

import base64
import json
import math
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from avstack_cli.app import app
from fake_http import recording_handler, serving
from typer.testing import CliRunner

from avstack.io import write_wav_float
from avstack.manifest import load_manifest
from avstack.media.wavfile import pcm16_wav
from avstack.prompting.messages import Audio, Image, Request, Text, to_gemini, to_hf, to_openai
from avstack.prompting.sound import clip_sound
from avstack.prompting.stacks import INTERFACE, interface_pairs, make_stack
from avstack.runs.ablation.arms import AblationSpec, stacks_to_run
from avstack.runs.planning.cost import audio_tokens, wav_duration_ms
from avstack.runs.planning.plan import plan_requests
from avstack.runs.planning.plan_record import Plan
from avstack.runs.sending.engine import REFUSED, Asking, RunSettings, WorkItem, run_items
from avstack.runs.sending.runners import Answer, Backend, BackendOptions
from avstack.tasks.ecog.prompt import build_request
from avstack.tasks.ecog.runs import requests_for


def _sound_parts(req: Request) -> list[Audio]:
    return [p for p in req.parts if isinstance(p, Audio)]


def test_omni_sends_every_frame_with_its_time_and_the_clips_own_sound_and_no_transcript(prepared):
    stack = make_stack("omni")
    for rec in load_manifest(prepared):
        req = build_request(rec, stack, str(prepared))
        images = [p for p in req.parts if isinstance(p, Image)]
        assert [p.pts_ms for p in images] == [f.pts_ms for f in rec.frames]
        text = "\n".join(p.text for p in req.parts if isinstance(p, Text))
        for f in rec.frames:
            assert f"<timestamp_ms>{f.pts_ms}" in text
        (sound,) = _sound_parts(req)
        if rec.audio:  # the prepared WAV itself
            assert req.path_of(sound).read_bytes() == (prepared / rec.audio["path"]).read_bytes()
        else:  # a clip without an audio track is heard as silence
            assert rec.has_audio is False and not sf.read(str(req.path_of(sound)))[0].any()
        # no ASR text at all: neither the block nor the transcript in the instruction
        assert "<asr_data>" not in text
        spoken = (rec.asr.to_ecog() if rec.asr else {}).get("text", "").strip()
        if spoken:
            assert spoken not in text and "spoken instruction is in the audio" in text, text
        seconds = sf.info(str(req.path_of(sound))).duration
        assert abs(seconds * 1000 - rec.duration_ms) <= 50, (rec.clip_id, seconds, rec.duration_ms)


def test_video_asr_sends_the_file_and_the_word_times(prepared):
    root = json.loads((prepared / "prepare.json").read_text())["data_root"]
    for rec in load_manifest(prepared):
        req = build_request(rec, make_stack("video_asr"), str(prepared), data_root=root)
        kinds = [type(p).__name__ for p in req.parts]
        assert kinds.count("Video") == 1 and "Image" not in kinds and "Audio" not in kinds
        text = "\n".join(p.text for p in req.parts if isinstance(p, Text))
        if rec.task_template != "指令1" and (rec.asr.to_ecog() if rec.asr else {}).get("words"):
            assert "<asr_data>" in text and '"begin_time"' in text


def test_a_clip_without_an_audio_track_sends_silence_as_long_as_the_clip(prepared, tmp_path):
    import dataclasses

    rec = dataclasses.replace(next(iter(load_manifest(prepared))), audio=None, has_audio=False, duration_ms=2345)
    rel = clip_sound(rec, tmp_path, "omni")
    data, rate = sf.read(str(tmp_path / rel), dtype="float32")
    assert rate == 16_000 and len(data) == 2345 * 16 and not data.any()
    with_track = dataclasses.replace(rec, has_audio=True)  # prepared without audio: refused, named
    with pytest.raises(ValueError, match="stack sends the clip's sound"):
        clip_sound(with_track, tmp_path, "omni")


def test_each_api_gets_the_sound_in_its_documented_shape(tmp_path):
    wav = tmp_path / "a.wav"
    write_wav_float(wav, [np.linspace(-0.5, 0.5, 1600, dtype=np.float32)], 16_000)
    req = Request("sys", (Text("hi"), Audio("a.wav")), root=str(tmp_path))
    raw = wav.read_bytes()
    # OpenAI chat completions: input_audio with base64 data (no data: prefix) and its format
    part = to_openai(req)[1]["content"][1]
    assert set(part) == {"type", "input_audio"} and set(part["input_audio"]) == {"data", "format"}
    assert part["type"] == "input_audio" and part["input_audio"]["format"] == "wav"
    assert base64.b64decode(part["input_audio"]["data"]) == raw
    # vLLM's audio_url: a URL, here a data URL
    url = to_openai(req, audio_as="audio_url")[1]["content"][1]
    assert url["type"] == "audio_url" and url["audio_url"]["url"].startswith("data:audio/wav;base64,")
    assert base64.b64decode(url["audio_url"]["url"].split(",", 1)[1]) == raw
    with pytest.raises(ValueError, match="audio_as"):
        to_openai(req, audio_as="wav")
    # Gemini: an inline part with the audio's mime type
    inline = to_gemini(req)["contents"][0]["parts"][1]["inline_data"]
    assert inline["mime_type"] == "audio/wav" and base64.b64decode(inline["data"]) == raw
    # a chat template (Qwen2.5-Omni style): an audio entry with the path
    assert to_hf(req)[1]["content"][1] == {"type": "audio", "audio": str(wav)}


def test_openais_own_api_refuses_a_sound_its_model_cannot_take_and_nothing_is_sent(tmp_path):
    pytest.importorskip("openai")
    from avstack.runs.sending.runners.openai_compat import OpenAICompat

    wav = tmp_path / "a.wav"
    write_wav_float(wav, [np.zeros(1600, np.float32)], 16_000)
    req = Request("sys", (Text("hi"), Audio("a.wav")), root=str(tmp_path), meta={"stack": "omni"})
    why = OpenAICompat("gpt-4o", BackendOptions(base_url="https://api.openai.com/v1"), api_key="x").refuses(req)
    assert why and "takes no audio" in why and "omni" in why
    hears = OpenAICompat("gpt-4o-audio-preview", BackendOptions(base_url="https://api.openai.com/v1"), api_key="x")
    assert hears.refuses(req) is None
    framed = Request("sys", (Text("hi"), Image("f.jpg", 0), Audio("a.wav")), root=str(tmp_path), meta={"stack": "omni"})
    assert "takes no image" in hears.refuses(framed)  # OpenAI's audio models see no frames: omni is not theirs
    assert (
        OpenAICompat("qwen-omni", BackendOptions(base_url="http://127.0.0.1:9/v1")).refuses(req) is None
    )  # the server decides


class Deaf(Backend):
    """A back-end that cannot take sound; counts what it is asked."""

    name = "deaf"
    asked = 0

    def refuses(self, request):
        return "no ears" if any(isinstance(p, Audio) for p in request.parts) else None

    def answer(self, request, truth=None):
        Deaf.asked += 1
        return Answer("{}")


def test_a_refused_stack_is_recorded_as_failed_and_never_sent(prepared, tmp_path):
    pairs, _ = requests_for(prepared, make_stack("omni"))
    items = [WorkItem(r.clip_id, q, {}) for r, q in pairs]
    Deaf.asked = 0
    asking = Asking(Deaf(), settings=RunSettings())
    path = run_items(items, tmp_path / "run", lambda t, i: ({}, None), {"stack": "omni"}, asking, "video_name")
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert Deaf.asked == 0 and len(rows) == len(items)
    assert all(r["error"] == f"{REFUSED}: no ears" and r["attempts"] == 0 for r in rows)


def test_the_plan_counts_audio_tokens_by_each_providers_rule(tmp_path):
    # hand-worked: 2.5 s of sound -> Gemini 32 tokens a second = 80; OpenAI's audio models
    # 1 token per 100 ms = 25; a model with no audio rule: none counted, and the plan says so
    wav = tmp_path / "a.wav"
    write_wav_float(wav, [np.zeros(40_000, np.float32)], 16_000)
    pcm = tmp_path / "b.wav"
    sf.write(str(pcm), np.zeros(8_000 * 3, np.int16), 8_000, subtype="PCM_16")  # another header: 3 s
    assert wav_duration_ms(wav) == 2500 and wav_duration_ms(pcm) == 3000
    assert audio_tokens(2500, "gemini:gemini-2.5-flash") == 80
    assert audio_tokens(2500, "openai:gpt-4o-audio-preview") == 25
    assert audio_tokens(2501, "openai:gpt-4o-audio-preview") == math.ceil(25.01)
    assert audio_tokens(2500, "openai:gpt-4o") is None
    req = Request("", (Text("x"), Audio("a.wav")), root=str(tmp_path))
    plan = plan_requests({"omni": [req, req]}, "gemini:gemini-2.5-flash", "gemini")
    bill = plan.stacks["omni"]
    assert (bill.audio_parts, bill.audio_tokens, bill.to_pay_audio_tokens) == (2, 160, 80)  # one repeat
    assert plan.total.audio_tokens == 80 and plan.audio_rule == "gemini"
    none = plan_requests({"omni": [req]}, "openai:gpt-4o", "openai")
    assert any("no published audio-token rule" in n for n in none.notes)
    # an audio price of its own: gpt-4o-audio-preview's audio input at 40 USD per 1M tokens
    priced = plan_requests({"omni": [req]}, "openai:gpt-4o-audio-preview", "openai", max_output_tokens=0)
    text = priced.total.input_tokens - 25
    assert priced.total.usd_at_most["online"] == round((25 * 40 + text * 2.5) / 1e6, 4)
    assert Plan.from_json(json.loads(json.dumps(priced.to_json()))) == priced  # plan.json reads back whole


def test_drop_applies_to_every_variant_that_has_the_cue_and_the_interface_pairs():
    names = [s.name for s in stacks_to_run(AblationSpec(("word_ts", "frame_ts"), ("text", "omni", "video_asr")))]
    assert names[:3] == ["full", "full-no_word_ts", "full-no_frame_ts"]
    assert {"text-no_word_ts", "omni-no_frame_ts", "video_asr-no_word_ts"} <= set(names)
    assert "omni-no_word_ts" not in names and "text-no_frame_ts" not in names  # cues they do not have
    baseline = [s.name for s in stacks_to_run(AblationSpec(("word_ts",), baseline="text"))]
    assert baseline == ["text", "text-no_word_ts"]
    # the 2x2: four pairs that differ in one factor, never the diagonal
    pairs = interface_pairs(INTERFACE)
    assert {(a, b) for a, b, _ in pairs} == {
        ("full", "omni"),
        ("full", "video_asr"),
        ("omni", "video"),
        ("video_asr", "video"),
    }
    assert interface_pairs(["full", "video"]) == []


# --------------------------------------------------------------- a real local server, recording


Recording = recording_handler(json.dumps({"selected_options": [], "point_list": []}))


@pytest.fixture()
def recording_server():
    pytest.importorskip("openai")
    Recording.bodies.clear()
    with serving(Recording) as url:
        yield url


def _kind(body: dict) -> str:
    parts = body["messages"][-1]["content"]
    types = [p["type"] for p in parts]
    text = "\n".join(p.get("text", "") for p in parts)
    if "input_audio" in types:
        return "omni"
    if "video_url" in types:
        return "video_asr" if "<asr_data>" in text else "video"
    return "full"


def test_ablate_sends_each_interface_cell_as_it_should_and_reports_the_2x2(prepared, recording_server, tmp_path):
    out = tmp_path / "abl"
    args = ["ablate", str(prepared), "--model", "openai:qwen-omni", "--base-url", recording_server]
    res = CliRunner().invoke(app, [*args, "--variants", "omni,video,video_asr", "--out", str(out)])
    assert res.exit_code == 0, res.output
    records = {r.clip_id: r for r in load_manifest(prepared)}
    by_kind: dict[str, list] = {}
    for body in Recording.bodies:
        by_kind.setdefault(_kind(body), []).append(body)
    # a clip with no speech shown (指令1) has the same video and video_asr request: asked once
    spoken = sum(
        r.task_template != "指令1" and bool((r.asr.to_ecog() if r.asr else {}).get("text", "").strip())
        for r in records.values()
    )
    counts = {k: len(v) for k, v in by_kind.items()}
    assert counts == {"full": len(records), "omni": len(records), "video": len(records), "video_asr": spoken}
    # a server of no known kind is sent 16-bit PCM (--audio-format auto): the prepared WAV's samples,
    # each rounded to the nearest step (media.wavfile.pcm16_wav, held to the samples in test_omni.py)
    wavs = {}
    for r in records.values():
        wavs[pcm16_wav((prepared / clip_sound(r, prepared, "omni")).read_bytes())] = r
    assert json.loads((out / "omni" / "run.json").read_text())["backend_settings"]["audio_format"] == "pcm16"
    for body in by_kind["omni"]:
        parts = body["messages"][-1]["content"]
        (sound,) = [p for p in parts if p["type"] == "input_audio"]
        rec = wavs[base64.b64decode(sound["input_audio"]["data"])]
        assert sum(p["type"] == "image_url" for p in parts) == len(rec.frames)
        text = "\n".join(p.get("text", "") for p in parts)
        assert all(f"<timestamp_ms>{f.pts_ms}" in text for f in rec.frames) and "<asr_data>" not in text
        seconds = sf.info(str(prepared / clip_sound(rec, prepared, "omni"))).duration
        assert abs(seconds * 1000 - rec.duration_ms) <= 50
    for body in by_kind["video_asr"]:
        parts = body["messages"][-1]["content"]
        assert sum(p["type"] == "video_url" for p in parts) == 1
    report = (out / "report.md").read_text()
    assert "## Interface (2x2)" in report
    for a, b in (("full", "omni"), ("full", "video_asr"), ("omni", "video"), ("video_asr", "video")):
        assert f"`{a}` -> `{b}`" in report
    assert (out / "interface.csv").is_file()


def test_exports_and_inspect_carry_the_sound_of_an_omni_stack(prepared):
    from avstack.runs.exports.rows import row_of
    from avstack.tasks.ecog.export import ManifestRows
    from avstack.tasks.ecog.inputs import EcogInputs

    rec = next(iter(load_manifest(prepared)))
    req = build_request(rec, make_stack("omni"), str(prepared))
    (first, *_), problems = ManifestRows(str(prepared), make_stack("omni"), EcogInputs()).rows((0, None))
    row = row_of(first, "omni")
    assert problems == [] and first.request.parts == req.parts  # the row carries the request run sends
    assert row["audio"] == str(prepared / rec.audio["path"]) and Path(row["audio"]).is_file()
    assert "<audio>" in row["question"]
    pytest.importorskip("inspect_ai")
    from inspect_ai.model import ContentAudio

    from avstack.tasks.inspect_registry import messages_of

    audio = [c for c in messages_of(req)[-1].content if isinstance(c, ContentAudio)]
    assert len(audio) == 1 and audio[0].audio == row["audio"] and audio[0].format == "wav"


def test_pcm16_is_the_same_samples_within_half_a_step_read_by_an_independent_reader(tmp_path):
    """media.wavfile.pcm16_wav against scipy's own WAV reader: the rate kept, every sample within
    half a step (1/65,536) of the float32 one, the ends clipped to the int16 range; a PCM16 file is
    sent as it is, and a format we do not know is refused by name."""
    import io

    import numpy as np
    from scipy.io import wavfile

    from avstack.io import write_wav_float
    from avstack.media.wavfile import in_format, is_pcm16

    rng = np.random.default_rng(7)
    samples = np.concatenate([rng.uniform(-0.9, 0.9, 16000), [1.0, -1.0, 0.99999, -0.99999]]).astype(np.float32)
    src = tmp_path / "float.wav"
    write_wav_float(src, [samples], 16000)
    raw = src.read_bytes()
    assert not is_pcm16(raw)
    pcm = pcm16_wav(raw)
    rate, steps = wavfile.read(io.BytesIO(pcm))
    assert rate == 16000 and steps.dtype == np.int16 and len(steps) == len(samples) and is_pcm16(pcm)
    back = steps.astype(np.float64) / 32768
    inner = np.abs(samples) < 32767 / 32768
    assert np.abs(back - samples)[inner].max() <= 0.5 / 32768 + 1e-12
    assert steps[-4] == 32767 and steps[-3] == -32768  # +1.0 clipped to the top step, -1.0 exact
    assert in_format(pcm, "pcm16") == pcm and in_format(raw, "prepared") == raw
    with pytest.raises(ValueError, match="expected one of prepared, pcm16"):
        in_format(raw, "mp3")
