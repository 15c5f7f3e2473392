"""How a door call fails: `CommandFailed` (it ran, and items or arms failed after everything was
written: exit 1) and `speaks_flags`, which every door function wears so that what the core raises
reaches the caller as an AvstackError in the command line's words (the flags), whether the caller
is the CLI or a script; an OSError (a missing path, a read-only or full disk) is the user's to mend
too. Nothing else is translated: any other exception is a bug and keeps its traceback."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

from avstack.errors import AvstackError, InputError

F = TypeVar("F", bound=Callable[..., object])


class CommandFailed(AvstackError):
    """A command that ran and did not succeed: `code` is its exit status (1: items or arms failed,
    or the input departed from the plan, after everything was written), `done` what it wrote."""

    def __init__(self, message: str, code: int = 1, done: object = None) -> None:
        super().__init__(message)
        self.code, self.done = code, done


class RunRefused(AvstackError, RuntimeError):
    """The back-end refused every request (a bad key, an unknown model, a wrong URL): the run
    stopped, and nothing was recorded for what it refused."""


def speaks_flags(fn: F) -> F:
    """A door function whose failures are AvstackErrors worded as the command line's flags."""

    @functools.wraps(fn)
    def door_call(*args: object, **kwargs: object) -> object:
        try:
            return fn(*args, **kwargs)
        except AvstackError:
            raise
        except OSError as exc:  # a path, a disk or a folder of the user's (missing, read-only, full)
            raise InputError(str(exc)) from exc
        except RuntimeError as exc:
            from avstack.runs.sending.runners.base import FatalError  # imported only here: the door stays light

            if not isinstance(exc, FatalError):
                raise
            raise RunRefused(
                f"the back-end refused the run: {exc}; nothing was recorded for the clips it refused, so a rerun "
                "asks again"
            ) from None

    return door_call  # type: ignore[return-value]
