"""Paired statistics for deltas between two runs over the same items, and cue attribution.

- `paired_bootstrap_ci`: percentile CI of the mean paired difference, items resampled with
  replacement (the same items in both arms), optionally whole clusters (scene, video) at once.
- `sign_flip_p`: two-sided paired permutation test; under no effect each difference is as
  likely negative as positive. Exact over all 2^k sign patterns of the k non-zero differences
  when k <= 16, else seeded random flips (p = (1 + hits) / (1 + draws)).
- `holm`: Holm's step-down adjustment within a family of comparisons.
- `mde`: the smallest true mean difference detectable with 80% power at alpha 0.05 (two-sided
  normal approximation), from the observed variance of the differences.
- `shapley` / `shapley_per_item`: exact Shapley values of cues from the values of every subset.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from avstack.errors import UsageError

N_RESAMPLES = 10_000
N_FLIPS = 20_000
EXACT_MAX = 16
SEED = 0


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def paired_bootstrap_ci(
    diffs: Sequence[float] | np.ndarray,
    clusters: Sequence[str] | None = None,
    n_resamples: int = N_RESAMPLES,
    seed: int = SEED,
    level: float = 0.95,
    statistic: Callable[[np.ndarray], np.ndarray] | None = None,
) -> tuple[float, float]:
    """Percentile CI of the mean of paired differences (or of `statistic` over resampled rows,
    which takes an (n_resamples, n) array of resampled values and returns n_resamples values)."""
    d = np.asarray(diffs, dtype=float)
    if d.size == 0:
        return math.nan, math.nan
    rng = _rng(seed)
    if clusters is None:
        idx = rng.integers(0, d.size, size=(n_resamples, d.size))
        stats = statistic(d[idx]) if statistic else d[idx].mean(axis=1)
    else:
        stats = _cluster_means(d, clusters, rng, n_resamples)
    alpha = (1 - level) / 2
    lo, hi = np.quantile(stats, [alpha, 1 - alpha])
    return float(lo), float(hi)


def _cluster_means(d: np.ndarray, clusters: Sequence[str], rng: np.random.Generator, n: int) -> np.ndarray:
    """Whole clusters resampled; the mean over the items of the clusters drawn."""
    names = sorted(set(clusters))
    sums = np.array([d[[c == k for c in clusters]].sum() for k in names])
    counts = np.array([sum(c == k for c in clusters) for k in names], dtype=float)
    idx = rng.integers(0, len(names), size=(n, len(names)))
    return sums[idx].sum(axis=1) / counts[idx].sum(axis=1)


def sign_flip_p(
    diffs: Sequence[float] | np.ndarray, exact_max: int = EXACT_MAX, n_flips: int = N_FLIPS, seed: int = SEED
) -> float:
    """Two-sided paired sign-flip permutation p-value of the mean difference."""
    d = np.asarray(diffs, dtype=float)
    d = d[d != 0]  # a zero difference flips to itself
    if d.size == 0:
        return 1.0
    observed = abs(d.sum())
    tol = 1e-9 * max(1.0, observed)
    if d.size <= exact_max:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=d.size)))
        return float(np.mean(np.abs(signs @ d) >= observed - tol))
    rng = _rng(seed)
    hits = 0
    for start in range(0, n_flips, 2000):  # in blocks: memory stays small for long runs
        m = min(2000, n_flips - start)
        signs = rng.integers(0, 2, size=(m, d.size), dtype=np.int8) * 2 - 1
        hits += int(np.sum(np.abs(signs @ d) >= observed - tol))
    return (1 + hits) / (1 + n_flips)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values, in the input order (NaN stays NaN and is not counted)."""
    p = np.asarray(pvalues, dtype=float)
    ok = np.flatnonzero(~np.isnan(p))
    out = np.full(p.shape, np.nan)
    order = ok[np.argsort(p[ok], kind="stable")]
    m, running = len(order), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return [float(x) for x in out]


def mde(diffs: Sequence[float] | np.ndarray, alpha: float = 0.05, power: float = 0.8) -> float:
    """Smallest true mean difference this many items detect with `power` (two-sided `alpha`)."""
    d = np.asarray(diffs, dtype=float)
    if d.size < 2:
        return math.nan
    z = NormalDist().inv_cdf(1 - alpha / 2) + NormalDist().inv_cdf(power)
    return float(z * d.std(ddof=1) / math.sqrt(d.size))


@dataclass(frozen=True)
class Delta:
    """One comparison of a run against its baseline on one metric over paired items."""

    value: float
    baseline_value: float
    delta: float
    ci_low: float
    ci_high: float
    p_value: float
    mde: float
    n: int


def paired_delta(
    values: Sequence[float],
    baseline: Sequence[float],
    clusters: Sequence[str] | None = None,
    n_resamples: int = N_RESAMPLES,
    seed: int = SEED,
) -> Delta:
    a, b = np.asarray(values, dtype=float), np.asarray(baseline, dtype=float)
    if a.shape != b.shape:
        raise UsageError(f"paired deltas need the same items: {a.size} vs {b.size}")
    d = a - b
    if d.size == 0:
        return Delta(math.nan, math.nan, math.nan, math.nan, math.nan, math.nan, math.nan, 0)
    lo, hi = paired_bootstrap_ci(d, clusters, n_resamples, seed)
    return Delta(float(a.mean()), float(b.mean()), float(d.mean()), lo, hi, sign_flip_p(d, seed=seed), mde(d), d.size)


def shapley_weights(n: int) -> dict[int, float]:
    """Weight of a coalition of size s that a player joins: s! (n - s - 1)! / n!."""
    return {s: math.factorial(s) * math.factorial(n - s - 1) / math.factorial(n) for s in range(n)}


def shapley(players: Sequence[str], value: Mapping[frozenset[str], float]) -> dict[str, float]:
    """Exact Shapley value of each player from the value of every coalition (all 2^n given)."""
    w = shapley_weights(len(players))
    out = {}
    for p in players:
        others = [q for q in players if q != p]
        total = 0.0
        for s in range(len(others) + 1):
            for coalition in itertools.combinations(others, s):
                c = frozenset(coalition)
                total += w[s] * (value[c | {p}] - value[c])
        out[p] = total
    return out


def shapley_per_item(players: Sequence[str], value: Mapping[frozenset[str], np.ndarray]) -> dict[str, np.ndarray]:
    """Shapley values item by item (they are linear in the values, so their mean is the Shapley
    value of the mean): bootstrap them with the same resampled items for every coalition."""
    w = shapley_weights(len(players))
    out = {}
    for p in players:
        others = [q for q in players if q != p]
        total = np.zeros_like(next(iter(value.values())), dtype=float)
        for s in range(len(others) + 1):
            for coalition in itertools.combinations(others, s):
                c = frozenset(coalition)
                total = total + w[s] * (value[c | {p}] - value[c])
        out[p] = total
    return out
