"""EcoG reports: the summary table, the Δ table (paper Table 4), the paper's analyses, plots."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from avstack.analysis.compare import ItemTable, compare_pairs, compare_runs, csv_rows, fmt_delta, plot_deltas
from avstack.analysis.tables import Report, failed_label, failures_note, markdown_table, write_markdown
from avstack.io import write_csv_atomic
from avstack.tasks.ecog.analysis import (
    BOTTLENECKS,
    bottlenecks,
    by_object_size,
    calibration,
    level_table,
    timestamp_errors,
)
from avstack.tasks.ecog.metrics import METRICS
from avstack.tasks.ecog.scoring import EcogResult

Run = tuple[str, EcogResult, dict[str, Any]]  # (label, result, score json)


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def summary_table(result: dict[str, Any]) -> str:
    """Overall, per level and per instruction, in percent."""
    header = ["group", "n", *METRICS, "acc_eco_referent"]
    rows = [
        [
            "overall",
            str(result["overall"]["count"]),
            *(_pct(result["overall"][m]) for m in METRICS),
            _pct(result["overall"]["acc_eco_referent"]),
        ]
    ]
    for key in ("per_level", "per_instruction", "per_lang", "per_scene"):
        for name, agg in result.get(key, {}).items():
            rows.append([name, str(agg["count"]), *(_pct(agg[m]) for m in METRICS), ""])
    c = result["counts"]
    foot = (
        f"\nclips {c['clips']}, missing predictions {c['missing_predictions']}, "
        f"parse errors {c['parse_errors']}, scoring errors {c['scoring_errors']}, GT errors {c['gt_errors']}"
    )
    return markdown_table(header, rows) + foot


PUBLISHED: dict[str, dict[str, Any]] = {  # ../shared/ecog/FORMAT.md, overall, percent
    "acc_eco": {
        "native video: Gemini-3-Pro": 17.0,
        "native video: Gemini-3-Flash": 7.0,
        "native video: Qwen3-Omni-30B-A3B": 0.7,
        "human": 96.9,
        "Images+ASR: Gemini-3-Pro": 42.9,
        "Images+ASR: Gemini-3-Flash": 48.1,
        "Images+ASR: Qwen3-Omni-Flash": 9.3,
    },
    "ablation (Acc_t / Acc_eco)": {
        "Gemini-3-Flash full": (81.8, 48.1),
        "Gemini-3-Flash no frame timestamps": (62.7, 30.4),
        "Gemini-3-Flash no word timing": (77.2, 45.9),
        "Gemini-3-Pro full": (76.5, 42.9),
        "Gemini-3-Pro no frame timestamps": (63.0, 21.7),
    },
}


TABLE_METRICS = ("acc_t", "acc_eco")  # the paper's Table 4 columns
GROUP_COLUMNS = ("level", "task_template")


def item_tables(runs: list[Run]) -> list[ItemTable]:
    return [ItemTable(label, result.per_item()) for label, result, _ in runs]


def delta_table(runs: list[Run], deltas: Sequence[Mapping[str, object]]) -> tuple[list[str], list[list[str]]]:
    """Paper Table 4: Acc_t and Acc_eco per level and overall; each delta vs the first run with its
    95% paired bootstrap CI and Holm-adjusted sign-flip p-value; n with the minimum detectable Δ."""
    header = ["run", "group", "Acc_t", "Δ Acc_t", "Acc_eco", "Δ Acc_eco", "n (MDE Acc_t / Acc_eco)"]
    by_key = {(d["run"], d["group"], d["metric"]): d for d in deltas}
    rows = []
    for i, (label, _, js) in enumerate(runs):
        for group, agg in level_table(js).items():
            if i == 0:
                rows.append(
                    [label, group, _pct(agg["acc_t"]), "baseline", _pct(agg["acc_eco"]), "baseline", str(agg["count"])]
                )
                continue
            dt, de = by_key.get((label, group, "acc_t")), by_key.get((label, group, "acc_eco"))
            mde = f" ({dt['mde']:.1f} / {de['mde']:.1f})" if dt and de and agg["count"] > 1 else ""
            rows.append(
                [
                    label,
                    group,
                    _pct(agg["acc_t"]),
                    fmt_delta(dt) if dt else "",
                    _pct(agg["acc_eco"]),
                    fmt_delta(de) if de else "",
                    f"{agg['count']}{mde}",
                ]
            )
    return header, rows


def failures(js: dict[str, Any]) -> dict[str, object] | None:
    """A run's request failures (answers: clips, request_failures, causes), or None when every
    request got an answer."""
    answers = js.get("answers") or {}
    return answers if answers.get("request_failures") else None


def marked(runs: list[Run]) -> list[Run]:
    """Runs whose requests failed, labelled so in every table they appear in: a stack that got no
    answer is not a model that scored zero."""
    return [(failed_label(label, failures(js)), result, js) for label, result, js in runs]


def answers_section(runs: list[Run]) -> list[str]:
    """Per stack: clips, answered, answers that did not parse, requests that failed and why."""
    rows = []
    for label, _, js in runs:
        a = js.get("answers") or {}
        causes = "; ".join(f"{n}x {c}" for c, n in (a.get("causes") or {}).items()) or "-"
        rows.append(
            [label, str(a.get("clips", "")), str(a.get("answered", "")), str(a.get("parse_failures", "")),
             str(a.get("request_failures", "")), causes.replace("|", "/")]
        )  # fmt: skip
    header = ["run", "clips", "answered", "parse failures", "request failures", "causes"]
    return ["## Answers per stack", "", markdown_table(header, rows), ""]


def write_report(
    runs: list[Run], out_dir: str | Path, cluster: str | None = None, prompts: dict[str, str] | None = None
) -> Report:
    """Markdown + CSV tables and PNG plots for runs [(label, EcogResult, score json)]; first is the baseline.
    Deltas are paired over the clips (the same clips in every run, else refused). A run whose
    requests failed is marked in every table and counted in the answers section."""
    runs = marked(runs)
    failed = {label: f for label, _, js in runs if (f := failures(js))}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    deltas = compare_runs(item_tables(runs), METRICS, GROUP_COLUMNS, cluster)
    write_csv_atomic(out / "delta.csv", csv_rows(deltas))
    header, rows = delta_table(runs, deltas)
    head = [
        "# avstack report",
        "",
        f"Baseline: `{runs[0][0]}`",
        "",
        *(
            [f"Prompts (template sha256): {', '.join(f'`{k}` {v[:12]}' for k, v in prompts.items())}", ""]
            if prompts
            else []
        ),
        "## Δ table (paper Table 4 style)",
        "",
        markdown_table(header, rows),
        "",
        "Δ in points with its 95% paired bootstrap CI (10,000 resamples of the clips"
        + (f", clustered by {cluster}" if cluster else "")
        + ") and the two-sided paired sign-flip p-value, Holm-adjusted within each group across the"
        " report's runs and metrics (all in delta.csv; comparisons whose arms agree on every clip are"
        " left out); MDE: the smallest Δ these clips detect with 80% power at alpha 0.05.",
        "",
    ]
    head += answers_section(runs)
    head += failures_note(failed, "clips")
    _plots(runs, out)
    if deltas:
        plot_deltas(deltas, METRICS, out / "delta.png")
        head += ["![deltas](delta.png)", ""]
    report = write_markdown(out, head, analysis_sections(runs))
    return Report(report.summary, report.text, report.path, failed)


def interface_section(
    cells: dict[str, Run], pairs: list[tuple[str, str, str]], out: Path, cluster: str | None = None
) -> list[str]:
    """The interface 2x2 (avstack.prompting.stacks.INTERFACE): each pair of cells that differs in
    one factor, the second against the first, paired over the clips; interface.csv beside it."""
    if not pairs:
        return []
    cells = {v: marked([run])[0] for v, run in cells.items()}
    tables = {v: item_tables([run])[0] for v, run in cells.items()}
    rows = compare_pairs([(tables[a], tables[b]) for a, b, _ in pairs], TABLE_METRICS, cluster)
    by = {(r["baseline"], r["run"], r["metric"]): r for r in rows}
    write_csv_atomic(out / "interface.csv", csv_rows(rows))
    table = []
    for a, b, factor in pairs:
        la, lb = cells[a][0], cells[b][0]
        cols = []
        for m in TABLE_METRICS:
            r = by[(la, lb, m)]
            cols += [f"{r['baseline_value']:.1f} -> {r['value']:.1f}", fmt_delta(r)]
        table.append([f"`{a}` -> `{b}`", factor, *cols, str(by[(la, lb, TABLE_METRICS[0])]["n"])])
    return [
        "## Interface (2x2): frames or the file, speech as text or as sound",
        "",
        markdown_table(["pair", "factor", "Acc_t", "Δ Acc_t", "Acc_eco", "Δ Acc_eco", "n"], table),
        "",
        "`full`: frames with their times + word-timed ASR; `omni`: frames with their times + the clip's"
        " sound; `video_asr`: the file + word-timed ASR; `video`: the file with its sound (the paper's"
        " native Video-Omni, its transcript in `<instruction>`). Each pair differs in one factor; Δ with"
        " its 95% paired bootstrap CI and the sign-flip p-value, Holm-adjusted across these pairs.",
        "",
    ]


def analysis_sections(runs: list[Run]) -> list[str]:
    """The paper's analyses: bottlenecks, calibration, object size, scene and language, published."""
    bn_rows, cal_rows, size_rows = [], [], []
    for label, result, _ in runs:
        bn = bottlenecks(result)
        bn_rows.append([label, *(str(bn[k]) for k in bn)])
        for key, c in calibration(result).items():
            cal_rows.append(
                [label, key, str(c["n"]), f"{c['mean_ms']:+.0f}", _pct(c["within_500"]), _pct(c["within_1000"])]
            )
        for key, c in by_object_size(result).items():
            size_rows.append([label, key, str(c["n"]), _pct(c["acc_eco"])])
    md = [
        "## Failure bottleneck of failed referents",
        "",
        markdown_table(["run", "only What", "only Where", "only When", "joint"], bn_rows),
        "",
        "## Temporal calibration (predicted - stroke midpoint)",
        "",
        markdown_table(["run", "stroke", "n", "mean ms", "within ±500 ms", "within ±1000 ms"], cal_rows),
        "",
        "## Acc_eco by object size (mask area share)",
        "",
        markdown_table(["run", "size", "referents", "Acc_eco"], size_rows),
        "",
    ]
    for key, title in (("per_scene", "scene"), ("per_lang", "language")):
        rows2 = [
            [label, name, str(agg["count"]), _pct(agg["acc_eco"])]
            for label, _, js in runs
            for name, agg in js[key].items()
        ]
        if rows2:
            md += [f"## Acc_eco by {title}", "", markdown_table(["run", title, "n", "Acc_eco"], rows2), ""]
    md += [
        "## Published numbers (EcoG-Bench paper)",
        "",
        markdown_table(["setting", "Acc_eco"], [[k, f"{v:.1f}"] for k, v in PUBLISHED["acc_eco"].items()]),
        "",
        markdown_table(
            ["setting", "Acc_t", "Acc_eco"],
            [[k, f"{a:.1f}", f"{b:.1f}"] for k, (a, b) in PUBLISHED["ablation (Acc_t / Acc_eco)"].items()],
        ),
        "",
        "![bottlenecks](bottlenecks.png)",
        "",
        "![timestamp errors](timestamp_errors.png)",
        "",
    ]
    return md


def _plots(runs: list[Run], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    meta = {"Software": None}  # no version stamp: same inputs, same bytes
    fig, ax = plt.subplots(figsize=(7, 3.5))
    width = 0.8 / len(runs)
    for i, (label, result, _) in enumerate(runs):
        bn = bottlenecks(result)
        ax.bar([j + i * width for j in range(len(BOTTLENECKS))], [bn[k] for k in BOTTLENECKS], width, label=label)
    ax.set_xticks([j + width * (len(runs) - 1) / 2 for j in range(len(BOTTLENECKS))], BOTTLENECKS)
    ax.set_ylabel("failed referents")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "bottlenecks.png", metadata=meta)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for label, result, _ in runs:
        errs = [e for _, e in timestamp_errors(result)]
        if errs:
            ax.hist(errs, bins=30, range=(-3000, 3000), alpha=0.5, label=label)
    ax.axvspan(-500, 500, color="grey", alpha=0.15)
    ax.set_xlabel("predicted - stroke midpoint (ms)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "timestamp_errors.png", metadata=meta)
    plt.close(fig)
