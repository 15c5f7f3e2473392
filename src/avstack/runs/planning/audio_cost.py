"""What a sound costs in tokens, by the model's published rule and, where it differs, the server's:
Gemini 32 a second, OpenAI's audio models 10, Qwen-Omni 25 (its own), or whole 30-s chunks on
llama.cpp."""

from __future__ import annotations

import math

AUDIO_TOKENS_PER_S = {"gemini": 32, "openai-audio": 10, "qwen-omni": 25}
# llama.cpp's Qwen2.5-Omni audio path (mtmd, QWEN2A) pads each sound to whole 30-s Whisper chunks of
# 750 tokens, and marks it with <|audio_bos|> and <|audio_eos|>: measured on a tiny Qwen2.5-Omni
# through the wheel's llama-server b1-7e4c0a9 (tests/test_omni.py), a 4.5-s sound counted 752
# tokens where the model's own 25 a second would give 114
LLAMA_CPP_CHUNK_S, LLAMA_CPP_CHUNK_TOKENS, LLAMA_CPP_MARKERS = 30, 750, 2


def audio_rule(model: str, server_kind: str | None = None) -> str | None:
    """The audio rule for a model spec (and the server that runs it), or None when none is published."""
    name = model.split(":", 1)[-1].lower()
    if "gemini" in name:
        return "gemini"
    if name.startswith(("gpt-4o-audio", "gpt-4o-mini-audio", "gpt-audio")):
        return "openai-audio"
    if "omni" in name and "qwen" in name:
        return "qwen-omni-llama.cpp" if server_kind == "llama.cpp" else "qwen-omni"
    return None


def audio_tokens(duration_ms: int, model: str, server_kind: str | None = None) -> int | None:
    """Tokens a sound of `duration_ms` costs on `model` (served by `server_kind`), or None when no
    rule is known."""
    rule = audio_rule(model, server_kind)
    if rule == "qwen-omni-llama.cpp":
        chunks = max(1, math.ceil(duration_ms / (LLAMA_CPP_CHUNK_S * 1000)))
        return chunks * LLAMA_CPP_CHUNK_TOKENS + LLAMA_CPP_MARKERS
    return None if rule is None else math.ceil(duration_ms * AUDIO_TOKENS_PER_S[rule] / 1000)
