"""Word-boundary accuracy of avstack's ASR on speech with known word times.

Held-out synthetic instructions (seeds not used while tuning), English with tiny.en
and Mandarin with base (the bundled offline models), raw Whisper times vs the
energy-edge refinement. Prints a Markdown table and writes JSON.

    python benchmarks/asr_timing.py [--clips 30] [--device auto] [--json benchmarks/asr_timing.json]
"""

from __future__ import annotations

import argparse
import json
import platform
from pathlib import Path

from avstack import asr, asr_eval

HELD_OUT_SEED = 50_000  # tuning used seeds 1000+


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clips", type=int, default=30, help="clips per language")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--runs", default="en:tiny.en,zh:base", help="comma list of LANG:MODEL")
    ap.add_argument("--json", type=Path, default=Path("benchmarks/asr_timing.json"))
    args = ap.parse_args()
    rows = []
    for spec in args.runs.split(","):
        lang, model = spec.split(":")
        cases = [asr_eval.make_case(lang, HELD_OUT_SEED + i) for i in range(args.clips)]
        for refine in (False, True):
            settings = asr.AsrSettings(model=model, device=args.device, language=lang, refine=refine)
            row = asr_eval.evaluate(cases, settings)
            row["device"] = " ".join(asr.pick_device(args.device))
            rows.append(row)
            print(json.dumps(row), flush=True)
    cols = [
        "lang", "model", "device", "refine", "clips", "words", "recognized_pct", "begin_median_ms", "begin_p90_ms",
        "end_median_ms", "end_p90_ms", "boundary_median_ms", "boundary_p90_ms", "rtf", "noise_only_words",
    ]  # fmt: skip
    print(f"\nmachine: {platform.machine()}, python {platform.python_version()}\n")
    print("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(str(r[c]) for c in cols) + " |")
    args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
