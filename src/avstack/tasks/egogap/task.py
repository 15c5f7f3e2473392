"""EgoGapBench as a task: baselines, run, score and report, for the registry."""

from __future__ import annotations

from pathlib import Path

from avstack.analysis.tables import Report, markdown_table
from avstack.io import read_predictions
from avstack.runs.engine import count_causes
from avstack.runs.runners import make_backend
from avstack.tasks import Outcome, RunJob, Task, failed_items, too_many_missing
from avstack.tasks.egogap.baselines import BASELINES
from avstack.tasks.egogap.data import load_bundles
from avstack.tasks.egogap.report import load_egogap_run, score_rows, write_egogap_report
from avstack.tasks.egogap.runs import run_egogap, score_egogap_run
from avstack.tasks.egogap.score import score
from avstack.tasks.egogap.stack import EgoGapStack


def run_job(job: RunJob) -> Outcome:
    a = job.args
    if a.get("bundles") is None:
        raise ValueError("--task egogap needs --bundles B.jsonl (and --images DIR unless --variant text)")
    variant = a.get("variant", "image")
    stack = EgoGapStack(
        a.get("style", "default"),
        "image" if variant == "full" else variant,
        a.get("options", "all"),
        a.get("shuffle_seed"),
        a.get("max_side", 512),
    )
    backend = make_backend(job.model, BASELINES, **job.backend_options)
    run_egogap(a["bundles"], backend, stack, job.out, a.get("images"), job.settings, job.model, progress=job.progress)
    result = score_egogap_run(job.out)
    failed = [str(i["error"]) for i in result["items"] if str(i["error"] or "").startswith("failed")]
    causes = count_causes(error.removeprefix("failed: ") for error in failed)
    notes = failed_items(len(failed), len(result["items"]), causes)
    return Outcome(markdown_table(*score_rows([(job.model, stack.name, result)])), notes, bool(notes), result=result)


def score_files(bundles: Path, pred: Path) -> Outcome:
    result = score(load_bundles(bundles), read_predictions(pred))
    c = result["counts"]
    table = markdown_table(*score_rows([(pred.name, bundles.name, result)]))
    summary = f"{table}\nitems {c['items']}, missing {c['missing_predictions']}, unparsed {c['unparsed']}"
    missing = too_many_missing(c["missing_predictions"], c["items"])
    return Outcome(summary, (f"error: {missing}",) if missing else (), missing is not None, result)


def report(runs: list[Path], out: Path, cluster: str | None = None) -> Report:
    for r in runs:
        score_egogap_run(r)
    return write_egogap_report([load_egogap_run(r) for r in runs], out, cluster)


TASK = Task(
    name="egogap",
    description="EgoGapBench: egocentric action selection, image multiple choice",
    baselines=BASELINES,
    layouts=(),
    run=run_job,
    score=score_files,
    report=report,
    truth="bundles",
)
