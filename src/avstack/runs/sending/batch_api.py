"""`--batch`: the requests of a run sent through a provider's batch API (OpenAI's Batch API,
Gemini's batch mode, Anthropic's Message Batches: about half the price, answers within 24 h)
instead of one by one.

The run's unanswered requests become JSONL lines (custom_id: the request's content key), cut into
files within the API's limits, uploaded (Files API, purpose "batch") and submitted. Exactly once,
whatever instant a kill comes at: each part gets a key derived from the run (a token made with
its batches.json) and the part's request keys; the intent (part key, request keys) is written to
RUN/batches.json before anything is sent, and the batch is tagged with the part key on the
provider's side (OpenAI: batch metadata and the input file's name; Gemini: the job's display
name). A rerun that finds an intent without a batch id (the kill fell between the provider
creating the batch and the id being written) lists the provider's batches and adopts the one with
that tag, in flight or done, instead of creating another. Anthropic's batches carry no tag and
their requests cannot be read while they run: there the intent records its time, and the batch
adopted is the one created within minutes of it with as many requests (two such: the run stops
and names them rather than create a third); its answers count only under our custom_ids (the
request keys). A cancelled, expired or failed batch is
not waited on again: the lines it answered are kept, the rest are asked online. Answered lines
land in the same file; predictions.jsonl is the one the online path writes.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from avstack.io import read_json, write_json_atomic
from avstack.prompting.messages import Request

MAX_LINES = 50_000  # requests per batch file (the Batch API's limit)
MAX_BYTES = 190 * 1024 * 1024  # under its 200 MB file limit
TERMINAL = ("completed", "failed", "expired", "cancelled")
STATE = "batches.json"
TAG = "avstack_part"  # the metadata field (OpenAI) / display-name prefix (Gemini) of a part's key
INTENT = "intent"  # an entry's status before the provider has said anything about it


def part_key(run_token: str, keys: Sequence[str]) -> str:
    """The tag of one part: the run (its token) and the request keys it holds."""
    body = json.dumps({"run": run_token, "keys": sorted(keys)})
    return "p" + hashlib.sha256(body.encode()).hexdigest()[:31]


def chunks(
    lines: Sequence[tuple[str, object]],
    max_lines: int = MAX_LINES,
    max_bytes: int = MAX_BYTES,
    size: Callable[[Any], int] = len,
) -> list[list[tuple[str, Any]]]:
    """(key, item) pairs cut into parts of at most max_lines items and max_bytes bytes (an item's
    bytes by `size`: a JSONL line's length, or an inlined request's estimate)."""
    out: list[list[tuple[str, object]]] = [[]]
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

    def __init__(
        self, client: Any, body: Callable[[Request], dict[str, object]], endpoint: str = "/v1/chat/completions"
    ):
        self.client, self.body, self.endpoint = client, body, endpoint

    def parts(self, pending: Sequence[tuple[str, Request]]) -> list[list[tuple[str, object]]]:
        return chunks([(k, _line(self, k, r)) for k, r in pending])

    def upload(self, part: list[tuple[str, Any]], tag: str) -> str:
        """The input file of a part (named by its tag), uploaded once: a file a killed run left
        uploaded under that name is used again."""
        name = f"avstack-{tag}.jsonl"
        for f in self.client.files.list(purpose="batch"):
            if getattr(f, "filename", None) == name:
                return str(f.id)
        return str(self.client.files.create(file=(name, b"".join(line for _, line in part)), purpose="batch").id)

    def create(self, file_id: str, tag: str) -> tuple[str, str]:
        """(batch id, status) of a new batch over an uploaded file, tagged with the part key."""
        batch = self.client.batches.create(
            input_file_id=file_id, endpoint=self.endpoint, completion_window="24h", metadata={TAG: tag}
        )
        return batch.id, batch.status

    def find(self, tag: str, entry: Mapping[str, object] | None = None) -> tuple[str, str, str] | None:
        """(batch id, input file id, status) of the provider's batch tagged `tag`, if any (the
        listing pages through every batch of the account, newest first)."""
        for b in self.client.batches.list(limit=100):
            if (getattr(b, "metadata", None) or {}).get(TAG) == tag:
                return b.id, b.input_file_id, b.status
        return None

    def poll(self, batch_id: str) -> tuple[str, dict[str, dict[str, object]] | None]:
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
        self, client: Any, model: str, inlined: Callable[[Request], dict[str, object]], size: Callable[[Request], int]
    ):
        self.client, self.model, self.inlined, self.size = client, model, inlined, size

    def parts(self, pending: Sequence[tuple[str, Request]]) -> list[list[tuple[str, object]]]:
        return chunks(list(pending), max_bytes=GEMINI_INLINE_BYTES, size=self.size)

    def create_inlined(self, part: list[tuple[str, Any]], tag: str) -> tuple[str, str]:
        src = [{**self.inlined(r), "metadata": {"key": k}} for k, r in part]
        job = self.client.batches.create(model=self.model, src=src, config={"display_name": f"{TAG}-{tag}"})
        return job.name, _state(job)

    def find(self, tag: str, entry: dict[str, object] | None = None) -> tuple[str, str, str] | None:
        for job in self.client.batches.list():
            if getattr(job, "display_name", None) == f"{TAG}-{tag}":
                return job.name, "", _state(job)
        return None

    def poll(self, batch_id: str) -> tuple[str, dict[str, dict[str, object]] | None]:
        job = self.client.batches.get(name=batch_id)
        state = _state(job)
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


ANTHROPIC_TERMINAL = ("ended",)
ANTHROPIC_MAX = 100_000  # requests per Message Batch
ANTHROPIC_BYTES = 200 * 1024 * 1024  # under its 256 MB per batch
ANTHROPIC_WINDOW_S = 300.0  # a batch created this close to an intent may be the intent's (clock skew)


class AmbiguousBatch(RuntimeError):
    """More than one of the provider's batches could be the one a stopped run created."""


class AnthropicBatchClient:
    """Anthropic's Message Batches through the official client: the requests inline, each with
    its request key as custom_id, cut within a batch's 100,000 requests and 256 MB."""

    terminal = ANTHROPIC_TERMINAL

    def __init__(self, client: Any, body: Callable[[Request], Mapping[str, object]], size: Callable[[Request], int]):
        self.client, self.body, self.size = client, body, size

    def parts(self, pending: Sequence[tuple[str, Request]]) -> list[list[tuple[str, object]]]:
        return chunks(list(pending), max_lines=ANTHROPIC_MAX, max_bytes=ANTHROPIC_BYTES, size=self.size)

    def create_inlined(self, part: list[tuple[str, Any]], tag: str) -> tuple[str, str]:
        requests = [{"custom_id": k, "params": self.body(r)} for k, r in part]
        batch = self.client.messages.batches.create(requests=requests)
        return batch.id, batch.processing_status

    def find(self, tag: str, entry: dict[str, Any] | None = None) -> tuple[str, str, str] | None:
        """The batch a stopped run created for this intent: created within ANTHROPIC_WINDOW_S of
        it and holding as many requests."""
        at = (entry or {}).get("intent_at")
        if not isinstance(at, (int, float)):
            return None  # an intent of an earlier version: nothing to match it by
        want = len((entry or {}).get("keys") or [])
        found = []
        for b in self.client.messages.batches.list(limit=100):
            created = b.created_at.timestamp()
            if created < at - ANTHROPIC_WINDOW_S:
                break  # newest first: the rest are older
            counts = b.request_counts
            total = counts.processing + counts.succeeded + counts.errored + counts.canceled + counts.expired
            if created <= at + ANTHROPIC_WINDOW_S and total == want:
                found.append(b)
        if len(found) > 1:
            raise AmbiguousBatch(
                f"{len(found)} batches of {want} requests were created within {ANTHROPIC_WINDOW_S:.0f} s of this "
                f"run's intent ({', '.join(b.id for b in found)}); cancel the ones that are not this run's, then rerun"
            )
        return (found[0].id, "", found[0].processing_status) if found else None

    def poll(self, batch_id: str) -> tuple[str, dict[str, dict[str, Any]] | None]:
        batch = self.client.messages.batches.retrieve(batch_id)
        if batch.processing_status not in ANTHROPIC_TERMINAL:
            return batch.processing_status, None
        out = {}
        for item in self.client.messages.batches.results(batch_id):
            result = item.result
            if getattr(result, "type", None) != "succeeded":
                continue  # errored, canceled, expired: asked online
            message = result.message
            text = "".join(getattr(b, "text", "") for b in message.content if getattr(b, "type", None) == "text")
            out[str(item.custom_id)] = {"raw": text, "usage": message.usage.model_dump(exclude_none=True)}
        return batch.processing_status, out


def _state(job: Any) -> str:
    return str(getattr(job.state, "value", job.state))


def _load_state(folder: Path) -> dict[str, Any]:
    """RUN/batches.json as written before; a file is untrusted input, so entries of another shape
    are dropped (their requests are submitted again) and answers must be {raw: str, usage: dict}."""
    state = read_json(folder / STATE)
    if not isinstance(state, dict):
        state = {}
    batches = [
        b
        for b in state.get("batches") or []
        if isinstance(b, dict)
        and isinstance(b.get("batch_id"), (str, type(None)))
        and isinstance(b.get("status"), str)
        and isinstance(b.get("keys"), list)
        and all(isinstance(k, str) for k in b["keys"])
        and isinstance(b.get("part", ""), str)
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
    for b in batches:  # an entry of an earlier version: fetched once it reached a terminal state
        if not isinstance(b.get("fetched"), bool):
            b["fetched"] = b["status"] in TERMINAL + GEMINI_TERMINAL + ANTHROPIC_TERMINAL
    token = state.get("run_token")
    if not (isinstance(token, str) and token.isalnum()):
        token = secrets.token_hex(8)  # written with the first intent, before anything is sent
    return {"run_token": token, "batches": batches, "answers": answers}


InlineClient = GeminiBatchClient | AnthropicBatchClient


def answer_in_batches(
    bc: BatchClient | InlineClient,
    pending: Sequence[tuple[str, Request]],
    folder: Path,
    poll_s: float = 30.0,
    log: Callable[[str], None] = lambda _: None,
    scrub: Callable[[Any], Any] = lambda x: x,
) -> dict[str, dict[str, object]]:
    """Answers by request key ({raw, usage}) for the pending requests: from batches submitted
    before (resumed), and from new ones for the rest. Keys without an answer are for online.
    `scrub` (the run's secret scrubber) is applied to every answer before it is stored."""
    state = _load_state(folder)
    answers: dict[str, dict[str, object]] = state["answers"]
    requests = dict(pending)
    recorded = {k for b in state["batches"] for k in b["keys"]}  # in a batch, or meant for one
    new = [(k, r) for k, r in requests.items() if k not in answers and k not in recorded]
    earlier = len(state["batches"])  # intents from here on are this process's: nothing to look up
    for part in bc.parts(new):
        keys = [k for k, _ in part]
        state["batches"].append(
            {
                "part": part_key(state["run_token"], keys),
                "batch_id": None,
                "keys": keys,
                "status": INTENT,
                "fetched": False,
                "intent_at": time.time(),  # what an untagged batch (Anthropic's) is found by
            }
        )
    write_json_atomic(folder / STATE, state)  # the intent, before anything is sent
    for i, entry in enumerate(state["batches"]):
        if entry["batch_id"] is None and entry["status"] == INTENT:
            _send_once(bc, entry, requests, folder, state, log, look_up=i < earlier)
    for entry in state["batches"]:
        if entry["batch_id"] is None or entry["fetched"]:
            continue
        while True:
            status, got = bc.poll(entry["batch_id"])
            if got is not None:
                break
            time.sleep(poll_s)
        entry["status"], entry["fetched"] = status, True
        answers.update(scrub(got))  # scrubbed before the file holds them: a server may echo a key
        write_json_atomic(folder / STATE, state)
        missing = sum(k not in answers for k in entry["keys"])
        log(
            f"batch {entry['batch_id']}: {status}"
            + (f"; {missing} requests without an answer, asked online" if missing else "")
        )
    return answers


def _send_once(
    bc: BatchClient | InlineClient,
    entry: dict[str, Any],
    requests: dict[str, Request],
    folder: Path,
    state: dict[str, Any],
    log: Callable[[str], None],
    look_up: bool = True,
) -> None:
    """Submit the part of an intent entry, unless the provider already holds a batch tagged with
    its key (a kill between the provider's create and our write): that one is adopted, whatever
    its state (a cancelled or expired one is not waited on; its unanswered lines go online).
    `look_up` False: the intent was made by this process, so the provider cannot hold it yet
    (listing an account's batches for every new part would cost a full listing each)."""
    tag = entry.get("part") or part_key(state["run_token"], entry["keys"])
    if not tag.isalnum():  # read from a file: a tag is ours (hex) or made again
        tag = part_key(state["run_token"], entry["keys"])
    entry["part"] = tag
    found = bc.find(tag, entry) if look_up else None
    if found is not None:
        entry["batch_id"], entry["input_file_id"], entry["status"] = found
        entry["fetched"] = False  # ended or not, its answered lines are fetched once
        log(f"batch {found[0]}: adopted (submitted by a run that was stopped before it recorded it)")
        write_json_atomic(folder / STATE, state)
        return
    part = [(k, _line(bc, k, requests[k]) if isinstance(bc, BatchClient) else requests[k]) for k in entry["keys"]
            if k in requests]  # fmt: skip
    if not part:  # answered elsewhere meanwhile (the cache, online): nothing to send
        entry["status"] = "dropped"
        write_json_atomic(folder / STATE, state)
        return
    if isinstance(bc, BatchClient):
        entry["input_file_id"] = bc.upload(part, tag)
        write_json_atomic(folder / STATE, state)
        entry["batch_id"], entry["status"] = bc.create(entry["input_file_id"], tag)
    else:
        entry["input_file_id"] = ""
        entry["batch_id"], entry["status"] = bc.create_inlined(part, tag)
    write_json_atomic(folder / STATE, state)  # before waiting: a killed run resumes this batch
    log(f"batch {entry['batch_id']}: {len(part)} requests submitted")


def _line(bc: BatchClient, key: str, request: Request) -> bytes:
    body = {"custom_id": key, "method": "POST", "url": bc.endpoint, "body": bc.body(request)}
    return (json.dumps(body, ensure_ascii=False) + "\n").encode()


def _answers(content: bytes) -> dict[str, dict[str, object]]:
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
