"""EgoGap reports: accuracy by group with 95% CIs, n4 error analysis, rank agreement, published numbers."""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

from avstack.analysis.compare import ItemSetMismatch, ItemTable, compare_runs, csv_rows, fmt_delta, plot_deltas
from avstack.analysis.tables import Report, markdown_table, write_markdown
from avstack.io import read_json_file, write_csv_atomic
from avstack.tasks.egogap.data import MOTOR, OFF_VANTAGE
from avstack.tasks.egogap.scoring import GROUPS, spearman

# ../shared/egogapbench/FORMAT.md, percent
PUBLISHED: list[tuple[str, dict[str, float]]] = [
    ("Human (200 sampled items)", {"overall": 94.5}),
    ("GPT-5.4 (medium)", {"overall": 66.1, "direct": 50.9, "indirect": 94.3}),
    ("GPT-4o", {"indirect": 52.3}),
    ("Gemma4 (gemma-4-E4B-it)", {"overall": 51.7, "n3": 53.4, "n4": 49.0}),
    ("Qwen3.5-9B", {"overall": 29.0, "direct": 20.0, "motor_intrusion": 69.4, "off_vantage": 6.3}),
    ("Qwen3.5-9B + EAS tuning", {"overall": 75.2, "direct": 63.4, "motor_intrusion": 14.9, "off_vantage": 23.0}),
    ("Chance", {"n3": 33.3, "n4": 25.0}),
]
PUBLISHED_STYLE_SPEARMAN = 0.60  # default vs egoplan


def _pct(x: float) -> str:
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}"


def _with_ci(group: dict[str, Any]) -> str:
    lo, hi = group["ci95"]
    return f"{_pct(group['accuracy'])} [{_pct(lo)}, {_pct(hi)}]" if group["n"] else ""


def load_egogap_run(run_dir: str | Path) -> tuple[str, str, dict[str, Any]]:
    """(model, condition, score json) of a finished EgoGap run folder."""
    run_dir = Path(run_dir)
    meta = read_json_file(run_dir / "run.json", dict)
    result = read_json_file(run_dir / "score.json", dict)
    return meta["backend"], meta["stack"], result


def score_rows(runs: list[tuple[str, str, dict[str, Any]]]) -> tuple[list[str], list[list[str]]]:
    header = [
        "model",
        "condition",
        *GROUPS,
        "motor intrusion (n4)",
        "off-vantage (n4)",
        "unparsed",
        "failed",
        "missing",
    ]
    rows = []
    for model, cond, res in runs:
        err, counts = res["n4_errors"], res["counts"]
        rows.append(
            [
                model,
                cond,
                *(_with_ci(res["groups"][g]) for g in GROUPS),
                _pct(err["motor_intrusion_rate"]),
                _pct(err["off_vantage_rate"]),
                str(counts["unparsed"]),
                str(counts.get("failed", 0)),
                str(counts["missing_predictions"]),
            ]
        )
    return header, rows


def rank_agreement(runs: list[tuple[str, str, dict[str, Any]]]) -> list[list[str]]:
    """Spearman rho of model accuracies between every pair of conditions (models present in both)."""
    by_cond: dict[str, dict[str, float]] = {}
    for model, cond, res in runs:
        by_cond.setdefault(cond, {})[model] = res["groups"]["overall"]["accuracy"]
    rows = []
    for a, b in itertools.combinations(by_cond, 2):
        common = sorted(set(by_cond[a]) & set(by_cond[b]))
        if len(common) >= 2:
            rho = spearman([by_cond[a][m] for m in common], [by_cond[b][m] for m in common])
            rows.append([a, b, str(len(common)), "" if math.isnan(rho) else f"{rho:.2f}"])
    return rows


ITEM_METRICS = ("correct", "motor_intrusion", "off_vantage")


def per_item(result: dict[str, Any]) -> dict[str, dict[str, object]]:
    """One row per item: correct, motor_intrusion, off_vantage (0/1), format n3/n4, direct/indirect."""
    return {
        str(g["uid"]): {
            "correct": int(bool(g["correct"])),
            "motor_intrusion": int(g["label"] in MOTOR),
            "off_vantage": int(g["label"] == OFF_VANTAGE),
            "format": "n4" if str(g["kind"]).endswith("4") else "n3",
            "kind": g["cand_kind"],
        }
        for g in result["items"]
    }


def delta_section(runs: list[tuple[str, str, dict[str, object]]], out: Path, cluster: str | None) -> list[str]:
    """Paired deltas of every run against the first, on the same items (else refused, counts named)."""
    if len(runs) < 2:
        return []
    tables = [ItemTable(f"{model} {cond}", per_item(res)) for model, cond, res in runs]
    try:
        deltas = compare_runs(tables, ITEM_METRICS, ("format", "kind"), cluster)
    except ItemSetMismatch as exc:
        return ["## Deltas vs the first run", "", f"Refused: {exc}.", ""]
    write_csv_atomic(out / "delta.csv", csv_rows(deltas))
    plot_deltas(deltas, ITEM_METRICS, out / "delta.png")
    cells: dict[tuple[str, str], dict[str, str]] = {}
    for d in deltas:
        cells.setdefault((d["run"], d["group"]), {})[d["metric"]] = fmt_delta(d) + f" (n {d['n']}, MDE {d['mde']:.1f})"
    rows = [[run, group, *(c.get(m, "") for m in ITEM_METRICS)] for (run, group), c in cells.items()]
    return [
        f"## Deltas vs `{tables[0].label}` (paired over items)",
        "",
        markdown_table(["run", "group", "Δ accuracy", "Δ motor intrusion", "Δ off-vantage"], rows),
        "",
        "Points, 95% paired bootstrap CI (10,000 resamples of the items), sign-flip p Holm-adjusted within "
        "each group across runs and metrics; MDE at 80% power, alpha 0.05. All rows in delta.csv.",
        "",
        "![deltas](delta.png)",
        "",
    ]


def write_egogap_report(
    runs: list[tuple[str, str, dict[str, object]]],
    out_dir: str | Path,
    cluster: str | None = None,
    notes: list[str] | None = None,
) -> Report:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    header, rows = score_rows(runs)
    write_csv_atomic(out / "scores.csv", [header, *rows])
    pub_cols = [*GROUPS, "motor_intrusion", "off_vantage"]
    pub = [[name, *(f"{v[c]:.1f}" if c in v else "" for c in pub_cols)] for name, v in PUBLISHED]
    md = [
        "# avstack EgoGapBench report",
        "",
        "Accuracy in percent with 95% bootstrap intervals; n4 error rates are shares of all n4 items.",
        "",
        markdown_table(header, rows),
        "",
        *(notes or []),
    ]
    agreement = rank_agreement(runs)
    if agreement:
        md += [
            "## Rank agreement between conditions (Spearman, overall accuracy)",
            "",
            markdown_table(["condition A", "condition B", "models", "rho"], agreement),
            "",
            f"Published: default vs egoplan rho = {PUBLISHED_STYLE_SPEARMAN:.2f}.",
            "",
        ]
    md += delta_section(runs, out, cluster)
    rest = ["## Published numbers (EgoGapBench paper)", "", markdown_table(["model", *pub_cols], pub), ""]
    _plot(runs, out / "accuracy.png")
    rest += ["![accuracy](accuracy.png)", ""]
    return write_markdown(out, md, rest)


def _plot(runs: list[tuple[str, str, dict[str, Any]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.6))
    width = 0.8 / max(1, len(runs))
    for i, (model, cond, res) in enumerate(runs):
        groups = [res["groups"][g] for g in GROUPS]
        acc = [100 * g["accuracy"] if g["n"] else 0 for g in groups]
        err = [
            [100 * (g["accuracy"] - g["ci95"][0]) if g["n"] else 0 for g in groups],
            [100 * (g["ci95"][1] - g["accuracy"]) if g["n"] else 0 for g in groups],
        ]
        xs = [j + i * width for j in range(len(GROUPS))]
        ax.bar(xs, acc, width, yerr=err, capsize=2, label=f"{model} {cond}")
    ax.set_xticks([j + width * (len(runs) - 1) / 2 for j in range(len(GROUPS))], GROUPS)
    ax.axhline(25, color="grey", lw=0.8, ls=":")
    ax.axhline(100 / 3, color="grey", lw=0.8, ls="--")
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(0, 100)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)
