"""`--batch`: the requests of a run sent through a provider's batch API (OpenAI's Batch API,
Gemini's batch mode: about half the price, answers within 24 h) instead of one by one.

The run's unanswered requests become JSONL lines (custom_id: the request's content key), cut into
files within the API's limits, uploaded (Files API, purpose "batch") and submitted; each batch's
id is written to RUN/batches.json before any wait, so a killed process resumes polling the same
batches on the rerun instead of paying twice. Answered lines land in the same file; lines the
batch failed, or that an expired batch never reached, come back without an answer and the engine
asks them online, so predictions.jsonl is the one the online path writes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from avstack.io import read_json, write_json_atomic
from avstack.prompting.messages import Request

MAX_LINES = 50_000  # requests per batch file (the Batch API's limit)
MAX_BYTES = 190 * 1024 * 1024  # under its 200 MB file limit
TERMINAL = ("completed", "failed", "expired", "cancelled")
STATE = "batches.json"


def chunks(
    lines: Sequence[tuple[str, Any]],
    max_lines: int = MAX_LINES,
    max_bytes: int = MAX_BYTES,
    size: Callable[[Any], int] = len,
) -> list[list[tuple[str, Any]]]:
    """(key, item) pairs cut into parts of at most max_lines items and max_bytes bytes (an item's
    bytes by `size`: a JSONL line's length, or an inlined request's estimate)."""
    out: list[list[tuple[str, Any]]] = [[]]
    total = 0
    for key, item in lines:
        n = size(item)
        if out[-1] and (len(out[-1]) >= max_lines or total + n > max_bytes):
            out.append([])
            total = 0
        out[-1].append((key, item))
        total += n
    return [c for c in out if c]


class BatchClient:
    """OpenAI's protocol: JSONL lines uploaded through the Files API, one batch per file."""

    terminal = TERMINAL

    def __init__(self, client: Any, body: Callable[[Request], dict[str, Any]], endpoint: str = "/v1/chat/completions"):
        self.client, self.body, self.endpoint = client, body, endpoint

    def parts(self, pending: Sequence[tuple[str, Request]]) -> list[list[tuple[str, Any]]]:
        return chunks([(k, _line(self, k, r)) for k, r in pending])

    def submit(self, part: list[tuple[str, Any]]) -> tuple[str, str, str]:
        """(batch id, input file id, status) of one submitted file of lines."""
        upload = self.client.files.create(
            file=("avstack-batch.jsonl", b"".join(line for _, line in part)), purpose="batch"
        )
        batch = self.client.batches.create(input_file_id=upload.id, endpoint=self.endpoint, completion_window="24h")
        return batch.id, upload.id, batch.status

    def poll(self, batch_id: str) -> tuple[str, dict[str, dict[str, Any]] | None]:
        """(status, the answered lines once the batch has ended, else None)."""
        batch = self.client.batches.retrieve(batch_id)
        if batch.status not in TERMINAL:
            return batch.status, None
        file_id = getattr(batch, "output_file_id", None)
        return batch.status, _answers(self.client.files.content(file_id).read()) if file_id else {}


GEMINI_TERMINAL = ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED")
GEMINI_INLINE_BYTES = 18 * 1024 * 1024  # inlined requests under the API's 20 MB per batch


class GeminiBatchClient:
    """Gemini's batch mode through google-genai: the requests inlined (each tagged with its key
    in metadata), cut under the 20 MB an inlined batch may hold."""

    terminal = GEMINI_TERMINAL

    def __init__(
        self, client: Any, model: str, inlined: Callable[[Request], dict[str, Any]], size: Callable[[Request], int]
    ):
        self.client, self.model, self.inlined, self.size = client, model, inlined, size

    def parts(self, pending: Sequence[tuple[str, Request]]) -> list[list[tuple[str, Any]]]:
        return chunks(list(pending), max_bytes=GEMINI_INLINE_BYTES, size=self.size)

    def submit(self, part: list[tuple[str, Any]]) -> tuple[str, str, str]:
        src = [{**self.inlined(r), "metadata": {"key": k}} for k, r in part]
        job = self.client.batches.create(model=self.model, src=src)
        return job.name, "", str(job.state)

    def poll(self, batch_id: str) -> tuple[str, dict[str, dict[str, Any]] | None]:
        job = self.client.batches.get(name=batch_id)
        state = str(getattr(job.state, "value", job.state))
        if state not in GEMINI_TERMINAL:
            return state, None
        out = {}
        for item in getattr(job.dest, "inlined_responses", None) or []:
            key = (item.metadata or {}).get("key")
            if key is None or item.error is not None or item.response is None:
                continue
            usage = item.response.usage_metadata
            out[key] = {"raw": item.response.text or "", "usage": usage.model_dump(exclude_none=True) if usage else {}}
        return state, out


def _load_state(folder: Path) -> dict[str, Any]:
    """RUN/batches.json as written before; a file is untrusted input, so entries of another shape
    are dropped (their requests are submitted again) and answers must be {raw: str, usage: dict}."""
    state = read_json(folder / STATE)
    if not isinstance(state, dict):
        return {"batches": [], "answers": {}}
    batches = [
        b
        for b in state.get("batches") or []
        if isinstance(b, dict)
        and isinstance(b.get("batch_id"), str)
        and isinstance(b.get("status"), str)
        and isinstance(b.get("keys"), list)
    ]
    answers = (
        {
            k: a
            for k, a in (state.get("answers") or {}).items()
            if isinstance(a, dict) and isinstance(a.get("raw"), str) and isinstance(a.get("usage"), dict)
        }
        if isinstance(state.get("answers"), dict)
        else {}
    )
    return {"batches": batches, "answers": answers}


def answer_in_batches(
    bc: BatchClient | GeminiBatchClient,
    pending: Sequence[tuple[str, Request]],
    folder: Path,
    poll_s: float = 30.0,
    log: Callable[[str], None] = lambda _: None,
    scrub: Callable[[Any], Any] = lambda x: x,
) -> dict[str, dict[str, Any]]:
    """Answers by request key ({raw, usage}) for the pending requests: from batches submitted
    before (resumed), and from new ones for the rest. Keys without an answer are for online.
    `scrub` (the run's secret scrubber) is applied to every answer before it is stored."""
    state = _load_state(folder)
    answers: dict[str, dict[str, Any]] = state["answers"]
    failed = ("failed", "cancelled", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED")
    submitted = {k for b in state["batches"] if b["status"] not in failed for k in b["keys"]}
    new = [(k, r) for k, r in dict(pending).items() if k not in answers and k not in submitted]
    for part in bc.parts(new):
        batch_id, file_id, status = bc.submit(part)
        state["batches"].append(
            {"batch_id": batch_id, "input_file_id": file_id, "keys": [k for k, _ in part], "status": status}
        )
        write_json_atomic(folder / STATE, state)  # before waiting: a killed run resumes this batch
        log(f"batch {batch_id}: {len(part)} requests submitted")
    for entry in state["batches"]:
        if entry["status"] in bc.terminal:
            continue
        while True:
            status, got = bc.poll(entry["batch_id"])
            if got is not None:
                break
            time.sleep(poll_s)
        entry["status"] = status
        answers.update(scrub(got))  # scrubbed before the file holds them: a server may echo a key
        write_json_atomic(folder / STATE, state)
        missing = sum(k not in answers for k in entry["keys"])
        log(
            f"batch {entry['batch_id']}: {status}"
            + (f"; {missing} requests without an answer, asked online" if missing else "")
        )
    return answers


def _line(bc: BatchClient, key: str, request: Request) -> bytes:
    body = {"custom_id": key, "method": "POST", "url": bc.endpoint, "body": bc.body(request)}
    return (json.dumps(body, ensure_ascii=False) + "\n").encode()


def _answers(content: bytes) -> dict[str, dict[str, Any]]:
    """The answered lines of an output file: custom_id -> {raw, usage}; a line with an error or
    an unreadable body is left out (asked online)."""
    out = {}
    for raw in content.decode("utf-8", errors="replace").splitlines():
        try:
            line = json.loads(raw)
            resp = line["response"]
            if line.get("error") or resp.get("status_code") != 200:
                continue
            body = resp["body"]
            out[str(line["custom_id"])] = {
                "raw": body["choices"][0]["message"]["content"] or "",
                "usage": body.get("usage") or {},
            }
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            continue
    return out
