"""The records a command's options become: how requests are sent (BackendOptions, inspect's
GenerateConfig), how the plan counts and bills (Costing), what a command gives back (Done) and how
it fails (CommandFailed); and the parsing of the options written as text (frame budgets, --pack)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from avstack.runs.runners.base import DEFAULTS


class CommandFailed(Exception):
    """A command that ran and did not succeed: `code` is its exit status (1: items or arms failed,
    or the input departed from the plan, after everything was written), `done` what it wrote."""

    def __init__(self, message: str, code: int = 1, done: Done | None = None) -> None:
        super().__init__(message)
        self.code, self.done = code, done


@dataclass(frozen=True)
class BackendOptions:
    """How every request of a command is sent, one record whatever the back-end (the answer key
    holds the temperature, the longest answer and the JSON mode)."""

    base_url: str | None = None  # an OpenAI-compatible server (else OPENAI_BASE_URL, or the provider's)
    temperature: float = DEFAULTS["temperature"]
    max_tokens: int = DEFAULTS["max_tokens"]
    timeout: float = DEFAULTS["timeout"]  # seconds per request
    audio_as: str = "input_audio"  # how an OpenAI-compatible server is sent a sound: input_audio or audio_url
    # a sound's WAV samples: auto (as prepared where the server decodes IEEE float32, else PCM16),
    # prepared or pcm16
    audio_format: str = "auto"
    json_mode: bool = DEFAULTS["json_mode"]

    def kwargs(self) -> dict[str, Any]:
        """The keywords the back-ends take (runs.runners.make_backend): the defaults left out, so a
        back-end that has no use for one is never handed it."""
        opts: dict[str, Any] = {"temperature": self.temperature, "max_tokens": self.max_tokens, "timeout": self.timeout}
        if not self.json_mode:
            opts["json_mode"] = False
        if self.base_url:
            opts["base_url"] = self.base_url
        if self.audio_as != "input_audio":
            opts["audio_as"] = self.audio_as
        if self.audio_format != "auto":
            opts["audio_format"] = self.audio_format
        return opts


@dataclass(frozen=True)
class Costing:
    """How the plan counts and bills before anything is sent."""

    dry_run: bool = False  # only plan: requests, tokens and cost into OUT/plan.json
    max_cost: float | None = None  # refuse to start above this (USD, online prices); stop once spent
    detail: str = "high"  # the OpenAI image detail the plan counts
    image_rule: str | None = None  # the image-token rule (default: by the model's name)
    prices: Path | None = None  # a price table of one's own
    providers: Path | None = None  # a providers file of one's own (cache rules, request limits)
    fit_limits: bool = False  # lower a stack's frame budget to fit the provider's limits


@dataclass(frozen=True)
class Done:
    """What a command did: the summary it prints, where it wrote, notes for stderr, the plan."""

    summary: str
    path: Path | None = None
    notes: tuple[str, ...] = ()
    plan: Any = None  # the plan (avstack.runs.plan_record.Plan) where one was made
    result: Any = None
    failed: dict[str, dict[str, Any]] = field(default_factory=dict)  # per stack whose requests failed
    departed: dict[str, str] = field(default_factory=dict)  # per arm whose input departs from the plan


def frame_budgets(fps: str | float | None, max_frames: str | int | None, one: bool = False) -> tuple[Any, ...]:
    """--fps and --max-frames as frame budgets: every pair of the two comma lists (one, for a run)."""
    from avstack.prompting.budget import FrameBudget

    def values(given: str | float | int | None, kind: type, flag: str) -> list[Any]:
        if given is None:
            return [None]
        text = str(given)
        try:
            return [kind(v) for v in text.split(",") if v.strip()] or [None]
        except ValueError:
            what = "numbers" if kind is float else "whole numbers"
            raise ValueError(f"{flag}: expected {what} (a comma list), found {text!r}") from None

    rates, counts = values(fps, float, "--fps"), values(max_frames, int, "--max-frames")
    if one and len(rates) * len(counts) > 1:
        raise ValueError("--fps, --max-frames: one value each for one stack (ablate compares several)")
    return tuple(dict.fromkeys(FrameBudget(r, n) for r in rates for n in counts))


def packs_of(given: str | bool) -> tuple[bool, ...]:
    """--pack off | on | off,on (or a bool) as the ablation's packing axis."""
    if isinstance(given, bool):
        return (given,)
    said = {"off": False, "on": True}
    values = [v.strip() for v in given.split(",") if v.strip()]
    if not values or any(v not in said for v in values):
        raise ValueError(f"--pack: expected off, on or off,on; found {given!r}")
    return tuple(dict.fromkeys(said[v] for v in values))


def comma_list(given: str | Any) -> tuple[str, ...]:
    """A comma list option (or a sequence already) as a tuple of its non-empty items."""
    items = given.split(",") if isinstance(given, str) else list(given)
    return tuple(x.strip() for x in items if x.strip())
