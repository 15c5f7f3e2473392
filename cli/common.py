"""What every command shares: the Typer apps, progress bars, and errors a user can cause ending in
one line naming what was expected and what was found (never a traceback)."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer

app = typer.Typer(no_args_is_help=True, add_completion=False, help="Egocentric clips -> model inputs -> scores.")


ecog_app = typer.Typer(no_args_is_help=True, help="EcoG-Bench helpers.")


app.add_typer(ecog_app, name="ecog")


egogap_app = typer.Typer(no_args_is_help=True, help="EgoGapBench helpers: prompts, export.")


app.add_typer(egogap_app, name="egogap")


def _print_version(value: bool) -> None:
    if value:
        from avstack.version import __version__

        typer.echo(f"avstack {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Egocentric clips -> model inputs -> scores."""


T = TypeVar("T")


ALIGN_HELP = (
    "What times the words: auto (= acoustic: phone HMMs for English and Mandarin, else self), self, none, "
    "or a model name"
)


QUESTIONS_HELP = "videoqa: the questions file (JSONL/CSV; Charades-STA .txt, QVHighlights .jsonl, Video-MME table)"


QFORMAT_HELP = "videoqa: auto, generic, charades, qvhighlights or videomme"


DROP_HELP = "Anchor to drop: frame_ts, word_ts, asr, frames (repeatable)"


LONG_ASR_S = 60.0  # a clip whose ASR gets a progress line of its own


def progress(items: Iterable[T], total: int, label: str = "clips") -> Iterable[T]:
    """A progress bar on stderr (quiet when stderr is not a terminal); for clip records it also
    counts the failed and the cached ones."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from avstack.asr.progress import asr_progress

    cols = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    failed = cached = 0
    with Progress(*cols, transient=False, disable=not sys.stderr.isatty()) as bar:
        task = bar.add_task(label, total=total)
        asr: list[Any] = []  # the line of a long clip's ASR, while one is being transcribed

        def heard(done_s: float, total_s: float) -> None:
            # a clip of a minute or more: its ASR advances on a line of its own, seconds of audio
            if total_s < LONG_ASR_S:
                return
            if not asr:
                asr.append(bar.add_task("  ASR of a long clip (s of audio)", total=round(total_s)))
            bar.update(asr[0], completed=round(done_s), total=round(total_s))

        with asr_progress(heard):
            for item in items:
                yield item
                if asr:
                    bar.remove_task(asr.pop())
                failed += int(bool(getattr(item, "error", None)))
                cached += int(bool(getattr(item, "cache_hit", False)))
                note = f" ({failed} failed, {cached} cached)" if hasattr(item, "cache_hit") else ""
                bar.update(task, advance=1, description=label + note)


def fail(message: str, code: int = 2) -> NoReturn:
    from avstack.runs.secrets import scrub

    typer.echo(f"error: {scrub(message)}", err=True)
    raise typer.Exit(code)


@contextmanager
def user_errors() -> Iterator[None]:
    """Errors from bad input, options, back-ends or the disk: one line, exit 2 (Ctrl-C: 130)."""
    from avstack.runs.ablation import UnsupportedOption
    from avstack.runs.cost import BudgetReached
    from avstack.runs.engine import NoBatchMode
    from avstack.runs.runners import FatalError

    def flags(names: Sequence[str]) -> str:
        said = {"frame_budget": "fps/--max-frames"}  # one option, two flags
        return ", ".join("--" + said.get(n, n.replace("_", "-")) for n in names) or "none of them"

    try:
        yield
    except UnsupportedOption as exc:
        fail(f"--task {exc.task} cannot honour {flags(exc.options)}: it takes {flags(exc.honours)}")
    except BudgetReached as exc:
        fail(
            f"--max-cost {exc.limit_usd:g} USD reached: the servers reported {exc.spent_usd:.4f} USD of usage; "
            f"the answers so far are kept in {exc.out}, and a rerun with a higher --max-cost goes on from there"
        )
    except NoBatchMode as exc:
        fail(f"--batch: {exc}")
    except FatalError as exc:
        fail(
            f"the back-end refused the run: {exc}; nothing was recorded for the clips it refused, so a rerun asks again"
        )
    except (ValueError, ImportError, OSError, KeyError) as exc:  # DataError and OutputError are among these
        fail(str(exc) if not isinstance(exc, KeyError) else f"missing field {exc}")
    except KeyboardInterrupt:
        fail("interrupted; what was finished is kept and a rerun goes on from there", 130)


def backend_options(
    base_url: str | None,
    temperature: float,
    max_tokens: int,
    timeout: float,
    audio_as: str = "input_audio",
    json_mode: bool = True,
) -> dict[str, Any]:
    opts: dict[str, Any] = {"temperature": temperature, "max_tokens": max_tokens, "timeout": timeout}
    if not json_mode:
        opts["json_mode"] = False
    if base_url:
        opts["base_url"] = base_url
    if audio_as != "input_audio":
        opts["audio_as"] = audio_as
    return opts


def counting_for(
    model: str, baselines: Any, options: dict[str, Any], image_rule: str | None, detail: str = "high", **more: Any
) -> Any:
    """How the plan counts: the image rule, and the server's own text count where the back-end
    can ask one. Planning needs no key: a back-end that cannot be made here (a missing key or
    extra) leaves the plan to its own estimate; the run itself says why when it starts."""
    from avstack.runs.plan import Counting
    from avstack.runs.runners import make_backend

    try:
        backend = make_backend(model, baselines, **options)
    except (ValueError, ImportError):
        backend = None
    return Counting.of(backend, image_rule, detail, **more)


def defaults() -> dict[str, Any]:
    from avstack.runs.runners import DEFAULTS

    return DEFAULTS


# options `run` and `ablate` share, declared once
BatchOption = Annotated[
    bool, typer.Option("--batch", help="Send through the provider's batch API (about half the price; resumable)")
]
BatchPollOption = Annotated[float, typer.Option(help="--batch: seconds between polls")]
TemperatureOption = Annotated[float, typer.Option(help="Sampling temperature (recorded, part of the answer key)")]
MaxTokensOption = Annotated[int, typer.Option(help="Longest answer in tokens (recorded, part of the answer key)")]
JsonModeOption = Annotated[
    bool,
    typer.Option(
        "--json-mode/--no-json-mode",
        help="Ask for a JSON answer (response_format json_object, Gemini's JSON MIME type); off to send the "
        "request as a harness without it does (recorded, part of the answer key)",
    ),
]
FpsOption = Annotated[
    str | None,
    typer.Option(
        "--fps",
        help="Frame budget at stack time: at most this many frames a second, picked from the prepared ones "
        "uniformly in time, each at its true pts (ablate: a comma list is an axis)",
    ),
]
MaxFramesOption = Annotated[
    str | None,
    typer.Option(
        "--max-frames",
        help="Frame budget at stack time: at most this many frames, spread evenly in time over the prepared "
        "ones, first and last kept (ablate: a comma list such as 8,32,128 is an axis)",
    ),
]


def frame_budgets(fps: str | None, max_frames: str | None, one: bool = False) -> tuple[Any, ...]:
    """--fps and --max-frames as frame budgets: every pair of the two comma lists (one, for a run)."""
    from avstack.prompting.budget import FrameBudget

    def values(text: str | None, kind: Any, flag: str) -> list[Any]:
        if text is None:
            return [None]
        try:
            return [kind(v) for v in text.split(",") if v.strip()] or [None]
        except ValueError:
            fail(f"{flag}: expected {'numbers' if kind is float else 'whole numbers'} (a comma list), found {text!r}")

    rates, counts = values(fps, float, "--fps"), values(max_frames, int, "--max-frames")
    if one and len(rates) * len(counts) > 1:
        fail("--fps, --max-frames: one value each for one stack (ablate compares several)")
    try:
        return tuple(dict.fromkeys(FrameBudget(r, n) for r in rates for n in counts))
    except ValueError as exc:
        fail(str(exc))


FitLimitsOption = Annotated[
    bool,
    typer.Option(
        "--fit-limits",
        help="Where a stack would go over the provider's limits (images, bytes, pixels, context), lower its "
        "frame budget to the largest that fits, and record it (else the plan refuses it, naming the limit)",
    ),
]


def packs_of(text: str) -> tuple[bool, ...]:
    """--pack off | on | off,on as the ablation's packing axis."""
    said = {"off": False, "on": True}
    values = [v.strip() for v in text.split(",") if v.strip()]
    bad = [v for v in values if v not in said]
    if bad or not values:
        fail(f"--pack: expected off, on or off,on; found {text!r}")
    return tuple(dict.fromkeys(said[v] for v in values))


def has_limits(model: str, providers: Path | None) -> bool:
    """Does the providers file know a limit of this model's family (OpenAI's, Claude's, Gemini's)?"""
    from avstack.runs.providers import family_of

    found = family_of(model, None, providers)
    return found is not None and any(v is not None for v in vars(found.limits).values())


def within_limits(plan: dict[str, Any], budgets: tuple[Any, ...], fit: bool, replan: Any, out: Path) -> Any:
    """(plan, budgets) once every stack is within its provider's limits: the plan refuses a stack
    over one (naming the limit, the item and the budget that fits) or, with `fit`, plans again
    with the budgets lowered and records the change in plan.json."""
    from avstack.prompting.stacks import parse_stack_name
    from avstack.runs.limits import refuse_or_fit
    from avstack.runs.plan import write_plan

    def budget_of(stack: str) -> Any:
        try:
            return parse_stack_name(stack).budget
        except ValueError:  # a task's own condition (EgoGap's): no frame budget
            return None

    lowered = refuse_or_fit(plan.get("limits"), budgets, budget_of, fit)
    if not lowered:
        return plan, budgets
    budgets = tuple(lowered.get(b, b) for b in budgets)
    plan = replan(budgets)
    refuse_or_fit(plan.get("limits"), budgets, budget_of, False)  # still over: no lower budget mends it
    fitted = {old.label or "every frame": new.label for old, new in lowered.items()}
    plan["limits"]["fitted"] = fitted
    write_plan(plan, out)
    said = ", ".join(f"{a} -> {b}" for a, b in fitted.items())
    typer.echo(f"--fit-limits: frame budget lowered to fit {plan['limits']['family']}'s limits: {said}")
    return plan, budgets


ProvidersOption = Annotated[
    Path | None,
    typer.Option(
        help="A providers file of your own (JSON, as runs/providers.json): each model family's prompt-cache "
        "rule and request limits (images, bytes, pixels, audio seconds, context tokens)"
    ),
]
ImageRuleOption = Annotated[
    str | None,
    typer.Option(
        help="The image-token rule the plan counts by (default: by the model's name): openai-tiles, "
        "openai-patches, gemini, qwen2-vl, qwen2-vl-llama.cpp, qwen3-vl, internvl, llava-onevision, gemma3, claude"
    ),
]


def print_outcome(outcome: Any) -> None:
    typer.echo(outcome.summary)
    for note in outcome.notes:
        typer.echo(note, err=True)


AUDIO_AS_HELP = "OpenAI-compatible servers: how a sound is sent: input_audio (OpenAI, vLLM) or audio_url (vLLM)"
TS_HELP = "How frame times are told: ms, seconds, mmss, qwen, index, overlay"


WORDS_HELP = "How word times are told: json, srt, inline"


LAYOUT_HELP = (
    "Where what a clip's stacks share goes: benchmark (its own order) or shared-first (the frames with "
    "their tags before the instruction and the ASR block, so a provider's prompt cache serves them)"
)


PROMPT_HELP = "A folder of prompt templates (system.j2, user.j2; see README); default: the shipped ones"


prompts_app = typer.Typer(no_args_is_help=True, help="Prompt templates: check a folder of your own.")


app.add_typer(prompts_app, name="prompts")


def bill_first(plan: dict[str, Any], out: Path, dry_run: bool, max_cost: float | None) -> Any:
    """Print the plan; end the command there for --dry-run; refuse to start above --max-cost;
    the Budget that stops the run once the servers' reported usage reaches it (None: no limit)."""
    from avstack.runs.cost import Budget, Price
    from avstack.runs.plan import plan_table

    typer.echo(plan_table(plan))
    if dry_run:
        typer.echo(f"plan: {out / 'plan.json'} (nothing was sent)")
        raise typer.Exit()
    if max_cost is None:
        return None
    usd = plan["total"]["usd_at_most"]
    if usd is None:
        fail(f"--max-cost: the price of {plan['model']} is not known (not in the price table); pass --prices FILE")
    if usd["online"] > max_cost:
        fail(f"--max-cost {max_cost:g} USD: the plan may cost up to {usd['online']:.2f} USD; nothing was sent")
    return Budget(max_cost, Price(**plan["price_usd_per_1m"]))
