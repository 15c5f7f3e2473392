"""EgoGapBench as a task: baselines, run, score and report, for the registry."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path

from avstack.analysis.tables import Report, failed_label, failures_note, markdown_table
from avstack.errors import UsageError
from avstack.io import DataError, read_json_file, read_predictions
from avstack.prompting.messages import Request
from avstack.runs.ablation.arms import AblationSpec, Scored, request_failures
from avstack.runs.exports.rows import ExportOptions, ExportRow, LmmsTask
from avstack.runs.exports.writer import write_export
from avstack.runs.sending.causes import count_causes
from avstack.runs.sending.engine import Asking
from avstack.tasks import (
    Outcome,
    RunJob,
    StackChoice,
    Task,
    failed_items,
    refuse_flags,
    too_many_missing,
)
from avstack.tasks.egogap.baselines import BASELINES
from avstack.tasks.egogap.data import Item, load_bundles
from avstack.tasks.egogap.inputs import EgogapInputs
from avstack.tasks.egogap.lmms import METRICS
from avstack.tasks.egogap.prompt import STYLES
from avstack.tasks.egogap.report import ITEM_METRICS, load_egogap_run, per_item, score_rows, write_egogap_report
from avstack.tasks.egogap.runs import run_egogap, score_egogap_run, work_items
from avstack.tasks.egogap.scoring import score
from avstack.tasks.egogap.stack import IMAGE_VARIANTS, OPTION_VARIANTS, EgoGapStack


def run_stack(choice: StackChoice, inputs: EgogapInputs) -> EgoGapStack:
    refuse_flags("egogap", choice.given(), ())  # no anchors: its conditions are its inputs
    return inputs.stack("image" if choice.variant == "full" else choice.variant)


def run_job(job: RunJob) -> Outcome:
    bundles_of(job.prepared, job.inputs)
    stack = run_stack(job.stack, job.inputs)
    run_egogap(job.inputs, stack, job.out, job.asking)
    result = score_egogap_run(job.out)
    failed = [str(i["error"]) for i in result["items"] if str(i["error"] or "").startswith("failed")]
    causes = count_causes(error.removeprefix("failed: ") for error in failed)
    notes = failed_items(len(failed), len(result["items"]), causes)
    return Outcome(markdown_table(*score_rows([(job.model, stack.name, result)])), notes, bool(notes), result=result)


EGOGAP_OPTIONS = frozenset({"variants", "cluster", "until", "aa"})  # no anchors: no drops, subsets or time formats


def condition(token: str, base: EgoGapStack) -> EgoGapStack:
    """One EgoGap condition as an ablation names it: `full` (the base), an image variant (vflip,
    hflip, gray, downscale, text), an option format (n3, swap_motor), a prompt style (egoplan,
    exclusion) or `shuffleN` (the options shuffled with seed N)."""
    if token in ("full", "image"):
        return base
    if token in IMAGE_VARIANTS:
        return replace(base, image=token)
    if token in OPTION_VARIANTS:
        return replace(base, options=token)
    if token in STYLES:
        return replace(base, style=token)
    if token.startswith("shuffle") and token[len("shuffle") :].isdigit():
        return replace(base, shuffle_seed=int(token[len("shuffle") :]))
    known = [*IMAGE_VARIANTS, *OPTION_VARIANTS[1:], *STYLES]
    raise UsageError(f"egogap variant: expected full, {', '.join(known)} or shuffleN; got {token!r}")


@dataclass(frozen=True)
class EgoGapAblation:
    """EgoGapBench as the ablation engine sees it: its conditions (image variants, option formats,
    styles, shuffles) as stacks of one ablation over the bundles' items, read once."""

    inputs: EgogapInputs  # the bundles, images and the baseline's condition (style, options, shuffle, side)
    name: str = "egogap"
    metrics: tuple[str, ...] = ITEM_METRICS
    unit: str = "items"
    honours: frozenset[str] = EGOGAP_OPTIONS

    @cached_property
    def loaded(self) -> list[Item]:
        return load_bundles(self.inputs.bundles_file())

    def stacks(self, spec: AblationSpec) -> list[EgoGapStack]:
        base = condition(spec.baseline, self.inputs.stack())
        return list(dict.fromkeys([base, *(condition(v, base) for v in spec.variants)]))

    def items(self) -> list[str]:
        return [it.uid for it in self.loaded]

    def requests(self, stack: EgoGapStack) -> list[Request]:
        work = work_items(self.loaded, stack, self.inputs.images)
        return [w.request for w in work if w.request is not None]

    def run(self, stack: EgoGapStack, run_dir: Path, asking: Asking, only: set[str] | None) -> None:
        run_egogap(self.inputs, stack, run_dir, asking, only, self.loaded)

    def score(self, stack: EgoGapStack, run_dir: Path, only: set[str] | None) -> Scored:
        result = score_egogap_run(run_dir, only)
        model = read_json_file(run_dir / "run.json", dict).get("backend")
        return Scored(stack, run_dir, per_item(result), (str(model), stack.name, result))

    def report(
        self, scored: list[Scored], out: Path, cluster: str | None, only: set[str] | None
    ) -> tuple[Report, list[str]]:
        found = [(s.native, failures(s)) for s in scored]
        runs = [(model, failed_label(cond, f), result) for (model, cond, result), f in found]
        failed = {f"{model} {cond}": f for (model, cond, _), f in found if f}
        report = write_egogap_report(runs, out, cluster, failures_note(failed, "items"))
        return Report(report.summary, report.text, report.path, failed), []


def failures(s: Scored) -> dict[str, object] | None:
    """A scored EgoGap run's request and input failures over its items (clips, causes), or None."""
    if not s.native[2]["counts"].get("failed"):
        return None
    return request_failures(read_predictions(s.run_dir / "predictions.jsonl"), set(s.per_item), "uid")


def bundles_of(prepared: Path | None, inputs: EgogapInputs) -> Path:
    if prepared is not None:
        raise UsageError("--task egogap reads --bundles and --images, not a PREPARED folder")
    return inputs.bundles_file()


def ablation(prepared: Path | None, inputs: EgogapInputs) -> EgoGapAblation:
    bundles_of(prepared, inputs)
    return EgoGapAblation(inputs)


def export(prepared: Path | None, inputs: EgogapInputs, stack: EgoGapStack, opts: ExportOptions) -> Path:
    """One row per presented item under `stack`; an item whose image is missing is refused, named."""
    work = work_items(ablation(prepared, inputs).loaded, stack, inputs.images)
    bad = [f"{w.id}: {w.error}" for w in work if w.request is None]
    if bad:
        raise DataError(f"{len(bad)} items cannot be exported: " + "; ".join(bad[:3]))
    rows = [
        ExportRow(w.id, w.request, w.truth | {"letters": sorted(w.record["labels"])}, {"kind": w.record["kind"]})
        for w in work
        if w.request is not None
    ]
    return write_export(rows, stack.name, opts, LmmsTask("avstack_egogap", "avstack.tasks.egogap.lmms", METRICS))


def view(first: Path, runs: list[Path], out: Path) -> Path:
    from avstack.tasks.egogap.view import build_site

    return build_site([first, *runs], out)


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
    ablation=ablation,
    inputs=EgogapInputs,
    run_stack=run_stack,
    export=export,
    view=view,
)
