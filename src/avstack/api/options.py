"""The records a command's options become: how requests are sent (BackendOptions, inspect's
GenerateConfig), how the plan counts and bills (Costing), and what a command gives back (Done);
and the parsing of the options written as text (frame budgets, --pack)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from avstack.options import PLAN, ROUNDS, SEND, STACKS, option
from avstack.prompting.budget import FPS_FLAG, MAX_FRAMES_FLAG, FrameBudget, comma_list, frame_budgets, packs_of
from avstack.runs.sending.runners.base import BackendOptions


@dataclass(frozen=True)
class Costing:
    """How the plan counts and bills before anything is sent."""

    dry_run: bool = option(False, "Only plan: requests, tokens, cost per stack into OUT/plan.json", panel=PLAN)
    max_cost: float | None = option(
        None, "Refuse to start when the plan may cost more (USD, online prices); stop once spent", panel=PLAN
    )
    detail: str = option("high", "OpenAI image detail the plan counts: high or low", panel=PLAN)
    image_rule: str | None = option(
        None,
        "The image-token rule the plan counts by (default: by the model's name): openai-tiles, openai-patches, "
        "gemini, qwen2-vl, qwen2-vl-llama.cpp, qwen3-vl, internvl, llava-onevision, gemma3, claude",
        panel=PLAN,
    )
    prices: Path | None = option(None, "A price table of your own (JSON, as runs/planning/prices.json)", panel=PLAN)
    providers: Path | None = option(
        None,
        "A providers file of your own (JSON, as runs/planning/providers.json): each model family's prompt-cache "
        "rule and request limits (images, bytes, pixels, audio seconds, context tokens)",
        panel=PLAN,
    )
    fit_limits: bool = option(
        False,
        "Where a stack would go over the provider's limits (images, bytes, pixels, context), lower its frame budget "
        "to the largest that fits, and record it (else the plan refuses it, naming the limit)",
        panel=PLAN,
    )


@dataclass(frozen=True)
class Sending:
    """How the requests of a run or an ablation go out: how many at once, retried how often, online
    or through the provider's batch API, and whether failed items are asked again."""

    concurrency: int = option(4, "Requests in flight", panel=SEND)
    retries: int = option(5, "Retries on 429/5xx/timeouts", panel=SEND)
    batch: bool = option(False, "Send through the provider's batch API (about half the price; resumable)", panel=SEND)
    batch_poll: float = option(30.0, "--batch: seconds between polls", panel=SEND)
    retry_failed: bool = option(False, "Ask again the items whose request failed (refused, 4xx, no answer)", panel=SEND)

    def settings(self, budget: Any = None) -> Any:
        """The engine's RunSettings of these choices, with the cost budget the plan's bill set."""
        from avstack.runs.sending.engine import RunSettings

        return RunSettings(
            concurrency=self.concurrency,
            retries=self.retries,
            budget=budget,
            batch_poll_s=self.batch_poll if self.batch else None,
            retry_failed=self.retry_failed,
        )


def axis(flag: str, default: str, help: str) -> Any:
    """An ablation axis given as a comma list (--ts-format ms,index): the flag named as the one
    value it takes in `run`, the field the tuple of them."""
    return option((default,), help, panel=STACKS, name=flag, text=str, default_text=default, parse=comma_list)


@dataclass(frozen=True)
class Ablating:
    """What `avstack ablate` compares, how far it asks and how strictly it holds each arm's input
    to the plan, as its flags give it (comma lists are axes); `spec()` is the engine's
    AblationSpec of it."""

    strict_inputs: bool = option(
        False,
        "Exit 1 when an arm's input tokens as the server counted them depart from the plan by more than the plan's "
        "uncertainty (after everything is written)",
        panel=PLAN,
    )
    drop: tuple[str, ...] = option((), "Anchor to drop (repeatable)", panel=STACKS, many=True)
    variant: str = option(
        "full", "The baseline variant: full, text, video, omni, video_asr (videoqa also subtitled)", panel=STACKS
    )
    variants: tuple[str, ...] = option(
        (),
        "Comma list of extra variants: text, video, omni, video_asr (each with its --drop); egogap: vflip, hflip, "
        "gray, downscale, text, n3, swap_motor, egoplan, exclusion, shuffleN",
        panel=STACKS,
        text=str,
        default_text="",
        parse=comma_list,
    )
    subsets: bool = option(
        False, "Run every subset of the --drop cues and report each cue's Shapley value", panel=STACKS, switch=True
    )
    ts_formats: tuple[str, ...] = axis(
        "ts-format", "ms", "Comma list of frame-time formats to compare, e.g. ms,index,overlay"
    )
    word_ts_format: str = option("json", "How word times are told: json, srt, inline", panel=STACKS)
    layouts: tuple[str, ...] = axis(
        "layout", "benchmark", "Comma list of layouts to compare: benchmark, shared-first (see run --help)"
    )
    budgets: tuple[Any, ...] = option((FrameBudget(),), flags=(FPS_FLAG, MAX_FRAMES_FLAG), parse=frame_budgets)
    packs: tuple[bool, ...] = option(
        (False,),
        "videoqa: off (a request a question), on (all of a video's questions in one request), or off,on to measure "
        "what packing changes",
        panel=STACKS,
        name="pack",
        text=str,
        default_text="off",
        parse=packs_of,
    )
    aa: bool = option(
        False,
        "Add the A/A arm (<baseline>-aa): the baseline asked again past every cache; the report gives the noise floor "
        "(flip rate, its delta with a CI) and marks each cue whose |delta| lies within it",
        panel=STACKS,
    )
    cluster: str | None = option(None, "Bootstrap whole clusters: scene, task_template, level or lang", panel=ROUNDS)
    until: str = option(
        "all", "all: every clip; decided: rounds of clips until every contrast is decided", panel=ROUNDS
    )
    round_size: int | None = option(
        None,
        "--until decided: items per round (default: growing rounds, a look after 10, 15, 23, 35, ... items)",
        panel=ROUNDS,
        name="round",
    )
    precision: float | None = option(
        None, "--until decided: also stop when every interval is narrower (0-1)", panel=ROUNDS
    )
    seed: int = option(0, "--until decided: the seed of the clip order", panel=ROUNDS)

    def spec(self) -> Any:
        """The engine's AblationSpec (runs.ablation) of these choices."""
        from avstack.runs.ablation.arms import AblationSpec

        return AblationSpec(
            drops=tuple(dict.fromkeys(self.drop)),
            variants=self.variants,
            baseline=self.variant,
            subsets=self.subsets,
            ts_formats=self.ts_formats,
            word_ts_format=self.word_ts_format,
            layouts=self.layouts,
            budgets=self.budgets,
            packs=self.packs,
            cluster=self.cluster,
            until=self.until,
            round_size=self.round_size,
            precision=self.precision,
            seed=self.seed,
            aa=self.aa,
        )


@dataclass(frozen=True)
class Done:
    """What a command did: the summary it prints, where it wrote, notes for stderr, the plan."""

    summary: str
    path: Path | None = None
    notes: tuple[str, ...] = ()
    plan: object = None  # the plan (avstack.runs.planning.plan_record.Plan) where one was made
    result: object = None
    failed: dict[str, dict[str, object]] = field(default_factory=dict)  # per stack whose requests failed
    departed: dict[str, str] = field(default_factory=dict)  # per arm whose input departs from the plan


__all__ = ["Ablating", "BackendOptions", "Costing", "Done", "Sending", "comma_list", "frame_budgets", "packs_of"]
