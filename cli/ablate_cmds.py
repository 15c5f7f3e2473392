"""`avstack ablate`: the options parsed into records and handed to one library call,
`avstack.ablate` (avstack.api), which plans, bills and runs every arm; an option the task
cannot honour exits 2 naming it."""

from __future__ import annotations

from typing import Any

import typer

import avstack.api as door

from .common import app, ended, print_done, progress
from .declared import takes
from .run_cmds import ASKING, asking_head


@app.command()
@takes(
    asking_head(
        "Folder for one run per stack and the report", "oracle, chance, deixis, openai:MODEL, replay:FILE, ..."
    ),
    ablating=door.Ablating,
    **ASKING,
)
def ablate(**given: Any) -> None:
    """Run full and each --drop (and --variants), score each, write the Δ table (paired CIs, p-values) and report."""
    with ended():
        print_done(door.ablate(**given, say=typer.echo, progress=progress))
