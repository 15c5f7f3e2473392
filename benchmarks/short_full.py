"""`prepare --anchors full` on many short spoken clips: throughput and word timing, per configuration.

24 clips of 4-8 s (640x360 camera-like video by default, `--size`; half of them connected speech spoken whole by
festival, half word-by-word espeak-ng instructions; held-out seeds), each a whole CLI process with
a cold cache, configurations alternating within each round. The words each run wrote into its
manifest are scored against the synthesizer's word times (recognition, edge errors), so a faster
configuration is only worth having when its words are as good.

    python benchmarks/short_full.py --rounds 2 --before e2f88f0   # also avstack as of that commit

`--before REV` (repeatable) runs avstack as it was at a git revision (its default configuration), in the same
rounds: the baseline "today's default" of a change, measured rather than remembered. Every
configuration is also given as a ratio to the hand-written per-clip pipeline
(`benchmarks/handwritten.py`: PyAV frames at 2 fps + faster-whisper int8 word timestamps),
run in the same rounds (`time_vs_handwritten`, lower is faster).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

from avstack import asr
from avstack.asr import evaluation as asr_eval
from avstack.manifest import load_manifest

sys.path.insert(0, str(Path(__file__).parent))
from before import checkout  # noqa: E402

SEED = 90_000  # held out: never used while choosing defaults


def make_clips(root: Path, n: int, size: str = "640x360") -> dict[str, list[dict[str, Any]]]:
    """n spoken clips (4-8 s) into root; the true words of each, by file name."""
    root.mkdir(parents=True, exist_ok=True)
    voices = [v for v in asr_eval.FESTIVAL_VOICES if asr_eval.festival_available(v)]
    truths = {}
    for i in range(n):
        seed = SEED + i
        if voices and i % 2 == 0:
            case = asr_eval.connected_case(seed, voices[(i // 2) % len(voices)])
        else:
            case = asr_eval.make_case("en", seed)
        rng = random.Random(seed)
        total = int(rng.uniform(4.0, 8.0) * asr.RATE)
        audio = case.audio[:total]
        if len(audio) < total:  # a quiet room after the speech
            tail = 0.004 * np.random.default_rng(seed).standard_normal(total - len(audio))
            audio = np.concatenate([audio, tail.astype(np.float32)])
        wav = root / f"s{i:02d}.wav"
        sf.write(wav, audio, asr.RATE)
        name = f"c{i:02d}.mp4"
        cmd = ["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", f"testsrc2=size={size}:rate=30:d={total / asr.RATE}"]
        cmd += ["-i", str(wav), "-c:a", "aac", "-shortest", "-vf", f"noise=alls=8:allf=t:all_seed={i}"]
        cmd += ["-c:v", "libx264", "-preset", "veryfast", "-bf", "2", "-g", "30", "-pix_fmt", "yuv420p"]
        cmd += [str(root / name)]
        subprocess.run(cmd, check=True)
        wav.unlink()
        truths[name] = [w for w in case.truth if w["end_time"] <= total * 1000 // asr.RATE]
    return truths


def _summary(cases: list[asr_eval.Case], hyps: list[list[asr.Word]]) -> dict[str, Any]:
    row = asr_eval.summarize(cases, hyps, 0, 0.0)
    return {
        "recognized_pct": row["recognized_pct"],
        "median_ms": row["boundary_median_ms"],
        "p90_ms": row["boundary_p90_ms"],
        "end_p90_ms": row["end_p90_ms"],
    }


def score(out: Path, truths: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The words each clip's record holds, scored by the ASR harness against the true words."""
    cases, hyps = [], []
    for rec in load_manifest(out):
        truth = truths[Path(rec.clip_id).name]
        cases.append(asr_eval.Case("en", np.zeros(0, np.float32), truth, 0))
        hyps.append(
            [
                asr.Word(w["text"], w["begin_time"], w["end_time"], w.get("prob", 0.0))
                for w in rec.asr.to_ecog()["words"]
            ]
        )
    return _summary(cases, hyps)


def score_handwritten(out: Path, truths: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    cases, hyps = [], []
    for name, truth in truths.items():
        words = json.loads((out / Path(name).stem / "words.json").read_text())["words"]
        cases.append(asr_eval.Case("en", np.zeros(0, np.float32), truth, 0))
        hyps.append([asr.Word(w["text"], w["begin_time"], w["end_time"], 0.0) for w in words])
    return _summary(cases, hyps)


HANDWRITTEN = "hand-written pipeline"


def print_profiles(rows: list[dict[str, Any]]) -> None:
    """Where each configuration's time went (its last round's prepare.json): wall seconds per
    stage summed over the clips, and the run's wall time x workers, so idle workers show as the
    difference. A configuration without a profile (the hand-written pipeline, a commit before
    the profile) is left out."""
    found = [r for r in rows if r.get("profile")]
    if not found:
        return
    stages = list(dict.fromkeys(s for r in found for s in r["profile"]["stages"]))
    cols = ["config", "wall x workers", "stages summed", *stages]
    print("\nStage profile (wall s summed over clips, last round):\n")
    print("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
    for r in found:
        p = r["profile"]
        summed = sum(v["wall_s"] for v in p["stages"].values())
        cells = [r["config"], f"{p['wall_s'] * p['workers']:.1f}", f"{summed:.1f}"]
        cells += [f"{p['stages'][s]['wall_s']:.2f}" if s in p["stages"] else "-" for s in stages]
        print("| " + " | ".join(cells) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clips", type=int, default=24)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--size", default="640x360", help="video size (frames cost more at 1080p; ASR is the same)")
    ap.add_argument(
        "--before", action="append", default=[], help="a git revision whose default is a baseline (repeatable)"
    )
    ap.add_argument("--json", type=Path, default=Path("benchmarks/short_full.json"))
    args = ap.parse_args()
    configs: dict[str, list[str]] = {
        HANDWRITTEN: [],
        "default": [],
        "--asr-compute int8": ["--asr-compute", "int8"],  # what the machine-independent float32 costs
        "--aligner none": ["--aligner", "none"],  # the transcriber's times: the aligner's cost
    }
    env_of: dict[str, dict[str, str]] = {}
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        for k, rev in enumerate(reversed(args.before)):
            label = f"default at {rev}"
            configs = {HANDWRITTEN: [], label: [], **configs}
            env_of[label] = checkout(rev, tmp / f"before{k}")
        truths = make_clips(tmp / "clips", args.clips, args.size)
        times: dict[str, list[float]] = {k: [] for k in configs}
        scores: dict[str, dict[str, Any]] = {}
        plans: dict[str, Any] = {}
        profiles: dict[str, Any] = {}  # each configuration's stage profile (prepare.json), last round
        for _ in range(args.rounds):
            for label, extra in configs.items():
                out = tmp / "out"
                shutil.rmtree(out, ignore_errors=True)
                if label == HANDWRITTEN:
                    run = [
                        sys.executable,
                        str(Path(__file__).with_name("handwritten.py")),
                        str(tmp / "clips"),
                        str(out),
                    ]
                else:
                    cmd = [
                        sys.executable,
                        "-c",
                        "from avstack_cli.app import main; main()",
                        "prepare",
                        str(tmp / "clips"),
                    ]
                    run = [*cmd, "--out", str(out), "--lang", "en", *extra]
                t0 = time.perf_counter()
                subprocess.run(run, check=True, capture_output=True, env=env_of.get(label))
                times[label].append(time.perf_counter() - t0)
                if label == HANDWRITTEN:
                    scores[label], plans[label] = score_handwritten(out, truths), None
                else:
                    scores[label] = score(out, truths)
                    meta = json.loads((out / "prepare.json").read_text())
                    plans[label], profiles[label] = meta.get("plan"), meta.get("profile")
        base = next(iter(configs))
        rows = []
        for label in configs:
            secs = times[label]
            rows.append(
                {
                    "config": label,
                    "plan": plans[label],
                    "profile": profiles.get(label),
                    "seconds": round(statistics.median(secs), 2),
                    "clips_per_s": round(args.clips / statistics.median(secs), 2),
                    "time_vs_handwritten": round(statistics.median(a / b for a, b in zip(secs, times[base])), 2),
                    **scores[label],
                }
            )
    cols = ["config", "seconds", "clips_per_s", "time_vs_handwritten", "recognized_pct", "median_ms", "p90_ms"]
    cols += ["end_p90_ms"]
    print("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(str(r[c]) for c in cols) + " |")
    print_profiles(rows)
    meta = {"clips": args.clips, "size": args.size, "rounds": args.rounds}
    args.json.write_text(json.dumps(meta | {"rows": rows}, indent=1))


if __name__ == "__main__":
    main()
