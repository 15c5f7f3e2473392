"""The one export writer, for every task: a task's rows (a list, or a source that makes each
shard's rows where it is written, as EcoG's manifest does) written shard by shard into a hidden
folder, locally or by Ray Data workers, then published whole: one JSONL or batch file, Parquet
shards, or an lmms-eval task folder over them. Nothing is half-written where a complete export
is expected; an item the task could not make a request of stops the export, named."""

from __future__ import annotations

import os
import pickle
import shutil
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from avstack.errors import UsageError
from avstack.io import DataError, atomic_stream, write_jsonl_atomic
from avstack.runs.exports.rows import (
    ExportOptions,
    ExportRow,
    LmmsTask,
    batch_line,
    row_of,
    write_lmms_task,
    write_parquet,
)

FORMATS = ("jsonl", "openai-batch", "hf", "lmms-eval")


class RowSource(Protocol):
    """Where a task's rows come from, shard by shard (picklable: a Ray worker makes its own)."""

    def shards(self, size: int) -> Sequence[object]:
        """What each shard is (EcoG: a byte range of the manifest)."""
        ...

    def rows(self, shard: Any) -> tuple[list[ExportRow], list[str]]:
        """One shard's rows, and each item it could not make a request of, named."""
        ...


@dataclass(frozen=True)
class RowList:
    """Rows already made (videoqa, EgoGap): each shard a slice of them."""

    items: tuple[ExportRow, ...]

    def shards(self, size: int) -> Sequence[Any]:
        return [(k, k + size) for k in range(0, len(self.items), size)]

    def rows(self, shard: Any) -> tuple[list[ExportRow], list[str]]:
        return list(self.items[shard[0] : shard[1]]), []


@dataclass(frozen=True)
class ShardJob:
    """What a worker needs to write one shard: the rows' source and how they are written."""

    source: Any
    folder: str
    fmt: str  # jsonl, openai-batch or hf (lmms-eval reads the hf shards)
    stack: str
    model: str
    max_tokens: int


def write_export(
    rows: Sequence[ExportRow] | RowSource, stack: str, opts: ExportOptions, lmms: LmmsTask | None = None
) -> Path:
    """Every row in the chosen format under opts.out; the path of the file (lmms-eval: the task
    YAML). Refused before anything is written: an unknown format, or lmms-eval for a task with no
    hooks; after the shards, before publishing: no row at all, or an item without a request."""
    if opts.to not in FORMATS:
        raise UsageError(f"--to must be one of {', '.join(FORMATS)}, or features; found {opts.to!r}")
    if opts.to == "lmms-eval" and lmms is None:
        raise UsageError("--to lmms-eval: this task has no lmms-eval hooks (export --to hf or jsonl)")
    source: Any = RowList(tuple(rows)) if isinstance(rows, Sequence) else rows
    out = Path(opts.out)
    tmp = out / f".export-{uuid.uuid4().hex[:8]}"
    fmt = "hf" if opts.to == "lmms-eval" else opts.to
    job = ShardJob(source, str(tmp), fmt, stack, opts.model, opts.max_tokens)
    shards = source.shards(max(1, opts.shard_size))
    try:
        written = _run_shards(job, shards, opts.executor, opts.ray_address)
        _refuse([p for _, problems in written for p in problems])
        if not sum(count for count, _ in written):
            raise DataError(f"nothing to export to {out}: no item has a request under {stack}")
        path = _publish(tmp, out, fmt, len(shards))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if opts.to == "lmms-eval":
        assert lmms is not None
        return write_lmms_task(out, stack, lmms, str((out / "test-*.parquet").resolve()), opts.max_tokens)
    return path


def _refuse(problems: list[str]) -> None:
    """Never export what a task could not make a request of: one error naming the items."""
    if problems:
        more = f" (and {len(problems) - 5} more items)" if len(problems) > 5 else ""
        raise DataError("; ".join(problems[:5]) + more)


def _run_shards(job: ShardJob, shards: Sequence[Any], executor: str, address: str | None) -> list[Any]:
    if executor == "ray":
        from avstack.preparation.executors.ray import connect

        ray = connect(address)
        items = [{"k": k, "shard": pickle.dumps(s)} for k, s in enumerate(shards)]
        ds = ray.data.from_items(items, override_num_blocks=max(1, len(items)))
        done = ds.map(_shard_row, fn_kwargs={"job": pickle.dumps(job)}, num_cpus=1).iter_rows()
        return [(r["count"], list(r["problems"])) for r in done]
    return [write_shard(job, k, s) for k, s in enumerate(shards)]


def _shard_row(row: dict[str, Any], job: bytes) -> dict[str, object]:
    count, problems = write_shard(pickle.loads(job), row["k"], pickle.loads(row["shard"]))
    return {"count": count, "problems": problems}


def write_shard(job: ShardJob, k: int, shard: object) -> tuple[int, list[str]]:
    """One shard's file from its rows; (rows written, items without a request)."""
    rows, problems = job.source.rows(shard)
    folder = Path(job.folder)
    if job.fmt == "hf":
        write_parquet([row_of(r, job.stack) for r in rows], folder / f"test-{k:05d}.parquet")
    elif job.fmt == "openai-batch":
        write_jsonl_atomic(folder / f"part-{k:05d}.jsonl", [batch_line(r, job.model, job.max_tokens) for r in rows])
    else:
        write_jsonl_atomic(folder / f"part-{k:05d}.jsonl", [row_of(r, job.stack) for r in rows])
    return len(rows), problems


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
            part = tmp / f"part-{k:05d}.jsonl"
            if part.is_file():
                with open(part, "rb") as src:
                    shutil.copyfileobj(src, dst)
    return path
