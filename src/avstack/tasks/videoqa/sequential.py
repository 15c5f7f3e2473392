"""`ablate --task videoqa --until decided`: the questions asked in a seeded random order, in
rounds, until every contrast is decided (avstack.analysis.sequential; per question `correct`:
accuracy, R@0.5 for grounding). Every stack's run folder holds the same questions at each stop."""

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
from avstack.tasks.videoqa.baselines import BASELINES
from avstack.tasks.videoqa.report import write_report
from avstack.tasks.videoqa.runs import joined, run, score_run


def sequential_qa_ablate(
    prepared: str | Path,
    questions: str | Path,
    model: str,
    out: str | Path,
    drops: list[str],
    variant: str = "full",
    settings: RunSettings | None = None,
    backend_options: Mapping[str, Any] | None = None,
    fmt: str = "auto",
    prompt_dir: Path | None = None,
    round_size: int | None = None,
    alpha: float = 0.05,
    precision: float | None = None,
    seed: int = 0,
    progress: Progress | None = None,
) -> Report:
    """Rounds of questions (growing, or `round_size` each) into out/<stack>/ until decided; out/sequential.json and
    the report say where it stopped, why and what it saved."""
    out = Path(out)
    if not drops:
        raise ValueError("--until decided needs at least one --drop: there is no contrast to decide")
    backend = make_backend(model, BASELINES, **(backend_options or {}))
    stacks = [make_stack(variant), *(make_stack(variant, [d]) for d in dict.fromkeys(drops))]
    ids = [it.id for it, rec in joined(prepared, questions, fmt)[0] if rec is not None and rec.ok]

    def ask(asked: list[str]) -> list[list[float]]:
        for s in stacks:
            run(
                prepared,
                questions,
                backend,
                s,
                out / s.name,
                settings,
                fmt,
                prompt_dir,
                out / "cache",
                model,
                progress,
                set(asked),
            )
        rows = [score_run(out / s.name, set(asked))["per_item"] for s in stacks]
        return [[float(rows[0][q]["correct"]) - float(other[q]["correct"]) for q in asked] for other in rows[1:]]

    asked, decision = ask_until_decided(ids, round_size, ask, alpha, precision, seed)
    report = write_report([out / s.name for s in stacks], out, only=set(asked))
    stop = stop_record(
        decision, [s.name for s in stacks], len(stacks), round_size, alpha, precision, seed, "correct", "questions"
    )
    write_json_atomic(out / "sequential.json", stop)
    section = stop_section(stop)
    atomic_write(report.path, (report.text + section).encode())
    return Report(report.summary + section, report.text + section, report.path)
