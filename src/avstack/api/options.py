"""The records a command's options become: how requests are sent (BackendOptions, inspect's
GenerateConfig), how the plan counts and bills (Costing), and what a command gives back (Done);
and the parsing of the options written as text (frame budgets, --pack)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from avstack.errors import UsageError
from avstack.runs.runners.base import BackendOptions


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
            raise UsageError(f"{flag}: expected {what} (a comma list), found {text!r}") from None

    rates, counts = values(fps, float, "--fps"), values(max_frames, int, "--max-frames")
    if one and len(rates) * len(counts) > 1:
        raise UsageError("--fps, --max-frames: one value each for one stack (ablate compares several)")
    return tuple(dict.fromkeys(FrameBudget(r, n) for r in rates for n in counts))


def packs_of(given: str | bool) -> tuple[bool, ...]:
    """--pack off | on | off,on (or a bool) as the ablation's packing axis."""
    if isinstance(given, bool):
        return (given,)
    said = {"off": False, "on": True}
    values = [v.strip() for v in given.split(",") if v.strip()]
    if not values or any(v not in said for v in values):
        raise UsageError(f"--pack: expected off, on or off,on; found {given!r}")
    return tuple(dict.fromkeys(said[v] for v in values))


def comma_list(given: str | Any) -> tuple[str, ...]:
    """A comma list option (or a sequence already) as a tuple of its non-empty items."""
    items = given.split(",") if isinstance(given, str) else list(given)
    return tuple(x.strip() for x in items if x.strip())


__all__ = ["BackendOptions", "Costing", "Done", "comma_list", "frame_budgets", "packs_of"]
