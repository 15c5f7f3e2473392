"""`avstack.ablate` and `avstack.run`: what `avstack ablate` and `avstack run` do, from Python.

Each takes the command's option names as keywords, makes the records the engine reads (the
task's own inputs, the stack or the ablation's spec, BackendOptions, Costing, RunSettings), plans
every request with those same records before sending (the provider's limits, the bill), and runs.
A task's own options are offered to the chosen task, which refuses, by flag, what it does not
declare."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from avstack.api.failures import CommandFailed, speaks_flags
from avstack.api.options import Ablating, BackendOptions, Costing, Done, Sending
from avstack.api.planning import (
    Say,
    backend_or_none,
    bill,
    counting_for,
    has_limits,
    plan_summary,
    quiet,
    within_limits,
)
from avstack.errors import UsageError
from avstack.io import Progress
from avstack.options import fold
from avstack.runs.planning.plan_record import Plan
from avstack.runs.sending.runners import DEFAULTS, refuse_unhonoured
from avstack.tasks import DEFAULT_TASK, StackChoice

PathLike = str | Path


def chosen_task(task: str, offered: Mapping[str, object]) -> tuple[Any, object]:
    """The registered task and its own inputs record from the task options offered (every
    registered task's, by flag name): one the task does not declare, set, is refused."""
    from avstack.tasks import all_tasks, get_task, task_inputs

    defaults = {f.name: f.default for t in all_tasks() for f in fields(t.inputs)}
    chosen = get_task(task)
    return chosen, task_inputs(chosen, offered, defaults)


@speaks_flags
def ablate(
    prepared: PathLike | None = None,
    *,
    model: str,
    out: PathLike,
    task: str = DEFAULT_TASK,
    ablating: Ablating | None = None,
    backend: BackendOptions | None = None,
    costing: Costing | None = None,
    sending: Sending | None = None,
    say: Say = quiet,
    progress: Progress | None = None,
    **keywords: object,
) -> Done:
    """The input-stack ablation of any registered task, as `avstack ablate` runs it: every arm
    planned and held to its parent before anything is sent, the provider's limits, the bill, then
    every stack run, scored and reported into `out` (report.md, delta.csv, plan.json). The options
    are records (what is compared: Ablating; how requests are sent: BackendOptions; how the plan
    counts and bills: Costing; how requests go out: Sending), or their fields by keyword as the
    command's flags name them (`drop=["word_ts"]`, `ts_format="ms,index"`, `dry_run=True`); the rest
    are the task's own (EcoG: asr, coord_order, prompt; videoqa: questions, questions_format,
    prompt; EgoGap: bundles, images, style, options, shuffle_seed, max_side).
    Raises CommandFailed (code 1) when a stack's requests failed or, with `strict_inputs`
    (Ablating's), an arm's input departs from the plan; everything is written first."""
    from avstack.runs.ablation import arms as engine
    from avstack.runs.sending.engine import Asking
    from avstack.runs.sending.runners import make_backend

    out = Path(out)
    ablating = fold(Ablating, keywords, ablating)
    spec, strict_inputs = ablating.spec(), ablating.strict_inputs
    backend, costing, sending = _sending(keywords, backend, costing, sending)
    chosen, inputs = chosen_task(task, keywords)
    refuse_unhonoured(model, chosen.baselines, backend)  # before anything is planned or sent
    if chosen.ablation is None:
        raise UsageError(f"--task {task} has no ablation")
    target = chosen.ablation(Path(prepared) if prepared is not None else None, inputs)
    engine.refuse_unhonoured_options(target, spec)
    made = backend_or_none(model, chosen.baselines, backend)  # made once: the plan counts with it, the run asks it
    counting = counting_for(made, costing, clip_major=not sending.batch)

    def replan(budgets: tuple[object, ...]) -> Plan:
        again = replace(spec, budgets=budgets)
        return engine.plan(target, again, model, out, counting, backend.max_tokens, costing.prices)

    plan, budgets = within_limits(replan, spec.budgets, costing.fit_limits, out, say)
    spec = replace(spec, budgets=budgets)
    if costing.dry_run:
        return Done(plan_summary(plan, out), out / "plan.json", plan=plan)
    settings = sending.settings(bill(plan, out, costing, say))
    if made is None:  # the plan went without it: now its own error, naming what is missing
        made = make_backend(model, chosen.baselines, backend)
    asking = Asking(made, model, out / "cache", settings, progress)
    report = engine.ablate(target, spec, asking, out, plan, strict_inputs)
    summary = f"{report.summary}\nfull report: {report.path}"
    done = Done(summary, report.path, plan=plan, failed=report.failed, departed=report.departed)
    if report.departed and strict_inputs:
        arms = ", ".join(report.departed)
        raise CommandFailed(
            f"{len(report.departed)} arm(s) whose input departs from the plan (--strict-inputs): {arms}", 1, done
        )
    if report.failed:
        raise CommandFailed(f"{len(report.failed)} stack(s) with request failures", 1, done)
    return done


@speaks_flags
def run(
    prepared: PathLike | None = None,
    *,
    model: str,
    out: PathLike,
    task: str = DEFAULT_TASK,
    stack: StackChoice | None = None,
    backend: BackendOptions | None = None,
    costing: Costing | None = None,
    sending: Sending | None = None,
    say: Say = quiet,
    progress: Progress | None = None,
    **keywords: object,
) -> Done:
    """A model over a task's items under one stack, resumable, then scored, as `avstack run` does:
    planned first with the same records it sends with wherever the provider has limits (or with
    `costing.dry_run`, which stops there). The stack is a StackChoice, the rest as for `ablate`:
    records, or their fields by keyword as the flags name them (`variant="video"`, `drop=[...]`,
    `fps=1`, `pack=True`), and the task's own options by keyword.
    Raises CommandFailed (code 1) when items got no answer; everything is written first."""
    from avstack.runs.sending.engine import Asking
    from avstack.runs.sending.runners import make_backend
    from avstack.tasks import RunJob

    out = Path(out)
    choice = fold(StackChoice, keywords, stack)
    backend, costing, sending = _sending(keywords, backend, costing, sending)
    chosen, inputs = chosen_task(task, keywords)
    refuse_unhonoured(model, chosen.baselines, backend)  # before anything is planned or sent
    where = Path(prepared) if prepared is not None else None
    plannable = chosen.ablation is not None and chosen.run_stack is not None
    if costing.dry_run and not plannable:
        raise UsageError(f"--dry-run plans a task's requests; --task {task} has none to plan")
    budget_usd, made = None, None
    if plannable and (costing.dry_run or costing.fit_limits or has_limits(model, costing.providers)):
        made = backend_or_none(model, chosen.baselines, backend)  # made once: the plan counts with it, the run asks it
        choice, plan = _plan_run(chosen, where, inputs, choice, model, out, made, backend.max_tokens, costing, say)
        if costing.dry_run:
            return Done(plan_summary(plan, out), out / "plan.json", plan=plan)
        budget_usd = bill(plan, out, costing, say)
    settings = sending.settings(budget_usd)
    if made is None:  # not planned, or the plan went without it: now its own error, naming what is missing
        made = make_backend(model, chosen.baselines, backend)
    job = RunJob(Asking(made, model, None, settings, progress), out, where, inputs, choice)
    outcome = chosen.run(job)
    done = Done(outcome.summary, out, outcome.notes, result=outcome.result)
    if outcome.failed:  # the notes say which and why
        raise CommandFailed(next(iter(outcome.notes), "items failed"), 1, done)
    return done


def _sending(
    keywords: dict[str, object], backend: BackendOptions | None, costing: Costing | None, sending: Sending | None
) -> tuple[BackendOptions, Costing, Sending]:
    """The records of how requests are sent, planned and billed, from the records given or their
    fields among the keywords (taken out of them)."""
    return fold(BackendOptions, keywords, backend), fold(Costing, keywords, costing), fold(Sending, keywords, sending)


def _plan_run(
    chosen: Any,
    prepared: Path | None,
    inputs: object,
    choice: Any,
    model: str,
    out: Path,
    made: object,
    max_tokens: int,
    costing: Costing,
    say: Say,
) -> tuple[object, Plan]:
    """The run's one stack planned from the records the run sends with (the task's inputs, the
    stack choice, the back-end it sends with, or None where it cannot be made before the run says
    why), within the provider's limits: (the choice, the plan)."""
    from avstack.runs.ablation.arms import plan_stacks

    target = chosen.ablation(prepared, inputs)
    counting = counting_for(made, costing)

    def replan(budgets: tuple[object, ...]) -> Plan:
        stack = chosen.run_stack(replace(choice, budget=budgets[0]), inputs)
        return plan_stacks(target, [stack], model, out, counting, max_tokens, costing.prices)

    plan, (budget,) = within_limits(replan, (choice.budget,), costing.fit_limits, out, say)
    return replace(choice, budget=budget), plan


__all__ = ["DEFAULTS", "ablate", "run"]
