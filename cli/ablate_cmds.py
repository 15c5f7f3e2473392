"""`avstack ablate`: the options parsed into records and handed to one library call,
`avstack.ablate` (avstack.api), which plans, bills and runs every arm; an option the task
cannot honour exits 2 naming it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

import avstack.api as door

from .common import (
    BACKEND,
    MODEL,
    PLAN,
    ROUNDS,
    SEND,
    STACKS,
    TASK,
    AsrSourceOption,
    AudioAsOption,
    AudioFormatOption,
    BaseUrlOption,
    BatchOption,
    BatchPollOption,
    BundlesOption,
    CoordOrderOption,
    FitLimitsOption,
    FpsOption,
    ImageRuleOption,
    ImagesOption,
    JsonModeOption,
    MaxCostOption,
    MaxFramesOption,
    MaxSideOption,
    MaxTokensOption,
    OptionsOption,
    PricesOption,
    PromptOption,
    ProvidersOption,
    QFormatOption,
    QuestionsOption,
    RetryFailedOption,
    ShuffleOption,
    StyleOption,
    TemperatureOption,
    WordsOption,
    app,
    ended,
    progress,
    records_of,
    shown,
)


@app.command()
def ablate(
    model: Annotated[
        str, typer.Option(help="oracle, chance, deixis, openai:MODEL, replay:FILE", rich_help_panel=MODEL)
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for one run per stack and the report")],
    prepared: Annotated[
        Path | None, typer.Argument(help="A folder written by `avstack prepare` (ecog, videoqa)")
    ] = None,
    task: Annotated[
        str, typer.Option(help="ecog, videoqa (with --questions) or egogap (with --bundles)", rich_help_panel=TASK)
    ] = "ecog",
    drop: Annotated[list[str], typer.Option(help="Anchor to drop (repeatable)", rich_help_panel=STACKS)] = [],  # noqa: B006
    variant: Annotated[
        str,
        typer.Option(
            help="The baseline variant: full, text, video, omni, video_asr (videoqa also subtitled)",
            rich_help_panel=STACKS,
        ),
    ] = "full",
    variants: Annotated[
        str,
        typer.Option(
            help=(
                "Comma list of extra variants: text, video, omni, video_asr (each with its --drop); egogap: "
                "vflip, hflip, gray, downscale, text, n3, swap_motor, egoplan, exclusion, shuffleN"
            ),
            rich_help_panel=STACKS,
        ),
    ] = "",
    subsets: Annotated[
        bool,
        typer.Option(
            help="Run every subset of the --drop cues and report each cue's Shapley value", rich_help_panel=STACKS
        ),
    ] = False,
    ts_format: Annotated[
        str,
        typer.Option(help="Comma list of frame-time formats to compare, e.g. ms,index,overlay", rich_help_panel=STACKS),
    ] = "ms",
    word_ts_format: WordsOption = "json",
    layout: Annotated[
        str,
        typer.Option(
            help="Comma list of layouts to compare: benchmark, shared-first (see run --help)", rich_help_panel=STACKS
        ),
    ] = "benchmark",
    fps: FpsOption = None,
    max_frames: MaxFramesOption = None,
    pack: Annotated[
        str,
        typer.Option(
            help="videoqa: off (a request a question), on (all of a video's questions in one request), "
            "or off,on to measure what packing changes",
            rich_help_panel=STACKS,
        ),
    ] = "off",
    aa: Annotated[
        bool,
        typer.Option(
            "--aa",
            help="Add the A/A arm (<baseline>-aa): the baseline asked again past every cache; the report gives the "
            "noise floor (flip rate, its delta with a CI) and marks each cue whose |delta| lies within it",
            rich_help_panel=STACKS,
        ),
    ] = False,
    asr: AsrSourceOption = None,
    coord_order: CoordOrderOption = "xy",
    prompt: PromptOption = None,
    questions: QuestionsOption = None,
    questions_format: QFormatOption = "auto",
    bundles: BundlesOption = None,
    images: ImagesOption = None,
    style: StyleOption = "default",
    options: OptionsOption = "all",
    shuffle_seed: ShuffleOption = None,
    max_side: MaxSideOption = 512,
    base_url: BaseUrlOption = None,
    temperature: TemperatureOption = BACKEND.temperature,
    max_tokens: MaxTokensOption = BACKEND.max_tokens,
    json_mode: JsonModeOption = BACKEND.json_mode,
    audio_as: AudioAsOption = "input_audio",
    audio_format: AudioFormatOption = "auto",
    concurrency: Annotated[int, typer.Option(help="Requests in flight", rich_help_panel=SEND)] = 4,
    batch: BatchOption = False,
    batch_poll: BatchPollOption = 30.0,
    retry_failed: RetryFailedOption = False,
    strict_inputs: Annotated[
        bool,
        typer.Option(
            "--strict-inputs",
            help="Exit 1 when an arm's input tokens as the server counted them depart from the plan by more than "
            "the plan's uncertainty (after everything is written)",
            rich_help_panel=PLAN,
        ),
    ] = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run", help="Only plan: requests, tokens, cost per stack into OUT/plan.json", rich_help_panel=PLAN
        ),
    ] = False,
    max_cost: MaxCostOption = None,
    detail: Annotated[
        str, typer.Option(help="OpenAI image detail the plan counts: high or low", rich_help_panel=PLAN)
    ] = "high",
    image_rule: ImageRuleOption = None,
    prices: PricesOption = None,
    providers: ProvidersOption = None,
    fit_limits: FitLimitsOption = False,
    cluster: Annotated[
        str | None,
        typer.Option(help="Bootstrap whole clusters: scene, task_template, level or lang", rich_help_panel=ROUNDS),
    ] = None,
    until: Annotated[
        str,
        typer.Option(
            help="all: every clip; decided: rounds of clips until every contrast is decided", rich_help_panel=ROUNDS
        ),
    ] = "all",
    round_size: Annotated[
        int | None,
        typer.Option(
            "--round",
            help="--until decided: items per round (default: growing rounds, a look after 10, 15, 23, 35, ... items)",
            rich_help_panel=ROUNDS,
        ),
    ] = None,
    precision: Annotated[
        float | None,
        typer.Option(help="--until decided: also stop when every interval is narrower (0-1)", rich_help_panel=ROUNDS),
    ] = None,
    seed: Annotated[int, typer.Option(help="--until decided: the seed of the clip order", rich_help_panel=ROUNDS)] = 0,
) -> None:
    """Run full and each --drop (and --variants), score each, write the Δ table (paired CIs, p-values) and report."""
    args = records_of(locals())  # first: every option, and nothing else
    with ended():
        shown(door.ablate(**args, say=typer.echo, progress=progress))
