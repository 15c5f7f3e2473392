"""Each option declared once: its flag, default, help text and help panel stand beside its field
on the record it sets (PrepareSettings, a task's inputs, StackChoice, BackendOptions, Costing, the
ablation's spec, ...), as faster-whisper's TranscriptionOptions folds its keywords into one
record. The command line is built from these declarations (cli/declared.py) and the door's
errors name a field by its flag (`flag_of`), so adding an option is one line in one place.

A field declared with `option(...)` is a flag; one declared with `dataclasses.field` or a plain
default is a setting the command line does not offer. A field may be set by several flags (a
frame budget by --fps and --max-frames): `option(..., flags=(Flag(...), Flag(...)), parse=f)`,
where `f` takes the flags' values in order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from dataclasses import MISSING, dataclass
from typing import Any, TypeVar

from avstack.errors import UsageError

FLAGS = "avstack.flags"  # the field metadata key
R = TypeVar("R")


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: object = _Unset()  # a flag whose default is its field's


@dataclass(frozen=True)
class Flag:
    """One flag of the command line: what it is called, what it says in --help and where."""

    help: str
    panel: str = ""  # the --help panel it is listed in ("" for the command's own Options)
    name: str = ""  # the flag without "--" (default: the field's name, dashes for underscores)
    text: object = None  # what the flag reads where it is not the field's own type (a comma list: str)
    default_text: object = UNSET  # the flag's default where it is not the field's (in `text` terms)
    short: str = ""  # a one-letter alias ("-o")
    switch: str = ""  # a bool's pair of flags where both are offered ("--json-mode/--no-json-mode")
    many: bool = False  # repeatable: each use adds one value (--drop frame_ts --drop word_ts)

    def flag(self, field_name: str) -> str:
        return "--" + (self.name or field_name.replace("_", "-"))


def option(
    default: object = MISSING,
    help: str = "",
    *,
    panel: str = "",
    flags: Sequence[Flag] = (),
    parse: Callable[..., object] | None = None,
    default_factory: Any = MISSING,
    **flag: Any,
) -> Any:
    """A record field that is also a flag: `max_side: int | None = option(None, "Shrink frames to
    this longest side in px", panel=FRAMES)`. `parse` turns what the flag(s) read into the field's
    value (a comma list into a tuple); without it the flag's value is the field's."""
    declared = tuple(flags) or (Flag(help, panel, **flag),)
    meta = {FLAGS: Declared(declared, parse)}
    if default_factory is not MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


@dataclass(frozen=True)
class Declared:
    """A field's flags and how their values become the field's."""

    flags: tuple[Flag, ...]
    parse: Callable[..., Any] | None = None


def declared(record: Any) -> Iterator[tuple[dataclasses.Field[object], Declared]]:
    """The fields of a record (class or instance) that are flags, in their order."""
    for f in dataclasses.fields(record):
        said = f.metadata.get(FLAGS)
        if said is not None:
            yield f, said


def flag_default(f: dataclasses.Field[object], said: Declared, flag: Flag) -> object:
    """What a flag defaults to on the command line: its own default text, else None where the
    field takes its value from several flags or a repeated one (not given: the field's default),
    else the field's default."""
    if flag.default_text is not UNSET:
        return flag.default_text
    if flag.many or len(said.flags) > 1:
        return None
    return f.default_factory() if f.default_factory is not MISSING else f.default


def flag_of(record: object, field_name: str) -> str:
    """The flag(s) that set a record's field, for an error message ("--fps/--max-frames")."""
    for f, said in declared(record):
        if f.name == field_name:
            return "/".join(flag.flag(f.name) for flag in said.flags)
    return "--" + field_name.replace("_", "-")


def given(record: Any) -> list[str]:
    """The fields of a record set away from their declared defaults: what the user gave (a
    default is not given)."""
    out = []
    for f in dataclasses.fields(record):
        default = f.default_factory() if f.default_factory is not MISSING else f.default
        if default is not MISSING and getattr(record, f.name) != default:
            out.append(f.name)
    return out


# the topics flags are grouped by in --help (Typer's help panels)
TASK, STACKS, MODEL, SEND, PLAN, ROUNDS, OUTPUT = (
    "Task and its inputs",
    "Input stacks",
    "Model",
    "Sending",
    "Plan and cost",
    "Rounds and statistics",
    "Output",
)
FRAMES, ASR, STREAMS, WORK = "Frames", "Speech (ASR)", "Streams", "Workers"


def keyword_of(f: dataclasses.Field[object], flag: Flag) -> str:
    """The Python keyword a flag is given by: the flag's name with underscores ("--max-frames":
    max_frames; --pack, of the field `packed`: pack)."""
    return flag.flag(f.name)[2:].replace("-", "_")


def fold(record: type, keywords: dict[str, Any], base: Any = None) -> Any:
    """A record from the keywords that are its own, taken out of `keywords` (inspect_ai's
    GenerateConfig from eval()'s keywords): a field by its name (its value as is), or by its
    flags' keywords (what the flags read, through the field's `parse`). `base`: a record to start
    from. What is left in `keywords` belongs to another record."""
    values: dict[str, Any] = {}
    said_of = {f.name: said for f, said in declared(record)}
    for f in dataclasses.fields(record):
        said = said_of.get(f.name)
        names = _keywords(f, said) if said else []
        if not any(n in keywords for n in names):
            if f.name in keywords:
                values[f.name] = keywords.pop(f.name)  # the field itself, by its name
            continue
        given = [keywords.pop(n, None) for n in names]
        if said.parse is not None:  # type: ignore[union-attr]
            values[f.name] = said.parse(*given)  # type: ignore[union-attr]
        elif said.flags[0].many:  # type: ignore[union-attr]
            if given[0] is not None:  # a repeatable flag not given: the field's default
                values[f.name] = tuple(given[0])
        else:
            values[f.name] = given[0]
    if base is not None:
        return dataclasses.replace(base, **values)
    required = [f for f in dataclasses.fields(record) if _required(f) and f.name not in values]
    if required:
        raise UsageError(f"expected {', '.join(flag_of(record, f.name) for f in required)}; found none given")
    return record(**values)


def _required(f: dataclasses.Field[object]) -> bool:
    return f.init and f.default is MISSING and f.default_factory is MISSING


def _keywords(f: dataclasses.Field[Any], said: Declared) -> list[str]:
    return [keyword_of(f, flag) for flag in said.flags]


def fold_all(command: str, record: type[R], keywords: dict[str, object], base: R | None = None) -> R:
    """A command's one record from its keywords (`fold`), any keyword left over refused by name."""
    made: R = fold(record, keywords, base)
    refuse_unknown(command, keywords, record)
    return made


def same_as(record: type, name: str) -> Any:
    """A field declared as another record's field (its flag, default, help and panel): an option
    two commands share (EgoGap's --style) is declared once."""
    f = next(f for f in dataclasses.fields(record) if f.name == name)
    if f.default_factory is not MISSING:
        return dataclasses.field(default_factory=f.default_factory, metadata=f.metadata)
    return dataclasses.field(default=f.default, metadata=f.metadata)


def refuse_unknown(command: str, keywords: dict[str, object], *records: type) -> None:
    """Keywords no record of the call folded: an error naming them and what the call takes."""
    if keywords:
        takes = sorted({keyword_of(f, flag) for r in records for f, said in declared(r) for flag in said.flags})
        raise UsageError(f"{command} takes no {', '.join(sorted(keywords))}; it takes {', '.join(takes)}")
