"""Sequential ablation by simulation: 10,000 ablations with known effects, looking after every round.

Each simulated ablation has 811 clips (EcoG-Bench's size) and two contrasts (full against
-frame_ts and against -word_ts), the clips asked in rounds of `--round` in a random order; after
each round the anytime-valid confidence sequences (avstack.analysis.sequential, alpha shared by
the contrasts) decide whether to stop. Per scenario it reports how often a contrast was declared
with the wrong sign or where there is no effect (the error rate, to be at most alpha), how often
a real effect was found, and the share of requests saved. Beside it, the naive way: a fixed-n 95%
normal interval looked at after every round, whose error rate is not held.

    python benchmarks/sequential.py --sims 10000
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from avstack.analysis.sequential import bounds

CLIPS = 811
# per clip (full right, ablated right) joint probabilities: the paper's -19 points of Acc_t
# (full 43%, without the cue 24%, some clips right only without it) and no effect at all
SCENARIOS = {
    "effect -19 points": {(1, 1): 0.21, (1, 0): 0.22, (0, 1): 0.03, (0, 0): 0.54},
    "no effect": {(1, 1): 0.33, (1, 0): 0.10, (0, 1): 0.10, (0, 0): 0.47},
}


def simulate(joint: dict[tuple[int, int], float], sims: int, rng: np.random.Generator) -> np.ndarray:
    """Per simulated ablation and clip, the paired difference full - ablated (in {-1, 0, 1})."""
    cells = list(joint)
    picks = rng.choice(len(cells), size=(sims, CLIPS), p=[joint[c] for c in cells])
    diff = np.array([a - b for a, b in cells], dtype=float)
    return diff[picks]


def stop_round(decided: np.ndarray, rounds: np.ndarray) -> np.ndarray:
    """Per simulation, the first round end where `decided` holds (else the last clip)."""
    hit = decided[:, rounds - 1]
    first = np.where(hit.any(axis=1), hit.argmax(axis=1), len(rounds) - 1)
    return rounds[first]


def run(sims: int, round_size: int, alpha: float, seed: int) -> dict[str, dict[str, float]]:
    rng = np.random.default_rng(seed)
    rounds = np.array([*range(round_size, CLIPS, round_size), CLIPS])
    each = alpha / 2  # two contrasts share alpha
    out = {}
    for name, joint in SCENARIOS.items():
        truth = sum(p * (a - b) for (a, b), p in joint.items())
        d1, d2 = simulate(joint, sims, rng), simulate(joint, sims, rng)
        (l1, h1), (l2, h2) = bounds(d1, each), bounds(d2, each)
        decided = ((l1 > 0) | (h1 < 0)) & ((l2 > 0) | (h2 < 0))
        stop = stop_round(decided, rounds)
        at = stop - 1
        rows = np.arange(sims)
        wrong = np.zeros(sims, bool)
        found = np.zeros(sims, bool)
        for lo, hi in ((l1, h1), (l2, h2)):
            claims_pos, claims_neg = lo[rows, at] > 0, hi[rows, at] < 0
            wrong |= (claims_pos & (truth <= 0)) | (claims_neg & (truth >= 0))
            found |= claims_pos if truth > 0 else claims_neg if truth < 0 else np.zeros(sims, bool)
        # the naive way: a 95% normal interval per contrast, looked at after every round
        naive_wrong = np.zeros(sims, bool)
        for d in (d1, d2):
            k = np.arange(1, CLIPS + 1)
            mean = np.cumsum(d, axis=1) / k
            var = np.maximum(np.cumsum(d**2, axis=1) / k - mean**2, 1e-12)
            half = 1.96 * np.sqrt(var / np.maximum(k - 1, 1))
            looks = ((mean - half > 0) | (mean + half < 0))[:, rounds - 1]
            naive_wrong |= looks.any(axis=1) if truth == 0 else np.zeros(sims, bool)
        out[name] = {
            "true_difference": round(truth, 3),
            "error_rate": round(float(wrong.mean()), 4),
            "found_both_pct": round(100 * float(found.mean()), 1) if truth else None,
            "mean_clips_asked": round(float(stop.mean()), 1),
            "requests_saved_pct": round(100 * (1 - float(stop.mean()) / CLIPS), 1),
            "naive_repeated_look_error_rate": round(float(naive_wrong.mean()), 4) if truth == 0 else None,
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sims", type=int, default=10_000)
    ap.add_argument("--round", type=int, default=50, dest="round_size")
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, default=Path("benchmarks/sequential.json"))
    args = ap.parse_args()
    result = run(args.sims, args.round_size, args.alpha, args.seed)
    cols = ["true_difference", "error_rate", "found_both_pct", "mean_clips_asked", "requests_saved_pct"]
    cols += ["naive_repeated_look_error_rate"]
    print("| scenario | " + " | ".join(cols) + " |\n|" + "---|" * (len(cols) + 1))
    for name, row in result.items():
        print(f"| {name} | " + " | ".join(str(row[c]) for c in cols) + " |")
    meta = {"sims": args.sims, "clips": CLIPS, "round": args.round_size, "alpha": args.alpha, "contrasts": 2}
    args.json.write_text(json.dumps({**meta, "scenarios": result}, indent=1) + "\n")


if __name__ == "__main__":
    main()
