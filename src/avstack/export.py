"""Export prepared inputs for other harnesses: OpenAI Batch API, generic JSONL, Hugging Face datasets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .media import atomic_write
from .messages import Image, Request, Text, Video, to_openai
from .run import RunSettings, requests_for
from .stacks import Stack

FORMATS = ("openai-batch", "jsonl", "hf")


def flat_prompt(req: Request) -> tuple[str, list[str], list[int | None]]:
    """User text with `<image>` / `<video>` where the media go, and the image paths and pts in order."""
    chunks, images, pts = [], [], []
    for p in req.parts:
        if isinstance(p, Text):
            chunks.append(p.text)
        elif isinstance(p, Image):
            chunks.append("<image>")
            images.append(str(req.path_of(p)))
            pts.append(p.pts_ms)
        elif isinstance(p, Video):
            chunks.append("<video>")
    return "\n".join(chunks), images, pts


def generic_row(record: dict[str, Any], req: Request, stack: Stack) -> dict[str, Any]:
    question, images, pts = flat_prompt(req)
    video = next((str(req.path_of(p)) for p in req.parts if isinstance(p, Video)), None)
    return {
        "id": record["clip_id"],
        "stack": stack.name,
        "system": req.system,
        "question": question,
        "images": images,
        "image_pts_ms": pts,
        "video": video,
        "answer": json.dumps(record.get("eval_gt") or {}, ensure_ascii=False),
        "task_template": record.get("task_template"),
        "lang": req.meta.get("lang"),
        "width": record["width"],
        "height": record["height"],
    }


def _write_lines(path: Path, rows: list[dict[str, Any]]) -> None:
    atomic_write(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode())


def export(
    prepared: str | Path,
    out: str | Path,
    fmt: str,
    stack: Stack,
    settings: RunSettings | None = None,
    model: str = "gpt-4o",
    max_tokens: int = 2048,
) -> Path:
    """Write one file for every usable clip of `prepared` under `stack`; returns the file."""
    if fmt not in FORMATS:
        raise ValueError(f"--to must be one of {', '.join(FORMATS)}; found {fmt!r}")
    out = Path(out)
    pairs = requests_for(Path(prepared), stack, settings or RunSettings())
    if fmt == "openai-batch":
        path = out / "batch.jsonl"
        _write_lines(
            path,
            [
                {
                    "custom_id": rec["clip_id"],
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
        _write_lines(path, rows)
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
