"""Same clip, same words: does a clip's word track change with the machine, the folder or the names?

23 clips: 16 held-out connected sentences (festival, seeds 91000-91015, two voices, echo and
noise, as 4-8 s camera-like clips) and the 7 bundled samples. `avstack prepare --anchors full
--lang en --asr-model tiny.en` with defaults otherwise, once as the reference and then in 7 runs:
both GEMM back-ends (CT2_USE_MKL=1, the one Intel CPUs get; =0, oneDNN, the one AMD CPUs get),
two lower instruction sets (CT2_FORCE_CPU_ISA=AVX, GENERIC), a folder holding every third clip
only, the whole folder renamed so it sorts in reverse, and both back-ends with a lower ISA at
once. Counts the clips whose words (text, begin, end) differ from the reference run.

    python benchmarks/same_words.py                      # the default (float32 on a CPU)
    python benchmarks/same_words.py --asr-compute int8   # the faster, machine-dependent path
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import soundfile as sf

from avstack import asr
from avstack.asr import evaluation as asr_eval
from avstack.manifest import load_manifest

SEEDS = range(91_000, 91_016)  # held out: never used while choosing defaults
SAMPLES = Path(__file__).resolve().parents[1] / "samples" / "ecog_en"
RUNS: dict[str, dict[str, str]] = {
    "CT2_USE_MKL=1": {"CT2_USE_MKL": "1"},
    "CT2_USE_MKL=0": {"CT2_USE_MKL": "0"},
    "CT2_FORCE_CPU_ISA=AVX": {"CT2_FORCE_CPU_ISA": "AVX"},
    "CT2_FORCE_CPU_ISA=GENERIC": {"CT2_FORCE_CPU_ISA": "GENERIC"},
    "CT2_USE_MKL=0 + ISA AVX2": {"CT2_USE_MKL": "0", "CT2_FORCE_CPU_ISA": "AVX2"},
}


def make_clips(root: Path) -> list[str]:
    """The 23 clips into root (flat), by name; the sentences as 30 fps clips with their audio."""
    root.mkdir(parents=True)
    voices = [v for v in asr_eval.FESTIVAL_VOICES if asr_eval.festival_available(v)]
    if not voices or shutil.which("ffmpeg") is None:
        raise SystemExit("needs festival (with a voice) and ffmpeg: apt-get install festival festvox-kallpc16k ffmpeg")
    for i, seed in enumerate(SEEDS):
        case = asr_eval.connected_case(seed, voices[i % len(voices)])
        wav = root / f"s{seed}.wav"
        sf.write(wav, case.audio, asr.RATE)
        d = len(case.audio) / asr.RATE
        cmd = ["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", f"testsrc2=size=320x240:rate=30:d={d}"]
        cmd += ["-i", str(wav), "-c:a", "aac", "-shortest", "-c:v", "libx264", "-preset", "veryfast"]
        subprocess.run([*cmd, "-pix_fmt", "yuv420p", str(root / f"s{seed}.mp4")], check=True)
        wav.unlink()
    for clip in sorted(SAMPLES.rglob("*")):
        if clip.suffix.lower() in (".mp4", ".mov"):
            shutil.copy(clip, root / clip.name)
    return sorted(p.name for p in root.iterdir())


def words(out: Path, names: dict[str, str]) -> dict[str, list[list[Any]]]:
    """Each clip's words, keyed by its original name (`names`: the name in this run -> original)."""
    return {
        names[Path(r.clip_id).name]: [
            [w["text"], w["begin_time"], w["end_time"]] for w in (r.asr.to_ecog() if r.asr else {}).get("words", [])
        ]
        for r in load_manifest(out)
    }


def prepare(clips: Path, out: Path, env: dict[str, str], extra: list[str]) -> float:
    cmd = [sys.executable, "-c", "from avstack_cli.app import main; main()", "prepare", str(clips), "--out", str(out)]
    cmd += ["--anchors", "full", "--lang", "en", "--asr-model", "tiny.en", *extra]
    t0 = time.perf_counter()
    # a cache of its own per run: every run transcribes, none is handed another's words
    subprocess.run(cmd, check=True, capture_output=True, env=os.environ | {"AVSTACK_CACHE": str(out / ".c")} | env)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--asr-compute", default="auto")
    ap.add_argument("--json", type=Path, default=Path("benchmarks/same_words.json"))
    args = ap.parse_args()
    extra = ["--asr-compute", args.asr_compute]
    rows = []
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        every = make_clips(tmp / "all")
        same = {n: n for n in every}
        t = prepare(tmp / "all", tmp / "ref", {}, extra)
        ref = words(tmp / "ref", same)
        rows.append({"run": "reference (defaults)", "clips": len(ref), "differ": 0, "seconds": round(t, 1)})
        runs: list[tuple[str, Path, dict[str, str], dict[str, str]]] = [
            (label, tmp / "all", env, same) for label, env in RUNS.items()
        ]
        subset = tmp / "subset"
        subset.mkdir()
        for n in every[::3]:
            shutil.copy(tmp / "all" / n, subset / n)
        runs.append(("a folder of every third clip", subset, {}, {n: n for n in every[::3]}))
        renamed = tmp / "renamed"
        renamed.mkdir()
        new_names = {f"{len(every) - i:02d}_{n}": n for i, n in enumerate(every)}  # sorts in reverse
        for new, old in new_names.items():
            shutil.copy(tmp / "all" / old, renamed / new)
        runs.append(("the folder renamed to sort in reverse", renamed, {}, new_names))
        for i, (label, clips, env, names) in enumerate(runs):
            out = tmp / f"run{i}"
            t = prepare(clips, out, env, extra)
            got = words(out, names)
            differ = sorted(n for n in got if got[n] != ref[n])
            rows.append(
                {"run": label, "clips": len(got), "differ": len(differ), "which": differ, "seconds": round(t, 1)}
            )
            print(f"{label}: {len(differ)} / {len(got)} differ", file=sys.stderr)
    words_total = sum(len(w) for w in ref.values())
    print(f"compute type: {args.asr_compute}; {len(ref)} clips, {words_total} words in the reference run\n")
    print("| run | clips that differ | seconds |\n|---|---|---|")
    for r in rows:
        print(f"| {r['run']} | {r['differ']} / {r['clips']} | {r['seconds']} |")
    meta = {"asr_compute": args.asr_compute, "words": words_total, "cpu": asr.runtime_of(asr.AsrSettings()).get("cpu")}
    args.json.write_text(json.dumps(meta | {"rows": rows}, indent=1))


if __name__ == "__main__":
    main()
