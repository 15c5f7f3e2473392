"""`avstack ablate`: the input-stack ablation end to end (EcoG, videoqa): run each stack, score
each, write the Δ table and the report; it parses options and calls the task's ablate."""

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
    MaxTokensOption,
    TemperatureOption,
    app,
    backend_options,
    bill_first,
    defaults,
    fail,
    user_errors,
)


@app.command()
def ablate(
    prepared: Annotated[Path, typer.Argument(help="A folder written by `avstack prepare`")],
    model: Annotated[str, typer.Option(help="oracle, chance, deixis, openai:MODEL, replay:FILE")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for one run per stack and the report")],
    drop: Annotated[list[str], typer.Option(help="Anchor to drop (repeatable)")] = [],  # noqa: B006
    variants: Annotated[
        str, typer.Option(help="Comma list of extra variants: text, video, omni, video_asr (each with its --drop)")
    ] = "",
    concurrency: Annotated[int, typer.Option()] = 4,
    base_url: Annotated[str | None, typer.Option()] = None,
    temperature: TemperatureOption = defaults()["temperature"],
    max_tokens: MaxTokensOption = defaults()["max_tokens"],
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
    prompt: Annotated[Path | None, typer.Option(help=PROMPT_HELP)] = None,
    task: Annotated[str, typer.Option(help="ecog, or videoqa (with --questions)")] = "ecog",
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
    prices: Annotated[Path | None, typer.Option(help="A price table of your own (JSON, as runs/prices.json)")] = None,
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
) -> None:
    """Run full and each --drop (and --variants), score each, write the Δ table (paired CIs, p-values) and report."""
    from avstack.runs.engine import RunSettings
    from avstack.tasks.ecog.ablate import ablate as run_ablate
    from avstack.tasks.ecog.prompt import EcogOptions

    d = defaults()
    budget, plan = None, None
    if until not in ("all", "decided"):
        fail(f"--until: expected all or decided, got {until!r}")
    backend = backend_options(base_url, temperature, max_tokens, d["timeout"], audio_as)

    def run_settings() -> RunSettings:  # after the plan: it carries the budget
        return RunSettings(
            concurrency=concurrency,
            budget=budget,
            batch_poll_s=batch_poll if batch else None,
            retry_failed=retry_failed,
        )

    if task == "videoqa":
        from avstack.tasks.videoqa.ablate import ablate as qa_ablate
        from avstack.tasks.videoqa.ablate import plan_qa_ablation, qa_stacks

        if questions is None:
            fail("--task videoqa needs --questions FILE")
        if dry_run or max_cost is not None:
            with user_errors():
                stacks = qa_stacks(variant, drop, subsets, ts_format.split(",")[0])
                plan = plan_qa_ablation(
                    prepared, questions, model, out, stacks, questions_format, prompt, detail, max_tokens, prices
                )
            budget = bill_first(plan, out, dry_run, max_cost)
        settings = run_settings()
        with user_errors():
            if until == "decided":
                from avstack.tasks.videoqa.sequential import sequential_qa_ablate

                report = sequential_qa_ablate(
                    prepared, questions, model, out, drop, variant, settings, backend, questions_format, prompt,
                    round_size, precision=precision, seed=seed,
                )  # fmt: skip
                typer.echo(report.summary)
                typer.echo(f"full report: {report.path}")
                return
            report = qa_ablate(
                prepared, questions, model, out, drop, variant, settings, backend, questions_format, prompt, subsets,
                ts_format.split(",")[0],
            )  # fmt: skip
        typer.echo(report.summary)
        typer.echo(f"full report: {report.path}")
        return
    if dry_run or max_cost is not None:
        from avstack.tasks.ecog.ablate import plan_ablation, stacks_to_run

        formats = [f.strip() for f in ts_format.split(",") if f.strip()]
        with user_errors():
            stacks = stacks_to_run(
                drop, [v for v in variants.split(",") if v], subsets, formats, word_ts_format, variant
            )
            plan = plan_ablation(
                prepared, model, out, stacks, EcogOptions(prompt_dir=prompt), detail, max_tokens, prices
            )
        budget = bill_first(plan, out, dry_run, max_cost)
    if until == "decided":
        from avstack.tasks.ecog.sequential import sequential_ablate

        with user_errors():
            report = sequential_ablate(
                prepared,
                model,
                out,
                drop,
                run_settings(),
                backend,
                EcogOptions(prompt_dir=prompt),
                round_size,
                precision=precision,
                seed=seed,
            )
        typer.echo(report.summary)
        typer.echo(f"full report: {report.path}")
        return
    with user_errors():
        report = run_ablate(
            prepared,
            model,
            out,
            drop,
            [v for v in variants.split(",") if v],
            run_settings(),
            backend,
            options=EcogOptions(prompt_dir=prompt),
            subsets=subsets,
            cluster=cluster,
            ts_formats=[f.strip() for f in ts_format.split(",") if f.strip()],
            word_ts_format=word_ts_format,
            bill=plan,
            baseline=variant,
        )
    typer.echo(report.summary)
    typer.echo(f"full report: {report.path}")
    exit_on_failures(report.failed)


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
