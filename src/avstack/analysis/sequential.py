"""Stopping an ablation when its answer is in: anytime-valid confidence sequences for the mean
paired difference of two stacks, clip by clip.

A per-clip score lies in [0, 1], so a paired difference d = a - b lies in [-1, 1]; mapped to
x = (d + 1) / 2 in [0, 1], the mean is bounded and the predictable plug-in empirical-Bernstein
confidence sequence (Waudby-Smith and Ramdas, "Estimating means of bounded random variables by
betting", JRSS-B 2024, eq. 15) covers it at every clip count at once with probability at least
1 - alpha. Looking after every round (and stopping when the interval excludes zero or is narrow
enough) therefore does not inflate the error, as a fixed-n interval looked at repeatedly would.
Several contrasts at once share alpha (Bonferroni: alpha / k each).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from avstack.errors import UsageError

LAMBDA_CAP = 0.5  # the largest bet: keeps log(1 - lambda) finite and the sequence stable early on


@dataclass(frozen=True)
class Interval:
    """The confidence sequence after n paired clips, on the difference scale [-1, 1]."""

    n: int
    low: float
    high: float

    @property
    def width(self) -> float:
        return self.high - self.low

    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0


def bounds(diffs: np.ndarray, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) of the running confidence sequence for the mean of each row of `diffs` (shape
    (n,) or (runs, n), values in [-1, 1]), after each prefix; the running intersection is taken,
    which keeps the simultaneous coverage."""
    d = np.atleast_2d(np.clip(np.asarray(diffs, dtype=float), -1.0, 1.0))
    x = (d + 1.0) / 2.0
    runs, n = x.shape
    log_term = math.log(2.0 / alpha)
    mean_prev, var_prev = np.full(runs, 0.5), np.full(runs, 0.25)  # the plug-ins before any clip
    sum_x, sum_sq = np.zeros(runs), np.zeros(runs)
    num, den, penalty = np.zeros(runs), np.zeros(runs), np.zeros(runs)
    low, high = np.zeros((runs, n)), np.ones((runs, n))
    lo, hi = np.zeros(runs), np.ones(runs)
    for t in range(1, n + 1):
        xi = x[:, t - 1]
        lam = np.minimum(np.sqrt(2.0 * log_term / (var_prev * t * math.log(1.0 + t))), LAMBDA_CAP)
        num += lam * xi
        den += lam
        # v_i psi_E(lambda_i) with v_i = 4 (x_i - mean_{i-1})^2, psi_E(l) = (-log(1 - l) - l) / 4
        penalty += (xi - mean_prev) ** 2 * (-np.log1p(-lam) - lam)
        center, radius = num / den, (log_term + penalty) / den
        lo, hi = np.maximum(lo, center - radius), np.minimum(hi, center + radius)
        low[:, t - 1], high[:, t - 1] = lo, hi
        sum_x += xi
        mean_prev = (0.5 + sum_x) / (t + 1)
        sum_sq += (xi - mean_prev) ** 2  # against the mean that includes x_t (eq. 15's sigma-hat)
        var_prev = (0.25 + sum_sq) / (t + 1)
    return 2.0 * low - 1.0, 2.0 * high - 1.0


def confidence_sequence(diffs: Sequence[float], alpha: float = 0.05) -> list[Interval]:
    """The running intervals for the mean of `diffs` (each in [-1, 1]), one per prefix; each holds
    the mean with probability >= 1 - alpha simultaneously over all prefixes."""
    low, high = bounds(np.asarray(diffs, dtype=float), alpha)
    return [Interval(t + 1, float(a), float(b)) for t, (a, b) in enumerate(zip(low[0], high[0]))]


@dataclass(frozen=True)
class Decision:
    """Where a sequential comparison stopped, and why."""

    stopped_at: int  # paired clips used
    of: int  # clips available
    decided: bool
    why: str
    intervals: tuple[Interval, ...]  # per contrast, at the stop


# growing rounds (round_size None): the first look after FIRST_LOOK items, each next round GROWTH
# times the items asked so far. A set of a few dozen items gets several looks (10, 15, 23, 35, 40
# of 40: look_points) and a large one few (18 looks for 10,000): the confidence sequence covers the mean
# at every n at once, so it is valid under any look schedule, and looking is free
FIRST_LOOK = 10
GROWTH = 1.5


def look_points(n: int, round_size: int | None = None) -> list[int]:
    """The item counts after which a look is taken: every `round_size` items, or growing rounds."""
    if n <= 0:
        return []
    if round_size is not None:
        if round_size < 1:
            raise UsageError(f"--round: expected a positive number of items, got {round_size}")
        return [*range(round_size, n, round_size), n]
    ends, end = [], FIRST_LOOK
    while end < n:
        ends.append(end)
        end = max(end + 1, math.ceil(end * GROWTH))
    return [*ends, n]


def decide(
    contrasts: Sequence[Sequence[float]],
    round_size: int | None = None,
    alpha: float = 0.05,
    precision: float | None = None,
) -> Decision:
    """Walk the clips in rounds (the diffs in the order they were asked; `look_points`) and stop
    after the first round where every contrast's interval excludes zero or is narrower than
    `precision`; alpha is shared among the contrasts."""
    n = min(len(c) for c in contrasts)
    each = alpha / max(1, len(contrasts))
    seqs = [confidence_sequence(list(c)[:n], each) for c in contrasts]
    for end in look_points(n, round_size):
        now = tuple(s[end - 1] for s in seqs)
        if all(i.excludes_zero() or (precision is not None and i.width < precision) for i in now):
            why = "every interval excludes zero" if all(i.excludes_zero() for i in now) else "precision reached"
            return Decision(end, n, True, why, now)
    return Decision(n, n, False, "clips ran out", tuple(s[-1] for s in seqs))


def ask_until_decided(
    ids: Sequence[str],
    round_size: int | None,
    ask: Callable[[list[str]], list[list[float]]],
    alpha: float = 0.05,
    precision: float | None = None,
    seed: int = 0,
) -> tuple[list[str], Decision]:
    """Ask the items in a seeded random order, a round more each time (`look_points`: every
    `round_size` items, or growing rounds when None; `ask` answers the items asked so far under
    every stack and gives each contrast's paired differences, in that order), until `decide`
    stops; (the items asked, the decision)."""
    order = sorted(ids)
    if not order:
        raise UsageError("--until decided: there is nothing to ask (no usable item)")
    random.Random(seed).shuffle(order)
    for end in look_points(len(order), round_size):
        asked = order[:end]
        decision = decide(ask(asked), round_size, alpha, precision)
        if decision.decided or end == len(order):
            return asked, decision
    raise AssertionError("look_points always ends at the item count")


def stop_record(
    d: Decision,
    names: list[str],
    n_stacks: int,
    round_size: int | None,
    alpha: float,
    precision: float | None,
    seed: int,
    metric: str,
    unit: str = "clips",
) -> dict[str, object]:
    """What sequential.json and the report say: where it stopped, why, what it saved, the intervals."""
    return {
        "unit": unit,
        "stopped_at_clips": d.stopped_at,
        "clips": d.of,
        "decided": d.decided,
        "why": d.why,
        "requests_saved": (d.of - d.stopped_at) * n_stacks,
        "requests_asked": d.stopped_at * n_stacks,
        "metric": metric,
        "alpha": alpha,
        "precision": precision,
        "round": round_size if round_size is not None else f"growing ({FIRST_LOOK}, then x{GROWTH})",
        "seed": seed,
        "contrasts": {
            f"{names[0]} - {name}": {"low": round(i.low, 4), "high": round(i.high, 4)}
            for name, i in zip(names[1:], d.intervals)
        },
    }


def stop_section(stop: dict[str, Any]) -> str:
    """The report's "Sequential stop" section."""
    lines = [
        "",
        "## Sequential stop",
        "",
        f"Stopped after {stop['stopped_at_clips']} of {stop['clips']} {stop.get('unit', 'clips')} ({stop['why']}); "
        f"{stop['requests_saved']} of {stop['requests_saved'] + stop['requests_asked']} requests saved. "
        f"Anytime-valid {100 * (1 - stop['alpha']):.0f}% confidence sequences of the paired {stop['metric']} "
        f"difference (alpha shared by the contrasts; rounds of {stop['round']}, clip order seed {stop['seed']}):",
        "",
        "| contrast | low | high |",
        "|---|---|---|",
        *(f"| {k} | {v['low']:+.3f} | {v['high']:+.3f} |" for k, v in stop["contrasts"].items()),
        "",
    ]
    return "\n".join(lines)
