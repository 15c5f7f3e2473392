"""Tables of scores, in Markdown."""

from __future__ import annotations

from typing import Any

from .tasks.ecog.metrics import METRICS


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def summary_table(result: dict[str, Any]) -> str:
    """Overall, per level and per instruction, in percent."""
    header = ["group", "n", *METRICS, "acc_eco_referent"]
    rows = [["overall", str(result["overall"]["count"]), *(_pct(result["overall"][m]) for m in METRICS),
             _pct(result["overall"]["acc_eco_referent"])]]
    for key in ("per_level", "per_instruction", "per_lang", "per_scene"):
        for name, agg in result.get(key, {}).items():
            rows.append([name, str(agg["count"]), *(_pct(agg[m]) for m in METRICS), ""])
    c = result["counts"]
    foot = (f"\nclips {c['clips']}, missing predictions {c['missing_predictions']}, "
            f"parse errors {c['parse_errors']}, scoring errors {c['scoring_errors']}, GT errors {c['gt_errors']}")
    return markdown_table(header, rows) + foot
