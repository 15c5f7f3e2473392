"""What every model back-end is: a request in, answer text out; and the defaults they share."""

from __future__ import annotations

import hashlib
import random
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from importlib import import_module
from typing import Any

from avstack.errors import MissingPackage
from avstack.options import MODEL, SEND, given, option
from avstack.options import flag_of as declared_flag
from avstack.prompting.messages import Request

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})  # HTTP codes worth retrying
FATAL_STATUS = frozenset({401, 403, 404})  # bad key, no access, unknown model or wrong URL: stop the run

# The one place back-end defaults live (CLI options, ablate and the constructors read them).
DEFAULTS: dict[str, object] = {"temperature": 0.0, "max_tokens": 2048, "timeout": 120.0, "json_mode": True}


@dataclass(frozen=True)
class BackendOptions:
    """How every request of a command is sent, one record whatever the back-end (the answer key
    holds the temperature, the longest answer and the JSON mode)."""

    base_url: str | None = option(None, "OpenAI-compatible server (or OPENAI_BASE_URL)", panel=MODEL)
    temperature: float = option(
        DEFAULTS["temperature"], "Sampling temperature (recorded, part of the answer key)", panel=MODEL
    )
    max_tokens: int = option(
        DEFAULTS["max_tokens"], "Longest answer in tokens (recorded, part of the answer key)", panel=MODEL
    )
    json_mode: bool = option(
        DEFAULTS["json_mode"],
        "Ask for a JSON answer (response_format json_object, Gemini's JSON MIME type); off to send the request as a "
        "harness without it does (recorded, part of the answer key)",
        panel=MODEL,
        switch=True,
    )
    audio_as: str = option(
        "input_audio",
        "OpenAI-compatible servers: how a sound is sent: input_audio (OpenAI, vLLM) or audio_url (vLLM)",
        panel=MODEL,
    )
    audio_format: str = option(
        "auto",
        "OpenAI-compatible servers: a sound's WAV samples: auto (as prepared, IEEE float32, where the server decodes "
        "it: llama.cpp, vLLM; else 16-bit PCM), prepared or pcm16",
        panel=MODEL,
    )
    timeout: float = option(DEFAULTS["timeout"], "Seconds per request", panel=SEND)

    def given(self) -> list[str]:
        """The options set away from their defaults: what the user gave (a default is not given)."""
        return given(self)


def flag_of(name: str) -> str:
    """A BackendOptions field as the flag that sets it."""
    return declared_flag(BackendOptions, name)


@dataclass
class Answer:
    text: str
    usage: dict[str, object] = field(default_factory=dict)


class TransientError(RuntimeError):
    """Worth retrying (429, 5xx, timeout, dropped connection); may carry Retry-After seconds."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


def retry_after_s(value: str | None) -> float | None:
    """A `retry-after` header's seconds (None when absent or not a number of seconds)."""
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None


class FatalError(RuntimeError):
    """Wrong for every request of the run (bad key, unknown model, wrong URL): the run stops and
    nothing is recorded as an answer, so a rerun asks again."""


def status_failure(
    status: int,
    said: str,
    where: str,
    retry_after: float | None = None,
    retry: frozenset[int] = RETRY_STATUS,
    final_note: str = "",
) -> Exception:
    """An HTTP error status in the run engine's terms, the same for every back-end: worth retrying
    (429, 5xx), wrong for the whole run (401, 403, 404: said with the server it came from, since a
    wrong URL is the usual cause), or final for this item (400, 413: what the server said kept, with
    `final_note`, what the back-end knows of why)."""
    if status in retry:
        return TransientError(said, retry_after)
    if status in FATAL_STATUS:
        return FatalError(f"{said} (from {where})")
    return RuntimeError(said + final_note)


class Backend(ABC):
    """What every back-end is (inspect_ai's ModelAPI): one abstract method, `answer`, and every
    other capability a method with a default that a back-end overrides where it differs. The
    engine, the plan and the batch path call these methods; none probes a back-end for what it
    has. Back-ends are registered in one place (runs.sending.runners.MODEL_CLASSES; a task's offline
    baselines in its Task) and made from BackendOptions whole (runs.sending.runners.make_backend)."""

    name = "backend"

    @abstractmethod
    def answer(self, request: Request, truth: dict[str, object] | None = None) -> Answer:
        """Answer one request. `truth` is the item's ground truth; only an oracle may read it."""

    def __repr__(self) -> str:  # the model and where it is served; never the key
        said = [f"model={getattr(self, 'model', None)!r}"]
        if getattr(self, "base_url", None):
            said.append(f"base_url={self.base_url!r}")  # type: ignore[attr-defined]
        return f"{type(self).__name__}({', '.join(said)})"

    def refuses(self, request: Request) -> str | None:
        """Why this back-end cannot take the request at all (a part its API or model does not
        take), asked before anything is sent; None: it takes it. It never drops a part."""
        return None

    # the attributes the run records about this back-end, in this order (never a key)
    recorded: tuple[str, ...] = ()

    def settings(self) -> dict[str, object]:
        """What the run records about this back-end (never a key): its `recorded` attributes."""
        return {name: getattr(self, name) for name in self.recorded}

    def close(self) -> None:
        """Release what the run held (uploads, connections)."""
        return None

    def secrets(self) -> list[str]:
        """Values that must never be stored or printed (the key it was given)."""
        return []

    def batch_client(self) -> Any:
        """The provider's batch API (runs.batch), or None: this back-end has no batch mode."""
        return None

    def body(self, request: Request) -> dict[str, object] | None:
        """The body this back-end sends for a request, where it can tell (the plan digests it, so a
        run's bodies can be held to the plan); None: it cannot."""
        return None

    def count_text_tokens(self, request: Request) -> int | None:
        """The request's text tokens as the server counts them, or None where it cannot say."""
        return None

    def counts_text_by(self) -> str | None:
        """How the server counts text (its tokenizer endpoint), or None: it does not."""
        return None

    def server_kind(self) -> str | None:
        """The kind of server behind the back-end (llama.cpp, vLLM, ...), where it can tell."""
        return None

    def merges_adjacent_images(self) -> bool:
        """Whether the server takes two touching pictures as one."""
        return False

    def without_prompt_cache(self) -> Backend:
        """This back-end asking past the server's prompt cache (the A/A arm); itself where it has
        no such cache to pass."""
        return self


def parts_of(request: Request) -> set[str]:
    """The kinds of part a request carries: text, image, video, audio."""
    return {type(p).__name__.lower() for p in request.parts}


def refusal(backend: Backend, request: Request) -> str | None:
    """Why `backend` cannot take `request` at all, asked before anything is sent (Backend.refuses)."""
    return backend.refuses(request)


def seeded_rng(request: Request, seed: int | str) -> random.Random:
    """A random stream for an offline baseline, fixed by the seed and the item (its clip id)."""
    key = f"{seed}:{request.meta.get('clip_id', request.system)}"
    return random.Random(int(hashlib.sha256(key.encode()).hexdigest()[:16], 16))


def sdk(backend: str, extra: str, *modules: str) -> tuple[Any, ...]:
    """The optional packages a back-end needs, imported when it is made (never at import time):
    MissingExtra names the first and the extra that installs them."""
    try:
        return tuple(import_module(m) for m in modules)
    except ImportError:
        raise MissingExtra(backend, extra, modules[0]) from None


class MissingExtra(MissingPackage):
    def __init__(self, backend: str, extra: str, module: str):
        super().__init__(f"the {backend!r} back-end needs {module!r}: pip install 'avstack[{extra}]'")
