"""Prompt templates as files (Jinja2): strict (an undefined variable is an error naming it and
the template line, never an empty string), hashed (a result names the prompt that made it), and
split into request parts at two markers the templates place: `{{ part }}` starts a new text
part, `{{ f.image }}` stands where a frame's image goes.
"""

from __future__ import annotations

import hashlib
import re
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from avstack.errors import UsageError

if TYPE_CHECKING:  # jinja2 is imported when a template is first rendered
    import jinja2

PART = "\x1e"  # starts a new text part
IMAGE = "\x1f{}\x1f"  # stands for the k-th image
_SPLIT = re.compile("\x1e|(\x1f\\d+\x1f)")
_CONTROL = str.maketrans("", "", "\x1e\x1f")


class PromptError(UsageError):
    """A template that cannot render: names the template, the line and what is wrong."""


def clean(value: object) -> object:
    """Strings from data never carry the part markers."""
    return value.translate(_CONTROL) if isinstance(value, str) else value


@dataclass(frozen=True)
class PromptSet:
    """The templates of one prompt folder (`system.j2`, `user.j2`, optionally in `en/`, `zh/`)."""

    folder: Path
    sha256: str

    def path(self, lang: str, name: str) -> Path:
        own = self.folder / lang / name
        return own if own.is_file() else self.folder / name

    def render(self, lang: str, name: str, variables: Mapping[str, object]) -> str:
        path = self.path(lang, name)
        if not path.is_file():
            raise PromptError(f"{self.folder}: no {name} (looked in {self.folder / lang} and {self.folder})")
        template = _environment(str(path.parent)).get_template(path.name)
        try:
            return template.render(variables)
        except Exception as exc:  # jinja2's UndefinedError, TypeError in a filter, ...
            raise PromptError(f"{path}:{_line_of(exc, path)}: {type(exc).__name__}: {exc}") from None


def _line_of(exc: BaseException, path: Path) -> str:
    lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if f.filename == str(path)]
    return str(lines[-1]) if lines else "?"


@lru_cache(maxsize=32)
def _environment(folder: str) -> jinja2.Environment:
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(folder),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
        autoescape=False,
    )


def folder_hash(folder: Path) -> str:
    """sha256 over every template file's relative path and bytes."""
    h = hashlib.sha256()
    for f in sorted(p for p in folder.rglob("*.j2") if p.is_file()):
        h.update(f.relative_to(folder).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def load_prompts(folder: str | Path) -> PromptSet:
    folder = Path(folder)
    if not folder.is_dir():
        raise PromptError(f"prompt folder {folder} does not exist")
    if not any(folder.rglob("*.j2")):
        raise PromptError(f"{folder}: no *.j2 templates (expected system.j2 and user.j2)")
    return PromptSet(folder.resolve(), folder_hash(folder))


def split_parts(rendered: str) -> list[str | int]:
    """Text parts (without the newline that ends a template line) and image indices, in order."""
    out: list[str | int] = []
    for token in _SPLIT.split(rendered):
        if token is None:
            continue
        if token.startswith("\x1f"):
            out.append(int(token.strip("\x1f")))
            continue
        text = token.strip("\n") if out and isinstance(out[-1], int) else token.rstrip("\n")
        if text:
            out.append(text)
    return out


def undeclared(folder: Path) -> dict[str, set[str]]:
    """Variables each template uses without setting them (for `prompts check`)."""
    import jinja2
    from jinja2 import meta

    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    return {
        f.relative_to(folder).as_posix(): meta.find_undeclared_variables(env.parse(f.read_text(encoding="utf-8")))
        for f in sorted(folder.rglob("*.j2"))
    }
