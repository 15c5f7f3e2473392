"""`avstack view` for EcoG: a static site over a prepared folder and any runs of it.

index.html: the runs' scores and paired deltas, a clip table with per-stack scores, filters and
a sort by disagreement. clips/<id>.html: one time axis in ms with the frames at their true pts,
the ASR words, the ground-truth strokes and every stack's predicted moments; the original video
with a cursor on the axis; the last frame with the ground truth and every stack's points; the raw
answers and per-clip scores. Frames are linked, never re-decoded.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from avstack.analysis.compare import ItemSetMismatch, compare_runs, fmt_delta
from avstack.io import atomic_write, read_predictions
from avstack.manifest import ClipRecord, data_root_of, is_number, load_manifest
from avstack.site.pages import PALETTE, esc, page, pct_left, rel
from avstack.tasks.ecog.data import LEVEL_OF, referents
from avstack.tasks.ecog.metrics import METRICS, load_mask
from avstack.tasks.ecog.report import Run, item_tables
from avstack.tasks.ecog.runs import load_run
from avstack.tasks.ecog.scoring import ScoredClip


@dataclass(frozen=True)
class StackRun:
    label: str
    color: str
    run: Run
    raw: dict[str, dict[str, object]]  # clip id -> predictions.jsonl line
    by_clip: Mapping[str, ScoredClip]  # by clip id

    def scored(self, clip_id: str) -> ScoredClip | None:
        return self.by_clip.get(clip_id)


def clip_page_name(clip_id: str) -> str:
    return f"clips/{hashlib.sha1(clip_id.encode()).hexdigest()[:16]}.html"


def load_stacks(run_dirs: Sequence[Path]) -> list[StackRun]:
    out = []
    for i, d in enumerate(run_dirs):
        run = load_run(d)
        raw = {str(p.get("video_name")): p for p in read_predictions(Path(d) / "predictions.jsonl")}
        by_clip = {sc.clip.video_name: sc for sc in run[1].clips}
        out.append(StackRun(run[0], PALETTE[i % len(PALETTE)], run, raw, by_clip))
    return out


def build_site(prepared: str | Path, run_dirs: Sequence[str | Path], out: str | Path) -> Path:
    """Write the site into `out`; returns index.html."""
    out = Path(out)
    records = load_manifest(prepared)
    stacks = load_stacks([Path(d) for d in run_dirs])
    root = data_root_of(prepared)
    for rec in records:
        atomic_write(out / clip_page_name(rec.clip_id), clip_page(rec, stacks, Path(prepared), root, out / "clips"))
    index = out / "index.html"
    atomic_write(index, index_page(records, stacks, out).encode())
    return index


# --------------------------------------------------------------------------- index


def _disagreement(rec: ClipRecord, stacks: list[StackRun]) -> float:
    scores = [sc.score for s in stacks if (sc := s.scored(rec.clip_id)) is not None]
    if len(scores) < 2:
        return 0.0
    return max(max(getattr(x, m) for x in scores) - min(getattr(x, m) for x in scores) for m in METRICS)


def _failed(rec: ClipRecord, stacks: list[StackRun]) -> bool:
    if rec.error:
        return True
    return any(
        (sc := s.scored(rec.clip_id)) is not None and (sc.parse_error or sc.request_error or sc.score.error)
        for s in stacks
    )


def runs_table(stacks: list[StackRun]) -> str:
    head = "".join(f"<th>{m}</th>" for m in METRICS)
    rows = "".join(
        f"<tr><td class=legend><span><i style='--c:{s.color}'></i>{esc(s.label)}</span></td>"
        f"<td class=num>{s.run[2]['counts']['clips']}</td>"
        + "".join(f"<td class=num>{100 * s.run[2]['overall'][m]:.1f}</td>" for m in METRICS)
        + "</tr>"
        for s in stacks
    )
    return f"<table id=runs><thead><tr><th>run</th><th>n</th>{head}</tr></thead><tbody>{rows}</tbody></table>"


def deltas_table(stacks: list[StackRun]) -> str:
    if len(stacks) < 2:
        return ""
    try:
        deltas = compare_runs(item_tables([s.run for s in stacks]), METRICS)
    except ItemSetMismatch as exc:
        return f"<p class=bad>Deltas refused: {esc(exc)}</p>"
    by = {(d["run"], d["metric"]): d for d in deltas if d["group"] == "overall"}
    rows = "".join(
        f"<tr><td>{esc(s.label)}</td>"
        + "".join(f"<td>{esc(fmt_delta(by[(s.label, m)]))}</td>" for m in METRICS)
        + "</tr>"
        for s in stacks[1:]
    )
    head = "".join(f"<th>Δ {m}</th>" for m in METRICS)
    note = "95% paired bootstrap CI, sign-flip p (Holm) against the first run"
    return f"<h2>Deltas vs {esc(stacks[0].label)}</h2><p>{note}</p><table id=deltas><tr><th>run</th>{head}</tr>{rows}</table>"


def _select(name: str, values: Sequence[str]) -> str:
    opts = "".join(f"<option value='{esc(v)}'>{esc(v)}</option>" for v in values)
    return f"<label>{esc(name)} <select data-filter='{esc(name)}'><option value=''>all</option>{opts}</select></label>"


def clip_table(records: list[ClipRecord], stacks: list[StackRun], out: Path) -> str:
    cols = "".join(f"<th data-col-stack='{esc(s.label)}'>{esc(s.label)}<br>acc_t / acc_eco</th>" for s in stacks)
    rows = []
    for rec in records:
        cells = []
        for s in stacks:
            sc = s.scored(rec.clip_id)
            text = f"{100 * sc.score.acc_t:.0f} / {100 * sc.score.acc_eco:.0f}" if sc else "-"
            cells.append(f"<td class=num data-col-stack='{esc(s.label)}'>{text}</td>")
        dis = _disagreement(rec, stacks)
        failed = _failed(rec, stacks)
        link = f"<a href='{esc(clip_page_name(rec.clip_id))}' data-clip-id='{esc(rec.clip_id)}'>{esc(rec.clip_id)}</a>"
        attrs = (
            f"data-clip-row='{esc(rec.clip_id)}' data-instruction='{esc(rec.task_template or '')}' "
            f"data-level='{esc(LEVEL_OF.get(rec.task_template or '', ''))}' data-scene='{esc(rec.scene or '')}' "
            f"data-lang='{esc(rec.lang or '')}' data-failed='{int(failed)}' data-disagreement='{dis:.4f}'"
        )
        err = f" <span class=bad>{esc((rec.error or {}).get('type', 'failed'))}</span>" if failed else ""
        rows.append(
            f"<tr {attrs}><td>{link}{err}</td><td>{esc(rec.task_template or '')}</td>"
            f"<td>{esc(LEVEL_OF.get(rec.task_template or '', ''))}</td><td>{esc(rec.scene or '')}</td>"
            f"<td>{esc(rec.lang or '')}</td>{''.join(cells)}<td class=num>{100 * dis:.0f}</td></tr>"
        )
    head = (
        "<tr><th>clip</th><th>instruction</th><th>level</th><th>scene</th><th>lang</th>"
        f"{cols}<th>disagreement</th></tr>"
    )
    return f"<table id=clips><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"


def index_page(records: list[ClipRecord], stacks: list[StackRun], out: Path) -> str:
    def values(attr: str) -> list[str]:
        return sorted({str(getattr(r, attr)) for r in records if getattr(r, attr)})

    filters = (
        "<div class=filters>"
        + _select("instruction", values("task_template"))
        + _select("level", sorted({LEVEL_OF.get(r.task_template or "", "") for r in records} - {""}))
        + _select("scene", values("scene"))
        + _select("lang", values("lang"))
        + _select("stack", [s.label for s in stacks])
        + "<label><input type=checkbox id=failed-only> failed only</label>"
        + "<button data-sort='disagreement'>sort by largest disagreement</button></div>"
    )
    body = (
        f"<h1>avstack view</h1><p>{len(records)} clips, {len(stacks)} runs</p>"
        + (runs_table(stacks) if stacks else "")
        + deltas_table(stacks)
        + "<h2>Clips</h2>"
        + filters
        + clip_table(records, stacks, out)
    )
    return page("avstack view", body)


# --------------------------------------------------------------------------- clip page


def axis_span(rec: ClipRecord) -> tuple[int, int]:
    ends = [rec.duration_ms or 0, *(f.pts_ms for f in rec.frames)]
    ends += [w.end_ms for w in rec.words]
    ends += [int(a["stroke_end_time"]) for a in referents(rec.eval_gt) if is_number(a.get("stroke_end_time"))]
    return 0, max(1, max(ends))


def _ticks(start: int, end: int) -> str:
    step = next(s for s in (100, 250, 500, 1000, 2000, 5000, 10000, 30000, 60000) if (end - start) / s <= 12)
    return "".join(
        f"<span class=tick style='left:{pct_left(t, start, end)}'>{t} ms</span>"
        for t in range(start - start % step, end + 1, step)
        if t >= start
    )


def timeline(rec: ClipRecord, stacks: list[StackRun], prepared: Path, pages: Path) -> str:
    start, end = axis_span(rec)
    frames = "".join(
        f"<div class=frame data-pts-ms='{f.pts_ms}' data-index='{f.index}' style='left:{pct_left(f.pts_ms, start, end)}'>"
        f"<img loading=lazy src='{esc(rel(prepared / f.path, pages))}' alt='frame {f.index}'><span>{f.pts_ms}</span></div>"
        for f in rec.frames
    )
    words = "".join(
        f"<div class=word data-begin-ms='{w.begin_ms}' data-end-ms='{w.end_ms}' "
        f"title='{esc(w.text)} {w.begin_ms}-{w.end_ms} ms, p={w.prob}' "
        f"style='left:{pct_left(w.begin_ms, start, end)};"
        f"width:{100 * max(1, w.end_ms - w.begin_ms) / (end - start):.4f}%;"
        f"opacity:{0.35 + 0.65 * w.prob:.2f}'>{esc(w.text)}</div>"
        for w in rec.words
    )
    strokes = "".join(
        f"<div class=stroke data-referent='{k}' data-stroke-begin-ms='{a['stroke_begin_time']}' "
        f"data-stroke-end-ms='{a['stroke_end_time']}' title='{esc(a['choice'])}: "
        f"{a['stroke_begin_time']}-{a['stroke_end_time']} ms' style='left:{pct_left(a['stroke_begin_time'], start, end)};"
        f"width:{100 * (a['stroke_end_time'] - a['stroke_begin_time']) / (end - start):.4f}%'>{esc(a['choice'])}</div>"
        for k, a in enumerate(referents(rec.eval_gt))
        if is_number(a.get("stroke_begin_time")) and is_number(a.get("stroke_end_time"))
    )
    lanes = "".join(_pred_lane(rec, s, start, end) for s in stacks)
    return (
        f"<div class=timeline><div class=lane-label>frames (true pts)</div><div class=frames>{frames}</div>"
        f"<div class=lane-label>ASR words</div><div class=lane>{words}</div>"
        f"<div class=lane-label>ground-truth strokes</div><div class=lane>{strokes}</div>{lanes}"
        f"<div class=axis data-axis-start-ms='{start}' data-axis-end-ms='{end}'>{_ticks(start, end)}</div>"
        "<div class=cursor style='left:0'></div></div>"
    )


def _pred_times(sc: ScoredClip | None, n: int) -> list[object]:
    points = sc.pred.get("point_list") if sc is not None and isinstance(sc.pred, dict) else None
    points = points if isinstance(points, list) else []
    return [p.get("timestamp") if isinstance(p, dict) else None for p in points[:n]]


def _pred_lane(rec: ClipRecord, s: StackRun, start: int, end: int) -> str:
    markers = ""
    for k, ts in enumerate(_pred_times(s.scored(rec.clip_id), len(referents(rec.eval_gt)))):
        if not is_number(ts):
            continue
        left = pct_left(min(max(float(ts), start), end), start, end)
        markers += (
            f"<div class=pred data-stack='{esc(s.label)}' data-referent='{k}' data-pred-ms='{ts}' "
            f"title='{esc(s.label)}: referent {k + 1} at {ts} ms' style='--c:{s.color};left:{left}'></div>"
        )
    return f"<div class=lane-label>{esc(s.label)}</div><div class=lane>{markers}</div>"


def _mask_overlay(mask: Mapping[str, object], w: int, h: int) -> str:
    loaded = load_mask(mask, w, h)
    if loaded is None:
        return ""
    img, (x1, y1, x2, y2) = loaded
    rgba = np.zeros((*img.shape, 4), np.uint8)
    rgba[img > 128] = (67, 160, 46, 120)  # BGRA: green, translucent
    ok, buf = cv2.imencode(".png", rgba)
    if not ok:
        return ""
    full = img.shape == (h, w)
    x, y, bw, bh = (0, 0, w, h) if full else (x1, y1, max(1, x2 - x1), max(1, y2 - y1))
    data = base64.b64encode(buf.tobytes()).decode()
    return (
        f"<image class=gt-mask x='{x}' y='{y}' width='{bw}' height='{bh}' href='data:image/png;base64,{data}'/>"
        f"<rect class=gt-bbox x='{x1}' y='{y1}' width='{max(1, x2 - x1)}' height='{max(1, y2 - y1)}' fill='none' "
        "stroke='#2ea043' stroke-width='3'/>"
    )


def last_frame(rec: ClipRecord, stacks: list[StackRun], prepared: Path, pages: Path) -> str:
    if rec.last_frame is None or not rec.width or not rec.height:
        return ""
    w, h = rec.width, rec.height
    parts = [f"<image x='0' y='0' width='{w}' height='{h}' href='{esc(rel(prepared / rec.last_frame.path, pages))}'/>"]
    for a in referents(rec.eval_gt):
        if isinstance(a.get("mask"), dict):
            parts.append(_mask_overlay(a["mask"], w, h))
        pts = a.get("points")
        if pts and not isinstance(a.get("mask"), dict):
            for p in pts if isinstance(pts[0], list) else [pts]:
                parts.append(
                    f"<circle class=gt-point cx='{p[1] * w / 1000:.1f}' cy='{p[0] * h / 1000:.1f}' r='{max(w, h) / 60:.1f}' "
                    f"fill='none' stroke='#2ea043' stroke-width='3'><title>{esc(a['choice'])}</title></circle>"
                )
    for s in stacks:
        sc = s.scored(rec.clip_id)
        points = sc.pred.get("point_list") if sc is not None and isinstance(sc.pred, dict) else None
        for k, p in enumerate(points if isinstance(points, list) else []):
            pt = p.get("point") if isinstance(p, dict) else None
            if isinstance(pt, list) and len(pt) == 2 and all(is_number(v) for v in pt):
                parts.append(
                    f"<circle class=pred-point data-stack='{esc(s.label)}' cx='{pt[0] * w / 1000:.1f}' "
                    f"cy='{pt[1] * h / 1000:.1f}' r='{max(w, h) / 90:.1f}' fill='{s.color}' stroke='#fff'>"
                    f"<title>{esc(s.label)} referent {k + 1}</title></circle>"
                )
    scale = min(1.0, 640 / max(w, h))
    return (
        f"<div class=lastframe><svg viewBox='0 0 {w} {h}' width='{w * scale:.0f}' height='{h * scale:.0f}'>"
        f"{''.join(parts)}</svg></div>"
    )


def answers(rec: ClipRecord, stacks: list[StackRun]) -> str:
    out = []
    for s in stacks:
        sc = s.scored(rec.clip_id)
        line = s.raw.get(rec.clip_id, {})
        scores = "".join(f"<td class=num>{100 * getattr(sc.score, m):.0f}</td>" for m in METRICS) if sc else ""
        problems = " ".join(
            f"<span class=bad>{esc(k)}: {esc(v)}</span>"
            for k, v in (
                ("error", line.get("error")),
                ("parse error", line.get("parse_error")),
                ("scoring error", sc.score.error if sc else None),
            )
            if v
        )
        out.append(
            f"<h3 style='color:{s.color}'>{esc(s.label)}</h3><table><tr>{''.join(f'<th>{m}</th>' for m in METRICS)}</tr>"
            f"<tr>{scores}</tr></table>{problems}<pre>{esc(line.get('raw') or '')}</pre>"
        )
    return "".join(out)


def clip_page(rec: ClipRecord, stacks: list[StackRun], prepared: Path, data_root: str | None, pages: Path) -> bytes:
    legend = "".join(f"<span><i style='--c:{s.color}'></i>{esc(s.label)}</span>" for s in stacks)
    video = ""
    if data_root and (Path(data_root) / rec.video).is_file():
        video = f"<video id=video controls preload=metadata style='max-height:360px;max-width:480px' src='{esc(rel(Path(data_root) / rec.video, pages))}'></video>"
    gt = json.dumps(rec.eval_gt or {}, ensure_ascii=False)[:4000]
    body = (
        f"<p><a href='../index.html'>index</a></p><h1>{esc(rec.clip_id)}</h1>"
        f"<p>{esc(rec.task_template or '')} · {esc(rec.scene or '')} · {esc(rec.lang or '')} · "
        f"{rec.width}x{rec.height} · {rec.duration_ms} ms · {esc(rec.decode_path or '')}</p>"
        + (f"<p class=bad>prepare failed: {esc(rec.error)}</p>" if rec.error else "")
        + f"<div class=legend>{legend}</div>"
        + timeline(rec, stacks, prepared, pages)
        + "<h2>Last frame: ground truth (green) and each stack's points; the clip</h2>"
        + "<div style='display:flex;gap:16px;align-items:flex-start;flex-wrap:wrap'>"
        + last_frame(rec, stacks, prepared, pages)
        + video
        + "</div>"
        + "<h2>Answers</h2>"
        + answers(rec, stacks)
        + f"<h2>Ground truth</h2><pre>{esc(gt)}</pre>"
    )
    return page(rec.clip_id, body).encode()
