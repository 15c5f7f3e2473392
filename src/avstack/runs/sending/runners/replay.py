"""Answers produced elsewhere (another harness), replayed so they score like ours."""

from __future__ import annotations

import json
from pathlib import Path

from avstack.prompting.messages import Request
from avstack.runs.sending.runners.base import Answer, Backend, BackendOptions


class Replay(Backend):
    """Reads JSONL lines with `clip_id` (or `video_name`) and `text` (or `response`/`answer`)."""

    name = "replay"

    def __init__(self, path: str, options: BackendOptions = BackendOptions()):
        self.answers: dict[str, str] = {}
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            rec = json.loads(line)
            key = rec.get("clip_id") or rec.get("video_name")
            text = next((rec[k] for k in ("text", "response", "answer", "raw") if k in rec), None)
            if key is not None and text is not None:
                self.answers[str(key)] = text if isinstance(text, str) else json.dumps(text)

    def answer(self, request: Request, truth: dict[str, object] | None = None) -> Answer:
        key = str(request.meta.get("clip_id"))
        if key not in self.answers:
            raise KeyError(f"replay file has no answer for {key!r}")
        return Answer(self.answers[key])
