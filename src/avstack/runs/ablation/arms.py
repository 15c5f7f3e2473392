"""The input-stack ablation, once for every task: which stacks to run, the plan and its bill,
running them (resumable, one answer cache shared by the stacks), sequential rounds
(`until="decided"`), each cue's Shapley value, the report, and the stacks whose requests failed.

A task supplies only what is its own (`AblationTask`): its items, the requests of one stack (for
the plan), how to run and score one stack, and its report (with any sections of its own, EcoG's
interface 2x2 say). Options travel as one record (`AblationSpec`); an option a task cannot carry
out is refused before anything runs (`refused`), never dropped. The engine knows no benchmark.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from avstack.analysis.compare import ItemTable, check_same_items
from avstack.analysis.sequential import ask_until_decided, stop_record, stop_section
from avstack.analysis.stats import paired_bootstrap_ci, shapley_per_item
from avstack.analysis.tables import Report, markdown_table
from avstack.errors import UsageError
from avstack.io import atomic_write, write_csv_atomic, write_json_atomic
from avstack.prompting.budget import FrameBudget
from avstack.prompting.messages import Request, shared_prefixes
from avstack.prompting.stacks import VARIANTS, Stack, Subset, make_stack, subset_stacks
from avstack.runs.ablation.integrity import arms_of, changes_section, check_arms
from avstack.runs.ablation.noise import asking_for, is_repeat, noise_section
from avstack.runs.ablation.reconcile import as_json, inputs_section, marked, reconcile
from avstack.runs.planning.plan import Counting, plan_requests, usage_section, write_plan
from avstack.runs.planning.plan_record import Plan
from avstack.runs.sending.engine import Asking, RunSettings
from avstack.runs.sending.interleave import run_interleaved

UNTIL = ("all", "decided")
# every option of an ablation of input stacks (AblationSpec.asks_for names): what EcoG and videoqa honour
ANCHOR_OPTIONS = frozenset(
    {"drop", "variants", "subsets", "cluster", "ts_format", "word_ts_format", "until", "layout", "frame_budget", "aa"}
)


@dataclass(frozen=True)
class AblationSpec:
    """What an ablation compares and how far it asks: the same meaning on every task."""

    drops: tuple[str, ...] = ()
    variants: tuple[str, ...] = ()  # other variants beside the baseline (each with its drops)
    baseline: str = "full"
    subsets: bool = False  # every subset of the drops, and each cue's Shapley value
    ts_formats: tuple[str, ...] = ("ms",)  # the baseline's stacks in each frame-time format
    word_ts_format: str = "json"
    # where what a clip's stacks share goes (prompting.stacks.LAYOUTS); several: the baseline's
    # stacks in each, an axis with its own paired delta (the first layout's baseline is the report's)
    layouts: tuple[str, ...] = ("benchmark",)
    # the frames each stack picks from the prepared ones (prompting.budget); several: the baseline's
    # stacks under each, an axis with its own paired delta (the first budget's baseline is the report's)
    budgets: tuple[FrameBudget, ...] = (FrameBudget(),)
    # several questions of a video in one request (videoqa): (False, True) is an axis with its own delta
    packs: tuple[bool, ...] = (False,)
    cluster: str | None = None  # bootstrap whole clusters in the paired deltas
    until: str = "all"  # all: every item; decided: rounds until every contrast is decided
    round_size: int | None = None
    precision: float | None = None
    seed: int = 0
    alpha: float = 0.05
    # the A/A arm (`<baseline>-aa`): the baseline asked again past every cache, the noise floor
    aa: bool = False

    def __post_init__(self) -> None:
        if self.until not in UNTIL:
            raise UsageError(f"until: expected all or decided, got {self.until!r}")
        if not self.ts_formats:
            raise UsageError("ts_formats: expected at least one frame-time format")
        if not self.layouts:
            raise UsageError("layouts: expected at least one layout")
        if not self.budgets:
            raise UsageError("budgets: expected at least one frame budget")
        if self.until == "decided" and not (self.drops or self.variants):
            raise UsageError("a sequential ablation (until decided) needs a dropped cue or a variant: no contrast")

    def asks_for(self) -> list[str]:
        """The options this spec sets away from their defaults (what a task must be able to do)."""
        wanted = {
            "drop": bool(self.drops),
            "variants": bool(self.variants),
            "subsets": self.subsets,
            "cluster": self.cluster is not None,
            "ts_format": self.ts_formats != ("ms",),
            "word_ts_format": self.word_ts_format != "json",
            "until": self.until != "all",
            "layout": self.layouts != ("benchmark",),
            "frame_budget": self.budgets != (FrameBudget(),),
            "pack": self.packs != (False,),
            "aa": self.aa,
        }
        return [name for name, on in wanted.items() if on]


@dataclass(frozen=True)
class Scored:
    """One stack's run, scored over the items asked: per item its metrics (for the cue values and
    the sequential contrasts), and whatever the task keeps for its report (its failures among it)."""

    stack: Any  # a prompting Stack, or a task's own condition with a `name`
    run_dir: Path
    per_item: Mapping[str, Mapping[str, Any]]
    native: Any = None


class AblationTask(Protocol):
    """What a benchmark supplies to be ablated."""

    name: str
    metrics: Sequence[str]  # per-item metrics: each cue's value on each; the first decides sequential rounds
    honours: frozenset[str]  # AblationSpec.asks_for names this task carries out
    unit: str  # what its items are called in the report: clips, questions, ...

    def stacks(self, spec: AblationSpec) -> Sequence[Any]:
        """The stacks the spec asks for, the baseline first (each with a unique `name`): the input
        stacks of anchors (`stacks_to_run`), or a task's own conditions (EgoGap's)."""
        ...

    def items(self) -> list[str]: ...

    def requests(self, stack: object) -> list[Request]: ...

    def run(self, stack: object, run_dir: Path, asking: Asking, only: set[str] | None) -> None: ...

    def score(self, stack: object, run_dir: Path, only: set[str] | None) -> Scored: ...

    def report(
        self, scored: list[Scored], out: Path, cluster: str | None, only: set[str] | None
    ) -> tuple[Report, list[str]]:
        """The task's report of the scored stacks (the first the baseline), and sections of its own
        the ablation adds after the cue values (EcoG's interface 2x2)."""
        ...


class UnsupportedOption(UsageError):
    """Options the task cannot carry out, by their AblationSpec names, said as the flags that set
    them (the library and the command line say the same words)."""

    def __init__(self, task: str, options: Iterable[str], honours: Iterable[str]):
        self.task, self.options, self.honours = task, tuple(options), tuple(sorted(honours))
        super().__init__(f"--task {task} cannot honour {spec_flags(self.options)}: it takes {spec_flags(self.honours)}")


def spec_flags(names: Iterable[str]) -> str:
    """AblationSpec fields as the flags that set them."""
    said = {"frame_budget": "fps/--max-frames"}  # one option, two flags
    return ", ".join("--" + said.get(n, n.replace("_", "-")) for n in names) or "none of them"


def refuse_unhonoured_options(task: AblationTask, spec: AblationSpec) -> None:
    missing = [o for o in spec.asks_for() if o not in task.honours]
    if missing:
        raise UnsupportedOption(task.name, missing, task.honours)


# ------------------------------------------------------------------------------------ the stacks


def has_cue(variant: str, cue: str) -> bool:
    """Does `variant` carry `cue`, so that dropping it makes another stack?"""
    return cue in VARIANTS.get(variant, frozenset())


def ablation_stacks(spec: AblationSpec) -> list[Stack]:
    """The baseline variant first, then it minus each drop, then each other variant and it minus
    each drop it has (`--drop word_ts` also gives `text-no_word_ts`); with several time formats or
    layouts, the baseline's stacks in each (the first format's and layout's baseline is the report's)."""
    base, words = spec.baseline, spec.word_ts_format
    # the baseline's: every format, layout and frame budget
    axes = [(f, lay, b, p) for p in spec.packs for b in spec.budgets for lay in spec.layouts for f in spec.ts_formats]
    stacks = [make_stack(base, [], f, words, lay, b, p) for f, lay, b, p in axes]
    stacks += [
        make_stack(base, [d], f, words, lay, b, p) for d in spec.drops if has_cue(base, d) for f, lay, b, p in axes
    ]
    first, lay, budget, pack = spec.ts_formats[0], spec.layouts[0], spec.budgets[0], spec.packs[0]
    for v in spec.variants:
        if v == base:
            continue
        stacks.append(make_stack(v, [], first, words, lay, budget, pack))
        stacks += [make_stack(v, [d], first, words, lay, budget, pack) for d in spec.drops if has_cue(v, d)]
    return list(dict.fromkeys(stacks))


def subset_plan(spec: AblationSpec) -> list[Subset]:
    return subset_stacks(list(dict.fromkeys(spec.drops)), spec.baseline) if spec.subsets else []


def stacks_to_run(spec: AblationSpec) -> list[Stack]:
    """The input stacks an ablation of anchors runs, in order (the baseline first)."""
    bad = [v for v in (spec.baseline, *spec.variants) if v not in VARIANTS]
    if bad:
        raise UsageError(f"variant: expected one of {', '.join(VARIANTS)}, got {', '.join(map(repr, bad))}")
    if not spec.subsets:
        return ablation_stacks(spec)
    stacks = [s.stack for s in subset_plan(spec) if s.same_as is None]
    stacks += [make_stack(v) for v in spec.variants if v != spec.baseline]
    return list(dict.fromkeys(stacks))


def arms(task: AblationTask, spec: AblationSpec) -> list[Any]:
    """The task's stacks for the spec, and with `aa` the baseline's repeat last (`full-aa`)."""
    stacks = list(task.stacks(spec))
    return [*stacks, replace(stacks[0], repeat=True)] if spec.aa and stacks else stacks


# ------------------------------------------------------------------------------------ plan and run


def plan_stacks(
    task: AblationTask,
    stacks: Sequence[Any],
    model: str,
    out: str | Path,
    counting: Counting | None = None,
    max_output_tokens: int = 512,
    prices_file: Path | None = None,
) -> Plan:
    """What running `stacks` would ask and cost (avstack.runs.planning.plan), written to out/plan.json; no
    request is sent (a local server may be asked to count the text: `Counting.server`). First every
    arm's requests are held to its parent's (avstack.runs.ablation.integrity): an arm that differs by more
    than its cue raises ArmMismatch, and nothing is planned or sent."""
    requests = {stack.name: task.requests(stack) for stack in stacks}
    changed = check_arms(arms_of(stacks), requests)
    fresh = [s.name for s in stacks if is_repeat(s)]
    cache = Path(out) / "cache"
    bill = plan_requests(requests, model, model, cache, counting, max_output_tokens, prices_file, fresh)
    bill = bill.with_arms([vars(c) for c in changed])
    write_plan(bill, Path(out))
    return bill


def plan(task: AblationTask, spec: AblationSpec, model: str, out: str | Path, *costing: Any) -> Plan:
    """What the ablation would ask and cost, written to out/plan.json; nothing sent. `costing`:
    plan_stacks' counting, max_output_tokens and prices_file."""
    refuse_unhonoured_options(task, spec)
    return plan_stacks(task, arms(task, spec), model, out, *costing)


def ablate(
    task: AblationTask,
    spec: AblationSpec,
    asking: Asking,
    out: str | Path,
    bill: Plan | None = None,
    strict_inputs: bool = False,
) -> Report:
    """Run every stack into out/<stack>/ (every item, or rounds until decided), score each once,
    write out/report.md: the task's report, the cue values, the sequential stop, the plan beside
    the usage the servers reported. `Report.failed` names the stacks whose requests failed."""
    refuse_unhonoured_options(task, spec)
    out = Path(out)
    stacks = arms(task, spec)
    bill = bill or plan(task, spec, asking.backend_id or str(getattr(asking.backend, "name", "backend")), out)
    if any(getattr(s, "layout", "benchmark") != "benchmark" for s in stacks):
        # a cache breakpoint only where another stack's request shares the prefix (as planned)
        shared = shared_prefixes(r for s in stacks for r in task.requests(s))
        asking = replace(asking, settings=replace(asking.settings or RunSettings(), shared_prefixes=shared))
    only: set[str] | None = None
    stop: dict[str, object] | None = None
    if spec.until == "decided":
        asked, stop = _ask_until_decided(task, spec, asking, out, stacks)
        only = set(asked)
    else:
        run_stacks(task, stacks, out, asking, None)
    scored = [task.score(s, out / s.name, only) for s in stacks]
    report, own = task.report(scored, out, spec.cluster, only)
    predictions = {s.name: out / s.name / "predictions.jsonl" for s in stacks}
    seen = reconcile(bill, predictions)
    write_json_atomic(out / "inputs.json", {"arms": bill.checked_arms, "reported": as_json(seen)})
    noise = noise_section(task, scored, out) if any(is_repeat(s) for s in stacks) else ""
    sections = (cue_section(task, spec, scored, out) if spec.subsets else []) + own
    joined = "\n".join(sections)
    stopped = stop_section(stop) if stop else ""
    usage = usage_section(bill, predictions)
    checks = changes_section(bill.checked_arms) + inputs_section(seen, strict_inputs)
    text = marked(report.text, seen) + joined + noise + stopped + checks + usage
    atomic_write(report.path, text.encode())
    summary = marked(report.summary, seen) + (joined + "\n" if sections else "") + noise + stopped
    departed = {a.arm: a.said() for a in seen if a.flagged}
    return Report(summary, text, report.path, report.failed, departed)


def run_stacks(task: AblationTask, stacks: Sequence[Any], out: Path, asking: Asking, only: set[str] | None) -> None:
    """Every stack into out/<stack>/ (an existing folder resumes: nothing answered is asked again),
    one clip's stacks together through one pool of --concurrency (avstack.runs.sending.interleave); in
    batch mode one stack after another (each stack's requests are one batch)."""
    settings = asking.settings or RunSettings()
    if len(stacks) < 2 or settings.batch_poll_s is not None or not settings.interleave:
        for stack in stacks:
            task.run(stack, out / stack.name, asking_for(stack, asking), only)
        return

    def run_one(stack: Any) -> None:
        task.run(stack, out / stack.name, asking_for(stack, asking), only)

    run_interleaved(stacks, settings.concurrency, run_one, asking.backend.close)


def _ask_until_decided(
    task: AblationTask, spec: AblationSpec, asking: Asking, out: Path, stacks: list[Any]
) -> tuple[list[str], dict[str, object]]:
    """Items in a seeded random order, in rounds, until every contrast (the baseline against each
    other stack) is decided; every stack's run folder holds the same items at each stop."""
    metric = task.metrics[0]

    def ask(asked: list[str]) -> list[list[float]]:
        run_stacks(task, stacks, out, asking, set(asked))
        rows = [task.score(s, out / s.name, set(asked)).per_item for s in stacks]
        return [[float(rows[0][i][metric]) - float(other[i][metric]) for i in asked] for other in rows[1:]]

    asked, decision = ask_until_decided(task.items(), spec.round_size, ask, spec.alpha, spec.precision, spec.seed)
    names = [s.name for s in stacks]
    stop = stop_record(
        decision, names, len(stacks), spec.round_size, spec.alpha, spec.precision, spec.seed, metric, task.unit
    )
    write_json_atomic(out / "sequential.json", stop)
    return asked, stop


# ------------------------------------------------------------------------------------ cue values


def cue_section(task: AblationTask, spec: AblationSpec, scored: list[Scored], out: Path) -> list[str]:
    """Each cue's exact Shapley value over the subsets (and the frame_ts x word_ts interaction) on
    every metric, with a paired bootstrap CI (one seed: the same resampled items for every subset)."""
    cues = list(dict.fromkeys(spec.drops))
    subsets = subset_plan(spec)
    by_stack = {s.stack: s.per_item for s in scored}
    tables = {s.present: by_stack[s.stack] for s in subsets}
    base = tables[frozenset(cues)]
    ids = sorted(base)
    for s in subsets:  # paired over the same items, else refused naming the runs
        check_same_items(ItemTable(s.stack.name, dict(tables[s.present])), ItemTable("full", dict(base)))
    rows_out, csv = [], [["cue", "metric", "shapley", "ci_low", "ci_high", "n"]]
    for m in task.metrics:
        values = {k: np.array([float(t[i][m]) for i in ids]) for k, t in tables.items()}
        effects = shapley_per_item(cues, values)
        if {"frame_ts", "word_ts"} <= set(cues):
            full = frozenset(cues)
            effects["frame_ts x word_ts"] = (
                values[full]
                - values[full - {"frame_ts"}]
                - values[full - {"word_ts"}]
                + values[full - {"frame_ts", "word_ts"}]
            )
        for cue, per_item in effects.items():
            lo, hi = paired_bootstrap_ci(per_item)
            mean = 100 * float(per_item.mean())
            rows_out.append([cue, m, f"{mean:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]"])
            csv.append([cue, m, f"{mean:.6g}", f"{100 * lo:.6g}", f"{100 * hi:.6g}", str(len(ids))])
    write_csv_atomic(out / "shapley.csv", csv)
    same = [f"`{' + '.join(sorted(s.present))}` = `{s.same_as}`" for s in subsets if s.same_as]
    by_cue: dict[str, list[str]] = {}
    for cue, _metric, cell in rows_out:
        by_cue.setdefault(cue, []).append(cell)
    table = markdown_table(["cue", *task.metrics], [[cue, *cells] for cue, cells in by_cue.items()])
    note = (
        "Impossible subsets (a cue kept without the cue it lives in) are the requests of a possible one and reuse"
        " its run: " + "; ".join(same) + "."
    )
    return [
        f"## What each cue is worth (exact Shapley over {len(subsets)} subsets of {', '.join(cues)})",
        "",
        table,
        "",
        "Points of each metric that each cue adds, averaged over every order of adding the cues (exact),"
        " with a 95% bootstrap CI (10,000 resamples of the items, the same for every subset);"
        " `frame_ts x word_ts`: v(both) - v(no frame_ts) - v(no word_ts) + v(neither), the others present.",
        "",
        *([note, ""] if same else []),
    ]


# ------------------------------------------------------------------------------------ failures


def request_failures(predictions: Sequence[Mapping[str, Any]], ids: set[str], id_field: str) -> dict[str, object]:
    """How many of the items got an answer, and the requests that failed (refused, 4xx, no answer, an
    input that could not be read), with their causes: a stack that got no answer is no model that
    scored zero. Last line per item wins, as in the engine."""
    from avstack.runs.sending.causes import count_causes
    from avstack.runs.sending.engine import failed_request

    last = {str(p.get(id_field)): p for p in predictions if str(p.get(id_field)) in ids}
    causes = count_causes(str(rec.get("error")) for rec in last.values() if failed_request(dict(rec)))
    failed = sum(causes.values())
    return {
        "clips": len(ids),
        "answered": len(last) - failed,
        "request_failures": failed,
        "causes": causes,
    }
