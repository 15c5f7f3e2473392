"""Commands from prepared clips to scores (docs: stacks.md, runs.md, ablation.md, harnesses.md):
stacks, run, ablate, score, report, export."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

import avstack.api as door

from .common import (
    BACKEND,
    DROP_HELP,
    LAYOUT_HELP,
    MODEL,
    OUTPUT,
    PLAN,
    PROMPT_HELP,
    QFORMAT_HELP,
    QUESTIONS_HELP,
    SEND,
    STACKS,
    TASK,
    TS_HELP,
    WORDS_HELP,
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
    PromptOption,
    ProvidersOption,
    QFormatOption,
    QuestionsOption,
    RetryFailedOption,
    ShuffleOption,
    StyleOption,
    TemperatureOption,
    TimeoutOption,
    WordsOption,
    app,
    ended,
    progress,
    records_of,
    shown,
)


@app.command()
def score(
    task: Annotated[str, typer.Option(help="ecog, egogap or videoqa")] = "ecog",
    gt: Annotated[Path | None, typer.Option(help="Ground truth JSONL (avstack ecog gt) or a reference .json")] = None,
    bundles: Annotated[Path | None, typer.Option(help="EgoGap *.bundles.jsonl (for --task egogap)")] = None,
    questions: Annotated[Path | None, typer.Option(help=QUESTIONS_HELP)] = None,
    pred: Annotated[Path | None, typer.Option(help="Predictions JSONL (or predictions.jsonl of a run)")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the full result as JSON here")] = None,
) -> None:
    """Score predictions with the benchmark's own metric definitions."""
    with ended():
        shown(door.score(task, gt=gt, bundles=bundles, questions=questions, predictions=pred, json_out=json_out))


@app.command()
def stacks(
    prepared: Annotated[Path, typer.Argument(help="A folder written by `avstack prepare`")],
    out: Annotated[Path, typer.Option("--out", "-o", help="JSONL file, one request per clip")],
    variant: Annotated[str, typer.Option(help="full, text, video, omni or video_asr")] = "full",
    drop: Annotated[list[str], typer.Option(help=DROP_HELP)] = [],  # noqa: B006
    asr: Annotated[str | None, typer.Option(help="whisper (ours) or source (annotations); default ours")] = None,
    fmt: Annotated[str, typer.Option("--format", help="openai, gemini, hf or neutral")] = "openai",
    coord_order: Annotated[str, typer.Option(help="xy or yx")] = "xy",
    media_mode: Annotated[str, typer.Option("--media", help="path or data (inline base64)")] = "path",
    ts_format: Annotated[str, typer.Option(help=TS_HELP)] = "ms",
    word_ts_format: Annotated[str, typer.Option(help=WORDS_HELP)] = "json",
    layout: Annotated[str, typer.Option(help=LAYOUT_HELP)] = "benchmark",
    fps: FpsOption = None,
    max_frames: MaxFramesOption = None,
    prompt: Annotated[Path | None, typer.Option(help=PROMPT_HELP)] = None,
    task: Annotated[str, typer.Option(help="ecog, or videoqa (with --questions)")] = "ecog",
    questions: Annotated[Path | None, typer.Option(help=QUESTIONS_HELP)] = None,
    questions_format: Annotated[str, typer.Option(help=QFORMAT_HELP)] = "auto",
) -> None:
    """Write the rendered request of every clip (videoqa: every question) under one input stack."""
    with ended():
        written = door.write_stacks(
            prepared,
            out=out,
            task=task,
            variant=variant,
            drop=drop,
            ts_format=ts_format,
            word_ts_format=word_ts_format,
            layout=layout,
            fps=fps,
            max_frames=max_frames,
            format=fmt,
            media_mode=media_mode,
            asr=asr,
            coord_order=coord_order,
            prompt=prompt,
            questions=questions,
            questions_format=questions_format,
        )
    shown(written)


@app.command("export")
def export_cmd(
    prepared: Annotated[
        Path | None, typer.Argument(help="A folder written by `avstack prepare` (ecog, videoqa; features)")
    ] = None,
    to: Annotated[
        str,
        typer.Option(
            "--to", help="jsonl, openai-batch, hf, lmms-eval (a task folder), or features", rich_help_panel=OUTPUT
        ),
    ] = "jsonl",
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder", rich_help_panel=OUTPUT)] = Path("export"),
    task: Annotated[
        str, typer.Option(help="ecog, videoqa (with --questions) or egogap (with --bundles)", rich_help_panel=TASK)
    ] = "ecog",
    variant: Annotated[
        str,
        typer.Option(help="full, text, video, omni or video_asr; egogap: image, vflip, ...", rich_help_panel=STACKS),
    ] = "full",
    drop: Annotated[list[str], typer.Option(help=DROP_HELP, rich_help_panel=STACKS)] = [],  # noqa: B006
    ts_format: Annotated[str, typer.Option(help=TS_HELP, rich_help_panel=STACKS)] = "ms",
    word_ts_format: WordsOption = "json",
    layout: Annotated[str, typer.Option(help=LAYOUT_HELP, rich_help_panel=STACKS)] = "benchmark",
    fps: FpsOption = None,
    max_frames: MaxFramesOption = None,
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
    model: Annotated[
        str, typer.Option(help="Model named in openai-batch request bodies", rich_help_panel=OUTPUT)
    ] = "gpt-4o",
    max_tokens: Annotated[
        int, typer.Option(help="Longest answer (openai-batch bodies, lmms-eval generation)", rich_help_panel=OUTPUT)
    ] = 2048,
    shard_size: Annotated[
        int, typer.Option(help="Rows per shard (per Parquet file for hf)", rich_help_panel=OUTPUT)
    ] = 1000,
    executor: Annotated[
        str, typer.Option(help="local, or ray (ecog: shards written by Ray Data workers)", rich_help_panel=OUTPUT)
    ] = "local",
    ray_address: Annotated[
        str | None, typer.Option(help="Ray cluster address (default RAY_ADDRESS)", rich_help_panel=OUTPUT)
    ] = None,
) -> None:
    """Precomputed inputs for other harnesses, for every task (docs: loaders); --to features for any prepared folder."""
    args = dict(locals())  # first: every option, and nothing else
    with ended():
        shown(door.export(**args))


@app.command("run")
def run_cmd(
    model: Annotated[
        str, typer.Option(help="oracle, chance, deixis, openai:M, gemini:M, hf:M, replay:FILE", rich_help_panel=MODEL)
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="Run folder (predictions.jsonl, run.json)")],
    prepared: Annotated[
        Path | None, typer.Argument(help="A folder written by `avstack prepare` (ecog, videoqa)")
    ] = None,
    task: Annotated[str, typer.Option(help="ecog, egogap or videoqa", rich_help_panel=TASK)] = "ecog",
    variant: Annotated[
        str,
        typer.Option(
            help="ecog, videoqa: full, video, text, omni, video_asr (videoqa: subtitled); egogap: image, vflip, ...",
            rich_help_panel=STACKS,
        ),
    ] = "full",
    drop: Annotated[list[str], typer.Option(help=DROP_HELP, rich_help_panel=STACKS)] = [],  # noqa: B006
    ts_format: Annotated[str, typer.Option(help=TS_HELP, rich_help_panel=STACKS)] = "ms",
    word_ts_format: WordsOption = "json",
    layout: Annotated[str, typer.Option(help=LAYOUT_HELP, rich_help_panel=STACKS)] = "benchmark",
    fps: FpsOption = None,
    max_frames: MaxFramesOption = None,
    pack: Annotated[
        bool,
        typer.Option(
            "--pack",
            help="videoqa: all of a video's questions in one request, each answer parsed back",
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
    timeout: TimeoutOption = BACKEND.timeout,
    concurrency: Annotated[int, typer.Option(help="Requests in flight", rich_help_panel=SEND)] = 4,
    retries: Annotated[int, typer.Option(help="Retries on 429/5xx/timeouts", rich_help_panel=SEND)] = 5,
    batch: BatchOption = False,
    batch_poll: BatchPollOption = 30.0,
    retry_failed: RetryFailedOption = False,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="Only plan (requests, tokens, cost) into OUT/plan.json", rich_help_panel=PLAN),
    ] = False,
    max_cost: MaxCostOption = None,
    image_rule: ImageRuleOption = None,
    providers: ProvidersOption = None,
    fit_limits: FitLimitsOption = False,
) -> None:
    """Run a model over prepared clips (ecog, videoqa) or bundles (egogap); resumable; then score."""
    args = records_of(locals())  # first: every option, and nothing else
    with ended():
        shown(door.run(**args, say=typer.echo, progress=progress))


@app.command()
def report(
    runs: Annotated[list[Path], typer.Argument(help="Run folders; the first is the baseline")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Report folder")] = Path("report"),
    cluster: Annotated[
        str | None, typer.Option(help="Bootstrap whole clusters (EcoG: scene, task_template, level, lang)")
    ] = None,
) -> None:
    """EcoG: Δ table, bottlenecks, calibration, size/scene/language. EgoGap: scores with CIs, rank agreement."""
    with ended():
        shown(door.report(runs, out=out, cluster=cluster))
