"""Commands from prepared clips to scores (docs: stacks.md, runs.md, ablation.md, harnesses.md):
stacks, run, ablate, score, report, export."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import typer

import avstack.api as door

from .common import MODEL, TASK, app, ended, print_done, progress
from .declared import argument, flag, takes

PREPARED = "A folder written by `avstack prepare`"
TASK_HELP = "ecog, videoqa (with --questions) or egogap (with --bundles)"
MODEL_HELP = "oracle, chance, deixis, openai:MODEL, gemini:MODEL, anthropic:MODEL, hf:MODEL, replay:FILE"


def task_flag() -> inspect.Parameter:
    return flag("task", str, "--task", default=door.DEFAULT_TASK, help=TASK_HELP, rich_help_panel=TASK)


@app.command()
@takes([task_flag()], scoring=door.Scoring)
def score(**given: Any) -> None:
    """Score predictions with the benchmark's own metric definitions."""
    with ended():
        print_done(door.score(**given))


def model_flag(help: str = MODEL_HELP) -> inspect.Parameter:
    return flag("model", str, "--model", help=help, rich_help_panel=MODEL)


@app.command()
@takes(
    [
        argument("prepared", Path, PREPARED),
        flag("out", Path, "--out", "-o", help="JSONL file, one request per clip"),
        task_flag(),
    ],
    stack=door.StackChoice,
    rendering=door.Rendering,
    task_options=None,
)
def stacks(**given: Any) -> None:
    """Write the rendered request of every clip (videoqa: every question) under one input stack."""
    with ended():
        print_done(door.write_stacks(**given))


@app.command("export")
@takes(
    [argument("prepared", Path | None, f"{PREPARED} (ecog, videoqa; features)", default=None), task_flag()],
    stack=door.StackChoice,
    task_options=None,
    exporting=door.ExportOptions,
)
def export_cmd(**given: Any) -> None:
    """Precomputed inputs for other harnesses, for every task (docs: loaders); --to features for any prepared folder."""
    with ended():
        print_done(door.export(**given))


def asking_head(out_help: str, model_help: str = MODEL_HELP) -> list[inspect.Parameter]:
    """What a command that asks a model names first: the model, where it writes, the prepared
    folder, the task (run and ablate)."""
    return [
        model_flag(model_help),
        flag("out", Path, "--out", "-o", help=out_help),
        argument("prepared", Path | None, f"{PREPARED} (ecog, videoqa)", default=None),
        task_flag(),
    ]


# how a command that asks a model sends, plans and bills, beside every task's own options
ASKING = {"task_options": None, "backend": door.BackendOptions, "sending": door.Sending, "costing": door.Costing}


@app.command("run")
@takes(asking_head("Run folder (predictions.jsonl, run.json)"), stack=door.StackChoice, **ASKING)
def run_cmd(**given: Any) -> None:
    """Run a model over prepared clips (ecog, videoqa) or bundles (egogap); resumable; then score."""
    with ended():
        print_done(door.run(**given, say=typer.echo, progress=progress))


@app.command()
@takes([argument("runs", list[Path], "Run folders; the first is the baseline")], reporting=door.Reporting)
def report(**given: Any) -> None:
    """EcoG: Δ table, bottlenecks, calibration, size/scene/language. EgoGap: scores with CIs, rank agreement."""
    with ended():
        print_done(door.report(**given))
