"""Gemini through google-genai: frames inline; native video uploaded via the File API.

An upload is waited on until ACTIVE, reused for every request of the run that
carries the same file, and deleted when the run closes the back-end.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

from avstack.prompting.messages import Audio, Image, Request, Text, Video, mime_of
from avstack.runs.sending.runners.base import Answer, Backend, BackendOptions, TransientError, sdk, status_failure


class Gemini(Backend):
    name = "gemini"
    recorded = ("model", "base_url", "temperature", "max_tokens", "json_mode")

    def __init__(
        self,
        model: str,
        options: BackendOptions = BackendOptions(),
        api_key: str | None = None,
        poll_s: float = 2.0,
        max_wait_s: float = 600.0,
    ):
        genai, self._types, self._errors = sdk(
            "gemini", "gemini", "google.genai", "google.genai.types", "google.genai.errors"
        )
        self.model, self.base_url = model, options.base_url or os.environ.get("GEMINI_BASE_URL")
        self.temperature, self.max_tokens, self.json_mode = options.temperature, options.max_tokens, options.json_mode
        self.poll_s, self.max_wait_s = poll_s, max_wait_s
        key = api_key or os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY")
        http: dict[str, object] = {"timeout": int(options.timeout * 1000)}
        if self.base_url:
            # the API version Google's own endpoint defaults to, also behind another base URL (a
            # proxy, a local server): the client sent /v1/ there, where batch mode is not served
            http["base_url"], http["api_version"] = self.base_url, "v1beta"
        self._key = key or ""
        self._client = genai.Client(api_key=key, http_options=self._types.HttpOptions(**http))
        self._uploads: dict[str, Any] = {}
        self._lock = threading.Lock()

    def secrets(self) -> list[str]:
        return [self._key] if self._key else []

    def _upload(self, path: Path) -> Any:
        """One upload per file per run, waited on until ACTIVE."""
        key = str(path.resolve())
        with self._lock:
            if key in self._uploads:
                return self._uploads[key]
            f = self._client.files.upload(file=str(path))
            waited = 0.0
            while _state(f) == "PROCESSING":
                if waited > self.max_wait_s:
                    raise TransientError(f"{path.name}: upload still PROCESSING after {waited:.0f} s")
                time.sleep(self.poll_s)
                waited += self.poll_s
                f = self._client.files.get(name=f.name)
            if _state(f) != "ACTIVE":
                raise RuntimeError(f"{path.name}: upload ended in state {_state(f)}")
            self._uploads[key] = f
            return f

    def parts(self, request: Request) -> list[object]:
        t = self._types
        out = []
        for p in request.parts:
            if isinstance(p, Text):
                out.append(t.Part.from_text(text=p.text))
                continue
            path = request.path_of(p)
            if isinstance(p, Video):
                f = self._upload(path)
                out.append(t.Part.from_uri(file_uri=f.uri, mime_type=f.mime_type))
            elif isinstance(p, (Image, Audio)):
                out.append(t.Part.from_bytes(data=path.read_bytes(), mime_type=mime_of(path)))
        return out

    def config(self, request: Request) -> object:
        return self._types.GenerateContentConfig(
            system_instruction=request.system or None,
            temperature=self.temperature,
            max_output_tokens=self.max_tokens,
            response_mime_type="application/json" if self.json_mode else None,
        )

    def inlined(self, request: Request) -> dict[str, object]:
        """The request as one inlined request of a batch (avstack.runs.sending.batch_api)."""
        return {
            "contents": [self._types.Content(role="user", parts=self.parts(request))],
            "config": self.config(request),
        }

    def inlined_size(self, request: Request) -> int:
        """About what the request weighs inlined: its pictures and sounds in base64, and its text."""
        media = [p for p in request.parts if isinstance(p, (Image, Audio))]
        text = sum(len(p.text) for p in request.parts if isinstance(p, Text)) + len(request.system)
        return sum(request.path_of(p).stat().st_size * 4 // 3 for p in media) + text + 1024

    def batch_client(self) -> object:
        """Gemini's batch mode through the same client (avstack.runs.sending.batch_api)."""
        from avstack.runs.sending.batch_api import GeminiBatchClient

        return GeminiBatchClient(self._client, self.model, self.inlined, self.inlined_size)

    def answer(self, request: Request, truth: dict[str, object] | None = None) -> Answer:
        t = self._types
        config = self.config(request)
        contents = [t.Content(role="user", parts=self.parts(request))]
        try:
            resp = self._client.models.generate_content(model=self.model, contents=contents, config=config)
        except self._errors.APIError as exc:
            raise status_failure(exc.code, f"HTTP {exc.code}: {str(exc)[:200]}", "Gemini") from None
        except (TimeoutError, ConnectionError, OSError) as exc:
            raise TransientError(f"{type(exc).__name__}: {exc}") from None
        except Exception as exc:  # httpx transport errors carry no common base we can import cheaply
            if type(exc).__module__.startswith("httpx"):
                raise TransientError(f"{type(exc).__name__}: {exc}") from None
            raise
        usage = resp.usage_metadata.model_dump(exclude_none=True) if resp.usage_metadata else {}
        return Answer(resp.text or "", usage)

    def close(self) -> None:
        """Delete this run's uploads."""
        with self._lock:
            for f in self._uploads.values():
                try:
                    self._client.files.delete(name=f.name)
                except Exception:  # a leftover upload expires by itself after 48 h
                    pass
            self._uploads.clear()


def _state(f: object) -> str:
    state = getattr(f, "state", None)
    return str(getattr(state, "name", state) or "ACTIVE")
