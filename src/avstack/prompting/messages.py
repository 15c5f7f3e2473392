"""Provider-neutral requests and the renderers that format them per API.

Renderers never decide what goes in; they only format what the stack builder put there.
"""

from __future__ import annotations

import base64
import hashlib
import json
import mimetypes
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from avstack.errors import UsageError


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Image:
    path: str  # absolute, or relative to Request.root
    pts_ms: int | None = None


@dataclass(frozen=True)
class Video:
    path: str


@dataclass(frozen=True)
class Audio:
    path: str


Part = Text | Image | Video | Audio


@dataclass(frozen=True)
class Request:
    system: str
    parts: tuple[Part, ...]
    root: str = ""  # folder that relative media paths are under
    meta: dict[str, Any] = field(default_factory=dict, compare=False)
    # how many leading parts this request shares with the other stacks of its clip (the layout
    # put them first): a back-end may mark where they end for its provider's prompt cache. Not
    # part of what is asked (not in to_neutral, so not in the answer cache's key).
    shared_prefix: int = field(default=0, compare=False)

    def path_of(self, part: Image | Video | Audio) -> Path:
        p = Path(part.path)
        return p if p.is_absolute() else Path(self.root) / p

    def to_neutral(self) -> dict[str, object]:
        parts = []
        for p in self.parts:
            kind = type(p).__name__.lower()
            parts.append({"type": kind, **{k: v for k, v in p.__dict__.items() if v is not None}})
        return {"system": self.system, "parts": parts, "root": self.root}

    @classmethod
    def from_neutral(cls, data: dict[str, Any]) -> Request:
        kinds = {"text": Text, "image": Image, "video": Video, "audio": Audio}
        parts = tuple(kinds[p["type"]](**{k: v for k, v in p.items() if k != "type"}) for p in data["parts"])
        return cls(system=data["system"], parts=parts, root=data.get("root", ""))


def prefix_digest(req: Request) -> str:
    """A short name for the request's shared prefix (its system prompt and first `shared_prefix`
    parts): the same for a clip's stacks that begin alike, a cache key a provider may route by."""
    head = Request(req.system, req.parts[: req.shared_prefix], req.root).to_neutral()
    return hashlib.sha256(json.dumps(head, sort_keys=True).encode()).hexdigest()[:32]


def shared_prefixes(requests: Iterable[Request]) -> frozenset[str]:
    """The prefix digests that two or more different requests begin with: where a cache breakpoint
    pays (the first writes, the others read). A prefix no other request shares would only be
    written, at a quarter more than plain input on Claude (an `-frame_ts` stack's untagged
    frames; a clip without words, whose drops ask what `full` asked)."""
    seen: dict[str, set[str]] = {}
    for req in requests:
        if req.shared_prefix > 0:
            body = json.dumps(req.to_neutral(), sort_keys=True)
            seen.setdefault(prefix_digest(req), set()).add(hashlib.sha256(body.encode()).hexdigest())
    return frozenset(d for d, bodies in seen.items() if len(bodies) > 1)


def unmarked_unless_shared(req: Request, shared: frozenset[str] | None) -> Request:
    """The request without its shared-prefix mark where no other request shares that prefix
    (`shared`: shared_prefixes of the job's requests; None: left as built)."""
    if shared is None or req.shared_prefix <= 0 or prefix_digest(req) in shared:
        return req
    return replace(req, shared_prefix=0)


# the names the APIs document for a sound (Python's mimetypes says audio/x-wav, which Gemini lists
# under no name)
_MIME = {".wav": "audio/wav", ".mp3": "audio/mp3", ".flac": "audio/flac"}


def mime_of(path: Path) -> str:
    return _MIME.get(path.suffix.lower()) or mimetypes.guess_type(path.name)[0] or "application/octet-stream"


def data_url(path: Path) -> str:
    return f"data:{mime_of(path)};base64,{base64.b64encode(path.read_bytes()).decode()}"


AUDIO_AS = ("input_audio", "audio_url")  # how a chat-completions server takes a sound (see to_openai)
VIDEO_AS = ("video_url", "input_video")  # how it takes a video file: builds of llama.cpp differ


def to_openai(
    req: Request,
    media: str = "data",
    detail: str | None = None,
    audio_as: str = "input_audio",
    video_as: str = "video_url",
    audio_format: str = "prepared",
) -> list[dict[str, Any]]:
    """Chat-completions messages; media as data URLs (`data`) or file paths (`path`). A sound goes
    as OpenAI's `input_audio` part (`{"data": base64 of the file, "format": "wav"}`, as the
    gpt-4o-audio models take it; vLLM takes it too) or, with `audio_as="audio_url"`, as vLLM's
    `audio_url` part (`{"url": data URL}`, what its Qwen-Omni examples send). A video file goes as
    a `video_url` part (vLLM, llama.cpp's source builds) or, with `video_as="input_video"`, as
    `{"data": base64 of the file, "format": "mp4"}` (the llama-server of the skulk wheel, build
    7e4c0a9, which answers a `video_url` part "unsupported content[].type"). `audio_format`: a
    sound's bytes as prepared (IEEE float32 WAV) or as 16-bit PCM (`pcm16`), for a server that
    decodes only that (media.wavfile)."""
    if audio_as not in AUDIO_AS:
        raise UsageError(f"audio_as: expected one of {', '.join(AUDIO_AS)}, got {audio_as!r}")
    if video_as not in VIDEO_AS:
        raise UsageError(f"video_as: expected one of {', '.join(VIDEO_AS)}, got {video_as!r}")

    def url(part: Image | Video | Audio) -> str:
        path = req.path_of(part)
        return data_url(path) if media == "data" else str(path)

    def sound(part: Audio) -> dict[str, object]:
        path = req.path_of(part)
        if media != "data":
            sent = str(path)
        elif audio_format != "prepared" and path.suffix.lower() == ".wav":
            from avstack.media.wavfile import in_format

            sent = base64.b64encode(in_format(path.read_bytes(), audio_format)).decode()
        else:
            sent = base64.b64encode(path.read_bytes()).decode()
        if audio_as == "audio_url":
            sent = f"data:{mime_of(path)};base64,{sent}" if media == "data" else sent
            return {"type": "audio_url", "audio_url": {"url": sent}}
        return {"type": "input_audio", "input_audio": {"data": sent, "format": path.suffix.lstrip(".").lower()}}

    def video(part: Video) -> dict[str, object]:
        if video_as == "video_url":
            return {"type": "video_url", "video_url": {"url": url(part)}}
        path = req.path_of(part)
        data = base64.b64encode(path.read_bytes()).decode() if media == "data" else str(path)
        return {"type": "input_video", "input_video": {"data": data, "format": path.suffix.lstrip(".").lower()}}

    content: list[dict[str, object]] = []
    for p in req.parts:
        if isinstance(p, Text):
            content.append({"type": "text", "text": p.text})
        elif isinstance(p, Image):
            img: dict[str, object] = {"url": url(p)}
            if detail:
                img["detail"] = detail
            content.append({"type": "image_url", "image_url": img})
        elif isinstance(p, Video):
            content.append(video(p))
        elif isinstance(p, Audio):
            content.append(sound(p))
    user = {"role": "user", "content": content}
    return [{"role": "system", "content": req.system}, user] if req.system else [user]


def to_anthropic(req: Request) -> dict[str, object]:
    """Anthropic's Messages fields: the system prompt at the top level and one user turn, each
    frame a base64 image block after its time tag. Claude takes no audio or video part (the
    back-end refuses such a request before this is called); an empty text block is an error
    there, so none is sent. Where the request shares its first parts with a clip's other stacks
    (`shared_prefix`), the block that ends them carries a `cache_control` breakpoint (below the
    model's minimum Anthropic caches nothing, silently, and charges no write)."""
    content: list[dict[str, object]] = []
    for k, p in enumerate(req.parts):
        if k == req.shared_prefix and content:
            # the end of what a clip's stacks share: Claude caches up to a marked block only
            content[-1]["cache_control"] = {"type": "ephemeral"}
        if isinstance(p, Text):
            if p.text.strip():  # Claude refuses a blank text block (a frame separator: it merges no image)
                content.append({"type": "text", "text": p.text})
        elif isinstance(p, Image):
            path = req.path_of(p)
            data = base64.b64encode(path.read_bytes()).decode()
            content.append({"type": "image", "source": {"type": "base64", "media_type": mime_of(path), "data": data}})
        else:
            raise UsageError(f"Anthropic's Messages API takes no {type(p).__name__.lower()} part")
    fields: dict[str, object] = {"messages": [{"role": "user", "content": content}]}
    if req.system:
        fields["system"] = req.system
    return fields


def to_gemini(req: Request, media: str = "data") -> dict[str, object]:
    """`contents` + system instruction for google-genai; a video is a file to upload."""
    parts: list[dict[str, object]] = []
    for p in req.parts:
        if isinstance(p, Text):
            parts.append({"text": p.text})
            continue
        path = req.path_of(p)
        mime = mime_of(path)
        if isinstance(p, Video):
            parts.append({"file_data": {"file_uri": str(path), "mime_type": mime, "upload": True}})
        elif media == "data":
            parts.append({"inline_data": {"mime_type": mime, "data": base64.b64encode(path.read_bytes()).decode()}})
        else:
            parts.append({"inline_data": {"mime_type": mime, "path": str(path)}})
    body: dict[str, object] = {"contents": [{"role": "user", "parts": parts}]}
    return {"system_instruction": req.system} | body if req.system else body


def to_hf(req: Request) -> list[dict[str, Any]]:
    """A chat-template message list (Qwen-VL style) with local paths."""
    content: list[dict[str, Any]] = []
    for p in req.parts:
        if isinstance(p, Text):
            content.append({"type": "text", "text": p.text})
        elif isinstance(p, Image):
            content.append({"type": "image", "image": str(req.path_of(p))})
        elif isinstance(p, Video):
            content.append({"type": "video", "video": str(req.path_of(p))})
        elif isinstance(p, Audio):
            content.append({"type": "audio", "audio": str(req.path_of(p))})
    user = {"role": "user", "content": content}
    return [{"role": "system", "content": [{"type": "text", "text": req.system}]}, user] if req.system else [user]


def flat_prompt(req: Request) -> tuple[str, list[str], list[int | None]]:
    """User text with `<image>` / `<video>` / `<audio>` where the media go, and the image paths and
    pts in order."""
    chunks, images, pts = [], [], []
    for p in req.parts:
        if isinstance(p, Text):
            chunks.append(p.text)
        elif isinstance(p, Image):
            chunks.append("<image>")
            images.append(str(req.path_of(p)))
            pts.append(p.pts_ms)
        elif isinstance(p, Video):
            chunks.append("<video>")
        elif isinstance(p, Audio):
            chunks.append("<audio>")
    return "\n".join(chunks), images, pts


def render(req: Request, fmt: str, media: str = "path") -> object:
    if fmt == "neutral":
        return req.to_neutral()
    if fmt == "hf":
        return to_hf(req)
    if fmt == "openai":
        return to_openai(req, media=media)
    if fmt == "gemini":
        return to_gemini(req, media=media)
    raise UsageError(f"format must be one of neutral, openai, gemini, hf; found {fmt!r}")
