"""The plan of an EcoG-sized ablation (811 clips), made without sending anything.

An EcoG-sized synthetic prepared folder: the bundled sample set prepared once, its seven records
repeated to 811 clips (each copy with frames of its own, hard links to the same pictures upscaled
to 1920 x 1080, so no two clips ask the same request), then the ablation's plan for the paper's
frame-based stacks (full, without frame timestamps, without word timing) on a model:

    python benchmarks/plan_ecog_size.py --model openai:gpt-4o
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

import cv2

from avstack.manifest import opened
from avstack.prompting.stacks import make_stack
from avstack.runs.ablation import plan_stacks
from avstack.runs.plan import plan_table
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="openai:gpt-4o")
    ap.add_argument("--prepared", type=Path, help="the sample set prepared already (else prepared here)")
    ap.add_argument("--json", type=Path, default=Path("benchmarks/plan_ecog_size.json"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        prepared = args.prepared
        if prepared is None:
            prepared = tmp / "sample"
            samples = Path(__file__).resolve().parents[1] / "samples" / "ecog_en"
            cmd = [sys.executable, "-c", "from avstack_cli.app import main; main()", "prepare", str(samples)]
            subprocess.run([*cmd, "--out", str(prepared), "--lang", "en"], check=True, capture_output=True)
        folder = ecog_sized(prepared, tmp / "ecog811")
        stacks = [make_stack("full"), make_stack("full", ["frame_ts"]), make_stack("full", ["word_ts"])]
        plan = plan_stacks(EcogAblation(opened(folder)), stacks, args.model, tmp / "plan")
    print(plan_table(plan))
    args.json.write_text(json.dumps(plan, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
