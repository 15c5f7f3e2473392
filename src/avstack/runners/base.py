"""What every model back-end is: a request in, answer text out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from ..messages import Request

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})  # HTTP codes worth retrying


@dataclass
class Answer:
    text: str
    usage: dict[str, Any] = field(default_factory=dict)


class TransientError(RuntimeError):
    """Worth retrying (429, 5xx, timeout, dropped connection); may carry Retry-After seconds."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class Backend(Protocol):
    name: str

    def answer(self, request: Request, truth: dict[str, Any] | None = None) -> Answer:
        """Answer one request. `truth` is the clip's ground truth; only `oracle` may read it."""
        ...


class MissingExtra(ImportError):
    def __init__(self, backend: str, extra: str, module: str):
        super().__init__(f"the {backend!r} back-end needs {module!r}: pip install 'avstack[{extra}]'")
