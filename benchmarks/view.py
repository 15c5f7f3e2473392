"""`avstack view` at scale: build the site for N generated clips and 2 runs, report build time and
size, and the index page's load time in headless Chromium.

    python benchmarks/view.py --clips 1000 [--json benchmarks/view.json]

The clips are generated records (no video): a manifest of N clips with 9 small JPEG frames each,
EcoG ground truth, and two runs of answers (`chance` and `deixis`-like), scored as usual. The
baseline is the time to score the two runs (what `avstack report` does anyway), measured in the
same process, so the ratio is machine-independent.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np

from avstack.io import write_json_atomic, write_jsonl_atomic
from avstack.manifest import ClipRecord, FrameRef, write_manifest
from avstack.tasks.ecog.runs import score_and_write
from avstack.tasks.ecog.view import build_site

PTS = [0, 500, 1000, 1500, 2000, 2500, 3000, 3500, 3967]


def make_prepared(folder: Path, n: int, seed: int = 0) -> list[ClipRecord]:
    rng = random.Random(seed)
    ok, jpg = cv2.imencode(".jpg", np.full((36, 64, 3), 128, np.uint8))
    assert ok
    records = []
    for i in range(n):
        frames = []
        for k, pts in enumerate(PTS):
            rel = f"frames/c{i:05d}/{k:06d}.jpg"
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / rel).write_bytes(jpg.tobytes())
            frames.append(FrameRef(k * 15, pts, rel))
        b = rng.randint(300, 2500)
        words = [
            {"text": t, "begin_time": 300 + 500 * j, "end_time": 650 + 500 * j, "prob": 0.9}
            for j, t in enumerate(["put", "this", "there"])
        ]
        gt = {
            "object_choices": ["A. cup", "B. box"],
            "space_choices": ["a. left"],
            "answer": [{"choice": "A", "stroke_begin_time": b, "stroke_end_time": b + 800, "points": [500, 500]}],
        }
        records.append(
            ClipRecord(
                clip_id=f"指令2/c{i:05d}.mp4",
                video=f"指令2/c{i:05d}.mp4",
                task_template="指令2",
                lang="en",
                scene=rng.choice(["Office Scene", "Kitchen"]),
                duration_ms=4000,
                width=640,
                height=360,
                frames=tuple(frames),
                last_frame=frames[-1],
                asr={"text": "put this there", "words": words},
                eval_gt=gt,
            )
        )
    write_manifest(folder, records)
    write_json_atomic(folder / "prepare.json", {"data_root": str(folder / "none")})
    return records


def make_run(folder: Path, prepared: Path, records: list[ClipRecord], name: str, seed: int) -> Path:
    rng = random.Random(seed)
    run = folder / name
    lines = []
    for r in records:
        point = {"point": [rng.randint(0, 1000), rng.randint(0, 1000)], "timestamp": rng.randint(0, 4000)}
        pred = {"selected_options": [rng.choice("AB")], "point_list": [point]}
        lines.append(
            {"video_name": r.clip_id, "raw": json.dumps(pred), "prediction": pred, "parse_error": None, "error": None}
        )
    write_jsonl_atomic(run / "predictions.jsonl", lines)
    write_json_atomic(run / "run.json", {"task": "ecog", "backend": name, "stack": "full", "prepared": str(prepared)})
    return run


def load_time(index: Path) -> float | None:
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        return None
    if not chromium or not driver:
        return None
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking"):
        opts.add_argument(flag)
    d = webdriver.Chrome(service=Service(driver), options=opts)
    try:
        times = []
        for _ in range(3):
            d.get(index.as_uri())
            nav = d.execute_script("return performance.getEntriesByType('navigation')[0].toJSON()")
            times.append(nav["loadEventEnd"] / 1000)
        return float(np.median(times))
    finally:
        d.quit()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clips", type=int, default=1000)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        prepared = t / "prepared"
        records = make_prepared(prepared, args.clips)
        runs = [make_run(t, prepared, records, name, i) for i, name in enumerate(("chance", "deixis"))]
        t0 = time.perf_counter()
        for r in runs:
            score_and_write(r)
        score_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        index = build_site(prepared, runs, t / "site")
        build_s = time.perf_counter() - t0
        size = sum(f.stat().st_size for f in (t / "site").rglob("*") if f.is_file())
        row = {
            "clips": args.clips,
            "build_s": round(build_s, 2),
            "score_two_runs_s": round(score_s, 2),
            "build_vs_scoring": round(build_s / score_s, 2),
            "site_mb": round(size / 1e6, 2),
            "index_kb": round(index.stat().st_size / 1e3, 1),
            "pages": sum(1 for _ in (t / "site").rglob("*.html")),
            "index_load_s": load_time(index),
        }
    print(json.dumps(row, indent=1))
    if args.json:
        args.json.write_text(json.dumps(row, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
