"""Scores and reports through the door: `score` (`avstack score`: a predictions file by the
benchmark's own definitions) and `report` (`avstack report`: run folders compared)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from avstack.api.failures import CommandFailed, speaks_flags
from avstack.api.options import Done
from avstack.errors import UsageError
from avstack.options import fold_all, option
from avstack.tasks import DEFAULT_TASK

PathLike = str | Path


@dataclass(frozen=True)
class Scoring:
    """What `avstack score` reads: a task's predictions and the file its truth is in (each task
    reads it from one of gt, bundles, questions), and where the result JSON goes."""

    gt: Path | None = option(None, "Ground truth JSONL (avstack ecog gt) or a reference .json")
    bundles: Path | None = option(None, "EgoGap *.bundles.jsonl (for --task egogap)")
    questions: Path | None = option(None, "videoqa: the questions file")
    predictions: Path | None = option(None, "Predictions JSONL (or predictions.jsonl of a run)", name="pred")
    json_out: Path | None = option(None, "Write the full result as JSON here", name="json")


@dataclass(frozen=True)
class Reporting:
    """Where `avstack report` writes, and what its bootstrap resamples."""

    out: Path = option(Path("report"), "Report folder", short="-o")
    cluster: str | None = option(None, "Bootstrap whole clusters (EcoG: scene, task_template, level, lang)")


@speaks_flags
def score(
    task: str = DEFAULT_TASK,
    truth: PathLike | None = None,
    predictions: PathLike | None = None,
    *,
    scoring: Scoring | None = None,
    **keywords: object,
) -> Done:
    """Score a predictions file with the benchmark's own definitions, as `avstack score` does:
    `score("ecog", "gt.jsonl", "predictions.jsonl")`, or a Scoring record, or its fields by
    keyword. The truth is `truth`, or the file the task reads it from by its own flag (EcoG `gt`:
    `avstack ecog gt` JSONL or a reference .json; EgoGap `bundles`: a *.bundles.jsonl; videoqa
    `questions`). `Done.result` is the result JSON (EcoG: per clip acc_cls, acc_s, acc_t, acc_eco,
    acc_seq and their means), also written to `json_out`. Raises CommandFailed (code 1) when items
    could not be scored, after writing."""
    from avstack.io import atomic_write
    from avstack.tasks import get_task

    if predictions is not None:
        keywords = {**keywords, "predictions": predictions}
    s = fold_all("score", Scoring, keywords, scoring)
    chosen = get_task(task)
    named = {"gt": s.gt, "bundles": s.bundles, "questions": s.questions}
    extra = [f"--{k}" for k, v in named.items() if v is not None and k != chosen.truth]
    if extra:
        raise UsageError(f"--task {task} reads its truth from --{chosen.truth}; found {', '.join(extra)}")
    truth = truth if truth is not None else named[chosen.truth]
    if truth is None or s.predictions is None:
        raise UsageError(f"--{chosen.truth} and --pred are required for --task {task}")
    outcome = chosen.score(Path(truth), Path(s.predictions))
    json_out = s.json_out
    if json_out:
        atomic_write(json_out, json.dumps(outcome.result, ensure_ascii=False, indent=1).encode())
    done = Done(outcome.summary, Path(json_out) if json_out else None, outcome.notes, result=outcome.result)
    if outcome.failed:
        raise CommandFailed(next(iter(outcome.notes), "items could not be scored"), 1, done)
    return done


@speaks_flags
def report(runs: Sequence[PathLike], reporting: Reporting | None = None, **keywords: object) -> Done:
    """`avstack report`: the run folders of one task compared, the first the baseline (EcoG: the
    delta table, bottlenecks, calibration; EgoGap: scores with CIs, rank agreement), into
    `reporting.out` (Reporting: out, cluster; or its fields by keyword)."""
    from avstack.io import read_json_file
    from avstack.tasks import task_of_run

    how = fold_all("report", Reporting, keywords, reporting)
    folders = [Path(r) for r in runs]
    if not folders:
        raise UsageError("report: expected at least one run folder, found none")
    tasks = {task_of_run(read_json_file(r / "run.json", dict)).name for r in folders}
    if len(tasks) > 1:
        raise UsageError(f"runs of one task per report; found {', '.join(sorted(tasks))}")
    written = task_of_run({"task": tasks.pop()}).report(folders, Path(how.out), how.cluster)
    return Done(f"{written.summary}\nreport: {written.path}", written.path)
