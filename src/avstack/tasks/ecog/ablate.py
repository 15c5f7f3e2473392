"""`ablate`: the input-stack ablation end to end: run each stack, score each once, report."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ...io import Progress
from ...run import RunSettings
from ...runners import make_backend
from ...stacks import Stack, make_stack
from .baselines import BASELINES
from .prompt import EcogOptions
from .report import Report, write_report
from .runs import run, score_and_write


def ablation_stacks(drops: list[str], variants: list[str]) -> list[Stack]:
    """full first (the baseline), then full minus each drop, then other variants."""
    stacks = [make_stack("full")] + [make_stack("full", [d]) for d in drops]
    stacks += [make_stack(v) for v in variants if v != "full"]
    return list(dict.fromkeys(stacks))


def ablate(
    prepared: str | Path,
    model: str,
    out: str | Path,
    drops: list[str],
    variants: list[str] | None = None,
    settings: RunSettings | None = None,
    backend_options: Mapping[str, Any] | None = None,
    options: EcogOptions = EcogOptions(),
    progress: Progress | None = None,
    on_stack: Callable[[Stack], None] | None = None,
) -> Report:
    """Run every stack into out/<stack>/, sharing cached answers; write out/report.md."""
    out = Path(out)
    backend = make_backend(model, BASELINES, **(backend_options or {}))
    runs = []
    for stack in ablation_stacks(drops, variants or []):
        if on_stack:
            on_stack(stack)
        run_dir = out / stack.name
        run(prepared, backend, stack, run_dir, settings, options, out / "cache", model, progress)
        runs.append(score_and_write(run_dir, prepared))
    return write_report(runs, out)
