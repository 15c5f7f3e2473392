"""EcoG-Bench as a task: its layout, baselines, run, score and report, for the registry."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from avstack.analysis.tables import Report
from avstack.io import DataError, read_predictions
from avstack.manifest import Prepared, opened
from avstack.prompting.messages import Request
from avstack.prompting.stacks import Stack, interface_pairs, make_stack, refuse_given_variants
from avstack.runs.ablation.arms import ANCHOR_OPTIONS, AblationSpec, Scored, stacks_to_run
from avstack.runs.exports.rows import ExportOptions
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
from avstack.tasks.ecog.baselines import BASELINES
from avstack.tasks.ecog.data import load_gt
from avstack.tasks.ecog.export import export, write_stacks
from avstack.tasks.ecog.inputs import EcogInputs
from avstack.tasks.ecog.layout import ecog_layout
from avstack.tasks.ecog.metrics import METRICS
from avstack.tasks.ecog.report import interface_section, item_tables, summary_table, write_report
from avstack.tasks.ecog.runs import load_run, prompt_of, prompt_record, requests_for, run, score_and_write
from avstack.tasks.ecog.scoring import score


@dataclass(frozen=True)
class EcogAblation:
    """EcoG-Bench as the ablation engine sees it: its clips, their requests, runs and scores."""

    prepared: Prepared  # opened once: every stack's requests, runs and scores read it
    options: EcogInputs = EcogInputs()
    name: str = "ecog"
    metrics: tuple[str, ...] = tuple(METRICS)
    unit: str = "clips"
    honours: frozenset[str] = ANCHOR_OPTIONS

    def stacks(self, spec: AblationSpec) -> list[Stack]:
        refuse_given_variants("ecog", (spec.baseline, *spec.variants))
        return stacks_to_run(spec)

    def items(self) -> list[str]:
        return [r.clip_id for r, _ in requests_for(self.prepared, make_stack("full"), self.options)[0]]

    def requests(self, stack: Stack) -> list[Request]:
        return [req for _, req in requests_for(self.prepared, stack, self.options)[0]]

    def run(self, stack: Stack, run_dir: Path, asking: Asking, only: set[str] | None) -> None:
        run(self.prepared, stack, run_dir, asking, self.options, only)

    def score(self, stack: Stack, run_dir: Path, only: set[str] | None) -> Scored:
        scored = score_and_write(run_dir, self.prepared, only)
        return Scored(stack, run_dir, item_tables([scored])[0].rows, scored)

    def report(
        self, scored: list[Scored], out: Path, cluster: str | None, only: set[str] | None
    ) -> tuple[Report, list[str]]:
        runs = [s.native for s in scored]
        sha = prompt_record(self.options)["sha256"]
        report = write_report(runs, out, cluster, {r[0]: sha for r in runs})
        cells = {s.stack.variant: s.native for s in scored if not s.stack.dropped and s.stack.name == s.stack.variant}
        return report, interface_section(cells, interface_pairs(cells), out, cluster)


def ablation(prepared: Path | None, inputs: EcogInputs) -> EcogAblation:
    return EcogAblation(opened(needs_prepared("ecog", prepared)), inputs)


def write_requests(prepared: Path, inputs: EcogInputs, out: Path, stack: Stack, fmt: str, media: str) -> int:
    return write_stacks(prepared, out, stack, inputs, fmt, media)


def run_stack(choice: StackChoice, inputs: EcogInputs) -> Stack:
    refuse_given_variants("ecog", [choice.variant])
    return choice.anchors("ecog")


def run_job(job: RunJob) -> Outcome:
    prepared = opened(needs_prepared("ecog", job.prepared))
    stack, options = run_stack(job.stack, job.inputs), job.inputs
    run(prepared, stack, job.out, job.asking, options)
    _, _, js = score_and_write(job.out, prepared)
    answers = js.get("answers") or {}
    notes = failed_items(answers.get("request_failures", 0), answers.get("clips", 0), answers.get("causes"))
    return Outcome(summary_table(js), notes, bool(notes), result=js)


def export_task(prepared: Path | None, inputs: EcogInputs, stack: Stack, opts: ExportOptions) -> Path:
    """Every usable clip of the prepared folder, shard by shard (tasks.ecog.export)."""
    return export(needs_prepared("ecog", prepared), stack, opts, inputs)


def view(first: Path, runs: list[Path], out: Path) -> Path:
    from avstack.tasks.ecog.view import build_site

    return build_site(first, runs, out)


def score_files(gt: Path, pred: Path) -> Outcome:
    clips, gt_errors = load_gt(gt)
    if not clips and not gt_errors:  # (bad clips are named below, each a GT error)
        raise DataError(
            f"{gt}: no EcoG clip to score against; write it with `avstack ecog gt "
            "DATA_ROOT`, or score other questions with --task videoqa --questions FILE"
        )
    preds = read_predictions(pred)
    js = score(clips, preds, gt_errors).to_json()
    notes = [f"  GT ERROR {p}" for p in gt_errors]
    missing = too_many_missing(js["counts"]["missing_predictions"], js["counts"]["clips"])
    notes += [f"error: {missing}"] if missing else []
    return Outcome(summary_table(js), tuple(notes), failed=missing is not None, result=js)


def report(runs: list[Path], out: Path, cluster: str | None = None) -> Report:
    loaded = [load_run(r) for r in runs]
    return write_report(loaded, out, cluster, {run[0]: prompt_of(d) for run, d in zip(loaded, runs)})


TASK = Task(
    name="ecog",
    description="EcoG-Bench: What / Where / When per referent from egocentric co-speech clips",
    baselines=BASELINES,
    layouts=(ecog_layout,),
    run=run_job,
    score=score_files,
    report=report,
    ablation=ablation,
    write_requests=write_requests,
    inputs=EcogInputs,
    run_stack=run_stack,
    export=export_task,
    view=view,
)
