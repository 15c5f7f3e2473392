"""Back-end registry: `--model BACKEND:NAME`. Clients are imported only when used.

The core knows the model back-ends; offline baselines (oracle, chance, deixis) belong to a task,
which passes them in as `baselines`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from avstack.runs.runners.base import (
    DEFAULTS,
    Answer,
    Backend,
    BackendBase,
    FatalError,
    MissingExtra,
    TransientError,
    parts_of,
    refusal,
    seeded_rng,
)

OPENAI_OPTIONS = (
    "base_url", "temperature", "max_tokens", "json_mode", "image_detail", "timeout", "audio_as", "audio_format"
)  # fmt: skip
GEMINI_OPTIONS = ("base_url", "temperature", "max_tokens", "json_mode", "timeout")
HF_OPTIONS = ("temperature", "max_tokens")
ANTHROPIC_OPTIONS = ("base_url", "temperature", "max_tokens", "timeout")
MODEL_BACKENDS = ("openai:MODEL", "gemini:MODEL", "anthropic:MODEL", "hf:MODEL", "replay:FILE")


def _pick(options: Mapping[str, Any], allowed: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in options.items() if k in allowed}


# each model back-end: its module, its class, the options it takes (the others are not its own)
MODEL_CLASSES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "openai": ("avstack.runs.runners.openai_compat", "OpenAICompat", OPENAI_OPTIONS),
    "gemini": ("avstack.runs.runners.gemini", "Gemini", GEMINI_OPTIONS),
    "anthropic": ("avstack.runs.runners.anthropic", "Anthropic", ANTHROPIC_OPTIONS),
    "hf": ("avstack.runs.runners.hf", "HFLocal", HF_OPTIONS),
    "replay": ("avstack.runs.runners.replay", "Replay", ()),
}


def make_backend(spec: str, baselines: Mapping[str, Callable[[str], Backend]] | None = None, **options: Any) -> Backend:
    """`openai:MODEL`, `gemini:MODEL`, `anthropic:MODEL`, `hf:MODEL`, `replay:PATH`, or one of `baselines` (a task's
    offline baselines by name, each made from the text after the colon)."""
    from importlib import import_module

    kind, _, name = spec.partition(":")
    if baselines and kind in baselines:
        return baselines[kind](name)
    if kind in ("openai", "gemini", "anthropic", "hf") and not name:
        example = "Qwen/Qwen2.5-VL-3B-Instruct" if kind == "hf" else "MODEL"
        raise ValueError(f"{kind} needs a model name: --model {kind}:{example}")
    if kind not in MODEL_CLASSES:
        known = [*(baselines or {}), *MODEL_BACKENDS]
        raise ValueError(f"unknown back-end {kind!r}: use {', '.join(known)}")
    module, cls, allowed = MODEL_CLASSES[kind]
    made: Backend = getattr(import_module(module), cls)(name, **_pick(options, allowed))
    return made


__all__ = [
    "DEFAULTS",
    "Answer",
    "Backend",
    "BackendBase",
    "FatalError",
    "MissingExtra",
    "TransientError",
    "make_backend",
    "parts_of",
    "refusal",
    "seeded_rng",
]
