"""object OpenAI-compatible chat-completions server (OpenAI, Azure OpenAI, vLLM, SGLang, Ollama,
DashScope) through the official `openai` client.

The client's own retries are off: ours (run engine) keep Retry-After, backoff and the
resumable record. One client per run keeps connections alive across requests. Azure
endpoints (`*.openai.azure.com`, or `OPENAI_API_VERSION` set) go through `AzureOpenAI`.
"""

from __future__ import annotations

import copy
import os
import re
from typing import Any

from avstack.errors import UsageError
from avstack.prompting.messages import AUDIO_AS, Request, prefix_digest, to_openai
from avstack.runs.sending.runners.base import (
    Answer,
    Backend,
    BackendOptions,
    TransientError,
    parts_of,
    retry_after_s,
    sdk,
    status_failure,
)
from avstack.runs.sending.runners.server_probe import MODALITY, ServerProbe

OPENAI_API = "https://api.openai.com"
NO_KEY = "no-key"  # the client insists on a key; a local server needs none, so the header is left out
NAMED = {"audio": "the clip's sound", "image": "frames", "video": "the clip's video file"}
AUDIO_FORMATS = ("auto", "prepared", "pcm16")  # --audio-format: how a sound's WAV samples go
# servers that decode the prepared WAV's IEEE float32 samples as they are: llama.cpp (measured on
# the tiny Qwen2.5-Omni, tests/test_omni.py: the same count and answer as its PCM16 copy) and vLLM
# (read from its source: AudioMediaIO.load_bytes calls librosa.load, which reads through
# soundfile's libsndfile, and that takes WAVE_FORMAT_IEEE_FLOAT); any other server, and OpenAI's
# own API (it documents `input_audio` as wav or mp3, not the sample format), gets 16-bit PCM
FLOAT_WAV_SERVERS = ("llama.cpp", "vllm")
SOUND_SENT = {"prepared": "WAV as prepared (IEEE float32, RIFF format 3)", "pcm16": "WAV as 16-bit PCM"}


class OpenAICompat(Backend):
    name = "openai"
    recorded = ("model", "base_url", "temperature", "max_tokens", "json_mode", "image_detail", "audio_as")

    def __init__(
        self,
        model: str,
        options: BackendOptions = BackendOptions(),
        api_key: str | None = None,
        image_detail: str | None = None,
        api_version: str | None = None,
    ):
        self.model = model
        audio_as, audio_format, timeout = options.audio_as, options.audio_format, options.timeout
        self.base_url = (options.base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1").rstrip(
            "/"
        )
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", "")
        self.temperature, self.max_tokens = options.temperature, options.max_tokens
        self.json_mode, self.image_detail, self.timeout = options.json_mode, image_detail, timeout
        self.api_version = api_version or os.environ.get("OPENAI_API_VERSION")
        if audio_as not in AUDIO_AS:
            raise UsageError(f"--audio-as: expected one of {', '.join(AUDIO_AS)}, got {audio_as!r}")
        self.audio_as = audio_as
        if audio_format not in AUDIO_FORMATS:
            raise UsageError(f"--audio-format: expected one of {', '.join(AUDIO_FORMATS)}, got {audio_format!r}")
        self.audio_format = audio_format
        # how a video file goes: `video_url` until a server refuses that part's type (see answer)
        self.video_as = "video_url"
        # the part kinds this server said it cannot take (its first refusal): later requests that
        # carry one are refused before they are sent
        self._refused: dict[str, str] = {}
        (self._openai,) = sdk("openai", "openai", "openai")
        # another server (llama.cpp, vLLM) is asked what it takes and how it counts, before a run
        self.probe = None if self.base_url.startswith(OPENAI_API) else ServerProbe(self.base_url, key, min(timeout, 10))
        self._key = key
        self._client: Any = None  # made on first use, again after close()

    def _make_client(self, key: str) -> object:
        openai = self._openai
        # the client's default pool (keep-alive, up to 1000 connections) serves any concurrency
        self._no_auth = {} if key else {"extra_headers": {"Authorization": openai.Omit()}}
        common = {"max_retries": 0, "timeout": self.timeout}
        if self.api_version or ".openai.azure.com" in self.base_url:
            return openai.AzureOpenAI(
                api_key=key or NO_KEY,
                azure_endpoint=self.base_url,
                api_version=self.api_version or "2024-10-21",
                **common,
            )
        return openai.OpenAI(api_key=key or NO_KEY, base_url=self.base_url, **common)

    def settings(self) -> dict[str, object]:
        return super().settings() | {"audio_format": self.sound_format()}

    def sound_format(self) -> str:
        """The WAV sample format this back-end sends a sound in (media.wavfile): as prepared where
        the server is known to decode IEEE float32 (FLOAT_WAV_SERVERS), else 16-bit PCM; or what
        --audio-format says."""
        if self.audio_format != "auto":
            return self.audio_format
        if self.probe is None:
            return "pcm16"
        return "prepared" if self.server_kind() in FLOAT_WAV_SERVERS else "pcm16"

    def refuses(self, request: Request) -> str | None:
        """OpenAI's own API takes no video part, and audio only in its audio models; another
        server (vLLM, SGLang, llama.cpp) is asked, and its own refusal is final (run engine)."""
        kinds, stack = parts_of(request), request.meta.get("stack", "this")
        said = next((self._refused[k] for k in sorted(kinds) if k in self._refused), None)
        if said is not None:
            return said
        if self.probe is not None:
            for kind in sorted(kinds - {"text"}):
                if self.probe.takes(kind) is False:
                    return (
                        f"the server at {self.base_url} takes no {kind} input (its /props: modalities "
                        f"{MODALITY[kind]} false); the {stack} stack sends {NAMED.get(kind, kind)}"
                    )
            return None
        if "video" in kinds:
            return f"OpenAI's chat API takes no video file; the {stack} stack sends one (gemini:MODEL takes it)"
        if "audio" in kinds and "audio" not in self.model:
            return (
                f"openai:{self.model} takes no audio input (OpenAI's are the gpt-4o-audio models); "
                f"the {stack} stack sends the clip's sound"
            )
        if "image" in kinds and "audio" in self.model:
            return f"openai:{self.model} takes no image input (text and audio only); the {stack} stack sends frames"
        return None

    def count_text_tokens(self, request: Request) -> int | None:
        """The request's text tokens as this server counts them (chat template included), or None
        where it cannot say (OpenAI's own API has no tokenizer endpoint)."""
        if self.probe is None:
            return None
        return self.probe.count_text(self.model, to_openai(request, "path", self.image_detail, self.audio_as))

    def counts_text_by(self) -> str | None:
        return self.probe.how if self.probe is not None else None

    def merges_adjacent_images(self) -> bool:
        """Whether the server takes two touching pictures as one (asked once; False for OpenAI)."""
        return self.probe.merges_adjacent_images(self.model) if self.probe is not None else False

    prompt_cache = True  # False: ask the server not to serve this back-end's prompts from its cache

    def without_prompt_cache(self) -> OpenAICompat:
        """This back-end, asking the server to compute every prompt afresh where it allows it
        (llama.cpp's `cache_prompt: false`; OpenAI's and vLLM's automatic caches cannot be turned
        off per request): the A/A arm's noise floor without the cache's other arithmetic."""
        fresh = copy.copy(self)
        fresh.prompt_cache = False
        return fresh

    def server_kind(self) -> str | None:
        """llama.cpp or vllm, as the server says (its prefix cache); None for OpenAI's own API."""
        return (self.probe.kind() or None) if self.probe is not None else None

    def body(self, request: Request) -> dict[str, object]:
        sent_as = (self.audio_as, self.video_as, self.sound_format())
        body: dict[str, object] = {
            "model": self.model,
            "messages": to_openai(request, "data", self.image_detail, *sent_as),
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        if self.json_mode:
            body["response_format"] = {"type": "json_object"}
        if not self.prompt_cache and self.server_kind() == "llama.cpp":
            body["extra_body"] = {"cache_prompt": False}  # computed afresh, not from its slot's cache
        if self.probe is None and request.shared_prefix:
            # OpenAI routes requests with one key to one cache: a clip's stacks, which begin alike
            body["prompt_cache_key"] = prefix_digest(request)
        return body

    def answer(self, request: Request, truth: dict[str, object] | None = None) -> Answer:
        openai = self._openai
        if self._client is None:
            self._client = self._make_client(self._key)
        try:
            resp = self._client.chat.completions.create(**self.body(request), **self._no_auth)
        except openai.APIStatusError as exc:
            detail = _detail(exc)
            if self._takes_the_other_video_part(request, exc.status_code, detail):
                return self.answer(request, truth)  # the same video, in the part this server names
            kind = unsupported_input(detail)
            if kind is not None:  # the same for every request with such a part: final, and remembered
                self._refused[kind] = (
                    f"the server at {self.base_url} takes no {kind} input (HTTP {exc.status_code}: {detail})"
                )
                raise RuntimeError(f"HTTP {exc.status_code}: unsupported {kind} input: {detail}") from None
            status, wait = exc.status_code, retry_after_s(exc.response.headers.get("retry-after"))
            said, sound = f"HTTP {status}: {detail}", self._sound_named(request)
            raise status_failure(status, said, self.base_url, wait, final_note=sound) from None
        except (openai.APIConnectionError, TimeoutError, ConnectionError) as exc:  # timeouts included
            raise TransientError(f"{type(exc).__name__}: {exc}") from None
        except (openai.APIResponseValidationError, ValueError) as exc:  # a cut or non-JSON body
            raise TransientError(f"malformed server response ({type(exc).__name__}): {str(exc)[:120]}") from None
        try:
            text = resp.choices[0].message.content
        except (AttributeError, IndexError, TypeError) as exc:
            raise TransientError(f"malformed server response ({type(exc).__name__}): {str(resp)[:120]}") from None
        usage = resp.usage.model_dump(exclude_none=True) if getattr(resp, "usage", None) else {}
        timings = (getattr(resp, "model_extra", None) or {}).get("timings")
        if isinstance(timings, dict):  # llama.cpp: the prompt tokens it reused from its cache and evaluated
            usage["timings"] = {k: timings[k] for k in ("cache_n", "prompt_n") if isinstance(timings.get(k), int)}
        return Answer(text or "", usage)

    def _sound_named(self, request: Request) -> str:
        """A refused request that carried a sound names the form it went in (a server that cannot
        decode it says only that it failed to load a file): final and counted, never dropped."""
        if "audio" not in parts_of(request):
            return ""
        fmt = self.sound_format()
        hint = "; --audio-format pcm16 sends 16-bit PCM" if fmt == "prepared" else ""
        return f" (the request's sound was sent as {SOUND_SENT[fmt]}{hint})"

    def _takes_the_other_video_part(self, request: Request, status: int, detail: str) -> bool:
        """A server that refuses the `video_url` part's type (llama.cpp builds differ: the skulk
        wheel's takes `input_video`) is sent that part from now on; True when the request should be
        sent again so. The same bytes go either way, so nothing the run measures changes."""
        if status != 400 or "unsupported content[].type" not in detail or self.video_as != "video_url":
            return False
        if self.probe is None or "video" not in parts_of(request):
            return False
        self.video_as = "input_video"
        return True

    def batch_client(self) -> object:
        """The official client and the request bodies, for the Batch API (avstack.runs.sending.batch_api)."""
        from avstack.runs.sending.batch_api import BatchClient

        if self._client is None:
            self._client = self._make_client(self._key)
        return BatchClient(self._client, self.body)

    def secrets(self) -> list[str]:
        return [self._key] if self._key else []

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


_UNSUPPORTED = re.compile(
    r"\b(image|audio|video|vision|multimodal)\b[^\n]{0,60}?\b(not supported|unsupported|not enabled|is disabled)"
    r"|does not support (image|audio|video)|\bmmproj\b",
    re.IGNORECASE,
)


def unsupported_input(detail: str) -> str | None:
    """The part kind a server's error says it cannot take ("image input is not supported - hint:
    ... provide the mmproj" from llama-server), or None for any other error."""
    m = _UNSUPPORTED.search(detail or "")
    if m is None:
        return None
    word = (m.group(1) or m.group(3) or "image").lower()
    return {"vision": "image", "multimodal": "image"}.get(word, word)


def _detail(exc: Any) -> str:
    try:
        return exc.response.text[:200]
    except Exception:
        return str(exc)[:200]
