"""`avstack ablate`: the input-stack ablation end to end, for any task with one: the options parsed
into one record (avstack.runs.ablation.AblationSpec) and handed, with the task from the registry, to
the one ablation engine; an option the task cannot honour exits 2 naming it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from .common import (
    AUDIO_AS_HELP,
    PROMPT_HELP,
    QFORMAT_HELP,
    QUESTIONS_HELP,
    WORDS_HELP,
    BatchOption,
    BatchPollOption,
    FitLimitsOption,
    FpsOption,
    ImageRuleOption,
    JsonModeOption,
    MaxFramesOption,
    MaxTokensOption,
    ProvidersOption,
    TemperatureOption,
    app,
    backend_options,
    bill_first,
    counting_for,
    defaults,
    fail,
    frame_budgets,
    packs_of,
    user_errors,
    within_limits,
)


@app.command()
def ablate(
    model: Annotated[str, typer.Option(help="oracle, chance, deixis, openai:MODEL, replay:FILE")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for one run per stack and the report")],
    drop: Annotated[list[str], typer.Option(help="Anchor to drop (repeatable)")] = [],  # noqa: B006
    prepared: Annotated[
        Path | None, typer.Argument(help="A folder written by `avstack prepare` (ecog, videoqa)")
    ] = None,
    variants: Annotated[
        str,
        typer.Option(
            help=(
                "Comma list of extra variants: text, video, omni, video_asr (each with its --drop); egogap: "
                "vflip, hflip, gray, downscale, text, n3, swap_motor, egoplan, exclusion, shuffleN"
            )
        ),
    ] = "",
    concurrency: Annotated[int, typer.Option()] = 4,
    base_url: Annotated[str | None, typer.Option()] = None,
    temperature: TemperatureOption = defaults()["temperature"],
    max_tokens: MaxTokensOption = defaults()["max_tokens"],
    json_mode: JsonModeOption = defaults()["json_mode"],
    audio_as: Annotated[str, typer.Option(help=AUDIO_AS_HELP)] = "input_audio",
    subsets: Annotated[
        bool, typer.Option(help="Run every subset of the --drop cues and report each cue's Shapley value")
    ] = False,
    cluster: Annotated[
        str | None, typer.Option(help="Bootstrap whole clusters: scene, task_template, level or lang")
    ] = None,
    ts_format: Annotated[
        str, typer.Option(help="Comma list of frame-time formats to compare, e.g. ms,index,overlay")
    ] = "ms",
    word_ts_format: Annotated[str, typer.Option(help=WORDS_HELP)] = "json",
    layout: Annotated[
        str, typer.Option(help="Comma list of layouts to compare: benchmark, shared-first (see run --help)")
    ] = "benchmark",
    fps: FpsOption = None,
    max_frames: MaxFramesOption = None,
    pack: Annotated[
        str,
        typer.Option(
            help="videoqa: off (a request a question), on (all of a video's questions in one request), "
            "or off,on to measure what packing changes"
        ),
    ] = "off",
    prompt: Annotated[Path | None, typer.Option(help=PROMPT_HELP)] = None,
    task: Annotated[str, typer.Option(help="ecog, videoqa (with --questions) or egogap (with --bundles)")] = "ecog",
    bundles: Annotated[Path | None, typer.Option(help="EgoGap *.bundles.jsonl")] = None,
    images: Annotated[Path | None, typer.Option(help="EgoGap image folder (COCO train2017, wikimedia)")] = None,
    style: Annotated[str, typer.Option(help="EgoGap prompt style: default, egoplan, exclusion")] = "default",
    questions: Annotated[Path | None, typer.Option(help=QUESTIONS_HELP)] = None,
    questions_format: Annotated[str, typer.Option(help=QFORMAT_HELP)] = "auto",
    variant: Annotated[
        str, typer.Option(help="The baseline variant: full, text, video, omni, video_asr (videoqa also subtitled)")
    ] = "full",
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Only plan: requests, tokens, cost per stack into OUT/plan.json")
    ] = False,
    max_cost: Annotated[
        float | None, typer.Option(help="Refuse to start when the plan may cost more (USD, online prices)")
    ] = None,
    detail: Annotated[str, typer.Option(help="OpenAI image detail the plan counts: high or low")] = "high",
    image_rule: ImageRuleOption = None,
    prices: Annotated[Path | None, typer.Option(help="A price table of your own (JSON, as runs/prices.json)")] = None,
    providers: ProvidersOption = None,
    fit_limits: FitLimitsOption = False,
    until: Annotated[
        str, typer.Option(help="all: every clip; decided: rounds of clips until every contrast is decided")
    ] = "all",
    round_size: Annotated[
        int | None,
        typer.Option(
            "--round",
            help="--until decided: items per round (default: growing rounds, a look after 10, 15, 23, 35, ... items)",
        ),
    ] = None,
    precision: Annotated[
        float | None, typer.Option(help="--until decided: also stop when every interval is narrower (0-1)")
    ] = None,
    seed: Annotated[int, typer.Option(help="--until decided: the seed of the clip order")] = 0,
    batch: BatchOption = False,
    batch_poll: BatchPollOption = 30.0,
    retry_failed: Annotated[
        bool, typer.Option("--retry-failed", help="Ask again the clips whose request failed (refused, 4xx, no answer)")
    ] = False,
    aa: Annotated[
        bool,
        typer.Option(
            "--aa",
            help="Add the A/A arm (<baseline>-aa): the baseline asked again past every cache; the report gives the "
            "noise floor (flip rate, its delta with a CI) and marks each cue whose |delta| lies within it",
        ),
    ] = False,
    strict_inputs: Annotated[
        bool,
        typer.Option(
            "--strict-inputs",
            help="Exit 1 when an arm's input tokens as the server counted them depart from the plan by more than "
            "the plan's uncertainty (after everything is written)",
        ),
    ] = False,
) -> None:
    """Run full and each --drop (and --variants), score each, write the Δ table (paired CIs, p-values) and report."""
    from avstack.runs import ablation as engine
    from avstack.runs.engine import Asking, RunSettings
    from avstack.runs.runners import make_backend
    from avstack.tasks import TaskInputs, get_task

    with user_errors():
        spec = engine.AblationSpec(
            drops=tuple(dict.fromkeys(drop)),
            variants=tuple(v.strip() for v in variants.split(",") if v.strip()),
            baseline=variant,
            subsets=subsets,
            ts_formats=tuple(f.strip() for f in ts_format.split(",") if f.strip()),
            word_ts_format=word_ts_format,
            layouts=tuple(x.strip() for x in layout.split(",") if x.strip()),
            budgets=frame_budgets(fps, max_frames),
            packs=packs_of(pack),
            cluster=cluster,
            until=until,
            round_size=round_size,
            precision=precision,
            seed=seed,
            aa=aa,
        )
        chosen = get_task(task)
        if chosen.ablation is None:
            fail(f"--task {task} has no ablation")
        inputs = TaskInputs(
            questions=questions,
            questions_format=questions_format,
            prompt=prompt,
            bundles=bundles,
            images=images,
            style=style,
        )
        target = chosen.ablation(prepared, inputs)
        engine.refused(target, spec)
    budget = None
    options = backend_options(base_url, temperature, max_tokens, defaults()["timeout"], audio_as, json_mode)
    counting = counting_for(
        model, chosen.baselines, options, image_rule, detail, clip_major=not batch, providers_file=providers
    )
    with user_errors():  # every request planned and checked against the provider's limits first
        from dataclasses import replace

        def replan(budgets: tuple[Any, ...]) -> dict[str, Any]:
            return engine.plan(target, replace(spec, budgets=budgets), model, out, counting, max_tokens, prices)

        bill, budgets = within_limits(replan(spec.budgets), spec.budgets, fit_limits, replan, out)
        spec = replace(spec, budgets=budgets)
    if dry_run or max_cost is not None:
        budget = bill_first(bill, out, dry_run, max_cost)
    settings = RunSettings(
        concurrency=concurrency, budget=budget, batch_poll_s=batch_poll if batch else None, retry_failed=retry_failed
    )
    with user_errors():
        asking = Asking(make_backend(model, chosen.baselines, **options), model, out / "cache", settings)
        report = engine.ablate(target, spec, asking, out, bill, strict_inputs)
    typer.echo(report.summary)
    typer.echo(f"full report: {report.path}")
    exit_on_departures(report.departed, strict_inputs)
    exit_on_failures(report.failed)


def exit_on_departures(departed: dict[str, str], strict: bool) -> None:
    """Say every arm whose server saw other input than planned; with --strict-inputs exit 1."""
    for arm, said in departed.items():
        typer.echo(f"{arm}: input departs from the plan: {said}", err=True)
    if departed and strict:
        fail(f"{len(departed)} arm(s) whose input departs from the plan (--strict-inputs): {', '.join(departed)}", 1)


def exit_on_failures(failed: dict[str, dict[str, Any]]) -> None:
    """Exit non-zero when a stack's requests failed, naming the stacks, their causes and the
    command that asks only those clips again."""
    if not failed:
        return
    import shlex
    import sys

    for stack, f in failed.items():
        causes = "; ".join(f"{n}x {c}" for c, n in f["causes"].items())
        typer.echo(f"{stack}: {f['request_failures']} of {f['clips']} requests failed: {causes}", err=True)
    again = [a for a in sys.argv[1:] if a != "--retry-failed"]
    command = " ".join(shlex.quote(a) for a in ["avstack", *again, "--retry-failed"])
    fail(f"{len(failed)} stack(s) with request failures; ask only those clips again: {command}", 1)
