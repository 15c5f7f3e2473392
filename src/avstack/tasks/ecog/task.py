"""EcoG-Bench as a task: its layout, baselines, run, score and report, for the registry."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from avstack.analysis.tables import Report
from avstack.io import DataError, read_predictions
from avstack.manifest import Prepared, opened
from avstack.prompting.messages import Request
from avstack.prompting.stacks import Stack, interface_pairs, make_stack
from avstack.runs.ablation import ANCHOR_OPTIONS, AblationSpec, Scored, stacks_to_run
from avstack.runs.engine import Asking
from avstack.runs.runners import make_backend
from avstack.tasks import (
    Outcome,
    RunJob,
    Task,
    TaskInputs,
    failed_items,
    needs_prepared,
    refuse_inputs,
    too_many_missing,
)
from avstack.tasks.ecog.baselines import BASELINES
from avstack.tasks.ecog.data import load_gt
from avstack.tasks.ecog.export import write_stacks
from avstack.tasks.ecog.layout import ecog_layout
from avstack.tasks.ecog.metrics import METRICS
from avstack.tasks.ecog.prompt import EcogOptions
from avstack.tasks.ecog.report import interface_section, item_tables, summary_table, write_report
from avstack.tasks.ecog.runs import load_run, prompt_of, prompt_record, requests_for, run, score_and_write
from avstack.tasks.ecog.score import score


@dataclass(frozen=True)
class EcogAblation:
    """EcoG-Bench as the ablation engine sees it: its clips, their requests, runs and scores."""

    prepared: Prepared  # opened once: every stack's requests, runs and scores read it
    options: EcogOptions = EcogOptions()
    name: str = "ecog"
    metrics: tuple[str, ...] = tuple(METRICS)
    unit: str = "clips"
    honours: frozenset[str] = ANCHOR_OPTIONS

    def stacks(self, spec: AblationSpec) -> list[Stack]:
        return stacks_to_run(spec)

    def items(self) -> list[str]:
        return [r.clip_id for r, _ in requests_for(self.prepared, make_stack("full"), self.options)[0]]

    def requests(self, stack: Stack) -> list[Request]:
        return [req for _, req in requests_for(self.prepared, stack, self.options)[0]]

    def run(self, stack: Stack, run_dir: Path, asking: Asking, only: set[str] | None) -> None:
        b = asking
        run(
            self.prepared,
            b.backend,
            stack,
            run_dir,
            b.settings,
            self.options,
            b.cache_dir,
            b.backend_id,
            b.progress,
            only,
        )

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


def options_of(inputs: TaskInputs) -> EcogOptions:
    refuse_inputs("ecog", inputs, ("asr", "coord_order"))
    return EcogOptions(inputs.coord_order, inputs.asr, prompt_dir=inputs.prompt)


def ablation(prepared: Path | None, inputs: TaskInputs) -> EcogAblation:
    return EcogAblation(opened(needs_prepared("ecog", prepared)), options_of(inputs))


def write_requests(prepared: Path, inputs: TaskInputs, out: Path, stack: Stack, fmt: str, media: str) -> int:
    return write_stacks(prepared, out, stack, options_of(inputs), fmt, media)


def run_job(job: RunJob) -> Outcome:
    prepared = opened(needs_prepared("ecog", job.prepared))
    stack, options = job.stack.anchors("ecog"), options_of(job.inputs)
    backend = make_backend(job.model, BASELINES, **job.backend_options)
    run(prepared, backend, stack, job.out, job.settings, options, None, job.model, job.progress)
    _, _, js = score_and_write(job.out, prepared)
    answers = js.get("answers") or {}
    notes = failed_items(answers.get("request_failures", 0), answers.get("clips", 0), answers.get("causes"))
    return Outcome(summary_table(js), notes, bool(notes), result=js)


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
)
