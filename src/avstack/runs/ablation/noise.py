"""The noise floor of an ablation: its baseline asked twice (the A/A arm, `<baseline>-aa`).

The same requests, asked again past avstack's answer cache and, where the server allows it, past
its prompt cache, do not always get the same answers: a server's batching and cache change its
arithmetic, an API at temperature 0 is not deterministic. The A/A arm measures that: the share of
items whose answer changed (with a Wilson interval), its delta on every metric with a paired
bootstrap CI, and a mark on every arm whose |delta| lies within the A/A interval: a cue that moves
the score no more than asking again does is not shown to matter."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from avstack.analysis.stats import paired_bootstrap_ci
from avstack.analysis.tables import markdown_table
from avstack.io import read_jsonl_objects, write_json_atomic
from avstack.runs.ablation.reconcile import item_of_record
from avstack.runs.sending.engine import Asking, RunSettings


def wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson score interval of a proportion k/n (95% by default)."""
    if n == 0:
        return math.nan, math.nan
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def answers(path: Path, ids: set[str]) -> dict[str, str]:
    """Each item's answer as parsed (its raw text where nothing parsed), last line per item."""
    out: dict[str, str] = {}
    if not path.is_file():
        return out
    for rec in read_jsonl_objects(path, "prediction"):
        item = item_of_record(rec, ids)
        if item is None:
            continue
        said = rec.get("prediction") or rec.get("raw") or rec.get("error")
        out[item] = json.dumps(said, sort_keys=True, ensure_ascii=False)
    return out


def flip_rate(base: Mapping[str, str], again: Mapping[str, str]) -> tuple[int, int]:
    """(items whose answer changed, items answered in both)."""
    both = sorted(set(base) & set(again))
    return sum(base[i] != again[i] for i in both), len(both)


def aa_figures(scored: Sequence[Any], metrics: Sequence[str]) -> dict[str, Any] | None:
    """The A/A arm's figures: flips, its delta and CI on every metric, and every other arm's delta
    with whether it lies within the A/A interval. None without an A/A arm."""
    base = scored[0]
    again = next((s for s in scored if getattr(s.stack, "repeat", False)), None)
    if again is None:
        return None
    ids = sorted(set(base.per_item) & set(again.per_item))
    flips, n = flip_rate(
        answers(base.run_dir / "predictions.jsonl", set(ids)), answers(again.run_dir / "predictions.jsonl", set(ids))
    )
    lo_f, hi_f = wilson(flips, n)
    floor: dict[str, Any] = {}
    for m in metrics:
        d = np.array([float(again.per_item[i][m]) - float(base.per_item[i][m]) for i in ids])
        lo, hi = paired_bootstrap_ci(d) if d.size else (math.nan, math.nan)
        floor[m] = {"delta": 100 * float(d.mean()) if d.size else math.nan, "ci": [100 * lo, 100 * hi]}
    arms = {}
    for s in scored[1:]:
        if s is again:
            continue
        common = [i for i in ids if i in s.per_item]
        row = {}
        for m in metrics:
            delta = 100 * float(np.mean([float(s.per_item[i][m]) - float(base.per_item[i][m]) for i in common]))
            lo, hi = floor[m]["ci"]
            within = bool(common) and abs(delta) <= max(abs(lo), abs(hi))
            row[m] = {"delta": delta, "within_noise": within}
        arms[s.stack.name] = row
    return {
        "arm": again.stack.name,
        "items": n,
        "flips": flips,
        "flip_rate": flips / n if n else math.nan,
        "flip_rate_ci": [lo_f, hi_f],
        "floor": floor,
        "arms": arms,
    }


def noise_section(task: Any, scored: Sequence[Any], out: Path) -> str:
    """The report's "Noise floor (A/A)", and out/aa.json."""
    figures = aa_figures(scored, task.metrics)
    if figures is None:
        return ""
    write_json_atomic(out / "aa.json", figures)
    f = figures
    lo_f, hi_f = f["flip_rate_ci"]
    line = (
        f"A/A: `{f['arm']}` asked the baseline's requests again: {f['flips']} of {f['items']} {task.unit}"
        f" changed their answer ({100 * f['flip_rate']:.1f}%, 95% CI {100 * lo_f:.1f}-{100 * hi_f:.1f}%)."
    )
    header = ["arm", *task.metrics]
    rows = [
        [f"{f['arm']} (A/A)"]
        + [f"{c['delta']:+.1f} [{c['ci'][0]:+.1f}, {c['ci'][1]:+.1f}]" for c in f["floor"].values()]
    ]
    for arm, row in f["arms"].items():
        rows.append([arm] + [f"{c['delta']:+.1f}" + (" ~ noise" if c["within_noise"] else "") for c in row.values()])
    return "\n".join(
        [
            "",
            "## Noise floor (A/A)",
            "",
            line,
            "",
            markdown_table(header, rows),
            "",
            "Δ in points against the baseline; the A/A row's interval is a 95% paired bootstrap CI."
            " `~ noise`: the arm's |Δ| lies within the A/A interval, so asking the same requests again"
            " moves the score as much: that cue is not shown to matter here.",
            "",
        ]
    )


def is_repeat(stack: object) -> bool:
    return bool(getattr(stack, "repeat", False))


def asking_for(stack: object, asking: Asking) -> Asking:
    """How a stack is asked: the A/A repeat past the answer cache (nothing read or kept there; its
    run folder still resumes) and, where the server allows it, past its prompt cache; every other
    stack as given."""
    if not is_repeat(stack):
        return asking
    backend = asking.backend.without_prompt_cache()
    settings = replace(asking.settings or RunSettings(), shared_prefixes=frozenset())  # no cache mark either
    return replace(asking, backend=backend, cache_dir=None, settings=settings)
