"""`avstack view` for EgoGap runs: per item the image, the options with the correct one marked,
each run's choice, and its motor-intrusion / off-vantage label."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from avstack.io import atomic_write, read_json_file, read_predictions
from avstack.site.pages import PALETTE, esc, page, rel
from avstack.tasks.egogap.data import MOTOR, OFF_VANTAGE, image_path, load_bundles
from avstack.tasks.egogap.scoring import score


def _label_name(label: str | None) -> str:
    if label in MOTOR:
        return "motor intrusion"
    if label == OFF_VANTAGE:
        return "off-vantage"
    return label or "no answer"


def build_site(run_dirs: Sequence[Path], out: str | Path) -> Path:
    out = Path(out)
    metas = [read_json_file(Path(d) / "run.json", dict) for d in run_dirs]
    items = load_bundles(metas[0]["bundles"])
    graded = []
    for d, meta in zip(run_dirs, metas):
        result = score(load_bundles(meta["bundles"]), read_predictions(Path(d) / "predictions.jsonl"))
        graded.append({g["uid"]: g for g in result["items"]})
    labels = [f"{m.get('backend')} {m.get('stack')}" for m in metas]
    images = metas[0].get("images")
    blocks = [_item_block(item, labels, graded, images, out) for item in items]
    legend = "".join(
        f"<span><i style='--c:{PALETTE[i % len(PALETTE)]}'></i>{esc(lab)}</span>" for i, lab in enumerate(labels)
    )
    body = f"<h1>EgoGap items</h1><p>{len(items)} items, {len(labels)} runs</p><div class=legend>{legend}</div>{''.join(blocks)}"
    index = out / "index.html"
    atomic_write(index, page("avstack view: EgoGap", body).encode())
    return index


def _item_block(item: Any, labels: list[str], graded: list[dict[str, Any]], images: str | None, out: Path) -> str:
    img = ""
    if images:
        try:
            img = f"<img loading=lazy src='{esc(rel(image_path(item, images), out))}' alt='{esc(item.file_name)}'>"
        except ValueError:
            img = f"<p class=bad>image {esc(item.file_name)} not found</p>"
    opts = "".join(
        f"<li class='{'opt-correct' if lab == 'correct' else ''}' data-label='{esc(lab)}'>{esc(let)}) {esc(text)} "
        f"<small>({esc(lab)})</small></li>"
        for let, text, lab in item.options
    )
    choices = "".join(
        f"<li data-run='{esc(lab)}' style='color:{PALETTE[i % len(PALETTE)]}'>{esc(lab)}: "
        f"{esc(g.get('letter') or '-')} ({esc(_label_name(g.get('label')))})</li>"
        for i, (lab, run) in enumerate(zip(labels, graded))
        if (g := run.get(item.uid)) is not None
    )
    return (
        f"<div class=item data-uid='{esc(item.uid)}'><b>{esc(item.uid)}</b> · {esc(item.kind)} · "
        f"{esc(item.cand_kind)}<br>{img}<ol type=A>{opts}</ol><ul>{choices}</ul></div>"
    )
