"""The plan of an EcoG-sized ablation (811 clips), made without sending anything.

An EcoG-sized synthetic prepared folder: the bundled sample set prepared once, its seven records
repeated to 811 clips (each copy with frames of its own, hard links to the same pictures upscaled
to 1920 x 1080, so no two clips ask the same request), then the plan of a full-size
ablation (full and four drops, each in the three frame-time formats: 15 stacks, 12,165 requests)
on a GPT-5, a Gemini 3 and a Claude model, before (one stack after another, the benchmark's
layout) and after (one clip's stacks together, what they share first; #58): the input tokens, the
share predicted to come from each provider's prompt cache under its rule and minimum
(runs/planning/providers.json), and the price without and with it. Nothing is sent:

    python benchmarks/plan_ecog_size.py            # -> benchmarks/plan_ecog_size.json
    python benchmarks/plan_ecog_size.py --model openai:gpt-4o --json /tmp/gpt4o.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import cv2

from avstack.manifest import opened
from avstack.runs.ablation.arms import AblationSpec, plan_stacks
from avstack.runs.planning.plan import Counting, plan_table
from avstack.tasks.ecog.task import EcogAblation

CLIPS = 811
SIZE = (1920, 1080)


def ecog_sized(prepared: Path, out: Path) -> Path:
    """`prepared` (the sample set) repeated to CLIPS clips at SIZE into `out`."""
    out.mkdir(parents=True)
    shutil.copy(prepared / "prepare.json", out / "prepare.json")
    shutil.copytree(prepared / "audio", out / "audio")
    records = [json.loads(line) for line in (prepared / "manifest.jsonl").read_text().splitlines()]
    big = out / "pictures"
    for rec in records:
        for f in rec["frames"]:
            target = big / f["path"]
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                cv2.imwrite(str(target), cv2.resize(cv2.imread(str(prepared / f["path"])), SIZE))
    lines = []
    for k in range(CLIPS):
        rec = json.loads(json.dumps(records[k % len(records)]))
        folder, name = rec["clip_id"].split("/", 1)
        rec["clip_id"] = f"{folder}/copy{k:03d}_{name}"
        rec["width"], rec["height"] = SIZE
        for f in [*rec["frames"], rec["last_frame"]]:
            mine = Path("frames") / f"copy{k:03d}" / f["path"]
            if not (out / mine).exists():
                (out / mine).parent.mkdir(parents=True, exist_ok=True)
                os.link(big / f["path"], out / mine)
            f["path"] = mine.as_posix()
        lines.append(json.dumps(rec, ensure_ascii=False))
    (out / "manifest.jsonl").write_text("\n".join(lines) + "\n")
    return out


ARMS = {
    # today's order: one stack after another, the benchmark's layout (the ASR block first)
    "before": {"layout": "benchmark", "clip_major": False},
    # one clip's stacks together, what they share first (#58)
    "after": {"layout": "shared-first", "clip_major": True},
}
MODELS = ("openai:gpt-5", "gemini:gemini-3-pro-preview", "anthropic:claude-sonnet-4-5")
# the full-size ablation: full and four drops, each in the three frame-time formats (the interface cells)
DROPS = ("frame_ts", "word_ts", "asr", "frames")
TS_FORMATS = ("ms", "index", "overlay")


def bill(folder: Path, model: str, arm: dict, out: Path) -> Any:
    task = EcogAblation(opened(folder))
    spec = AblationSpec(drops=DROPS, ts_formats=TS_FORMATS, layouts=(arm["layout"],))
    return plan_stacks(task, task.stacks(spec), model, out, Counting(clip_major=arm["clip_major"]))


def summary(plan: dict) -> dict:
    t = plan["total"]
    usd = t["usd_at_most"] or {}
    return {
        "requests_to_pay": t["to_pay_requests"],
        "input_tokens": t["input_tokens"],
        "cache_read_tokens": t["cache_read_tokens"],
        "cache_write_tokens": t["cache_write_tokens"],
        "cached_share": round(t["cache_read_tokens"] / max(1, t["input_tokens"]), 4),
        "usd_online_no_cache": usd.get("online"),
        "usd_online_with_cache": usd.get("online_with_cache", usd.get("online")),
        "usd_batch": usd.get("batch"),
        "prompt_cache": plan["prompt_cache"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", action="append", help="a model spec (repeatable; default: GPT-5, Gemini 3, Claude)")
    ap.add_argument("--prepared", type=Path, help="the sample set prepared already (else prepared here)")
    ap.add_argument("--json", type=Path, default=Path("benchmarks/plan_ecog_size.json"))
    args = ap.parse_args()
    results: dict = {"clips": CLIPS, "frame_size": list(SIZE), "drops": list(DROPS), "ts_formats": list(TS_FORMATS)}
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        prepared = args.prepared
        if prepared is None:
            prepared = tmp / "sample"
            samples = Path(__file__).resolve().parents[1] / "samples" / "ecog_en"
            cmd = [sys.executable, "-c", "from avstack_cli.app import main; main()", "prepare", str(samples)]
            subprocess.run([*cmd, "--out", str(prepared), "--lang", "en"], check=True, capture_output=True)
        folder = ecog_sized(prepared, tmp / "ecog811")
        for model in args.model or MODELS:
            results[model] = {}
            for arm_name, arm in ARMS.items():
                plan = bill(folder, model, arm, tmp / f"plan-{arm_name}")
                results[model][arm_name] = summary(plan.to_json())
                order = "one clip's stacks together" if arm["clip_major"] else "one stack after another"
                print(f"== {model}, {arm_name} ({arm['layout']}, {order})")
                print(plan_table(plan).split("\n| **total**")[1].split("\n", 1)[1])
    args.json.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
