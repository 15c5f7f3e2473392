"""Export prepared inputs for other harnesses: OpenAI Batch API, generic JSONL, Hugging Face datasets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ...io import DataError, write_jsonl_atomic
from ...manifest import ClipRecord
from ...messages import Request, Video, flat_prompt, render, to_openai
from ...stacks import Stack
from .prompt import EcogOptions
from .runs import requests_for

FORMATS = ("openai-batch", "jsonl", "hf")


def _more(problems: list[Any]) -> str:
    return f" (and {len(problems) - 5} more clips)" if len(problems) > 5 else ""


def generic_row(record: ClipRecord, req: Request, stack: Stack) -> dict[str, Any]:
    question, images, pts = flat_prompt(req)
    video = next((str(req.path_of(p)) for p in req.parts if isinstance(p, Video)), None)
    return {
        "id": record.clip_id,
        "stack": stack.name,
        "system": req.system,
        "question": question,
        "images": images,
        "image_pts_ms": pts,
        "video": video,
        "answer": json.dumps(record.eval_gt or {}, ensure_ascii=False),
        "task_template": record.task_template,
        "lang": req.meta.get("lang"),
        "width": record.width,
        "height": record.height,
    }


def export(
    prepared: str | Path,
    out: str | Path,
    fmt: str,
    stack: Stack,
    options: EcogOptions = EcogOptions(),
    model: str = "gpt-4o",
    max_tokens: int = 2048,
) -> Path:
    """Write one file for every usable clip of `prepared` under `stack`; returns the file."""
    if fmt not in FORMATS:
        raise ValueError(f"--to must be one of {', '.join(FORMATS)}; found {fmt!r}")
    out = Path(out)
    pairs, problems = requests_for(Path(prepared), stack, options)
    if problems:  # never export what a manifest points at outside its folder
        raise DataError("; ".join(f"{r.clip_id}: {why}" for r, why in problems[:5]) + _more(problems))
    if fmt == "openai-batch":
        path = out / "batch.jsonl"
        write_jsonl_atomic(
            path,
            [
                {
                    "custom_id": rec.clip_id,
                    "method": "POST",
                    "url": "/v1/chat/completions",
                    "body": {"model": model, "messages": to_openai(req), "temperature": 0, "max_tokens": max_tokens},
                }
                for rec, req in pairs
            ],
        )
        return path
    rows = [generic_row(rec, req, stack) for rec, req in pairs]
    if fmt == "jsonl":
        path = out / "data.jsonl"
        write_jsonl_atomic(path, rows)
        return path
    return _write_parquet(rows, out / "test.parquet")


def _write_parquet(rows: list[dict[str, Any]], path: Path) -> Path:
    """Images embedded (datasets.Image), so the file is self-contained."""
    try:
        from datasets import Dataset, Features, Image, Sequence, Value
    except ImportError as exc:
        raise ImportError("--to hf needs the datasets package: pip install 'avstack[export]'") from exc
    features = Features(
        {
            "id": Value("string"),
            "stack": Value("string"),
            "system": Value("string"),
            "question": Value("string"),
            "images": Sequence(Image()),
            "image_pts_ms": Sequence(Value("int64")),
            "video": Value("string"),
            "answer": Value("string"),
            "task_template": Value("string"),
            "lang": Value("string"),
            "width": Value("int64"),
            "height": Value("int64"),
        }
    )
    path.parent.mkdir(parents=True, exist_ok=True)
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
    if problems:
        raise DataError("; ".join(f"{r.clip_id}: {why}" for r, why in problems[:5]) + _more(problems))
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
