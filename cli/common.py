"""What every command shares: the Typer apps, progress bars, the options shared by several
commands, and the one mapping of errors to exit codes: the door's error root (AvstackError) ends a
command in one line naming what was expected and what was found; anything else is a bug and keeps
its traceback. cli/ imports nothing of avstack but the door (avstack.api)."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any, NoReturn, TypeVar

import typer

import avstack.api as door

app = typer.Typer(no_args_is_help=True, add_completion=False, help="Egocentric clips -> model inputs -> scores.")


ecog_app = typer.Typer(no_args_is_help=True, help="EcoG-Bench helpers.")


app.add_typer(ecog_app, name="ecog")


egogap_app = typer.Typer(no_args_is_help=True, help="EgoGapBench helpers: prompts, export.")


app.add_typer(egogap_app, name="egogap")


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"avstack {door.__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Egocentric clips -> model inputs -> scores."""


T = TypeVar("T")


LONG_ASR_S = 60.0  # a clip whose ASR gets a progress line of its own


def progress(items: Iterable[T], total: int, label: str = "clips") -> Iterable[T]:
    """A progress bar on stderr (quiet when stderr is not a terminal); for clip records it also
    counts the failed and the cached ones."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

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

        with door.asr_progress(heard):
            for item in items:
                yield item
                if asr:
                    bar.remove_task(asr.pop())
                failed += int(bool(getattr(item, "error", None)))
                cached += int(bool(getattr(item, "cache_hit", False)))
                note = f" ({failed} failed, {cached} cached)" if hasattr(item, "cache_hit") else ""
                bar.update(task, advance=1, description=label + note)


def fail(message: str, code: int = 2) -> NoReturn:
    typer.echo(f"error: {door.scrub(message)}", err=True)
    raise typer.Exit(code)


# the topics options are grouped by in --help (declared once, beside the records' fields)
MODEL, PLAN, TASK = door.MODEL, door.PLAN, door.TASK

prompts_app = typer.Typer(no_args_is_help=True, help="Prompt templates: check a folder of your own.")


app.add_typer(prompts_app, name="prompts")


def print_done(done: Any) -> None:
    """What a command did: its summary, then its notes and any arm whose input departed (stderr)."""
    if done.summary:
        typer.echo(done.summary)
    for note in done.notes:
        typer.echo(note, err=True)
    for arm, said in done.departed.items():
        typer.echo(f"{arm}: input departs from the plan: {said}", err=True)


@contextmanager
def ended() -> Iterator[None]:
    """A library call's ending as a command's: the door's errors (AvstackError) end in one line
    and exit with their code; a command that ran and failed (CommandFailed) shows what it wrote
    first, naming the stacks whose requests failed and the command that asks only those again.
    Ctrl-C: 130. Any other exception is a bug: its traceback is kept."""
    import shlex

    try:
        yield
    except door.CommandFailed as exc:
        if exc.done is None:
            fail(str(exc), exc.code)
        print_done(exc.done)
        for stack, f in exc.done.failed.items():
            causes = "; ".join(f"{n}x {c}" for c, n in f["causes"].items())
            typer.echo(f"{stack}: {f['request_failures']} of {f['clips']} requests failed: {causes}", err=True)
        if exc.done.failed:
            again = [a for a in sys.argv[1:] if a != "--retry-failed"]
            command = " ".join(shlex.quote(a) for a in ["avstack", *again, "--retry-failed"])
            fail(f"{exc}; ask only those items again: {command}", exc.code)
        if str(exc) not in exc.done.notes:
            fail(str(exc), exc.code)
        raise typer.Exit(exc.code) from None
    except door.AvstackError as exc:
        fail(str(exc), exc.code)
    except KeyboardInterrupt:
        fail("interrupted; what was finished is kept and a rerun goes on from there", 130)
