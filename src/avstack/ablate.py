"""`ablate`: the input-stack ablation end to end: run each stack, score, report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .prepare import load_manifest
from .run import RunSettings, gt_of, read_predictions, run, score_run, usable
from .runners import make_backend
from .stacks import Stack, make_stack
from .tasks.ecog import score
from .tasks.ecog.score import EcogResult


def ablation_stacks(drops: list[str], variants: list[str]) -> list[Stack]:
    """full first (the baseline), then full minus each drop, then other variants."""
    stacks = [make_stack("full")] + [make_stack("full", [d]) for d in drops]
    stacks += [make_stack(v) for v in variants if v != "full"]
    return list(dict.fromkeys(stacks))


def load_run(run_dir: str | Path) -> tuple[str, EcogResult, dict[str, Any]]:
    """(label, result, score json) of a finished run folder."""
    run_dir = Path(run_dir)
    meta = json.loads((run_dir / "run.json").read_text())
    records = load_manifest(meta["prepared"])
    clips = [gt_of(r) for r in records if usable(r)]
    preds = read_predictions(run_dir / "predictions.jsonl")
    result = score(clips, preds)
    return f"{meta['backend']} {meta['stack']}", result, result.to_json()


def ablate(
    prepared: str | Path,
    model: str,
    out: str | Path,
    drops: list[str],
    variants: list[str] | None = None,
    settings: RunSettings | None = None,
    backend_options: dict[str, Any] | None = None,
) -> Path:
    """Run every stack into out/<stack>/, sharing cached answers; write out/report.md."""
    from .report import write_report

    out = Path(out)
    backend = make_backend(model, **(backend_options or {}))
    runs = []
    for stack in ablation_stacks(drops, variants or []):
        run_dir = out / stack.name
        run(prepared, backend, stack, run_dir, settings, cache_dir=out / "cache", backend_id=model)
        score_run(prepared, run_dir)
        runs.append(load_run(run_dir))
    write_report(runs, out)
    return out / "report.md"
