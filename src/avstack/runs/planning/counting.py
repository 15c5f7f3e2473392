"""How the plan counts (Counting: the image rule, the server that counts text, the order of
sending, the back-end's body) and the digest of each request as it is sent, which a run's bodies
are held to."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from avstack.prompting.messages import Request, unmarked_unless_shared
from avstack.runs.sending.runners.base import Backend


@dataclass(frozen=True)
class Counting:
    """How the plan counts: the image rule (None: chosen by the model's name), OpenAI's image
    detail, the server that counts a request's text itself where it can (chat template
    included; where it cannot, `text_counter`'s count), what that server is (llama.cpp, vllm:
    its prefix cache), the order the requests go out in (`clip_major`: one clip's stacks
    together, as an interleaved ablation sends them; else one stack after another, as batches),
    and the providers file (limits and cache rules; None: the bundled one)."""

    image_rule: str | None = None
    detail: str = "high"
    server: Backend | None = None  # the back-end whose server counts text, where one could be made
    server_kind: str | None = None
    clip_major: bool = True
    providers_file: Path | None = None
    # the body the back-end sends for a request, where it can tell (OpenAI-compatible servers): each
    # planned request's digest is of that body, so a run's bodies can be held to the plan
    body: Any = None

    @classmethod
    def of(cls, backend: Any, image_rule: str | None = None, detail: str = "high", **more: Any) -> Counting:
        if backend is None:  # none could be made before the run (a missing key): the plan counts alone
            return cls(image_rule, detail, None, None, **more)
        made = cls(image_rule, detail, backend, backend.server_kind(), **more)
        return replace(made, body=backend.body)


def sent_digest(req: Request, counting: Counting, shared: frozenset[str] | None) -> str:
    """What a request is as sent, as a digest: the back-end's body for it (as the engine sends it:
    prefix marks only where shared), else avstack's neutral request. A server that records the
    JSON bodies it got can hold each to the plan (sorted keys, no spaces)."""
    sent = unmarked_unless_shared(req, shared)
    payload: Any = None
    if counting.body is not None:
        try:
            payload = counting.body(sent)
        except ValueError:  # a part the back-end refuses (Claude and a sound): refused when sent, not here
            payload = None
    return body_digest(payload if payload is not None else sent.to_neutral())


def body_digest(body: object) -> str:
    text = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:20]
