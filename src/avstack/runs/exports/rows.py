"""What every task's export is made of: rows of (id, request, answer, extra), one row format for
JSONL, Hugging Face Parquet (one schema, images embedded) and lmms-eval, an OpenAI batch line,
and the lmms-eval task folder (its YAML and utils, whose hooks are the task's own parser and
scorer). A task hands its rows to the one writer (runs.exports.writer)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from avstack.errors import MissingPackage
from avstack.io import atomic_write
from avstack.options import OUTPUT, option
from avstack.prompting.messages import Audio, Request, Text, Video, flat_prompt, to_openai

FORMATS = ("jsonl", "openai-batch", "hf", "lmms-eval")
SHARD_SIZE = 1000  # rows per Parquet shard


@dataclass(frozen=True)
class ExportOptions:
    """Where and how an export is written (`avstack export`'s options beside the stack)."""

    to: str = option("jsonl", "jsonl, openai-batch, hf, lmms-eval (a task folder), or features", panel=OUTPUT)
    out: Path = option(Path("export"), "Output folder", panel=OUTPUT, short="-o")
    model: str = option("gpt-4o", "Model named in openai-batch request bodies", panel=OUTPUT)
    max_tokens: int = option(2048, "Longest answer (openai-batch bodies, lmms-eval generation)", panel=OUTPUT)
    shard_size: int = option(SHARD_SIZE, "Rows per shard (per Parquet file for hf)", panel=OUTPUT)
    executor: str = option("local", "local, or ray (the shards written by Ray Data workers)", panel=OUTPUT)
    ray_address: str | None = option(None, "Ray cluster address (default RAY_ADDRESS)", panel=OUTPUT)


@dataclass(frozen=True)
class ExportRow:
    """One item to export: its id, its request exactly as `avstack run` sends it, the truth its
    scorer needs (JSON), and fields a harness may group by."""

    id: str
    request: Request
    answer: dict[str, object]
    extra: Mapping[str, object] = field(default_factory=dict)


class _Row(TypedDict):
    id: str
    stack: str
    system: str
    question: str
    parts: str  # JSON: part_layout
    images: Sequence[object]  # paths as written; PIL images once `datasets` has decoded the column
    image_pts_ms: list[int | None]
    video: str | None
    audio: str | None
    answer: str  # JSON: the truth the task's scorer reads
    extra: str  # JSON: fields a harness may group by


class LmmsDoc(_Row, total=False):
    """A generic row (row_of) as lmms-eval's hooks get it back (`doc`): read from a file, so each
    hook parses its JSON columns itself. An EcoG export written before the one schema had its
    clip's size as columns."""

    width: int
    height: int


@dataclass(frozen=True)
class LmmsTask:
    """What an lmms-eval task folder takes from the task: its name's prefix, the module whose
    `process_results(doc, results)` parses and scores one answer, and the metrics it returns."""

    prefix: str  # e.g. avstack_videoqa
    hooks: str  # e.g. avstack.tasks.videoqa.lmms
    metrics: tuple[str, ...]
    # a metric that is not a mean over answers: the hooks module's function that aggregates it
    # (Video-MME-v2's Non-Lin Score is a mean over groups of four)
    aggregations: Mapping[str, str] = field(default_factory=dict)


def part_layout(req: Request) -> list[dict[str, str]]:
    """The user turn's parts in order, media by kind only (`{"type": "image"}` is the next of the
    row's images): what a harness needs to send the request exactly as `avstack run` does, text
    part by text part (a flat prompt joins them, and a chat template then sees other text)."""
    return [
        {"type": "text", "text": p.text} if isinstance(p, Text) else {"type": type(p).__name__.lower()}
        for p in req.parts
    ]


def row_of(item: ExportRow, stack: str) -> LmmsDoc:
    """The generic row (jsonl, hf, lmms-eval): the flat prompt, the parts in order, the media."""
    req = item.request
    question, images, pts = flat_prompt(req)
    video = next((str(req.path_of(p)) for p in req.parts if isinstance(p, Video)), None)
    audio = next((str(req.path_of(p)) for p in req.parts if isinstance(p, Audio)), None)
    return {
        "id": item.id,
        "stack": stack,
        "system": req.system,
        "question": question,
        "parts": json.dumps(part_layout(req), ensure_ascii=False),
        "images": images,
        "image_pts_ms": pts,
        "video": video,
        "audio": audio,
        "answer": json.dumps(item.answer, ensure_ascii=False),
        "extra": json.dumps(item.extra, ensure_ascii=False),
    }


def batch_line(item: ExportRow, model: str, max_tokens: int) -> dict[str, object]:
    body = {"model": model, "messages": to_openai(item.request), "temperature": 0, "max_tokens": max_tokens}
    return {"custom_id": item.id, "method": "POST", "url": "/v1/chat/completions", "body": body}


def parquet_features() -> object:
    """The one Parquet schema of every task's rows (row_of): text columns, the images embedded
    (datasets.Image) so a shard is self-contained, and each image's pts."""
    try:
        from datasets import Features, Image, Sequence, Value
    except ImportError as exc:
        raise MissingPackage("--to hf needs the datasets package: pip install 'avstack[export]'") from exc
    text = Value("string")
    return Features(
        {k: text for k in ("id", "stack", "system", "question", "parts", "video", "audio", "answer", "extra")}
        | {"images": Sequence(Image()), "image_pts_ms": Sequence(Value("int64"))}
    )


def write_parquet(rows: Sequence[Mapping[str, object]], path: Path) -> Path:
    """One shard of rows as Parquet (an empty shard writes nothing)."""
    from datasets import Dataset

    path.parent.mkdir(parents=True, exist_ok=True)
    if rows:
        Dataset.from_list(rows, features=parquet_features()).to_parquet(str(path))
    return path


UTILS = '''"""lmms-eval hooks for an avstack export (generated by `avstack export --to lmms-eval`)."""

from avstack.runs import lmms_hooks as hooks
from {module} import process_results as scored


def doc_to_visual(doc):
    return hooks.doc_to_visual(doc)


def doc_to_messages(doc, lmms_eval_specific_kwargs=None):
    return hooks.doc_to_messages(doc)


def doc_to_text(doc, lmms_eval_specific_kwargs=None):
    return hooks.doc_to_text(doc, lmms_eval_specific_kwargs)


def process_results(doc, results):
    return scored(doc, results)


def aggregate_mean(items):
    return hooks.aggregate_mean(items)
'''
# the task's own aggregation, where a metric has one (LmmsTask.aggregations)
AGGREGATION = """

def {name}(items):
    from {module} import {name} as aggregate

    return aggregate(items)
"""


def lmms_task_name(prefix: str, stack: str) -> str:
    return prefix + "_" + re.sub(r"[^A-Za-z0-9_]+", "_", stack).strip("_")


def lmms_yaml(
    name: str, metrics: Sequence[str], data_files: str, max_tokens: int, aggregations: Mapping[str, str] | None = None
) -> str:
    how = {m: (aggregations or {}).get(m, "aggregate_mean") for m in metrics}
    listed = "".join(
        f"  - metric: {m}\n    aggregation: !function utils.{how[m]}\n    higher_is_better: true\n" for m in metrics
    )
    return (
        f"task: {name}\n"
        "dataset_path: parquet\n"
        "dataset_kwargs:\n"
        f"  data_files:\n    test: {json.dumps(data_files)}\n"
        "test_split: test\n"
        "output_type: generate_until\n"
        "doc_to_visual: !function utils.doc_to_visual\n"
        "doc_to_text: !function utils.doc_to_text\n"
        "doc_to_messages: !function utils.doc_to_messages\n"
        "doc_to_target: answer\n"
        f"generation_kwargs:\n  max_new_tokens: {max_tokens}\n  temperature: 0\n  do_sample: false\n"
        "process_results: !function utils.process_results\n"
        f"metric_list:\n{listed}"
        "metadata:\n  version: 1.0\n  source: avstack export --to lmms-eval\n"
    )


def write_lmms_task(folder: Path, stack: str, lmms: LmmsTask, shards_glob: str, max_tokens: int) -> Path:
    name = lmms_task_name(lmms.prefix, stack)
    path = folder / f"{name}.yaml"
    atomic_write(path, lmms_yaml(name, lmms.metrics, shards_glob, max_tokens, lmms.aggregations).encode())
    own = "".join(AGGREGATION.format(module=lmms.hooks, name=f) for f in sorted(set(lmms.aggregations.values())))
    atomic_write(folder / "utils.py", (UTILS.format(module=lmms.hooks) + own).encode())
    return path
