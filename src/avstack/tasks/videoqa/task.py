"""videoqa as a task: your own videos and questions, for the registry."""

from __future__ import annotations

from pathlib import Path

from avstack.analysis.tables import Report, markdown_table
from avstack.io import read_predictions
from avstack.prompting.stacks import make_stack
from avstack.runs.runners import make_backend
from avstack.tasks import Outcome, RunJob, Task, too_many_missing
from avstack.tasks.videoqa.baselines import BASELINES
from avstack.tasks.videoqa.data import load_questions
from avstack.tasks.videoqa.report import score_rows, write_report
from avstack.tasks.videoqa.runs import run, score_run
from avstack.tasks.videoqa.score import score

NEEDS = (
    "--task videoqa needs the PREPARED folder and --questions FILE "
    "(JSONL/CSV, or Charades-STA, QVHighlights, Video-MME)"
)


def run_job(job: RunJob) -> Outcome:
    a = job.args
    if a.get("prepared") is None or a.get("questions") is None:
        raise ValueError(NEEDS)
    stack = make_stack(
        a.get("variant", "full"), a.get("drop", ()), a.get("ts_format", "ms"), a.get("word_ts_format", "json")
    )
    backend = make_backend(job.model, BASELINES, **job.backend_options)
    _, errors = run(
        a["prepared"],
        a["questions"],
        backend,
        stack,
        job.out,
        job.settings,
        a.get("questions_format", "auto"),
        a.get("prompt"),
        None,
        job.model,
        job.progress,
    )
    result = score_run(job.out)
    head, body = score_rows([(f"{job.model} {stack.name}", result)])
    notes = tuple(f"  QUESTION ERROR {e}" for e in errors)
    return Outcome(markdown_table(head, body), notes, result={k: v for k, v in result.items() if k != "per_item"})


def score_files(questions: Path, pred: Path) -> Outcome:
    items, errors = load_questions(questions)
    result = score(items, read_predictions(pred))
    head, body = score_rows([(pred.name, result)])
    c = result["counts"]
    missing = too_many_missing(c["missing_predictions"], c["items"])
    notes = [f"  QUESTION ERROR {e}" for e in errors] + ([f"error: {missing}"] if missing else [])
    counts = f"items {c['items']}, missing {c['missing_predictions']}, unparsed {c['unparsed']}"
    summary = f"{markdown_table(head, body)}\n{counts}"
    return Outcome(summary, tuple(notes), missing is not None, {k: v for k, v in result.items() if k != "per_item"})


def report(runs: list[Path], out: Path, cluster: str | None = None) -> Report:
    return write_report(runs, out, cluster)


TASK = Task(
    name="videoqa",
    description="Your own videos and questions: multiple choice, open, temporal grounding",
    baselines=BASELINES,
    layouts=(),
    run=run_job,
    score=score_files,
    report=report,
)
