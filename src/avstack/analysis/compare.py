"""Deltas between runs over the same items: per (run, group, metric) the paired mean difference
against the baseline run, its 95% paired bootstrap CI, the sign-flip p-value, Holm's adjustment
across the report's comparisons, and the minimum detectable effect. Task-neutral: a task gives
per-item tables (item id -> metric values and group columns)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from avstack.analysis.stats import holm, paired_delta
from avstack.errors import UsageError

DELTA_COLUMNS = (
    "run",
    "baseline",
    "group",
    "metric",
    "value",
    "baseline_value",
    "delta",
    "ci_low",
    "ci_high",
    "p_value",
    "p_holm",
    "mde",
    "n",
)


@dataclass(frozen=True)
class ItemTable:
    """One run's per-item outcomes: item id -> {metric: 0..1 value, group column: name}."""

    label: str
    rows: Mapping[str, Mapping[str, Any]]


class ItemSetMismatch(UsageError):
    """Two runs over different items cannot be compared item by item."""


def check_same_items(run: ItemTable, base: ItemTable) -> None:
    if set(run.rows) != set(base.rows):
        common = len(set(run.rows) & set(base.rows))
        raise ItemSetMismatch(
            f"deltas need the same items: {run.label!r} has {len(run.rows)}, the baseline {base.label!r} has "
            f"{len(base.rows)} ({common} in common)"
        )


def groups_of(ids: Sequence[str], rows: Mapping[str, Mapping[str, Any]], columns: Sequence[str]) -> list[tuple]:
    """('overall', all ids), then each value of each group column with its ids, in sorted order."""
    out: list[tuple[str, list[str]]] = [("overall", list(ids))]
    for col in columns:
        names = sorted({str(rows[i].get(col)) for i in ids if rows[i].get(col) not in (None, "")})
        out += [(n, [i for i in ids if str(rows[i].get(col)) == n]) for n in names]
    return out


def compare_runs(
    runs: Sequence[ItemTable],
    metrics: Sequence[str],
    group_columns: Sequence[str] = (),
    cluster: str | None = None,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """delta.csv rows (values in percent) of every run after the first against the first."""
    base = runs[0]
    out: list[dict[str, object]] = []
    for run in runs[1:]:
        check_same_items(run, base)
        ids = sorted(base.rows)
        for group, members in groups_of(ids, base.rows, group_columns):
            clusters = [str(base.rows[i].get(cluster)) for i in members] if cluster else None
            for m in metrics:
                d = paired_delta(
                    [run.rows[i][m] for i in members], [base.rows[i][m] for i in members], clusters, seed=seed
                )
                out.append(
                    {
                        "run": run.label,
                        "baseline": base.label,
                        "group": group,
                        "metric": m,
                        "value": 100 * d.value,
                        "baseline_value": 100 * d.baseline_value,
                        "delta": 100 * d.delta,
                        "ci_low": 100 * d.ci_low,
                        "ci_high": 100 * d.ci_high,
                        "p_value": d.p_value,
                        "mde": 100 * d.mde,
                        "n": d.n,
                    }
                )
    _holm_by_group(out)
    return out


def compare_pairs(
    pairs: Sequence[tuple[ItemTable, ItemTable]],
    metrics: Sequence[str],
    cluster: str | None = None,
    seed: int = 0,
) -> list[dict[str, object]]:
    """delta.csv-shaped rows (overall) of each pair's second run against its first, Holm-adjusted
    across all the pairs and metrics together (one family: the pairs are one question)."""
    out: list[dict[str, object]] = []
    for base, run in pairs:
        rows = compare_runs([base, run], metrics, (), cluster, seed)
        out += [r for r in rows if r["group"] == "overall"]
    _holm_by_group(out)
    return out


def _holm_by_group(rows: list[dict[str, Any]]) -> None:
    """Holm within each group's family: every run and metric compared on that group (overall is
    the headline family). Comparisons whose two arms agree on every item test nothing and are
    left out of the family (p = 1)."""
    for group in dict.fromkeys(r["group"] for r in rows):
        family = [r for r in rows if r["group"] == group and not _identical(r)]
        for row, p in zip(family, holm([r["p_value"] for r in family])):
            row["p_holm"] = p
        for r in rows:
            if r["group"] == group and _identical(r):
                r["p_holm"] = 1.0


def _identical(row: Mapping[str, object]) -> bool:
    return row["delta"] == 0 and row["ci_low"] == 0 and row["ci_high"] == 0


def fmt_delta(row: Mapping[str, Any]) -> str:
    """'-14.3 [-35.7, +7.1] p=0.25' (p Holm-adjusted within the report)."""
    if math.isnan(row["delta"]):
        return ""
    return f"{row['delta']:+.1f} [{row['ci_low']:+.1f}, {row['ci_high']:+.1f}] p={_p(row['p_holm'])}"


def _p(p: float) -> str:
    return "1" if p >= 0.995 else f"{p:.2g}" if p >= 0.001 else f"{p:.0e}"


def csv_rows(rows: Sequence[Mapping[str, object]]) -> list[list[str]]:
    def cell(v: object) -> str:
        return f"{v:.6g}" if isinstance(v, float) else str(v)

    return [list(DELTA_COLUMNS), *[[cell(r[c]) for c in DELTA_COLUMNS] for r in rows]]


def plot_deltas(rows: Sequence[Mapping[str, Any]], metrics: Sequence[str], path: Any, group: str = "overall") -> None:
    """Δ per run and metric on `group`, with its 95% CI as an error bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = list(dict.fromkeys(r["run"] for r in rows if r["group"] == group))
    fig, ax = plt.subplots(figsize=(7, 3.5))
    width = 0.8 / max(1, len(runs))
    for k, run in enumerate(runs):
        mine = {r["metric"]: r for r in rows if r["run"] == run and r["group"] == group}
        xs = [j + k * width for j in range(len(metrics))]
        ds = [mine[m]["delta"] if m in mine else 0.0 for m in metrics]
        err = [
            [max(0.0, mine[m]["delta"] - mine[m]["ci_low"]) if m in mine else 0.0 for m in metrics],
            [max(0.0, mine[m]["ci_high"] - mine[m]["delta"]) if m in mine else 0.0 for m in metrics],
        ]
        ax.bar(xs, ds, width, yerr=err, capsize=3, label=run)
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xticks([j + width * (len(runs) - 1) / 2 for j in range(len(metrics))], list(metrics))
    ax.set_ylabel(f"Δ vs baseline ({group}), points, 95% CI")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)
