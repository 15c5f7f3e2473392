"""videoqa as a task: your own videos and questions, for the registry."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from avstack.analysis.tables import Report, markdown_table
from avstack.errors import UsageError
from avstack.io import DataError, read_predictions
from avstack.manifest import ClipRecord, Prepared, opened
from avstack.prompting.messages import Request
from avstack.prompting.stacks import Stack
from avstack.runs.ablation.arms import ANCHOR_OPTIONS, AblationSpec, Scored, stacks_to_run
from avstack.runs.exports.rows import ExportOptions, ExportRow, LmmsTask
from avstack.runs.exports.writer import write_export
from avstack.runs.sending.engine import Asking
from avstack.tasks import (
    Outcome,
    RunJob,
    StackChoice,
    Task,
    failed_items,
    needs_prepared,
    too_many_missing,
)
from avstack.tasks.videoqa.baselines import BASELINES
from avstack.tasks.videoqa.data import Item, load_questions
from avstack.tasks.videoqa.inputs import VideoqaInputs
from avstack.tasks.videoqa.lmms import answer_of, metrics_of
from avstack.tasks.videoqa.report import score_rows, write_report
from avstack.tasks.videoqa.runs import joined, packed_work_items, run, score_run, work_items, write_requests
from avstack.tasks.videoqa.score import score


def run_stack(choice: StackChoice, inputs: VideoqaInputs) -> Stack:
    return choice.anchors("videoqa", packs=True)


def run_job(job: RunJob) -> Outcome:
    prepared = needs_prepared("videoqa", job.prepared)
    stack = run_stack(job.stack, job.inputs)
    _, errors = run(prepared, job.inputs, stack, job.out, job.asking)
    result = score_run(job.out)
    head, body = score_rows([(f"{job.asking.backend_id} {stack.name}", result)])
    c = result["counts"]
    failed = failed_items(c["failed"], c["items"])
    notes = tuple(f"  QUESTION ERROR {e}" for e in errors) + failed
    js = {k: v for k, v in result.items() if k != "per_item"}
    return Outcome(markdown_table(head, body), notes, bool(failed), result=js)


@dataclass(frozen=True)
class QaAblation:
    """Video questions as the ablation engine sees them: per question `correct` (accuracy; R@0.5
    for grounding)."""

    prepared: Prepared  # opened once, the questions joined with it once (`pairs`): read by every stack
    inputs: VideoqaInputs
    name: str = "videoqa"
    metrics: tuple[str, ...] = ("correct",)
    unit: str = "questions"
    honours: frozenset[str] = ANCHOR_OPTIONS | {"pack"}

    @cached_property
    def pairs(self) -> tuple[list[tuple[Item, ClipRecord | None]], list[str]]:
        return joined(self.prepared, self.inputs.questions_file(), self.inputs.questions_format)

    def stacks(self, spec: AblationSpec) -> list[Stack]:
        return stacks_to_run(spec)

    def items(self) -> list[str]:
        return [it.id for it, rec in self.pairs[0] if rec and rec.ok]

    def requests(self, stack: Stack) -> list[Request]:
        if stack.packed:
            work = packed_work_items(self.pairs[0], stack, self.prepared, self.inputs)[0]
        else:
            work = work_items(self.pairs[0], stack, self.prepared, self.inputs)
        return [w.request for w in work if w.request is not None]

    def run(self, stack: Stack, run_dir: Path, asking: Asking, only: set[str] | None) -> None:
        run(self.prepared, self.inputs, stack, run_dir, asking, only, self.pairs)

    def score(self, stack: Stack, run_dir: Path, only: set[str] | None) -> Scored:
        return Scored(stack, run_dir, score_run(run_dir, only)["per_item"])

    def report(
        self, scored: list[Scored], out: Path, cluster: str | None, only: set[str] | None
    ) -> tuple[Report, list[str]]:
        return write_report([s.run_dir for s in scored], out, cluster, only), []


def ablation(prepared: Path | None, inputs: VideoqaInputs) -> QaAblation:
    prepared = needs_prepared("videoqa", prepared)
    inputs.questions_file()  # refused here, before the folder is read
    return QaAblation(opened(prepared), inputs)


def write_task_requests(prepared: Path, inputs: VideoqaInputs, out: Path, stack: Stack, fmt: str, media: str) -> int:
    return write_requests(prepared, inputs, out, stack, fmt, media)


def export(prepared: Path | None, inputs: VideoqaInputs, stack: Stack, opts: ExportOptions) -> Path:
    """One row per question under `stack`; a question whose request cannot be made is refused, named."""
    if stack.packed:
        raise UsageError("--pack: an export holds one row per question (export without --pack)")
    target = ablation(prepared, inputs)
    pairs = target.pairs[0]
    work = work_items(pairs, stack, target.prepared, inputs)
    bad = [f"{w.id}: {w.error}" for w in work if w.request is None]
    if bad:
        raise DataError(f"{len(bad)} questions cannot be exported: " + "; ".join(bad[:3]))
    rows = [
        ExportRow(w.id, w.request, answer_of(item), {"kind": item.kind, "video": item.video} | item.groups)
        for (item, _), w in zip(pairs, work)
        if w.request is not None
    ]
    metrics, aggregations = metrics_of([item for item, _ in pairs])
    lmms = LmmsTask("avstack_videoqa", "avstack.tasks.videoqa.lmms", metrics, aggregations)
    return write_export(rows, stack.name, opts, lmms)


def view(first: Path, runs: list[Path], out: Path) -> Path:
    from avstack.tasks.videoqa.view import build_site

    return build_site(first, runs, out)


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
    ablation=ablation,
    write_requests=write_task_requests,
    truth="questions",
    inputs=VideoqaInputs,
    run_stack=run_stack,
    export=export,
    view=view,
)
