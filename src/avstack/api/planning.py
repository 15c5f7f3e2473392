"""Before anything is sent: how the plan counts (the back-end's own count where it can give one),
whether the provider's limits hold (or the frame budget that fits), and the bill against
--max-cost, which becomes the budget the run stops at."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from avstack.api.options import BackendOptions, Costing
from avstack.errors import UsageError
from avstack.runs.planning.plan_record import Plan

Say = Callable[[str], None]


def quiet(_: str) -> None:
    """What a library call says by default: nothing (the CLI passes typer.echo)."""


def backend_or_none(model: str, baselines: Any, backend: BackendOptions) -> Any:
    """The back-end, or None where it cannot be made here (a missing key or extra): planning needs
    none, and the run itself says why when it starts."""
    from avstack.runs.sending.runners import make_backend

    try:
        return make_backend(model, baselines, backend)
    except (ValueError, ImportError):
        return None


def counting_for(made: object, costing: Costing, **more: object) -> Any:
    """How the plan counts: the image rule, and the server's own text count and body where the
    back-end `made` (None: none could be made) can give them."""
    from avstack.runs.planning.plan import Counting

    return Counting.of(made, costing.image_rule, costing.detail, providers_file=costing.providers, **more)


def has_limits(model: str, providers: Path | None) -> bool:
    """Does the providers file know a limit of this model's family (OpenAI's, Claude's, Gemini's)?"""
    from avstack.runs.planning.providers import family_of

    found = family_of(model, None, providers)
    return found is not None and any(v is not None for v in vars(found.limits).values())


def within_limits(
    replan: Callable[[tuple[object, ...]], Plan], budgets: tuple[Any, ...], fit: bool, out: Path, say: Say
) -> tuple[Plan, tuple[object, ...]]:
    """(plan, budgets) once every stack is within its provider's limits: the plan refuses a stack
    over one (naming the limit, the item and the budget that fits) or, with `fit`, plans again
    with the budgets lowered and records the change in plan.json."""
    from avstack.prompting.stacks import parse_stack_name
    from avstack.runs.planning.plan import write_plan
    from avstack.runs.planning.provider_limits import refuse_or_fit

    def budget_of(stack: str) -> Any:
        try:
            return parse_stack_name(stack).budget
        except ValueError:  # a task's own condition (EgoGap's): no frame budget
            return None

    plan = replan(budgets)
    lowered = refuse_or_fit(plan.limits, budgets, budget_of, fit)
    if not lowered:
        return plan, budgets
    budgets = tuple(lowered.get(b, b) for b in budgets)
    plan = replan(budgets)
    refuse_or_fit(plan.limits, budgets, budget_of, False)  # still over: no lower budget mends it
    fitted = {old.label or "every frame": new.label for old, new in lowered.items()}
    limits = dict(plan.limits or {})
    plan = plan.with_limits(limits | {"fitted": fitted})
    write_plan(plan, out)
    said = ", ".join(f"{a} -> {b}" for a, b in fitted.items())
    say(f"--fit-limits: frame budget lowered to fit {limits.get('family')}'s limits: {said}")
    return plan, budgets


def bill(plan: Plan, out: Path, costing: Costing, say: Say) -> object:
    """Say the plan; refuse to start above --max-cost; the Budget that stops the run once the
    servers' reported usage reaches it (None: no limit)."""
    from avstack.runs.planning.cost import Budget, Price
    from avstack.runs.planning.plan import plan_table

    if costing.max_cost is None:
        return None
    say(plan_table(plan))
    usd = plan.total.usd_at_most
    if usd is None or plan.price_usd_per_1m is None:
        raise UsageError(
            f"--max-cost: the price of {plan.model} is not known (not in the price table); pass --prices FILE"
        )
    if usd["online"] > costing.max_cost:
        raise UsageError(
            f"--max-cost {costing.max_cost:g} USD: the plan may cost up to {usd['online']:.2f} USD; nothing was sent"
        )
    return Budget(costing.max_cost, Price(**plan.price_usd_per_1m))


def plan_summary(plan: Plan, out: Path) -> str:
    """What a dry run prints after the plan."""
    from avstack.runs.planning.plan import plan_table

    return f"{plan_table(plan)}\nplan: {out / 'plan.json'} (nothing was sent)"
