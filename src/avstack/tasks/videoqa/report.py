"""Reports over video-question runs: scores per kind and group, and the paired deltas of every run
against the first (the same items), with CIs, p-values and MDE (avstack.analysis.compare)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from avstack.analysis.compare import ItemTable, compare_runs, csv_rows, fmt_delta, plot_deltas
from avstack.analysis.tables import Report, failed_label, failures_note, markdown_table, write_markdown
from avstack.io import read_json_file, read_predictions, write_csv_atomic
from avstack.runs.ablation.arms import request_failures
from avstack.tasks.videoqa.runs import score_run
from avstack.tasks.videoqa.score import THRESHOLDS

GROUNDING = ("r@0.3", "r@0.5", "r@0.7", "iou")


def label_of(run_dir: Path) -> str:
    meta = read_json_file(run_dir / "run.json", dict)
    return f"{meta.get('backend')} {meta.get('stack')}"


def tables(label: str, result: dict[str, Any]) -> tuple[ItemTable, ItemTable]:
    """Per-item tables: every item with `correct` (grouped by kind), and the grounding items with
    their IoU metrics."""
    rows = result["per_item"]
    grounding = {i: r for i, r in rows.items() if r["kind"] == "grounding"}
    return ItemTable(label, rows), ItemTable(label, grounding)


def score_rows(labelled: list[tuple[str, dict[str, Any]]]) -> tuple[list[str], list[list[str]]]:
    head = [
        "run",
        "items",
        "accuracy",
        "mcq",
        "open",
        "grounding R@0.5",
        "mIoU",
        *(f"R@{k}" for k in THRESHOLDS),
        "unparsed",
        "failed",
    ]
    body = []
    for label, res in labelled:
        kinds, c = res["by_kind"], res["counts"]
        g = kinds.get("grounding", {})
        cell = lambda d, k: f"{d[k]:.1f}" if k in d else "-"  # noqa: E731
        body.append(
            [
                label,
                str(c["items"]),
                cell(res["overall"], "accuracy"),
                cell(kinds.get("mcq", {}), "accuracy"),
                cell(kinds.get("open", {}), "accuracy"),
                cell(g, "r@0.5"),
                cell(g, "miou"),
                *(cell(g, f"r@{k}") for k in THRESHOLDS),
                str(c["unparsed"]),
                str(c["failed"]),
            ]
        )
    return head, body


def failures(run_dir: Path, result: dict[str, Any]) -> dict[str, object] | None:
    """A run's request failures over its scored questions (clips, request_failures, causes), or None."""
    if not result["counts"]["failed"]:
        return None
    return request_failures(read_predictions(run_dir / "predictions.jsonl"), set(result["per_item"]), "id")


def write_report(runs: list[Path], out: Path, cluster: str | None = None, only: set[str] | None = None) -> Report:
    """The report of run folders (the first the baseline), over every question or those in `only`.
    A run whose requests failed is marked in every table, and named in `Report.failed`."""
    results = [score_run(r, only) for r in runs]
    found = [(label_of(r), failures(r, res)) for r, res in zip(runs, results)]
    failed = {label: f for label, f in found if f}
    labelled = [(failed_label(label, f), res) for (label, f), res in zip(found, results)]
    out.mkdir(parents=True, exist_ok=True)
    head, body = score_rows(labelled)
    top = ["# videoqa report", "", markdown_table(head, body), "", *failures_note(failed, "questions")]
    lines: list[str] = []
    if len(runs) > 1:
        pairs = [tables(label, res) for label, res in labelled]
        groups = [
            c
            for c in ("kind", "duration", "domain", "task_type")
            if any(c in row for row in results[0]["per_item"].values())
        ]
        rows = compare_runs([a for a, _ in pairs], ["correct"], groups, cluster)
        if any(b.rows for _, b in pairs):
            rows += compare_runs([b for _, b in pairs], list(GROUNDING), (), cluster)
        write_csv_atomic(out / "delta.csv", csv_rows(rows))
        plot_deltas(rows, ["correct", *GROUNDING], out / "delta.png")
        delta_rows = [[r["run"], r["group"], r["metric"], f"{r['value']:.1f}", fmt_delta(r), str(r["n"])] for r in rows]
        lines += [
            "## Paired deltas against the first run",
            "",
            markdown_table(["run", "group", "metric", "value", "delta [95% CI] p", "n"], delta_rows),
            "",
            "Paired over the same questions: bootstrap CI (10,000 resamples), sign-flip p-value, Holm within"
            " each group; `correct` is accuracy (R@0.5 for grounding questions).",
            "",
        ]
    report = write_markdown(out, top, lines)
    return Report(report.summary, report.text, report.path, failed)
