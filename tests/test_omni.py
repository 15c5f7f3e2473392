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
from avstack.runs.cost import audio_tokens, wav_duration_ms


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
