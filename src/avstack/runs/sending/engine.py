"""The run engine, task-neutral: bounded concurrency, retries, resumable results.

A task turns its items into `WorkItem`s (a finished request each) and a parser; the engine asks
the back-end, appends every answer to RUN_DIR/predictions.jsonl the moment it arrives, and on a
rerun keeps each item's final answer and asks again only for items without one (never
answered, or given up on after transient errors).
"""

from __future__ import annotations

import hashlib
import json
import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from contextlib import nullcontext
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from avstack.errors import UsageError
from avstack.io import DataError, JsonlAppender, Progress, read_json, read_jsonl, write_json_atomic, write_jsonl_atomic
from avstack.prompting.messages import Request, unmarked_unless_shared
from avstack.runs.planning.cost import Budget, BudgetReached
from avstack.runs.planning.provider_limits import limit_named
from avstack.runs.sending.interleave import LANE
from avstack.runs.sending.predictions import Failure, Prediction, is_final
from avstack.runs.sending.runners import Backend, FatalError, TransientError, refusal
from avstack.runs.sending.secrets import Scrubber
from avstack.version import __version__

REFUSED = "refused before sending"  # the back-end cannot take the request (runners.refusal)


@dataclass(frozen=True)
class RunSettings:
    """Engine options only; what a task puts in its requests is the task's own value."""

    concurrency: int = 4
    retries: int = 5
    backoff_s: float = 1.0
    max_backoff_s: float = 60.0
    # the cost budget: charged from the servers' usage; once reached no new request starts (resumable)
    budget: Budget | None = field(default=None, compare=False)
    # batch mode: seconds between polls of the provider's batch API; None asks one request at a time
    batch_poll_s: float | None = None
    # ask failures again: a recorded request failure (refused, HTTP 4xx, no answer) is asked again
    retry_failed: bool = False
    # an ablation's stacks clip by clip through one pool (runs.interleave); False: one stack after another
    interleave: bool = True
    # the prefixes two or more of the job's requests share (prompting.messages.shared_prefixes): a
    # request whose marked prefix no other shares goes without its mark, so no cache write is paid
    # for nothing; None: every request as built
    shared_prefixes: frozenset[str] | None = field(default=None, compare=False, repr=False)


def request_key(backend_id: str, req: Request) -> str:
    body = json.dumps(
        {"b": backend_id, "r": req.to_neutral(), "meta": req.meta.get("coord_order")},
        sort_keys=True,
        ensure_ascii=False,
    )
    return hashlib.sha256(body.encode()).hexdigest()


class AnswerCache:
    """Answers by request content, shared between the stacks of an ablation."""

    def __init__(self, folder: Path | None):
        self.folder = folder

    def get(self, key: str) -> dict[str, object] | None:
        if self.folder is None:
            return None
        hit = read_json(self.folder / f"{key}.json")
        if not isinstance(hit, dict) or not {"raw", "usage", "error"} <= set(hit):
            return None
        return hit if is_final(hit["error"], Failure.named(hit.get("failure"))) else None

    def put(self, key: str, value: dict[str, Any]) -> None:
        if self.folder is not None:
            write_json_atomic(self.folder / f"{key}.json", value)


def ask_with_retries(
    backend: Backend,
    req: Request,
    truth: dict[str, object],
    s: RunSettings,
    sleep: Callable[[float], None] = time.sleep,
    scrubber: Scrubber | None = None,
) -> tuple[str | None, dict[str, object], str | None, int, Failure | None]:
    """(text, usage, error, attempts, failure kind), every string scrubbed of secrets before anyone
    sees it. Transient failures back off exponentially with jitter; a FatalError propagates
    (scrubbed)."""
    scrub = (scrubber or Scrubber(backend.secrets())).scrub
    try:
        text, usage, error, attempts, failure = _ask(backend, req, truth, s, sleep)
    except FatalError as exc:
        raise FatalError(scrub(str(exc))) from None
    return scrub(text), scrub(usage), scrub(error), attempts, failure


def _ask(
    backend: Backend, req: Request, truth: dict[str, object], s: RunSettings, sleep: Callable[[float], None]
) -> tuple[str | None, dict[str, object], str | None, int, Failure | None]:
    last = ""
    for attempt in range(1, s.retries + 2):
        try:
            ans = backend.answer(req, truth)
            return ans.text, ans.usage, None, attempt, None
        except FatalError:
            raise  # wrong for every item: the run stops, nothing is recorded
        except TransientError as exc:
            last = str(exc)
            if limit_named(last):  # a limit the request goes over: asking again cannot mend it
                return None, {}, last, attempt, Failure.LIMIT
            if attempt > s.retries:
                break
            delay = (
                exc.retry_after
                if exc.retry_after is not None
                else min(s.max_backoff_s, s.backoff_s * 2 ** (attempt - 1)) * (0.5 + random.random())
            )
            sleep(delay)
        except Exception as exc:  # a permanent failure for this item only (a limit the server names, or not)
            said = f"{type(exc).__name__}: {exc}"
            return None, {}, said, attempt, Failure.LIMIT if limit_named(said) else Failure.REJECTED
    return None, {}, f"transient: gave up after {s.retries + 1} attempts: {last}", s.retries + 1, Failure.GAVE_UP


@dataclass(frozen=True)
class WorkItem:
    """One thing to ask: its id, the finished request, what only an oracle may see, and fields
    copied into its prediction line (e.g. the option labels as shown). A preset `error` (a
    missing image) is recorded as that item's final answer without asking anyone."""

    id: str
    request: Request | None
    truth: dict[str, Any] = field(default_factory=dict)
    record: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


Parser = Callable[[str, WorkItem], tuple[dict[str, object], str | None]]


def failed_request(rec: dict[str, object]) -> bool:
    """A recorded outcome with no answer: the request failed (refused, a 4xx, an input problem)."""
    return rec.get("raw") is None and bool(rec.get("error"))


def _load_final(path: Path, id_field: str, retry_failed: bool = False) -> dict[str, dict[str, object]]:
    """Final answers already in a predictions file (last line per item wins); with `retry_failed`
    a failed request is not final."""
    done: dict[str, dict[str, object]] = {}
    if not path.is_file():
        return done
    for n, rec in read_jsonl(path):
        if isinstance(rec, DataError):
            continue  # a line cut by a kill: that item is asked again
        try:
            pred = Prediction.from_json(rec, id_field, f"{path}:{n}")
        except DataError:
            continue  # not a line of ours: that item is asked again
        if pred.final and not (retry_failed and pred.failed_request):
            done[pred.item_id] = rec
        else:
            done.pop(pred.item_id, None)
    return done


def _settings_of(backend: Backend) -> dict[str, object]:
    return backend.settings()


GENERATION = ("temperature", "max_tokens")  # settings that change the answer: part of its cache key


def answer_key_id(backend_id: str, settings: dict[str, object]) -> str:
    """The back-end's id in answer keys: with the generation settings that differ from the
    defaults (`--max-tokens 300` is another answer than 2,048), so the default keys stay as they
    were and an answer is never reused under other settings."""
    from avstack.runs.sending.runners import DEFAULTS

    changed = [f"{k}={settings[k]}" for k in GENERATION if k in settings and settings[k] != DEFAULTS[k]]
    return "|".join([backend_id, *changed])


def _wait_all(futures: list[Future[object]], wrap: Callable[..., Any]) -> None:
    try:
        for f in wrap(as_completed(futures), len(futures)):
            f.result()
    except BaseException:
        # a fatal answer (bad key, unknown model), a failed write or Ctrl-C: nothing more is
        # asked; answers already written stay whole and count on the rerun
        for f in futures:
            f.cancel()
        raise


class NoBatchMode(UsageError):
    """Batch answers were asked of a back-end that has no batch API."""


def _batch_answers(
    backend: Backend, bid: str, todo: list[WorkItem], cache: AnswerCache, out: Path, s: RunSettings, scrub: Scrubber
) -> dict[str, dict[str, object]]:
    """In batch mode: the answers of the requests not yet answered nor cached, from the provider's
    batch API (avstack.runs.sending.batch_api); what it leaves unanswered is asked online as usual."""
    if s.batch_poll_s is None:
        return {}
    client = backend.batch_client()
    if client is None:
        raise NoBatchMode(f"--batch: the back-end {bid!r} has no batch mode (OpenAI-compatible servers have)")
    from avstack.runs.sending.batch_api import answer_in_batches

    pending = [(request_key(bid, it.request), it.request) for it in todo if it.request is not None and it.error is None]
    pending = [(k, r) for k, r in pending if cache.get(k) is None]
    return answer_in_batches(client, pending, out, s.batch_poll_s, scrub=scrub.scrub) if pending else {}


@dataclass(frozen=True)
class Asking:
    """Who answers a run and how, as one record: the back-end, its name in the answer cache's keys
    (default: its own), the cache shared by the runs of a job, the engine's options, the progress."""

    backend: Backend
    backend_id: str | None = None
    cache_dir: Path | None = None
    settings: RunSettings | None = None
    progress: Progress | None = None


def run_items(
    items: list[WorkItem], out: str | Path, parse: Parser, meta: dict[str, Any], asking: Asking, id_field: str
) -> Path:
    """Ask every item without a final answer; returns the predictions file."""
    s = asking.settings or RunSettings()
    out = Path(out)
    pred_path = out / "predictions.jsonl"
    done = _load_final(pred_path, id_field, s.retry_failed)
    # rewrite without superseded or half lines, so the file holds one final line per item
    write_jsonl_atomic(pred_path, done.values())
    todo = [it for it in items if it.id not in done]
    if s.budget is not None and s.budget.reached():
        todo = []  # an earlier stack of this job spent the budget
    run = ItemRun(asking, s, out, parse, meta, id_field, todo)
    run.dispatch(items, todo, asking.progress or (lambda it, n: it))
    if s.budget is not None and s.budget.reached():
        raise BudgetReached(s.budget.limit_usd, s.budget.spent_usd, out)
    return pred_path


class ItemRun:
    """One run's asking: run.json, each item's answer (the answer cache, a batch, or the back-end,
    with retries), its prediction line, and the stop on a spent budget or a fatal error."""

    def __init__(
        self,
        asking: Asking,
        s: RunSettings,
        out: Path,
        parse: Parser,
        meta: dict[str, Any],
        id_field: str,
        todo: list[WorkItem],
    ) -> None:
        self.backend, self.s, self.parse, self.meta, self.id_field = asking.backend, s, parse, meta, id_field
        bid: str = asking.backend_id or str(getattr(self.backend, "name", "backend"))
        self.scrubber = Scrubber(self.backend.secrets())
        run_json = {"avstack_version": __version__, "backend": bid, "backend_settings": _settings_of(self.backend)}
        write_json_atomic(out / "run.json", self.scrubber.scrub(run_json) | meta)
        self.lane = LANE.get() if s.batch_poll_s is None else None  # an ablation's shared pool (runs.interleave)
        self.stopping = threading.Event()
        self.cache = AnswerCache(asking.cache_dir)
        self.key_id = answer_key_id(bid, _settings_of(self.backend))
        self.batched = _batch_answers(self.backend, self.key_id, todo, self.cache, out, s, self.scrubber)
        self.writer = JsonlAppender(out / "predictions.jsonl")

    def asked(self, request: Request, truth: dict[str, object], key: str) -> tuple[Any, ...]:
        """(text, usage, error, attempts, failure kind, cache hit) of one request: from the cache, a
        batch, or the back-end."""
        s, cache = self.s, self.cache
        hit = cache.get(key)
        if hit is not None and s.retry_failed and hit.get("raw") is None:
            hit = None  # a cached failure is asked again too
        if hit is not None:
            text, usage, error = self.scrubber.scrub((hit["raw"], hit["usage"], hit["error"]))
            failure = Failure.named(hit.get("failure"))
            if failure is None and text is None and error:  # cached before kinds were recorded
                failure = Failure.LIMIT if limit_named(error) else Failure.REJECTED
            return text, usage, error, 0, failure, hit
        if key in self.batched:  # answered in a batch: recorded as the online path does
            text, usage, error = self.scrubber.scrub((self.batched[key]["raw"], self.batched[key]["usage"], None))
            attempts, failure = 0, None
            cache.put(key, {"raw": text, "usage": usage, "error": error})
        else:
            text, usage, error, attempts, failure = ask_with_retries(
                self.backend, request, truth, s, scrubber=self.scrubber
            )
            if failure is None or failure.final:
                kind = {"failure": failure.value} if failure is not None else {}
                cache.put(key, {"raw": text, "usage": usage, "error": error} | kind)
        if s.budget is not None and s.budget.charge(usage):
            self.stopping.set()  # the answer in hand is kept; no new request starts
        return text, usage, error, attempts, failure, None

    def one(self, item: WorkItem) -> dict[str, object]:
        """One item's prediction line, written as it comes."""
        t0 = time.perf_counter()
        hit = None
        text: str | None
        usage: dict[str, object]
        error: str | None
        failure: Failure | None
        why = refusal(self.backend, item.request) if item.error is None and item.request is not None else None
        if item.error is not None or item.request is None:
            text, usage, error, attempts, failure = None, {}, item.error or "no request", 0, Failure.INPUT
        elif why is not None:  # a part the back-end cannot take: refused here, nothing is sent or dropped
            text, usage, error, attempts, failure = None, {}, f"{REFUSED}: {why}", 0, Failure.REFUSED
        else:
            key = request_key(self.key_id, item.request)
            with self.lane.only_one(key) if self.lane is not None else nullcontext():
                sent = unmarked_unless_shared(item.request, self.s.shared_prefixes)
                text, usage, error, attempts, failure, hit = self.asked(sent, item.truth, key)
        parsed, perr = self.parse(text, item) if text is not None else ({}, None)
        pred = Prediction(
            item.id,
            self.id_field,
            text,
            parsed,
            perr,
            error,
            round(time.perf_counter() - t0, 4),
            usage,
            attempts,
            hit is not None,
            self.meta.get("stack"),
            item.record,
            limit_named(error) if failure is Failure.LIMIT else None,  # the limit the server named
            failure,
        )
        line = pred.to_json()
        self.writer.append(line)
        return line

    def unless_stopping(self, item: WorkItem) -> dict[str, object] | None:
        # set by the worker whose item failed, before it takes another: a worker thread picks the
        # next queued item as soon as it is free, before the loop below can cancel it (one more
        # request after a 401 than was in flight)
        s = self.s
        if self.stopping.is_set() or (s.budget is not None and s.budget.reached()):
            return None
        try:
            return self.one(item)
        except BaseException:
            self.stopping.set()
            raise

    def dispatch(self, items: list[WorkItem], todo: list[WorkItem], wrap: Progress) -> None:
        """The items to ask, through the ablation's shared pool clip by clip, or a pool of this run's own."""
        if self.lane is not None:  # one pool for the ablation's stacks; the ablation closes the back-end
            place = {it.id: i for i, it in enumerate(items)}
            futures = [self.lane.submit(place[it.id], partial(self.unless_stopping, it)) for it in todo]
            self.lane.ready()
            _wait_all(futures, wrap)
            return
        try:
            with ThreadPoolExecutor(max(1, self.s.concurrency)) as pool:
                _wait_all([pool.submit(self.unless_stopping, it) for it in todo], wrap)
        finally:
            self.backend.close()  # e.g. delete a run's uploads
