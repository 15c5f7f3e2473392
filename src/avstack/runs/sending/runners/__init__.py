"""Back-end registry: `--model BACKEND:NAME`. Clients are imported only when used.

The core knows the model back-ends; offline baselines (oracle, chance, deixis) belong to a task,
which passes them in as `baselines`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from avstack.errors import UsageError
from avstack.options import fold
from avstack.runs.sending.runners.base import (
    DEFAULTS,
    Answer,
    Backend,
    BackendOptions,
    FatalError,
    MissingExtra,
    TransientError,
    flag_of,
    parts_of,
    refusal,
    seeded_rng,
)

MODEL_BACKENDS = ("openai:MODEL", "gemini:MODEL", "anthropic:MODEL", "hf:MODEL", "replay:FILE")

# each model back-end, registered in this one place: its module, its class, and the options of
# BackendOptions it honours (one given away from its default that it does not honour is refused)
MODEL_CLASSES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "openai": (
        "avstack.runs.sending.runners.openai_compat",
        "OpenAICompat",
        ("base_url", "temperature", "max_tokens", "json_mode", "timeout", "audio_as", "audio_format"),
    ),
    "gemini": (
        "avstack.runs.sending.runners.gemini",
        "Gemini",
        ("base_url", "temperature", "max_tokens", "json_mode", "timeout"),
    ),
    "anthropic": (
        "avstack.runs.sending.runners.anthropic",
        "Anthropic",
        ("base_url", "temperature", "max_tokens", "timeout"),
    ),
    "hf": ("avstack.runs.sending.runners.hf", "HFLocal", ("temperature", "max_tokens")),
    "replay": ("avstack.runs.sending.runners.replay", "Replay", ()),
}


def _kind_and_name(spec: str, baselines: Mapping[str, object] | None) -> tuple[str, str]:
    kind, _, name = spec.partition(":")
    if baselines and kind in baselines:
        return kind, name
    if kind in ("openai", "gemini", "anthropic", "hf") and not name:
        example = "Qwen/Qwen2.5-VL-3B-Instruct" if kind == "hf" else "MODEL"
        raise UsageError(f"{kind} needs a model name: --model {kind}:{example}")
    if kind not in MODEL_CLASSES:
        known = [*(baselines or {}), *MODEL_BACKENDS]
        raise UsageError(f"unknown back-end {kind!r}: use {', '.join(known)}")
    return kind, name


def refuse_unhonoured(spec: str, baselines: Mapping[str, object] | None, options: BackendOptions) -> None:
    """An option the user gave (set away from its default) that the chosen model back-end does not
    honour is refused, naming the back-end, the flag and what the back-end takes: never dropped.
    A task's offline baselines (oracle, chance, deixis) send nothing and take no option."""
    kind, _ = _kind_and_name(spec, baselines)
    if baselines and kind in baselines:
        return
    honours = MODEL_CLASSES[kind][2]
    unhonoured = [n for n in options.given() if n not in honours]
    if unhonoured:
        takes = ", ".join(flag_of(n) for n in honours) or "none of them"
        raise UsageError(
            f"--model {spec}: the {kind} back-end cannot honour {', '.join(flag_of(n) for n in unhonoured)}; "
            f"it takes {takes}"
        )


def make_backend(
    spec: str,
    baselines: Mapping[str, Callable[[str], Backend]] | None = None,
    options: BackendOptions | None = None,
    **keywords: object,
) -> Backend:
    """`openai:MODEL`, `gemini:MODEL`, `anthropic:MODEL`, `hf:MODEL`, `replay:PATH`, or one of
    `baselines` (a task's offline baselines by name, each made from the text after the colon).
    A model back-end is made from BackendOptions whole (`options`, or its fields among the
    keywords); what the user gave that it does not honour is refused first (refuse_unhonoured).
    Other keywords are the back-end class's own (api_key, poll_s, device)."""
    from importlib import import_module

    options = fold(BackendOptions, keywords, options)
    refuse_unhonoured(spec, baselines, options)
    kind, name = _kind_and_name(spec, baselines)
    if baselines and kind in baselines:
        return baselines[kind](name)
    module, cls, _ = MODEL_CLASSES[kind]
    made: Backend = getattr(import_module(module), cls)(name, options, **keywords)
    return made


__all__ = [
    "DEFAULTS",
    "Answer",
    "Backend",
    "BackendOptions",
    "FatalError",
    "MissingExtra",
    "TransientError",
    "refuse_unhonoured",
    "make_backend",
    "parts_of",
    "refusal",
    "seeded_rng",
]
