"""`ablate --until decided`: ask the clips in a seeded random order, in rounds, and stop when every
contrast (full against each stack without a cue) is decided by its anytime-valid confidence
sequence (avstack.analysis.sequential), or is narrower than the precision asked. Every stack's
run folder holds the same clips at every stop, so the report pairs them as any ablation's."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from avstack.analysis.sequential import ask_until_decided, stop_record, stop_section
from avstack.analysis.tables import Report
from avstack.io import Progress, atomic_write, write_json_atomic
from avstack.prompting.stacks import make_stack
from avstack.runs.engine import RunSettings
from avstack.runs.runners import make_backend
from avstack.tasks.ecog.baselines import BASELINES
from avstack.tasks.ecog.prompt import EcogOptions
from avstack.tasks.ecog.report import write_report
from avstack.tasks.ecog.runs import prompt_record, requests_for, run, score_and_write


def sequential_ablate(
    prepared: str | Path,
    model: str,
    out: str | Path,
    drops: list[str],
    settings: RunSettings | None = None,
    backend_options: Mapping[str, Any] | None = None,
    options: EcogOptions = EcogOptions(),
    round_size: int | None = None,
    alpha: float = 0.05,
    precision: float | None = None,
    seed: int = 0,
    metric: str = "acc_t",
    progress: Progress | None = None,
) -> Report:
    """Rounds of clips (growing, or `round_size` each) into out/<stack>/ until decided; out/sequential.json and the
    report say where it stopped, why and what it saved."""
    prepared, out = Path(prepared), Path(out)
    if not drops:
        raise ValueError("--until decided needs at least one --drop: there is no contrast to decide")
    backend = make_backend(model, BASELINES, **(backend_options or {}))
    stacks = [make_stack("full"), *(make_stack("full", [d]) for d in dict.fromkeys(drops))]
    ids = [r.clip_id for r, _ in requests_for(prepared, make_stack("full"), options)[0]]

    def ask(asked: list[str]) -> list[list[float]]:
        for stack in stacks:
            run(
                prepared,
                backend,
                stack,
                out / stack.name,
                settings,
                options,
                out / "cache",
                model,
                progress,
                set(asked),
            )
        scores = [score_and_write(out / s.name, prepared, set(asked))[1].per_item() for s in stacks]
        return [[scores[0][c][metric] - other[c][metric] for c in asked] for other in scores[1:]]

    asked, decision = ask_until_decided(ids, round_size, ask, alpha, precision, seed)
    runs = [score_and_write(out / s.name, prepared, set(asked)) for s in stacks]
    sha = prompt_record(options)["sha256"]
    report = write_report(runs, out, None, {r[0]: sha for r in runs})
    stop = stop_record(decision, [s.name for s in stacks], len(stacks), round_size, alpha, precision, seed, metric)
    write_json_atomic(out / "sequential.json", stop)
    section = stop_section(stop)
    atomic_write(report.path, (report.text + section).encode())
    return Report(report.summary + section, report.text + section, report.path)
