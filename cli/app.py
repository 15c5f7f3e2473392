"""The `avstack` command line: each command parses its options and calls one library function.

The commands live by stage, as the docs group them: prepare_cmds (prepare, transcribe, synth),
run_cmds (stacks, run, score, report, export), ablate_cmds (ablate), task_cmds (ecog, egogap, prompts, view);
common holds the Typer apps and what every command shares (progress, one-line errors).
"""

from __future__ import annotations

from . import ablate_cmds, prepare_cmds, run_cmds, task_cmds  # noqa: F401 - importing registers the commands
from .common import app

__all__ = ["app", "main"]


def main() -> None:
    app()


if __name__ == "__main__":
    main()
