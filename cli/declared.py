"""Commands built from the records' own declarations (avstack.options): each field declared with
`option(...)` on a record a command takes becomes that command's flag, with the field's default,
help and panel; the flags a user gives come back to the command as the records themselves.

    @app.command("run")
    @takes(HEAD, stack=door.StackChoice, backend=door.BackendOptions, ...)
    def run_cmd(**given): door.run(**given)     # given["stack"] is a StackChoice

`head` parameters (arguments, and a command's own options) are written as ordinary Typer
parameters; a group named `task_options` is every registered task's inputs (each field once), and
reaches the command flat, as keywords for the task the command chooses (which refuses, by flag,
those it does not declare).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable, Sequence
from typing import Annotated, Any

import typer
from rich.markup import escape

import avstack.api as door

TASK_OPTIONS = "task_options"


def _field_type(record: type, name: str) -> Any:
    return typing.get_type_hints(record, include_extras=True)[name]


def _many_of(kind: Any) -> Any:
    """A repeatable flag's type: list[X] for a field of tuple[X, ...] (or list[X])."""
    args = typing.get_args(kind)
    return list.__class_getitem__(args[0] if args else str)


def _params_of(record: type, group: str) -> list[tuple[inspect.Parameter, str]]:
    """The Typer parameters of a record's declared fields, each with the group it goes to; each
    is named as its flag's Python keyword (avstack.options.fold reads them so)."""
    made = []
    for f, said in door.declared(record):
        for flag in said.flags:
            kind = flag.text or _field_type(record, f.name)
            if flag.many:
                kind = _many_of(kind)
            default = door.flag_default(f, said, flag)
            if default is dataclasses.MISSING:  # a field without a default: a required flag
                default = inspect.Parameter.empty
            name = flag.flag(f.name)
            names = [f"{name}/--no-{name[2:]}" if flag.switch else name, *([flag.short] if flag.short else [])]
            # escaped: a help text says extras as pip does ('avstack[ray]'), which rich reads as markup
            opt = typer.Option(*names, help=escape(flag.help), rich_help_panel=flag.panel or None)
            param = inspect.Parameter(
                door.keyword_of(f, flag),
                inspect.Parameter.KEYWORD_ONLY,
                default=default,
                annotation=Annotated[kind, opt],
            )
            made.append((param, group))
    return made


def _task_params() -> list[tuple[inspect.Parameter, str]]:
    """Every registered task's own inputs, each field once (tasks that share a field's name share
    its declaration: tests/test_options.py holds them equal)."""
    seen, made = set(), []
    for record in door.task_input_records():
        for param, where in _params_of(record, TASK_OPTIONS):
            if param.name not in seen:
                seen.add(param.name)
                made.append((param, where))
    return made


def takes(head: Sequence[inspect.Parameter] = (), **records: type | None) -> Callable[[Callable[..., Any]], Any]:
    """The decorator that gives a command its flags: `head`, then each record's declared fields
    (`task_options=None`: every task's inputs). The command is called with the head's values and
    one record per group (the task options flat, for the chosen task to take, or refuse by flag
    where one is set away from its default). Two groups declaring one flag is a bug, said here."""
    built = [
        p
        for group, record in records.items()
        for p in (_task_params() if record is None else _params_of(record, group))
    ]
    kinds = {group: record for group, record in records.items() if record is not None}
    names = [p.name for p in head] + [p.name for p, _ in built]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise TypeError(f"a command declares these flags twice: {', '.join(twice)}")

    def decorate(command: Callable[..., Any]) -> Any:
        @functools.wraps(command)
        def parsed(**flags: Any) -> Any:
            values: dict[str, dict[str, Any]] = {group: {} for group in records}
            for param, group in built:
                values[group][param.name] = flags.pop(param.name)
            args = dict(flags)
            for group, given in values.items():
                if group == TASK_OPTIONS:
                    args.update(given)
                else:
                    args[group] = door.fold(kinds[group], given)
            return command(**args)

        ordered = sorted(head, key=lambda p: p.kind)
        params = [*ordered, *(p for p, _ in built)]
        parsed.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        return parsed

    return decorate


def argument(name: str, kind: Any, help: str, default: Any = inspect.Parameter.empty) -> inspect.Parameter:
    """A positional argument of a built command."""
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=Annotated[kind, typer.Argument(help=help)]
    )


def flag(name: str, kind: Any, *names: str, default: Any = inspect.Parameter.empty, **option: Any) -> inspect.Parameter:
    """A command's own option (not a record's) of a built command."""
    return inspect.Parameter(
        name,
        inspect.Parameter.KEYWORD_ONLY,
        default=default,
        annotation=Annotated[kind, typer.Option(*names, **option)],
    )
