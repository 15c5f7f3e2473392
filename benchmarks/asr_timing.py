"""Word-boundary accuracy of avstack's ASR on speech with known word times.

Held-out synthetic instructions (seeds not used while tuning), English with tiny.en
and Mandarin with base (the bundled offline models): raw Whisper times, with the
energy-edge refinement (the default), and packed (`--asr-mode packed`: several clips
per Whisper window). Noise-only clips are mixed in. Prints a Markdown table and writes JSON.

The held-out sentences come from mixed templates; `--same-template N` draws every clip
from template N, as in an EcoG folder (one instruction type), where packed clips prime
each other.

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
    ap.add_argument("--same-template", type=int, default=None, help="every clip from this template index")
    args = ap.parse_args()
    if args.same_template is not None:
        asr_eval.EN_TEMPLATES = (asr_eval.EN_TEMPLATES[args.same_template],)
        asr_eval.ZH_TEMPLATES = (asr_eval.ZH_TEMPLATES[args.same_template],)
    rows = []
    for spec in args.runs.split(","):
        lang, model = spec.split(":")
        cases = [asr_eval.make_case(lang, HELD_OUT_SEED + i) for i in range(args.clips)]
        for mode, refine in (("single", False), ("single", True), ("packed", True)):
            settings = asr.AsrSettings(model=model, device=args.device, language=lang, refine=refine)
            row = asr_eval.evaluate(cases, settings, mode=mode)
            row["device"] = " ".join(asr.pick_device(args.device))
            row["templates"] = "mixed" if args.same_template is None else f"#{args.same_template} only"
            rows.append(row)
            print(json.dumps(row), flush=True)
    cols = [
        "lang", "model", "device", "mode", "refine", "templates", "clips", "words", "recognized_pct",
        "begin_median_ms", "begin_p90_ms", "end_median_ms", "end_p90_ms", "boundary_median_ms", "boundary_p90_ms",
        "rtf", "noise_only_words",
    ]  # fmt: skip
    print(f"\nmachine: {platform.machine()}, python {platform.python_version()}\n")
    print("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(str(r[c]) for c in cols) + " |")
    args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
