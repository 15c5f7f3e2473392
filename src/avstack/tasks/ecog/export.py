"""Export prepared inputs for other harnesses: OpenAI Batch API, generic JSONL, Hugging Face datasets."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from avstack.errors import MissingPackage, UsageError
from avstack.io import DataError, atomic_stream, write_jsonl_atomic
from avstack.manifest import ClipRecord, data_root_of, iter_manifest, manifest_shards
from avstack.prompting.messages import Audio, Request, Video, flat_prompt, render, to_openai
from avstack.prompting.stacks import Stack
from avstack.runs.exports.rows import ExportOptions, part_layout
from avstack.tasks.ecog.prompt import EcogOptions
from avstack.tasks.ecog.runs import request_or_problem, requests_for, require_ground_truth, usable

FORMATS = ("openai-batch", "jsonl", "hf", "lmms-eval")


def _refuse(problems: list[str]) -> None:
    """Never export what a manifest points at outside its folder: one error naming the clips."""
    if problems:
        more = f" (and {len(problems) - 5} more clips)" if len(problems) > 5 else ""
        raise DataError("; ".join(problems[:5]) + more)


def generic_row(record: ClipRecord, req: Request, stack: Stack) -> dict[str, Any]:
    question, images, pts = flat_prompt(req)
    video = next((str(req.path_of(p)) for p in req.parts if isinstance(p, Video)), None)
    # the omni stack's sound: the prepared WAV, on the clip's clock (sample 0 is the clip's start)
    audio = next((str(req.path_of(p)) for p in req.parts if isinstance(p, Audio)), None)
    return {
        "id": record.clip_id,
        "stack": stack.name,
        "system": req.system,
        "question": question,
        "parts": json.dumps(part_layout(req), ensure_ascii=False),
        "images": images,
        "image_pts_ms": pts,
        "video": video,
        "audio": audio,
        "answer": json.dumps(record.eval_gt or {}, ensure_ascii=False),
        "task_template": record.task_template,
        "lang": req.meta.get("lang"),
        "width": record.width,
        "height": record.height,
    }


def export(prepared: str | Path, stack: Stack, opts: ExportOptions, options: EcogOptions = EcogOptions()) -> Path:
    """Every usable clip of `prepared` under `stack`, written shard by shard as it goes (never the
    whole dataset in memory): `batch.jsonl`, `data.jsonl`, or `test-00000.parquet`, ... for hf.
    With `opts.executor="ray"` the shards are written by Ray Data workers. A clip whose manifest
    record points outside the prepared folder stops the export (nothing is written) and is named."""
    fmt, model, max_tokens = opts.to, opts.model, opts.max_tokens
    if fmt not in FORMATS:
        raise UsageError(f"--to must be one of {', '.join(FORMATS)}, or features; found {fmt!r}")
    require_ground_truth(prepared, iter_manifest(prepared))  # no silent empty export
    out = Path(opts.out)
    tmp = out / f".export-{uuid.uuid4().hex[:8]}"
    shard_fmt = "hf" if fmt == "lmms-eval" else fmt  # lmms-eval reads the Parquet shards
    spec = ShardSpec(str(Path(prepared).resolve()), str(tmp), shard_fmt, stack, options, model, max_tokens)
    ranges = manifest_shards(prepared, opts.shard_size)
    try:
        results = _run_shards(spec, ranges, opts.executor, opts.ray_address)
        _refuse([p for _, ps in results for p in ps])
        path = _publish(tmp, out, shard_fmt, len(ranges))
        if fmt == "lmms-eval":
            from avstack.tasks.ecog.lmms import write_task

            return write_task(out, stack, str((out / "test-*.parquet").resolve()), max_tokens)
        return path
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@dataclass(frozen=True)
class ShardSpec:
    prepared: str
    folder: str
    fmt: str
    stack: Stack
    options: EcogOptions
    model: str
    max_tokens: int


def _run_shards(spec: ShardSpec, ranges: list[tuple[int, int]], executor: str, address: str | None) -> list[Any]:
    if executor == "ray":
        from avstack.preparation.executors.ray import connect

        ray = connect(address)
        items = [{"k": k, "start": a, "end": b} for k, (a, b) in enumerate(ranges)]
        ds = ray.data.from_items(items, override_num_blocks=max(1, len(items)))
        rows = ds.map(_shard_row, fn_kwargs={"spec": pickle.dumps(spec)}, num_cpus=1).iter_rows()
        return [(r["count"], list(r["problems"])) for r in rows]
    return [write_shard(spec, k, a, b) for k, (a, b) in enumerate(ranges)]


def _shard_row(row: dict[str, Any], spec: bytes) -> dict[str, Any]:
    count, problems = write_shard(pickle.loads(spec), row["k"], row["start"], row["end"])
    return {"count": count, "problems": problems}


def write_shard(spec: ShardSpec, k: int, start: int, end: int) -> tuple[int, list[str]]:
    """One shard's file from one byte range of the manifest; (clips written, problems)."""
    rows, problems = [], []
    prepared = Path(spec.prepared)
    root = data_root_of(prepared)
    for rec in iter_manifest(prepared, start, end):
        if not usable(rec):
            continue
        req, why = request_or_problem(rec, spec.stack, spec.prepared, spec.options, root)
        if req is None:
            problems.append(f"{rec.clip_id}: {why}")
            continue
        rows.append(_row(spec, rec, req))
    folder = Path(spec.folder)
    if spec.fmt == "hf":
        _write_parquet(rows, folder / f"test-{k:05d}.parquet")
    else:
        write_jsonl_atomic(folder / f"part-{k:05d}.jsonl", rows)
    return len(rows), problems


def _row(spec: ShardSpec, rec: ClipRecord, req: Request) -> dict[str, Any]:
    if spec.fmt == "openai-batch":
        return {
            "custom_id": rec.clip_id,
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {"model": spec.model, "messages": to_openai(req), "temperature": 0, "max_tokens": spec.max_tokens},
        }
    return generic_row(rec, req, spec.stack)


def _publish(tmp: Path, out: Path, fmt: str, shards: int) -> Path:
    """Move the finished shards into place: Parquet shards as they are (old ones removed), JSONL
    parts joined into one file."""
    out.mkdir(parents=True, exist_ok=True)
    if fmt == "hf":
        for old in out.glob("test-*.parquet"):
            old.unlink()
        for shard in sorted(tmp.glob("test-*.parquet")):
            os.replace(shard, out / shard.name)
        return out / "test-00000.parquet"
    path = out / ("batch.jsonl" if fmt == "openai-batch" else "data.jsonl")
    with atomic_stream(path) as dst:
        for k in range(shards):
            with open(tmp / f"part-{k:05d}.jsonl", "rb") as src:
                shutil.copyfileobj(src, dst)
    return path


def _write_parquet(rows: list[dict[str, Any]], path: Path) -> Path:
    """Images embedded (datasets.Image), so the file is self-contained."""
    try:
        from datasets import Dataset, Features, Image, Sequence, Value
    except ImportError as exc:
        raise MissingPackage("--to hf needs the datasets package: pip install 'avstack[export]'") from exc
    features = Features(
        {
            "id": Value("string"),
            "stack": Value("string"),
            "system": Value("string"),
            "question": Value("string"),
            "parts": Value("string"),
            "images": Sequence(Image()),
            "image_pts_ms": Sequence(Value("int64")),
            "video": Value("string"),
            "audio": Value("string"),
            "answer": Value("string"),
            "task_template": Value("string"),
            "lang": Value("string"),
            "width": Value("int64"),
            "height": Value("int64"),
        }
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    if rows:
        Dataset.from_list(rows, features=features).to_parquet(str(path))
    return path


def write_stacks(
    prepared: str | Path,
    out: str | Path,
    stack: Stack,
    options: EcogOptions = EcogOptions(),
    fmt: str = "openai",
    media: str = "path",
) -> int:
    """The rendered request of every usable clip under one stack, one JSON line each; returns the count."""
    pairs, problems = requests_for(Path(prepared), stack, options)
    _refuse([f"{r.clip_id}: {why}" for r, why in problems])
    lines = [
        {
            "clip_id": rec.clip_id,
            "stack": stack.name,
            "anchors": sorted(stack.anchors),
            "format": fmt,
            "request": render(req, fmt, media),
        }
        for rec, req in pairs
    ]
    write_jsonl_atomic(out, lines)
    return len(lines)
