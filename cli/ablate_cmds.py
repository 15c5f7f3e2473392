"""`avstack ablate`: the options parsed into records and handed to one library call,
`avstack.ablate` (avstack.api), which plans, bills and runs every arm; an option the task
cannot honour exits 2 naming it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

import avstack.api as door

from .common import PLAN, app, ended, progress, shown
from .declared import flag, takes
from .run_cmds import PREPARED, argument, model_flag, task_flag


@app.command()
@takes(
    [
        model_flag("oracle, chance, deixis, openai:MODEL, replay:FILE, ..."),
        flag("out", Path, "--out", "-o", help="Folder for one run per stack and the report"),
        argument("prepared", Path | None, f"{PREPARED} (ecog, videoqa)", default=None),
        task_flag(),
        flag(
            "strict_inputs",
            bool,
            "--strict-inputs",
            default=False,
            help="Exit 1 when an arm's input tokens as the server counted them depart from the plan by more than "
            "the plan's uncertainty (after everything is written)",
            rich_help_panel=PLAN,
        ),
    ],
    ablating=door.Ablating,
    task_options=None,
    backend=door.BackendOptions,
    sending=door.Sending,
    costing=door.Costing,
)
def ablate(**given: Any) -> None:
    """Run full and each --drop (and --variants), score each, write the Δ table (paired CIs, p-values) and report."""
    with ended():
        shown(door.ablate(**given, say=typer.echo, progress=progress))
