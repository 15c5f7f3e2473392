"""Commands from prepared clips to scores (docs: stacks.md, runs.md, ablation.md, harnesses.md):
stacks, run, ablate, score, report, export."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from .common import (
    AUDIO_AS_HELP,
    DROP_HELP,
    LAYOUT_HELP,
    PROMPT_HELP,
    QFORMAT_HELP,
    QUESTIONS_HELP,
    TS_HELP,
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
    has_limits,
    print_outcome,
    progress,
    user_errors,
    within_limits,
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
    from avstack.io import atomic_write
    from avstack.tasks import get_task

    with user_errors():
        chosen = get_task(task)
    truth = {"gt": gt, "bundles": bundles, "questions": questions}[chosen.truth]
    if truth is None or pred is None:
        fail(f"--{chosen.truth} and --pred are required for --task {task}")
    with user_errors():
        outcome = chosen.score(truth, pred)
    print_outcome(outcome)
    if json_out:
        with user_errors():
            atomic_write(json_out, json.dumps(outcome.result, ensure_ascii=False, indent=1).encode())
    if outcome.failed:
        raise typer.Exit(1)


def _ecog_inputs(
    variant: str,
    drop: list[str],
    asr: str | None,
    coord_order: str,
    ts_format: str = "ms",
    word_ts_format: str = "json",
    prompt: Path | None = None,
    budget: Any = None,
) -> tuple[Any, Any]:
    from avstack.prompting.budget import FrameBudget
    from avstack.prompting.stacks import make_stack
    from avstack.tasks.ecog.prompt import EcogOptions

    with user_errors():
        stack = make_stack(variant, drop, ts_format, word_ts_format, budget=budget or FrameBudget())
        return stack, EcogOptions(coord_order, asr, prompt_dir=prompt)


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
    from avstack.prompting.stacks import make_stack
    from avstack.tasks import TaskInputs, get_task

    with user_errors():
        chosen = get_task(task)
        if chosen.write_requests is None:
            fail(f"--task {task} has no requests over a prepared folder to write")
        stack = make_stack(variant, drop, ts_format, word_ts_format, layout, frame_budgets(fps, max_frames, True)[0])
        inputs = TaskInputs(questions, questions_format, prompt, asr, coord_order)
        n = chosen.write_requests(prepared, inputs, out, stack, fmt, media_mode)
    typer.echo(f"wrote {n} requests ({stack.name}, {fmt}) to {out}")


@app.command("export")
def export_cmd(
    prepared: Annotated[Path, typer.Argument(help="A folder written by `avstack prepare`")],
    to: Annotated[str, typer.Option("--to", help="openai-batch, jsonl, hf, lmms-eval (a task folder), or features")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder")],
    variant: Annotated[str, typer.Option(help="full, text, video, omni or video_asr")] = "full",
    drop: Annotated[list[str], typer.Option(help=DROP_HELP)] = [],  # noqa: B006
    asr: Annotated[str | None, typer.Option(help="whisper or source")] = None,
    coord_order: Annotated[str, typer.Option(help="xy or yx")] = "xy",
    model: Annotated[str, typer.Option(help="Model named in openai-batch request bodies")] = "gpt-4o",
    ts_format: Annotated[str, typer.Option(help=TS_HELP)] = "ms",
    word_ts_format: Annotated[str, typer.Option(help=WORDS_HELP)] = "json",
    prompt: Annotated[Path | None, typer.Option(help=PROMPT_HELP)] = None,
    fps: FpsOption = None,
    max_frames: MaxFramesOption = None,
    shard_size: Annotated[int, typer.Option(help="Clips per shard (per Parquet file for hf)")] = 1000,
    executor: Annotated[str, typer.Option(help="local, or ray (shards written by Ray Data workers)")] = "local",
    ray_address: Annotated[str | None, typer.Option(help="Ray cluster address (default RAY_ADDRESS)")] = None,
) -> None:
    """Precomputed inputs for other harnesses (see the docs: loaders); --to features for any prepared folder."""
    from avstack.tasks.ecog.export import export

    if to == "features":
        from avstack.features import export_features

        with user_errors():
            path = export_features(prepared, out)
        typer.echo(f"wrote {path} (and {path.with_suffix('.parquet').name} when datasets is installed)")
        return
    budget = frame_budgets(fps, max_frames, one=True)[0]
    stack, options = _ecog_inputs(variant, drop, asr, coord_order, ts_format, word_ts_format, prompt, budget)
    with user_errors():
        path = export(
            prepared, out, to, stack, options, model, shard_size=shard_size, executor=executor, ray_address=ray_address
        )
    typer.echo(f"wrote {path} ({stack.name})")


@app.command("run")
def run_cmd(
    model: Annotated[str, typer.Option(help="oracle, chance, deixis, openai:M, gemini:M, hf:M, replay:FILE")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Run folder (predictions.jsonl, run.json)")],
    prepared: Annotated[Path | None, typer.Argument(help="A folder written by `avstack prepare` (ecog)")] = None,
    task: Annotated[str, typer.Option(help="ecog, egogap or videoqa")] = "ecog",
    variant: Annotated[
        str,
        typer.Option(help="ecog, videoqa: full, video, text (videoqa: subtitled); egogap: image, vflip, hflip, ..."),
    ] = "full",
    drop: Annotated[list[str], typer.Option(help="Anchor to drop (ecog)")] = [],  # noqa: B006
    asr: Annotated[str | None, typer.Option(help="whisper or source (ecog)")] = None,
    coord_order: Annotated[str, typer.Option(help="xy or yx (ecog)")] = "xy",
    bundles: Annotated[Path | None, typer.Option(help="EgoGap *.bundles.jsonl")] = None,
    images: Annotated[Path | None, typer.Option(help="EgoGap image folder (COCO train2017, wikimedia)")] = None,
    style: Annotated[str, typer.Option(help="EgoGap prompt style: default, egoplan, exclusion")] = "default",
    options: Annotated[str, typer.Option(help="EgoGap options: all, n3 (drop off-vantage), swap_motor")] = "all",
    shuffle_seed: Annotated[int | None, typer.Option(help="EgoGap: shuffle and re-letter options")] = None,
    max_side: Annotated[int, typer.Option(help="EgoGap downscale variant: longest side in px")] = 512,
    concurrency: Annotated[int, typer.Option(help="Requests in flight")] = 4,
    retries: Annotated[int, typer.Option(help="Retries on 429/5xx/timeouts")] = 5,
    batch: BatchOption = False,
    batch_poll: BatchPollOption = 30.0,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Only plan (requests, tokens, cost) into OUT/plan.json")
    ] = False,
    retry_failed: Annotated[
        bool, typer.Option("--retry-failed", help="Ask again the items whose request failed (refused, 4xx, no answer)")
    ] = False,
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible server (or OPENAI_BASE_URL)")] = None,
    temperature: TemperatureOption = defaults()["temperature"],
    max_tokens: MaxTokensOption = defaults()["max_tokens"],
    json_mode: JsonModeOption = defaults()["json_mode"],
    timeout: Annotated[float, typer.Option(help="Seconds per request")] = defaults()["timeout"],
    audio_as: Annotated[str, typer.Option(help=AUDIO_AS_HELP)] = "input_audio",
    ts_format: Annotated[str, typer.Option(help=TS_HELP + " (ecog)")] = "ms",
    word_ts_format: Annotated[str, typer.Option(help=WORDS_HELP + " (ecog)")] = "json",
    layout: Annotated[str, typer.Option(help=LAYOUT_HELP + " (ecog, videoqa)")] = "benchmark",
    fps: FpsOption = None,
    max_frames: MaxFramesOption = None,
    pack: Annotated[
        bool, typer.Option("--pack", help="videoqa: all of a video's questions in one request, each answer parsed back")
    ] = False,
    prompt: Annotated[Path | None, typer.Option(help=PROMPT_HELP + " (ecog)")] = None,
    questions: Annotated[Path | None, typer.Option(help=QUESTIONS_HELP)] = None,
    questions_format: Annotated[str, typer.Option(help=QFORMAT_HELP)] = "auto",
    image_rule: ImageRuleOption = None,
    providers: ProvidersOption = None,
    fit_limits: FitLimitsOption = False,
) -> None:
    """Run a model over prepared clips (ecog, videoqa) or bundles (egogap); resumable; then score."""
    from avstack.runs.engine import RunSettings
    from avstack.tasks import RunJob, StackChoice, TaskInputs, get_task

    (budget,) = frame_budgets(fps, max_frames, one=True)
    inputs = TaskInputs(questions, questions_format, prompt, asr, coord_order, bundles, images, style)
    with user_errors():
        chosen = get_task(task)
    plannable = chosen.ablation is not None and prepared is not None
    if dry_run and not plannable:
        fail(f"--dry-run plans runs over a prepared folder; --task {task} has none to plan")
    if plannable and (dry_run or fit_limits or has_limits(model, providers)):
        # every request planned and checked against the provider's limits before any is sent
        from avstack.prompting.stacks import make_stack
        from avstack.runs.ablation import plan_stacks

        with user_errors():
            assert chosen.ablation is not None and prepared is not None
            # planned with what the run sends: the same inputs (--asr, --coord-order) and back-end options
            target = chosen.ablation(prepared, inputs)
            sent_with = backend_options(base_url, temperature, max_tokens, timeout, audio_as, json_mode)
            counting = counting_for(model, chosen.baselines, sent_with, image_rule, providers_file=providers)

            def replan(budgets: tuple[Any, ...]) -> dict[str, Any]:
                stack = make_stack(variant, drop, ts_format, word_ts_format, layout, budgets[0], pack)
                return plan_stacks(target, [stack], model, out, counting, max_output_tokens=max_tokens)

            bill, (budget,) = within_limits(replan((budget,)), (budget,), fit_limits, replan, out)
        if dry_run:
            bill_first(bill, out, True, None)

    with user_errors():
        job = RunJob(
            model,
            out,
            RunSettings(
                concurrency=concurrency,
                retries=retries,
                batch_poll_s=batch_poll if batch else None,
                retry_failed=retry_failed,
            ),
            backend_options(base_url, temperature, max_tokens, timeout, audio_as, json_mode),
            prepared,
            inputs,
            StackChoice(
                variant, tuple(drop), ts_format, word_ts_format, options, shuffle_seed, max_side, layout, budget, pack
            ),
            progress,
        )
        outcome = get_task(task).run(job)
    print_outcome(outcome)
    if outcome.failed:
        raise typer.Exit(1)


@app.command()
def report(
    runs: Annotated[list[Path], typer.Argument(help="Run folders; the first is the baseline")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Report folder")] = Path("report"),
    cluster: Annotated[
        str | None, typer.Option(help="Bootstrap whole clusters (EcoG: scene, task_template, level, lang)")
    ] = None,
) -> None:
    """EcoG: Δ table, bottlenecks, calibration, size/scene/language. EgoGap: scores with CIs, rank agreement."""
    from avstack.io import read_json_file
    from avstack.tasks import task_of_run

    with user_errors():
        tasks = {task_of_run(read_json_file(r / "run.json", dict)).name for r in runs}
        if len(tasks) > 1:
            fail(f"runs of one task per report; found {', '.join(sorted(tasks))}")
        written = task_of_run({"task": tasks.pop()}).report(runs, out, cluster)
    typer.echo(written.summary)
    typer.echo(f"report: {written.path}")
