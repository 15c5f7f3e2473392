"""EcoG-Bench as a task: its layout, baselines, run, score and report, for the registry."""

from __future__ import annotations

from pathlib import Path

from avstack.analysis.tables import Report
from avstack.io import DataError, read_predictions
from avstack.prompting.stacks import make_stack
from avstack.runs.runners import make_backend
from avstack.tasks import Outcome, RunJob, Task, too_many_missing
from avstack.tasks.ecog.baselines import BASELINES
from avstack.tasks.ecog.data import load_gt
from avstack.tasks.ecog.layout import ecog_layout
from avstack.tasks.ecog.prompt import EcogOptions
from avstack.tasks.ecog.report import summary_table, write_report
from avstack.tasks.ecog.runs import load_run, prompt_of, run, score_and_write
from avstack.tasks.ecog.score import score


def run_job(job: RunJob) -> Outcome:
    a = job.args
    if a.get("prepared") is None:
        raise ValueError("--task ecog needs the PREPARED folder argument")
    stack = make_stack(
        a.get("variant", "full"), a.get("drop", ()), a.get("ts_format", "ms"), a.get("word_ts_format", "json")
    )
    options = EcogOptions(a.get("coord_order", "xy"), a.get("asr"), prompt_dir=a.get("prompt"))
    backend = make_backend(job.model, BASELINES, **job.backend_options)
    run(a["prepared"], backend, stack, job.out, job.settings, options, None, job.model, job.progress)
    _, _, js = score_and_write(job.out, a["prepared"])
    return Outcome(summary_table(js), result=js)


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
)
