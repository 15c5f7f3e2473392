"""Back-end registry: `--model BACKEND:NAME`. Clients are imported only when used."""

from __future__ import annotations

from typing import Any

from .base import Answer, Backend, MissingExtra, TransientError


def make_backend(spec: str, **options: Any) -> Backend:
    """`oracle`, `chance`, `deixis`, `openai:MODEL`, `gemini:MODEL`, `hf:MODEL`, `replay:PATH`."""
    kind, _, name = spec.partition(":")
    if kind == "oracle":
        from .baselines import Oracle

        return Oracle()
    if kind in ("chance", "deixis"):
        from .baselines import Chance, Deixis

        return (Chance if kind == "chance" else Deixis)(seed=int(name or options.get("seed", 0)))
    if kind == "openai":
        from .openai_compat import OpenAICompat

        if not name:
            raise ValueError("openai needs a model name: --model openai:MODEL")
        return OpenAICompat(name, **{k: v for k, v in options.items() if k in OPENAI_OPTIONS})
    if kind == "replay":
        from .replay import Replay

        return Replay(name)
    if kind == "gemini":
        from .gemini import Gemini

        if not name:
            raise ValueError("gemini needs a model name: --model gemini:MODEL")
        return Gemini(name, **{k: v for k, v in options.items() if k in GEMINI_OPTIONS})
    if kind == "hf":
        from .hf import HFLocal

        if not name:
            raise ValueError("hf needs a model id or folder: --model hf:Qwen/Qwen2.5-VL-3B-Instruct")
        return HFLocal(name, **{k: v for k, v in options.items() if k in HF_OPTIONS})
    raise ValueError(
        f"unknown back-end {kind!r}: use oracle, chance, deixis, openai:MODEL, gemini:MODEL, hf:MODEL, replay:FILE"
    )


OPENAI_OPTIONS = ("base_url", "temperature", "max_tokens", "json_mode", "image_detail", "timeout")
GEMINI_OPTIONS = ("base_url", "temperature", "max_tokens", "json_mode", "timeout")
HF_OPTIONS = ("temperature", "max_tokens")

__all__ = ["Answer", "Backend", "MissingExtra", "TransientError", "make_backend"]
