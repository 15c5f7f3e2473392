"""What glibc's moving mmap threshold costs a long clip's windows (#69): in one process, a
window's decode with a seeded tiny.en, its release, and base loaded for the fallback, three times
over, with the threshold fixed (`asr.models.fixed_mmap_threshold`, what the windows do) and with
glibc's own moving threshold, each in a fresh process. Reported: RSS after each step and the
peak of each step (sampled every 10 ms).

    python benchmarks/heap.py                 # -> benchmarks/heap.json (about 3 minutes on 2 cores)
    python benchmarks/heap.py --seconds 60    # a shorter window
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path


def rss_mb() -> int:
    return int(re.search(r"VmRSS:\s+(\d+)", Path("/proc/self/status").read_text()).group(1)) // 1024  # type: ignore[union-attr]


def child(seconds: float, fixed: bool) -> list[dict]:
    """The steps in this process: [{step, rss_mb, peak_mb}]."""
    import gc

    from avstack.asr import models, whisper
    from avstack.asr.types import AsrSettings
    from avstack.synthetic.longread import read_aloud

    if not fixed:
        models.fixed_mmap_threshold = lambda: None  # type: ignore[assignment]
    peak = [0]

    def sample() -> None:
        while True:
            peak[0] = max(peak[0], rss_mb())
            time.sleep(0.01)

    audio, _ = read_aloud(seconds)
    threading.Thread(target=sample, daemon=True).start()
    s = AsrSettings(model="tiny.en", language="en")
    options = whisper.decode_options(s, "en")
    steps: list[dict] = []

    def mark(step: str) -> None:
        steps.append({"step": step, "rss_mb": rss_mb(), "peak_mb": peak[0]})
        peak[0] = rss_mb()

    with models.one_model_at_a_time():
        for k in range(3):
            whisper._seeded_decode(audio, s, options)
            mark(f"window {k + 1}: decoded (tiny.en, seeded), released")
            gc.collect()
            models.give_back_memory()
            mark(f"window {k + 1}: trimmed")
            models.load_model("base", "cpu", 1, 1, "auto")
            mark(f"window {k + 1}: base loaded")
    return steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=120.0)
    ap.add_argument("--json", type=Path, default=Path("benchmarks/heap.json"))
    ap.add_argument("--child", choices=("fixed", "moving"), default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.seconds, args.child == "fixed")))
        return
    runs = {}
    for how in ("fixed", "moving"):
        done = subprocess.run([sys.executable, __file__, "--seconds", str(args.seconds), "--child", how],
                              capture_output=True, text=True, check=True)  # fmt: skip
        runs[how] = json.loads(done.stdout.strip().splitlines()[-1])
    peak = {how: max(s["peak_mb"] for s in steps) for how, steps in runs.items()}
    base = {how: [s["rss_mb"] for s in steps if s["step"].endswith("base loaded")] for how, steps in runs.items()}
    result = {
        "what": __doc__.split("\n\n")[0],
        "seconds": args.seconds,
        "runs": runs,
        "peak_mb": peak,
        "peak_fixed_over_moving": round(peak["fixed"] / peak["moving"], 3),
        "base_loaded_rss_mb": base,
    }
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=1))
    args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
