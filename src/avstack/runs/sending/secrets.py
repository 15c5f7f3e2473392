"""Secrets never reach a file, a cache, a log or the console, whatever a server sends back.

Every string that comes out of a back-end (answer text, usage, error messages) goes through
`Scrubber.scrub` before anything stores, parses or prints it; so does every error line the
command line prints. A secret is any value of an environment variable whose name says it is
one (…_API_KEY, …_TOKEN, …_SECRET, …_PASSWORD, …_KEY), and any key handed to a back-end.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Any

MASK = "***"
_SECRET_NAME = re.compile(r"(API_KEY|TOKEN|SECRET|PASSWORD|_KEY|APIKEY)$", re.I)
MIN_LEN = 6  # shorter values would mask ordinary words


def env_secrets(environ: dict[str, str] | None = None) -> list[str]:
    env = os.environ if environ is None else environ
    return [v for k, v in env.items() if _SECRET_NAME.search(k) and len(v) >= MIN_LEN]


class Scrubber:
    """Replaces every known secret (longest first) in strings, recursively in JSON-like values."""

    def __init__(self, extra: Iterable[str | None] = ()):
        values = {v for v in [*env_secrets(), *extra] if v and len(v) >= MIN_LEN}
        self.values = sorted(values, key=len, reverse=True)

    def scrub(self, value: object) -> Any:
        if isinstance(value, str):
            for secret in self.values:
                if secret in value:
                    value = value.replace(secret, MASK)
            return value
        if isinstance(value, dict):
            return {self.scrub(k): self.scrub(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(self.scrub(v) for v in value)
        return value


def scrub(value: Any, extra: Iterable[str | None] = ()) -> object:
    """`value` with the environment's secrets (and `extra`) masked."""
    return Scrubber(extra).scrub(value)
