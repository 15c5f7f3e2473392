"""The input-stack ablation for video questions: every stack run (answers shared through a cache),
scored, reported with paired deltas; with `subsets`, each cue's exact Shapley value."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from avstack.analysis.compare import check_same_items
from avstack.analysis.stats import paired_bootstrap_ci, shapley_per_item
from avstack.analysis.tables import Report, markdown_table
from avstack.io import Progress, atomic_write, write_csv_atomic
from avstack.prompting.stacks import Stack, make_stack, subset_stacks
from avstack.runs.engine import RunSettings
from avstack.runs.plan import plan_requests, write_plan
from avstack.runs.runners import make_backend
from avstack.tasks.videoqa.baselines import BASELINES
from avstack.tasks.videoqa.report import write_report
from avstack.tasks.videoqa.runs import joined, run, score_run, work_items


def qa_stacks(variant: str, drops: list[str], subsets: bool, ts_format: str = "ms") -> list[Stack]:
    """The stacks a videoqa ablation runs, in order (`variant` first)."""
    cues = list(dict.fromkeys(drops))
    if subsets:
        return list(dict.fromkeys(s.stack for s in subset_stacks(cues, variant) if s.same_as is None))
    return list(
        dict.fromkeys([make_stack(variant, [], ts_format), *(make_stack(variant, [d], ts_format) for d in cues)])
    )


def plan_qa_ablation(
    prepared: str | Path,
    questions: str | Path,
    model: str,
    out: str | Path,
    stacks: list[Stack],
    fmt: str = "auto",
    prompt_dir: Path | None = None,
    detail: str = "high",
    max_output_tokens: int = 512,
    prices_file: Path | None = None,
) -> dict[str, Any]:
    """What the ablation would ask and cost (avstack.runs.plan), written to out/plan.json; nothing sent."""
    pairs, _ = joined(prepared, questions, fmt)
    requests = {
        s.name: [w.request for w in work_items(pairs, s, Path(prepared), prompt_dir) if w.request is not None]
        for s in stacks
    }
    plan = plan_requests(requests, model, model, Path(out) / "cache", detail, max_output_tokens, prices_file)
    write_plan(plan, Path(out))
    return plan


def ablate(
    prepared: str | Path,
    questions: str | Path,
    model: str,
    out: str | Path,
    drops: list[str],
    variant: str = "full",
    settings: RunSettings | None = None,
    backend_options: Mapping[str, Any] | None = None,
    fmt: str = "auto",
    prompt_dir: Path | None = None,
    subsets: bool = False,
    ts_format: str = "ms",
    progress: Progress | None = None,
) -> Report:
    """`variant` first (the baseline), then it minus each drop (or every subset of the drops)."""
    out = Path(out)
    backend = make_backend(model, BASELINES, **(backend_options or {}))
    cues = list(dict.fromkeys(drops))
    plan = subset_stacks(cues, variant) if subsets else []
    stacks = qa_stacks(variant, drops, subsets, ts_format)
    dirs: dict[Stack, Path] = {}
    for stack in stacks:
        dirs[stack] = out / stack.name
        run(prepared, questions, backend, stack, dirs[stack], settings, fmt, prompt_dir, out / "cache", model, progress)
    report = write_report(list(dirs.values()), out)
    if not subsets:
        return report
    section = _cue_section(cues, plan, dirs, out)
    text = report.text + "\n" + "\n".join(section)
    atomic_write(report.path, text.encode())
    return Report(report.summary + "\n".join(section) + "\n", text, report.path)


def _cue_section(cues: list[str], plan: list[Any], dirs: Mapping[Stack, Path], out: Path) -> list[str]:
    from avstack.analysis.compare import ItemTable

    tables = {s.present: ItemTable(s.stack.name, score_run(dirs[s.stack])["per_item"]) for s in plan}
    base = tables[frozenset(cues)]
    ids = sorted(base.rows)
    rows, csv = [], [["cue", "metric", "shapley", "ci_low", "ci_high", "n"]]
    for t in tables.values():
        check_same_items(t, base)
    values = {k: np.array([t.rows[i]["correct"] for i in ids], dtype=float) for k, t in tables.items()}
    for cue, per_item in shapley_per_item(cues, values).items():
        lo, hi = paired_bootstrap_ci(per_item)
        mean = 100 * float(per_item.mean())
        rows.append([cue, f"{mean:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]"])
        csv.append([cue, "correct", f"{mean:.6g}", f"{100 * lo:.6g}", f"{100 * hi:.6g}", str(len(ids))])
    write_csv_atomic(out / "shapley.csv", csv)
    return [
        f"## What each cue is worth (exact Shapley over {len(plan)} subsets of {', '.join(cues)})",
        "",
        markdown_table(["cue", "accuracy (points, 95% CI)"], rows),
        "",
    ]
