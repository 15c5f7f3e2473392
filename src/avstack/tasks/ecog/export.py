"""EcoG's exports: its rows for the one export writer (runs.exports.writer: JSONL, OpenAI batch,
Hugging Face Parquet, lmms-eval), and `avstack stacks`' rendered requests."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from avstack.io import DataError, write_jsonl_atomic
from avstack.manifest import data_root_of, iter_manifest, manifest_shards
from avstack.prompting.messages import render
from avstack.prompting.stacks import Stack
from avstack.runs.exports.rows import ExportOptions, ExportRow, LmmsTask
from avstack.runs.exports.writer import write_export
from avstack.tasks.ecog.inputs import EcogInputs
from avstack.tasks.ecog.metrics import METRICS
from avstack.tasks.ecog.runs import request_or_problem, requests_for, require_ground_truth, usable


def _refuse(problems: list[str]) -> None:
    """Never export what a manifest points at outside its folder: one error naming the clips."""
    if problems:
        more = f" (and {len(problems) - 5} more clips)" if len(problems) > 5 else ""
        raise DataError("; ".join(problems[:5]) + more)


@dataclass(frozen=True)
class ManifestRows:
    """EcoG's rows for the one export writer, made shard by shard from byte ranges of the manifest
    where the shard is written (never the whole dataset in memory; a Ray worker reads its own)."""

    prepared: str
    stack: Stack
    options: EcogInputs

    def shards(self, size: int) -> list[tuple[int, int]]:
        return manifest_shards(self.prepared, size)

    def rows(self, shard: tuple[int, int]) -> tuple[list[ExportRow], list[str]]:
        rows, problems = [], []
        prepared = Path(self.prepared)
        root = data_root_of(prepared)
        for rec in iter_manifest(prepared, *shard):
            if not usable(rec):
                continue
            req, why = request_or_problem(rec, self.stack, self.prepared, self.options, root)
            if req is None:
                problems.append(f"{rec.clip_id}: {why}")
                continue
            extra = {"task_template": rec.task_template, "lang": req.meta.get("lang"), "width": rec.width}
            rows.append(ExportRow(rec.clip_id, req, rec.eval_gt or {}, extra | {"height": rec.height}))
        return rows, problems


LMMS = LmmsTask("avstack_ecog", "avstack.tasks.ecog.lmms", METRICS)


def export(prepared: str | Path, stack: Stack, opts: ExportOptions, options: EcogInputs = EcogInputs()) -> Path:
    """Every usable clip of `prepared` under `stack`, through the one export writer: `batch.jsonl`,
    `data.jsonl`, Parquet shards (hf) or an lmms-eval task folder; with `opts.executor="ray"` the
    shards are written by Ray Data workers. A clip whose manifest record points outside the
    prepared folder stops the export (nothing is written) and is named."""
    require_ground_truth(prepared, iter_manifest(prepared))  # no silent empty export
    return write_export(ManifestRows(str(Path(prepared).resolve()), stack, options), stack.name, opts, LMMS)


def write_stacks(
    prepared: str | Path,
    out: str | Path,
    stack: Stack,
    options: EcogInputs = EcogInputs(),
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
