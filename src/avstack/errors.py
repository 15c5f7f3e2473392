"""The one error root meant for the user (inspect_ai's PrerequisiteError): every error avstack
raises for something a user can mend (an option, an input file, a missing extra, a refusal, a
budget) is an `AvstackError`, whose message says what was expected and what was found and names
the item, and whose `code` is the exit status the CLI ends with. The CLI maps this root, and only
it, to an exit code; any other exception is a bug and keeps its traceback.

The subclasses keep the builtin they used to be (ValueError, OSError, ImportError, RuntimeError),
so a caller's `except ValueError` still catches a bad option.
"""

from __future__ import annotations


class AvstackError(Exception):
    """Something the user can mend; `code` is the CLI's exit status (2: refused before or while
    reading; 1: ran, and items or arms failed after everything was written; 130: interrupted)."""

    code: int = 2


class UsageError(AvstackError, ValueError):
    """An option, or a combination of options, that cannot be honoured: names the flag, what it
    takes and what was given."""


class InputError(AvstackError, OSError):
    """A path the user named that cannot be read (missing, a folder where a file was expected, no
    permission): names the path and the OS's reason."""


class MissingPackage(AvstackError, ImportError):
    """An optional dependency the chosen path needs: names the extra that installs it."""


class MissingTool(AvstackError, RuntimeError):
    """A program or library outside Python that the chosen path needs (ffmpeg, eSpeak NG): names
    how to install it."""
