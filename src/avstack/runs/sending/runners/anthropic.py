"""Claude through Anthropic's Messages API (`anthropic:MODEL`), with the official `anthropic` client.

The system prompt goes at the top level, each frame as a base64 image block after its time tag
(avstack.prompting.messages.to_anthropic). The key comes from ANTHROPIC_API_KEY and is never
written anywhere; `--base-url` is the host as the SDK takes it (`https://api.anthropic.com`,
without `/v1`). The client's own retries are off: the run engine retries with Anthropic's
semantics: 429 (with its `retry-after`), 529 overloaded and other 5xx are worth another try; a
400 `invalid_request_error` or a 413 `request_too_large` is final, recorded with the limit the
server named (its message); 401, 403 and 404 stop the run. Claude takes no audio and no video:
`omni`, `video` and `video_asr` are refused before anything is sent.

`temperature` is sent where the installed SDK's request type has it. The SDK of late 2026
(anthropic 2.17) dropped it from `messages.create` (its `MessageCreateParams` has no such key):
there the body carries none, and `run.json` records `temperature: null` with the reason, rather
than a value that was never sent.
"""

from __future__ import annotations

import os
from typing import Any

from avstack.prompting.messages import Image, Request, Text, to_anthropic
from avstack.runs.sending.runners.base import (
    Answer,
    Backend,
    BackendOptions,
    FatalError,
    TransientError,
    parts_of,
    retry_after_s,
    sdk,
    status_failure,
)

RETRY = frozenset({408, 409, 429, 500, 502, 503, 504, 529})  # 529: Anthropic's "overloaded_error"
NOT_TAKEN = {"audio": "the clip's sound", "video": "the clip's video file"}


class Anthropic(Backend):
    name = "anthropic"
    recorded = ("model", "base_url", "temperature", "max_tokens")

    def __init__(self, model: str, options: BackendOptions = BackendOptions(), api_key: str | None = None):
        (self._sdk,) = sdk("anthropic", "anthropic", "anthropic")
        self.model = model
        self.base_url = (
            options.base_url or os.environ.get("ANTHROPIC_BASE_URL") or "https://api.anthropic.com"
        ).rstrip("/")
        if self.base_url.endswith("/v1"):  # the SDK adds /v1 itself: a URL with it would ask /v1/v1/messages
            self.base_url = self.base_url[: -len("/v1")]
        self._key = api_key if api_key is not None else os.environ.get("ANTHROPIC_API_KEY", "")
        self.max_tokens, self.timeout = options.max_tokens, options.timeout
        self.temperature: float | None = options.temperature if _takes("temperature") else None
        self._client: Any = None

    def settings(self) -> dict[str, object]:
        said = super().settings()
        if self.temperature is None:
            said["temperature_note"] = "not sent: the installed anthropic SDK's Messages API takes no temperature"
        return said

    def secrets(self) -> list[str]:
        return [self._key] if self._key else []

    def refuses(self, request: Request) -> str | None:
        stack = request.meta.get("stack", "this")
        for kind in sorted(parts_of(request) & set(NOT_TAKEN)):
            return (
                f"anthropic:{self.model} takes no {kind} input (Claude reads text and images); "
                f"the {stack} stack sends {NOT_TAKEN[kind]}"
            )
        return None

    def body(self, request: Request) -> dict[str, object]:
        """The Messages API's request body (what `messages.create` and a batch's `params` take)."""
        body: dict[str, object] = {"model": self.model, "max_tokens": self.max_tokens, **to_anthropic(request)}
        if self.temperature is not None:
            body["temperature"] = self.temperature
        return body

    def _make_client(self) -> object:
        if not self._key:
            raise FatalError("anthropic: no API key (set ANTHROPIC_API_KEY)")
        return self._sdk.Anthropic(api_key=self._key, base_url=self.base_url, max_retries=0, timeout=self.timeout)

    def answer(self, request: Request, truth: dict[str, object] | None = None) -> Answer:
        sdk = self._sdk
        if self._client is None:
            self._client = self._make_client()
        try:
            resp = self._client.messages.create(**self.body(request))
        except sdk.APIStatusError as exc:
            raise _status_error(exc, self.base_url) from None
        except (sdk.APIConnectionError, TimeoutError, ConnectionError) as exc:  # timeouts included
            raise TransientError(f"{type(exc).__name__}: {exc}") from None
        except (sdk.APIResponseValidationError, ValueError) as exc:  # a cut or non-JSON body
            raise TransientError(f"malformed server response ({type(exc).__name__}): {str(exc)[:120]}") from None
        text = "".join(getattr(b, "text", "") for b in (resp.content or []) if getattr(b, "type", None) == "text")
        usage = resp.usage.model_dump(exclude_none=True) if getattr(resp, "usage", None) else {}
        return Answer(text, usage)

    def batch_client(self) -> object:
        """Message Batches through the same client (avstack.runs.sending.batch_api)."""
        from avstack.runs.sending.batch_api import AnthropicBatchClient

        if self._client is None:
            self._client = self._make_client()
        return AnthropicBatchClient(self._client, self.body, self.body_size)

    def body_size(self, request: Request) -> int:
        """A request's bytes in a batch: its images as base64 (4/3 of the files) and its text."""
        images = sum(request.path_of(p).stat().st_size for p in request.parts if isinstance(p, Image))
        text = sum(len(p.text) for p in request.parts if isinstance(p, Text)) + len(request.system)
        return images * 4 // 3 + text + 512

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def _takes(field: str) -> bool:
    """Does the installed SDK's Messages request type have this field?"""
    try:
        from anthropic.types.message_create_params import MessageCreateParamsBase
    except ImportError:
        return True  # an SDK before the typed params: the API's documented field
    return field in MessageCreateParamsBase.__required_keys__ | MessageCreateParamsBase.__optional_keys__


def _status_error(exc: Any, base_url: str) -> Exception:
    """Anthropic's error, in the run engine's terms (its type and message kept: they name the limit)."""
    status = exc.status_code
    kind, message = _error_of(exc)
    said = f"HTTP {status} {kind}: {message}" if kind else f"HTTP {status}: {message}"
    # 400 invalid_request_error, 413 request_too_large: final, not retried
    return status_failure(status, said, base_url, retry_after_s(exc.response.headers.get("retry-after")), RETRY)


def _error_of(exc: Any) -> tuple[str, str]:
    body = getattr(exc, "body", None)
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return str(error.get("type", "")), str(error.get("message", ""))[:300]
    try:
        return "", exc.response.text[:300]
    except Exception:  # noqa: BLE001 - no body to read
        return "", str(exc)[:300]
