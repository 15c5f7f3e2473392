"""Markdown tables and the report value every task's report returns."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from avstack.io import atomic_write


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


@dataclass(frozen=True)
class Report:
    """A written report: the summary a command prints, the full Markdown text, and its file."""

    summary: str
    text: str
    path: Path
    # per stack whose requests failed (no answer came): how many of how many, and the causes
    failed: dict[str, dict[str, object]] = field(default_factory=dict)
    # per arm whose server saw other input than planned (avstack.runs.ablation.reconcile): what it saw
    departed: dict[str, str] = field(default_factory=dict)


def failed_label(label: str, failures: Mapping[str, object] | None) -> str:
    """A run's label, marked where its requests failed: a stack that got no answer is no model
    that scored zero, in every table it appears in."""
    return f"{label} [FAILED: {failures['request_failures']} of {failures['clips']} requests]" if failures else label


def failures_note(failed: Mapping[str, Mapping[str, object]], unit: str) -> list[str]:
    """The report's paragraph on the runs whose requests failed (none: no paragraph)."""
    if not failed:
        return []
    listed = "; ".join(f"`{k}`: {v['request_failures']} of {v['clips']}" for k, v in failed.items())
    return [
        f"**Request failures**: {listed}. Those {unit} have no answer; their zeros are not the model's. Retry only"
        " them: rerun the same command with `--retry-failed`.",
        "",
    ]


def write_markdown(out: Path, head: list[str], rest: list[str]) -> Report:
    """report.md from its head (what the console shows) and the rest."""
    text = "\n".join(head + rest)
    path = out / "report.md"
    atomic_write(path, text.encode())
    return Report("\n".join(head) + "\n", text, path)
