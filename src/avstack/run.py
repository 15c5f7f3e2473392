"""Run a back-end over prepared clips: bounded concurrency, retries, resumable results.

Every answer is appended to RUN_DIR/predictions.jsonl the moment it arrives.
A rerun keeps each clip's final answer and asks again only for clips without
one (never answered, or given up on after transient errors).
"""

from __future__ import annotations

import hashlib
import json
import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import __version__
from .messages import Request
from .prepare import Progress, load_manifest, write_json_atomic
from .runners import Backend, TransientError
from .stacks import Stack
from .tasks.ecog.data import GtClip
from .tasks.ecog.parse import parse_answer
from .tasks.ecog.prompt import PROMPT_VERSION, build_request


@dataclass(frozen=True)
class RunSettings:
    concurrency: int = 4
    retries: int = 5
    backoff_s: float = 1.0
    max_backoff_s: float = 60.0
    coord_order: str = "xy"
    asr_source: str | None = None
    lang: str | None = None


def _prepared_root(prepared: Path) -> str | None:
    meta = prepared / "prepare.json"
    return json.loads(meta.read_text())["data_root"] if meta.is_file() else None


def gt_of(record: dict[str, Any]) -> GtClip:
    """Ground truth of a prepared clip, keyed by clip_id (unique across folders)."""
    return GtClip(
        video_name=record["clip_id"],
        task_template=record.get("task_template") or "",
        width=record["width"],
        height=record["height"],
        eval_gt=record.get("eval_gt") or {},
        lang=record.get("lang"),
        scene=record.get("scene"),
    )


def usable(record: dict[str, Any]) -> bool:
    return not record.get("error") and bool(record.get("eval_gt")) and bool(record.get("width"))


def requests_for(prepared: Path, stack: Stack, s: RunSettings) -> list[tuple[dict[str, Any], Request]]:
    root = _prepared_root(prepared)
    return [
        (r, build_request(r, stack, str(prepared.resolve()), s.lang, s.coord_order, s.asr_source, root))
        for r in load_manifest(prepared)
        if usable(r)
    ]


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

    def get(self, key: str) -> dict[str, Any] | None:
        if self.folder is None:
            return None
        path = self.folder / f"{key}.json"
        return json.loads(path.read_text()) if path.is_file() else None

    def put(self, key: str, value: dict[str, Any]) -> None:
        if self.folder is not None:
            write_json_atomic(self.folder / f"{key}.json", value)


def ask_with_retries(
    backend: Backend, req: Request, truth: dict[str, Any], s: RunSettings, sleep: Callable[[float], None] = time.sleep
) -> tuple[str | None, dict[str, Any], str | None, int]:
    """(text, usage, error, attempts). Transient failures back off exponentially with jitter."""
    last = ""
    for attempt in range(1, s.retries + 2):
        try:
            ans = backend.answer(req, truth)
            return ans.text, ans.usage, None, attempt
        except TransientError as exc:
            last = str(exc)
            if attempt > s.retries:
                break
            delay = (
                exc.retry_after
                if exc.retry_after is not None
                else min(s.max_backoff_s, s.backoff_s * 2 ** (attempt - 1)) * (0.5 + random.random())
            )
            sleep(delay)
        except Exception as exc:  # a permanent failure for this item only
            return None, {}, f"{type(exc).__name__}: {exc}", attempt
    return None, {}, f"transient: gave up after {s.retries + 1} attempts: {last}", s.retries + 1


@dataclass(frozen=True)
class WorkItem:
    """One thing to ask: its id, the finished request, what only `oracle` may see, and fields
    copied into its prediction line (e.g. the option labels as shown). A preset `error` (a
    missing image) is recorded as that item's final answer without asking anyone."""

    id: str
    request: Request | None
    truth: dict[str, Any] = field(default_factory=dict)
    record: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


Parser = Callable[[str, WorkItem], tuple[dict[str, Any], str | None]]


def read_predictions(path: str | Path) -> list[dict[str, Any]]:
    """Prediction lines of a JSONL file; a bad line is an error naming the file and line."""
    preds = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                preds.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{n}: not JSON ({exc.msg})") from None
    return preds


def _load_final(path: Path, id_field: str) -> dict[str, dict[str, Any]]:
    """Final answers already in a predictions file (last line per item wins)."""
    done: dict[str, dict[str, Any]] = {}
    if not path.is_file():
        return done
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut by a kill: that item is asked again
        if not str(rec.get("error") or "").startswith("transient"):
            done[rec[id_field]] = rec
        else:
            done.pop(rec[id_field], None)
    return done


def run_items(
    items: list[WorkItem],
    backend: Backend,
    out: str | Path,
    parse: Parser,
    meta: dict[str, Any],
    settings: RunSettings | None = None,
    id_field: str = "video_name",
    cache_dir: Path | None = None,
    backend_id: str | None = None,
    progress: Progress | None = None,
) -> Path:
    """The task-neutral engine: ask every item without a final answer; returns the predictions file."""
    from .media import atomic_write

    s = settings or RunSettings()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    pred_path = out / "predictions.jsonl"
    done = _load_final(pred_path, id_field)
    # rewrite without superseded or half lines, so the file holds one final line per item
    atomic_write(pred_path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in done.values()).encode())
    bid: str = backend_id or str(getattr(backend, "name", "backend"))
    write_json_atomic(
        out / "run.json",
        {"avstack_version": __version__, "backend": bid, "backend_settings": _settings_of(backend)} | meta,
    )
    todo = [it for it in items if it.id not in done]
    cache = AnswerCache(cache_dir)
    lock = threading.Lock()

    def one(item: WorkItem) -> dict[str, Any]:
        t0 = time.perf_counter()
        hit = None
        text: str | None
        usage: dict[str, Any]
        error: str | None
        if item.error is not None or item.request is None:
            text, usage, error, attempts = None, {}, item.error or "no request", 0
        else:
            key = request_key(bid, item.request)
            hit = cache.get(key)
            if hit is None:
                text, usage, error, attempts = ask_with_retries(backend, item.request, item.truth, s)
                if error is None or not error.startswith("transient"):
                    cache.put(key, {"raw": text, "usage": usage, "error": error})
            else:
                text, usage, error, attempts = hit["raw"], hit["usage"], hit["error"], 0
        pred, perr = parse(text, item) if text is not None else ({}, None)
        rec = {
            id_field: item.id,
            "raw": text,
            "prediction": pred,
            "parse_error": perr,
            "error": error,
            "latency_s": round(time.perf_counter() - t0, 4),
            "usage": usage,
            "attempts": attempts,
            "cached": hit is not None,
            "stack": meta.get("stack"),
        } | item.record
        with lock, open(pred_path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
            fh.flush()
        return rec

    wrap = progress or (lambda it, n: it)
    try:
        with ThreadPoolExecutor(max(1, s.concurrency)) as pool:
            futures = [pool.submit(one, it) for it in todo]
            for _ in wrap(as_completed(futures), len(futures)):
                pass
    finally:
        close = getattr(backend, "close", None)
        if callable(close):
            close()  # e.g. delete a run's uploads
    return pred_path


def run(
    prepared: str | Path,
    backend: Backend,
    stack: Stack,
    out: str | Path,
    settings: RunSettings | None = None,
    cache_dir: Path | None = None,
    backend_id: str | None = None,
    progress: Progress | None = None,
) -> Path:
    """Answer every usable EcoG clip of a prepared folder; returns the predictions file."""
    s = settings or RunSettings()
    prepared = Path(prepared)
    meta = {
        "task": "ecog",
        "stack": stack.name,
        "variant": stack.variant,
        "anchors": sorted(stack.anchors),
        "dropped": list(stack.dropped),
        "prompt_version": PROMPT_VERSION,
        "prepared": str(prepared.resolve()),
        "coord_order": s.coord_order,
        "asr_source": s.asr_source or "default",
    }
    items = [
        WorkItem(r["clip_id"], q, {"eval_gt": r["eval_gt"], "width": r["width"], "height": r["height"]})
        for r, q in requests_for(prepared, stack, s)
    ]

    def parse(text: str, item: WorkItem) -> tuple[dict[str, Any], str | None]:
        return parse_answer(text, s.coord_order)

    return run_items(items, backend, out, parse, meta, s, "video_name", cache_dir, backend_id, progress)


def _settings_of(backend: Backend) -> dict[str, Any]:
    get = getattr(backend, "settings", None)
    return get() if callable(get) else {}


def score_run(prepared: str | Path, run_dir: str | Path) -> dict[str, Any]:
    from .tasks.ecog import score

    clips = [gt_of(r) for r in load_manifest(prepared) if usable(r)]
    preds = read_predictions(Path(run_dir) / "predictions.jsonl")
    result = score(clips, preds).to_json()
    write_json_atomic(Path(run_dir) / "score.json", result)
    return result
