"""Any OpenAI-compatible chat-completions server (OpenAI, vLLM, SGLang, Ollama, DashScope).

Spoken over plain HTTP with the standard library, so retries, timeouts and
Retry-After are ours to control and no client package is needed.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from typing import Any

from ..messages import Request, to_openai
from .base import RETRY_STATUS, Answer, TransientError


class OpenAICompat:
    name = "openai"

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        temperature: float = 0.0,
        max_tokens: int = 2048,
        json_mode: bool = True,
        image_detail: str | None = None,
        timeout: float = 120.0,
    ):
        self.model = model
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1").rstrip("/")
        self._key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", "")
        self.temperature, self.max_tokens = temperature, max_tokens
        self.json_mode, self.image_detail, self.timeout = json_mode, image_detail, timeout

    def __repr__(self) -> str:  # never show the key
        return f"OpenAICompat(model={self.model!r}, base_url={self.base_url!r})"

    def settings(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "base_url": self.base_url,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "json_mode": self.json_mode,
            "image_detail": self.image_detail,
        }

    def body(self, request: Request) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": to_openai(request, "data", self.image_detail),
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        if self.json_mode:
            body["response_format"] = {"type": "json_object"}
        return body

    def answer(self, request: Request, truth: dict[str, Any] | None = None) -> Answer:
        data = json.dumps(self.body(request)).encode()
        headers = {"Content-Type": "application/json"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        req = urllib.request.Request(f"{self.base_url}/chat/completions", data=data, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:200].decode(errors="replace")
            if exc.code in RETRY_STATUS:
                raise TransientError(
                    f"HTTP {exc.code}: {detail}", _retry_after(exc.headers.get("Retry-After"))
                ) from None
            raise RuntimeError(f"HTTP {exc.code}: {detail}") from None
        except (TimeoutError, urllib.error.URLError, ConnectionError, OSError) as exc:
            raise TransientError(f"{type(exc).__name__}: {exc}") from None
        try:
            payload = json.loads(raw)
            text = payload["choices"][0]["message"]["content"]
        except (json.JSONDecodeError, KeyError, IndexError, TypeError) as exc:
            raise TransientError(f"malformed server response ({type(exc).__name__}): {raw[:120]!r}") from None
        return Answer(text or "", payload.get("usage") or {})


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None
