"""`avstack view PREPARED RUN...` for video questions: an index of every question with each run's
answer and score, and a page per clip with everything on one time axis in ms: the sampled frames at
their true pts, the ASR words, each grounding question's true windows and every run's predicted
span. The DOM hooks: frames `data-pts-ms`; words `data-begin-ms`/`data-end-ms`; true windows
`data-true-start-ms`/`data-true-end-ms`; predictions `data-stack`, `data-pred-start-ms`,
`data-pred-end-ms` (each with `data-item`); the axis `data-axis-start-ms`/`data-axis-end-ms`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from avstack.io import atomic_write, read_json_file, read_predictions
from avstack.manifest import ClipRecord, frame_file, load_manifest
from avstack.site.pages import PALETTE, esc, page, pct_left, rel
from avstack.tasks.videoqa.data import Item, load_questions


def _span_bar(a_ms: float, b_ms: float, end: float, attrs: str, colour: str, title: str, row: int = 0) -> str:
    """A span as a bar on the axis; one row per source (the truth on top, then each run)."""
    width = max(0.3, 100 * (b_ms - a_ms) / max(1.0, end))
    return (
        f"<div class=span {attrs} title='{esc(title)}' style='left:{pct_left(a_ms, 0, end)};width:{width:.4f}%;"
        f"background:{colour};position:absolute;top:{2 + 9 * row}px;height:7px'></div>"
    )


def _clip_page(
    rec: ClipRecord, items: list[Item], runs: list[tuple[str, dict[str, Any]]], prepared: Path, out: Path
) -> str:
    end = float(rec.duration_ms or 1)
    frames = "".join(
        f"<img class=frame data-pts-ms={f.pts_ms} src='{rel(frame_file(prepared, f, rec.clip_id), out)}' "
        f"style='position:absolute;left:{pct_left(f.pts_ms, 0, end)};height:60px' title='{f.pts_ms} ms'>"
        for f in rec.frames
    )
    words = "".join(
        f"<span class=word data-begin-ms={w.begin_ms} data-end-ms={w.end_ms} "
        f"style='position:absolute;left:{pct_left(w.begin_ms, 0, end)}'>{esc(w.text)}</span>"
        for w in rec.words
    )
    lanes = []
    for item in items:
        if item.kind != "grounding":
            continue
        truth = "".join(
            _span_bar(
                1000 * a,
                1000 * b,
                end,
                f"data-item='{esc(item.id)}' data-true-start-ms={round(1000 * a)} data-true-end-ms={round(1000 * b)}",
                "#444",
                "truth",
            )
            for a, b in item.spans
        )
        preds = ""
        for k, (label, lines) in enumerate(runs):
            span = ((lines.get(item.id) or {}).get("prediction") or {}).get("span")
            if span:
                a, b = 1000 * span[0], 1000 * span[1]
                preds += _span_bar(
                    a,
                    b,
                    end,
                    f"data-item='{esc(item.id)}' data-stack='{esc(label)}' "
                    f"data-pred-start-ms={round(a)} data-pred-end-ms={round(b)}",
                    PALETTE[k % len(PALETTE)],
                    label,
                    k + 1,
                )
        lanes.append(
            f"<div class=lane-label>{esc(item.question)}</div>"
            f"<div class=lane style='position:relative;height:{12 + 9 * len(runs)}px'>{truth}{preds}</div>"
        )
    ticks = "".join(
        f"<span class=tick style='left:{pct_left(t, 0, end)}'>{t} ms</span>"
        for t in range(0, int(end) + 1, max(500, int(end) // 8 // 500 * 500))
    )
    legend = "".join(
        f"<span style='color:{PALETTE[k % len(PALETTE)]}'>&#9632; {esc(lab)}</span> " for k, (lab, _) in enumerate(runs)
    )
    return page(
        f"avstack view: {rec.clip_id}",
        (
            f"<p><a href='index.html'>index</a></p><h1>{esc(rec.clip_id)}</h1><p>{legend} &#9632; truth</p>"
            f"<div class=timeline data-axis-start-ms=0 data-axis-end-ms={int(end)}>"
            f"<div class=frames style='position:relative;height:64px'>{frames}</div>"
            f"<div class=lane style='position:relative'>{words}</div>{''.join(lanes)}"
            f"<div class=axis>{ticks}</div></div>"
        ),
    )


def build_site(prepared: str | Path, run_dirs: list[Path], out: str | Path) -> Path:
    prepared, out = Path(prepared), Path(out)
    out.mkdir(parents=True, exist_ok=True)
    metas = [read_json_file(d / "run.json", dict) for d in run_dirs]
    items, _ = load_questions(metas[0]["questions"], str(metas[0].get("questions_format") or "auto"))
    runs = [
        (
            f"{m.get('backend')} {m.get('stack')}",
            {str(p.get("id")): p for p in read_predictions(d / "predictions.jsonl")},
        )
        for d, m in zip(run_dirs, metas)
    ]
    records = {r.video: r for r in load_manifest(prepared)}
    names = {}
    for k, (video, rec) in enumerate(sorted(records.items())):
        mine = [it for it in items if it.video == video]
        if mine and rec.ok:
            names[video] = f"clip-{k:05d}.html"
            atomic_write(out / names[video], _clip_page(rec, mine, runs, prepared, out).encode())
    head = "".join(f"<th>{esc(lab)}</th>" for lab, _ in runs)
    rows = []
    for it in items:
        cells = ""
        for _, lines in runs:
            pred = (lines.get(it.id) or {}).get("prediction") or {}
            cells += f"<td>{esc(pred.get('answer', pred.get('span', '-')))}</td>"
        link = (
            f"<a data-item='{esc(it.id)}' href='{names[it.video]}'>{esc(it.video)}</a>"
            if it.video in names
            else esc(it.video)
        )
        truth = it.answer if it.kind != "grounding" else [list(s) for s in it.spans]
        rows.append(
            f"<tr><td>{esc(it.id)}</td><td>{link}</td><td>{esc(it.kind)}</td><td>{esc(it.question)}</td>"
            f"<td>{esc(truth)}</td>{cells}</tr>"
        )
    body = (
        f"<h1>videoqa: {len(items)} questions, {len(runs)} runs</h1><table><tr><th>id</th><th>video</th><th>kind</th>"
        f"<th>question</th><th>truth</th>{head}</tr>{''.join(rows)}</table>"
    )
    index = out / "index.html"
    atomic_write(index, page("avstack view: videoqa", body).encode())
    return index
