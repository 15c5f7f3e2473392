"""`ablate`: the input-stack ablation end to end: run each stack, score each once, report.

With `subsets`, every subset of the cues named with `--drop` is a stack (cues kept present, the
rest dropped); subsets that name an impossible stack (word_ts without asr, frame_ts without
frames) are the same requests as a smaller subset and reuse its run. Each cue's exact Shapley
value over those subsets is reported with a bootstrap CI, the same resampled clips for every
subset, and the frame_ts x word_ts interaction.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from avstack.analysis.compare import check_same_items
from avstack.analysis.stats import paired_bootstrap_ci, shapley_per_item
from avstack.analysis.tables import Report, markdown_table
from avstack.io import Progress, atomic_write, write_csv_atomic
from avstack.prompting.stacks import VARIANTS, Stack, Subset, interface_pairs, make_stack, subset_stacks
from avstack.runs.engine import RunSettings
from avstack.runs.plan import plan_requests, usage_section, write_plan
from avstack.runs.runners import make_backend
from avstack.tasks.ecog.baselines import BASELINES
from avstack.tasks.ecog.metrics import METRICS
from avstack.tasks.ecog.prompt import EcogOptions
from avstack.tasks.ecog.report import Run, interface_section, item_tables, write_report
from avstack.tasks.ecog.runs import prompt_record, requests_for, run, score_and_write


def ablation_stacks(
    drops: list[str],
    variants: list[str],
    ts_formats: list[str] | None = None,
    word_ts_format: str = "json",
    baseline: str = "full",
) -> list[Stack]:
    """The baseline variant first (`full` unless told), then it minus each drop, then each other
    variant and it minus each drop it has (`--drop word_ts` also gives `text-no_word_ts`,
    `omni` minus frame_ts `omni-no_frame_ts`); with several time formats, the baseline's stacks in
    each format (the first format's baseline is the report's)."""
    formats = ts_formats or ["ms"]
    stacks = [make_stack(baseline, [], f, word_ts_format) for f in formats]
    stacks += [make_stack(baseline, [d], f, word_ts_format) for d in drops if has_cue(baseline, d) for f in formats]
    for v in variants:
        if v == baseline:
            continue
        stacks.append(make_stack(v, [], formats[0], word_ts_format))
        stacks += [make_stack(v, [d], formats[0], word_ts_format) for d in drops if has_cue(v, d)]
    return list(dict.fromkeys(stacks))


def has_cue(variant: str, cue: str) -> bool:
    """Does `variant` carry `cue`, so that dropping it makes another stack?"""
    return cue in VARIANTS.get(variant, frozenset())


def stacks_to_run(
    drops: list[str],
    variants: list[str] | None,
    subsets: bool,
    ts_formats: list[str] | None,
    word_ts_format: str,
    baseline: str = "full",
) -> list[Stack]:
    """The stacks an ablation runs, in order (the baseline first)."""
    plan = subset_stacks(list(dict.fromkeys(drops)), baseline) if subsets else []
    stacks = (
        [s.stack for s in plan if s.same_as is None]
        if subsets
        else ablation_stacks(drops, variants or [], ts_formats, word_ts_format, baseline)
    )
    stacks += [make_stack(v) for v in variants or [] if subsets and v != baseline]
    return list(dict.fromkeys(stacks))


def plan_ablation(
    prepared: str | Path,
    model: str,
    out: str | Path,
    stacks: list[Stack],
    options: EcogOptions = EcogOptions(),
    detail: str = "high",
    max_output_tokens: int = 512,
    prices_file: Path | None = None,
) -> dict[str, Any]:
    """What the ablation would ask and cost (avstack.runs.plan), written to out/plan.json; nothing sent."""
    requests = {stack.name: [req for _, req in requests_for(Path(prepared), stack, options)[0]] for stack in stacks}
    plan = plan_requests(requests, model, model, Path(out) / "cache", detail, max_output_tokens, prices_file)
    write_plan(plan, Path(out))
    return plan


def ablate(
    prepared: str | Path,
    model: str,
    out: str | Path,
    drops: list[str],
    variants: list[str] | None = None,
    settings: RunSettings | None = None,
    backend_options: Mapping[str, Any] | None = None,
    options: EcogOptions = EcogOptions(),
    progress: Progress | None = None,
    on_stack: Callable[[Stack], None] | None = None,
    subsets: bool = False,
    cluster: str | None = None,
    ts_formats: list[str] | None = None,
    word_ts_format: str = "json",
    bill: dict[str, Any] | None = None,
    baseline: str = "full",
) -> Report:
    """Run every stack into out/<stack>/, sharing cached answers; write out/report.md with the
    plan (`bill`, planned here when not given) beside the usage the servers reported."""
    out = Path(out)
    backend = make_backend(model, BASELINES, **(backend_options or {}))
    plan = subset_stacks(list(dict.fromkeys(drops)), baseline) if subsets else []
    stacks = stacks_to_run(drops, variants, subsets, ts_formats, word_ts_format, baseline)
    bill = bill or plan_ablation(prepared, model, out, stacks, options)
    runs: dict[Stack, Run] = {}
    for stack in stacks:
        if on_stack:
            on_stack(stack)
        run_dir = out / stack.name  # an existing run folder resumes: nothing answered is asked again
        run(prepared, backend, stack, run_dir, settings, options, out / "cache", model, progress)
        runs[stack] = score_and_write(run_dir, prepared)
    sha = prompt_record(options)["sha256"]
    report = write_report(list(runs.values()), out, cluster, {r[0]: sha for r in runs.values()})
    section = cue_section(list(dict.fromkeys(drops)), plan, runs, out) if subsets else []
    cells = {s.variant: r for s, r in runs.items() if not s.dropped and s.name == s.variant}
    section += interface_section(cells, interface_pairs(cells), out, cluster)
    usage = usage_section(bill, {s.name: out / s.name / "predictions.jsonl" for s in stacks})
    text = report.text + "\n".join(section) + usage
    atomic_write(report.path, text.encode())
    summary = report.summary + ("\n".join(section) + "\n" if section else "")
    return Report(summary, text, report.path, report.failed)


def cue_section(cues: list[str], plan: list[Subset], runs: Mapping[Stack, Run], out: Path) -> list[str]:
    """Shapley values of the cues (and their frame_ts x word_ts interaction) on every metric."""
    tables = {s.present: item_tables([runs[s.stack]])[0] for s in plan}
    base = tables[frozenset(cues)]
    for t in tables.values():
        check_same_items(t, base)
    ids = sorted(base.rows)
    rows, csv = [], [["cue", "metric", "shapley", "ci_low", "ci_high", "n"]]
    for m in METRICS:
        values = {k: np.array([t.rows[i][m] for i in ids], dtype=float) for k, t in tables.items()}
        effects = shapley_per_item(cues, values)
        if {"frame_ts", "word_ts"} <= set(cues):
            full = frozenset(cues)
            effects["frame_ts x word_ts"] = (
                values[full]
                - values[full - {"frame_ts"}]
                - values[full - {"word_ts"}]
                + values[full - {"frame_ts", "word_ts"}]
            )
        for cue, per_item in effects.items():
            lo, hi = paired_bootstrap_ci(per_item)  # one seed: the same resampled clips for every subset
            mean = 100 * float(per_item.mean())
            rows.append([cue, m, f"{mean:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]"])
            csv.append([cue, m, f"{mean:.6g}", f"{100 * lo:.6g}", f"{100 * hi:.6g}", str(len(ids))])
    write_csv_atomic(out / "shapley.csv", csv)
    same = [f"`{' + '.join(sorted(s.present))}` = `{s.same_as}`" for s in plan if s.same_as]
    by_cue: dict[str, list[str]] = {}
    for cue, _metric, cell in rows:
        by_cue.setdefault(cue, []).append(cell)
    table = markdown_table(["cue", *METRICS], [[cue, *cells] for cue, cells in by_cue.items()])
    return [
        f"## What each cue is worth (exact Shapley over {len(plan)} subsets of {', '.join(cues)})",
        "",
        table,
        "",
        "Points of each metric that each cue adds, averaged over every order of adding the cues (exact),"
        " with a 95% bootstrap CI (10,000 resamples of the clips, the same for every subset);"
        " `frame_ts x word_ts`: v(both) - v(no frame_ts) - v(no word_ts) + v(neither), the others present.",
        "",
        *(
            [
                "Impossible subsets (a cue kept without the cue it lives in) are the requests of a possible"
                " one and reuse its run: " + "; ".join(same) + ".",
                "",
            ]
            if same
            else []
        ),
    ]
