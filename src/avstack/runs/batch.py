"""`--batch`: the requests of a run sent through a provider's batch API (OpenAI's Batch API:
about half the price, answers within 24 h) instead of one by one.

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
    lines: Sequence[tuple[str, bytes]], max_lines: int = MAX_LINES, max_bytes: int = MAX_BYTES
) -> list[list[tuple[str, bytes]]]:
    """(key, JSONL line) pairs cut into files of at most max_lines lines and max_bytes bytes."""
    out: list[list[tuple[str, bytes]]] = [[]]
    size = 0
    for key, line in lines:
        if out[-1] and (len(out[-1]) >= max_lines or size + len(line) > max_bytes):
            out.append([])
            size = 0
        out[-1].append((key, line))
        size += len(line)
    return [c for c in out if c]


class BatchClient:
    """What the protocol needs of a back-end: its official client and each request's body."""

    def __init__(self, client: Any, body: Callable[[Request], dict[str, Any]], endpoint: str = "/v1/chat/completions"):
        self.client, self.body, self.endpoint = client, body, endpoint


def _load_state(folder: Path) -> dict[str, Any]:
    state = read_json(folder / STATE)
    if isinstance(state, dict) and isinstance(state.get("batches"), list) and isinstance(state.get("answers"), dict):
        return state
    return {"batches": [], "answers": {}}


def answer_in_batches(
    bc: BatchClient,
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
    submitted = {k for b in state["batches"] if b["status"] not in ("failed", "cancelled") for k in b["keys"]}
    new = [(k, r) for k, r in dict(pending).items() if k not in answers and k not in submitted]
    lines = [(k, _line(bc, k, r)) for k, r in new]
    for part in chunks(lines):
        upload = bc.client.files.create(
            file=("avstack-batch.jsonl", b"".join(line for _, line in part)), purpose="batch"
        )
        batch = bc.client.batches.create(input_file_id=upload.id, endpoint=bc.endpoint, completion_window="24h")
        state["batches"].append(
            {"batch_id": batch.id, "input_file_id": upload.id, "keys": [k for k, _ in part], "status": batch.status}
        )
        write_json_atomic(folder / STATE, state)  # before waiting: a killed run resumes this batch
        log(f"batch {batch.id}: {len(part)} requests submitted")
    for entry in state["batches"]:
        if entry["status"] in TERMINAL:
            continue
        batch = _wait(bc, entry["batch_id"], poll_s, log)
        entry["status"] = batch.status
        for file_id in (getattr(batch, "output_file_id", None),):
            if file_id:
                # scrubbed before the file holds them: a server may echo a key in an answer
                answers.update(scrub(_answers(bc.client.files.content(file_id).read())))
        write_json_atomic(folder / STATE, state)
        missing = sum(k not in answers for k in entry["keys"])
        if missing:
            log(f"batch {entry['batch_id']} {batch.status}: {missing} requests without an answer, asked online")
    return answers


def _line(bc: BatchClient, key: str, request: Request) -> bytes:
    body = {"custom_id": key, "method": "POST", "url": bc.endpoint, "body": bc.body(request)}
    return (json.dumps(body, ensure_ascii=False) + "\n").encode()


def _wait(bc: BatchClient, batch_id: str, poll_s: float, log: Callable[[str], None]) -> Any:
    while True:
        batch = bc.client.batches.retrieve(batch_id)
        if batch.status in TERMINAL:
            log(f"batch {batch_id}: {batch.status}")
            return batch
        time.sleep(poll_s)


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
